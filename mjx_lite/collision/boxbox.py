"""Box-box collider stub."""
from mjx_lite.collision.types import NOCONTACT, Contacts  # noqa: F401


def box_box(g1, g2, margin):
    raise NotImplementedError
