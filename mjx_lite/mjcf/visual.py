"""The <visual> section: the mjVisual settings the Model keeps (`types.Visual`: global_ fovy/azimuth/elevation/
orthographic, headlight ambient/diffuse/specular/active, map znear/zfar).

Several <visual> sections (includes) are merged in document order, later values win, over MuJoCo's defaults
(`types.VISUAL_DEFAULTS`). The parser has typed and range-checked the values (`parse._reader_checks`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mjx_lite import types
from mjx_lite.mjcf.attrs import sections
from mjx_lite.mjcf.spec import Element


def visual_settings(root: Element) -> dict[str, dict[str, Any]]:
    """{group: {field: value}} for `io.build_model(vis=...)`: MuJoCo's defaults with the written values."""
    out = {g: dict(v) for g, v in types.VISUAL_DEFAULTS.items()}
    for sec in sections(root, "visual"):
        for c in sec.children:
            group = "global_" if c.tag == "global" else c.tag
            if group not in out:
                continue  # quality, scale, rgba: not kept (the renderer draws no decorations)
            for name in out[group]:
                v = c.attrs.get(name)
                if v is None:
                    continue
                if isinstance(v, (bool, np.bool_)) or isinstance(v, (int, np.integer)) and name in _INTS:
                    out[group][name] = int(v)
                else:
                    out[group][name] = np.array(v, dtype=float)
    return out


_INTS = ("orthographic", "active")
