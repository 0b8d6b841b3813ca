"""The compiler's attribute helpers (`mjcf/attrs.py`): one behaviour for wrong arity, MuJoCo's (an error)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf import attrs
from mjx_lite.mjcf.spec import Element, MJCFError


def _el(**attrs_) -> Element:
    return Element("geom", dict(attrs_), [], "f.xml", 7)


def test_vec_pads_with_the_default_tail():
    out = attrs.vec(_el(friction=np.array([0.5])), "friction", 3, (1, 0.005, 0.0001))
    np.testing.assert_array_equal(out, [0.5, 0.005, 0.0001])
    np.testing.assert_array_equal(attrs.vec(_el(), "pos", 3, (0, 0)), [0, 0, 0])


def test_vec_rejects_extra_values_instead_of_truncating():
    with pytest.raises(MJCFError) as e:
        attrs.vec(_el(solref=np.array([0.02, 1.0, 3.0])), "solref", 2, (0.02, 1.0))
    assert (e.value.file, e.value.line, e.value.element, e.value.attribute) == ("f.xml", 7, "geom", "solref")


@pytest.mark.parametrize(
    "geom, attr",
    [('size="1 2 3 4"', "size"), ('size=".1" friction="1 2 3 4"', "friction"), ('size=".1" pos="1 2"', "pos"),
     ('size=".1" solimp="1 2 3 4 5 6"', "solimp")],
)  # fmt: skip
def test_wrong_arity_is_an_error_as_in_mujoco(geom, attr):
    xml = f"<mujoco><worldbody>\n<geom {geom}/></worldbody></mujoco>"
    with pytest.raises(ValueError, match="data"):  # "has too much data" / "does not have enough data"
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError) as e:
        mjx_lite.load_mjcf_string(xml)
    assert (e.value.line, e.value.element, e.value.attribute) == (2, "geom", attr), str(e.value)
