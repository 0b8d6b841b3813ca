"""Deformable scenes built from one <flexcomp> (MJCF strings), shared by tests/test_flex.py and
benchmarks/flex_steps.py: `mjx_lite.load_mjcf_string(flex.cloth_on_plane())`.

  rope(...)           dim 1: a pinned rope hanging under gravity, edge stiffness and damping
  cloth_on_plane(...) dim 2: a cloth dropped on a plane, edge equality constraints (or <elasticity>) and damping
  hanging_cloth(...)  dim 2: a cloth pinned at two corners, <elasticity> stretch and bending (elastic2d)
  soft_box(...)       dim 3: a grid of tetrahedra (a soft cube) dropped on a plane, <elasticity> (young, poisson)
  draped(...)         dim 1 or 2: a rope or a cloth dropped on a sphere, capsule, box, ellipsoid or cylinder (fixed,
                      or a free body)
  on_terrain(...)     dims 1, 2, 3: ropes, cloth and soft cubes dropped on a bumpy height field

Every builder returns the XML text; keyword arguments size and tune the scene (counts, spacing, material).
"""

from __future__ import annotations

__all__ = ["cloth_on_plane", "draped", "hanging_cloth", "on_terrain", "rope", "soft_box"]


def _vec(v) -> str:
    return " ".join(str(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))


def _scene(body: str, option: str = "", plane: str | None = None) -> str:
    floor = f'\n    <geom type="plane" size="1 1 .1" {plane}/>' if plane is not None else ""
    return f"""<mujoco>
  <option timestep="0.002" {option}/>
  <worldbody>{floor}
    {body}
  </worldbody>
</mujoco>
"""


def rope(count: int = 20, spacing: float = 0.03, euler: str = "0 60 0", mass: float = 0.2, radius: float = 0.005,
         stiffness: float = 100.0, damping: float = 0.02, plane: bool = False) -> str:  # fmt: skip
    """A rope of `count` points, its first point pinned to the world at height 1 (no contacts)."""
    body = (f'<flexcomp name="rope" type="grid" count="{count} 1 1" spacing="{spacing} .1 .1" pos="0 0 1" '
            f'euler="{euler}" dim="1" mass="{mass}" radius="{radius}">\n'
            f'      <edge stiffness="{stiffness}" damping="{damping}"/>\n'
            '      <contact contype="0" conaffinity="0"/>\n      <pin id="0"/>\n    </flexcomp>')  # fmt: skip
    return _scene(body, plane='contype="0" conaffinity="0"' if plane else None)


def cloth_on_plane(count: int = 7, spacing: float = 0.04, height: float = 0.03, mass: float = 0.2,
                   radius: float = 0.005, damping: float = 0.01, friction: float | None = None,
                   elasticity: str | None = None) -> str:  # fmt: skip
    """A count x count cloth dropped from `height` (tilted 5 and 3 degrees) on a plane; edge equality constraints,
    or the <elasticity> attributes `elasticity` instead (then no edge equality)."""
    edge = (f'<elasticity {elasticity}/>' if elasticity else f'<edge equality="true" damping="{damping}"/>')
    body = (f'<flexcomp name="cloth" type="grid" count="{count} {count} 1" spacing="{spacing} {spacing} {spacing}" '
            f'pos="0 0 {height}" euler="5 3 0" dim="2" mass="{mass}" radius="{radius}">\n'
            f'      {edge}\n      <contact selfcollide="none"/>\n    </flexcomp>')  # fmt: skip
    return _scene(body, plane="" if friction is None else f'friction="{friction}"')


def hanging_cloth(count: tuple = (3, 3), spacing: float = 0.1, young: float = 1e4, poisson: float = 0.3,
                  thickness: float = 0.01, damping: float = 0.01, elastic2d: str = "both", mass: float = 0.2) -> str:
    """A cloth in a vertical plane pinned to the world at its two upper corners (no contacts), with <elasticity>."""
    nx, ny = count
    body = (f'<flexcomp name="cloth" type="grid" count="{nx} {ny} 1" spacing="{spacing} {spacing} {spacing}" '
            f'pos="0 0 1" euler="90 0 0" dim="2" mass="{mass}" radius="0.005">\n'
            f'      <elasticity young="{young}" poisson="{poisson}" thickness="{thickness}" damping="{damping}" '
            f'elastic2d="{elastic2d}"/>\n'
            f'      <contact contype="0" conaffinity="0"/>\n      <pin id="{ny - 1} {nx * ny - 1}"/>\n'
            '    </flexcomp>')  # fmt: skip
    return _scene(body)


def soft_box(count: tuple = (2, 2, 2), spacing: float = 0.1, height: float = 0.08, young: float = 1e4,
             poisson: float = 0.3, damping: float = 0.002, mass: float = 1.0, radius: float = 0.005,
             euler: str = "4 -3 10") -> str:  # fmt: skip
    """A soft cube (dim 3: six tetrahedra per grid cell) dropped from `height` on a plane, <elasticity>."""
    body = (f'<flexcomp name="box" type="grid" count="{_vec(count)}" spacing="{spacing} {spacing} {spacing}" '
            f'pos="0 0 {height}" euler="{euler}" dim="3" mass="{mass}" radius="{radius}">\n'
            f'      <elasticity young="{young}" poisson="{poisson}" damping="{damping}"/>\n'
            '      <contact selfcollide="none"/>\n    </flexcomp>')  # fmt: skip
    return _scene(body, plane="")


_SHAPES = {"sphere": 'type="sphere" size=".1"', "capsule": 'type="capsule" size=".05 .12" euler="0 90 0"',
           "box": 'type="box" size=".1 .1 .1" euler="0 0 10"',
           "ellipsoid": 'type="ellipsoid" size=".1 .08 .06" euler="0 0 20"',
           "cylinder": 'type="cylinder" size=".08 .06" euler="0 20 0"'}  # fmt: skip


def draped(geom: str = "sphere", dim: int = 2, count: int = 4, spacing: float = 0.05, height: float = 0.12,
           mass: float = 0.2, radius: float = 0.005, free: bool = False, damping: float = 0.01,
           option: str = "") -> str:  # fmt: skip
    """A rope (dim 1: `count` points) or a cloth (dim 2: count x count) dropped from `height` (tilted 5 and 3
    degrees) on a sphere (radius .1), a capsule (radius .05, half length .12, along x), a box (half size .1, turned
    10 degrees), an ellipsoid (radii .1 .08 .06) or a cylinder (radius .08, half height .06, tilted 20 degrees) at
    the origin: fixed to the world, or on a free body (`free`, then over a plane at z = -0.3). Edge
    equality constraints and edge damping; the flex collides with the geom (flex elements against it)."""
    counts = f"{count} 1 1" if dim == 1 else f"{count} {count} 1"
    shape = f"<geom {_SHAPES[geom]}/>"
    if free:
        shape = f'<body name="{geom}" pos="0 0 0"><freejoint/>{shape}</body>'
    body = (f'{shape}\n    <flexcomp name="flex" type="grid" count="{counts}" spacing="{spacing} {spacing} {spacing}" '
            f'pos="0.01 0.02 {height}" euler="5 3 0" dim="{dim}" mass="{mass}" radius="{radius}">\n'
            f'      <edge equality="true" damping="{damping}"/>\n      <contact selfcollide="none"/>\n'
            '    </flexcomp>')  # fmt: skip
    return _scene(body, option=option, plane='pos="0 0 -.3"' if free else None)


# a bumpy 6 x 7 height field (elevations 0..3, scaled to .04), its flexes' places on it by dim
_TERRAIN = ("0 1 2 1 0 1 0  1 2 3 2 1 0 1  0 1 2 1 0 1 2  2 1 0 1 2 1 0  0 0 1 0 0 2 1  1 0 0 1 2 1 0")
_TERRAIN_AT = {1: ((0.15, -0.15), "5 3 20"), 2: ((-0.17, 0.01), "5 3 0"), 3: ((0.17, 0.12), "5 3 0")}


def on_terrain(dims: tuple = (2,), count: int = 4, spacing: float = 0.05, height: float = 0.08, mass: float = 0.2,
               radius: float = 0.005, damping: float = 0.01, margin: float = 0.0, pin: bool = False,
               option: str = "") -> str:  # fmt: skip
    """Flexes dropped from `height` on a bumpy height field (6 x 7 grid, .8 x .6 x .04 with a base of .05, tilted by
    4, -3 and 10 degrees): per dim in `dims` a rope (dim 1: count + 2 points, radius 1.6 x `radius`), a cloth (dim 2:
    count x count) or a soft cube (dim 3: (count - 1)^3 points, spacing .8 x) at its own place on the field. Edge
    equality constraints and damping, the flexes' contact `margin`; pin: the first vertex of each flex pinned to the
    world (MuJoCo skips its elements against the field, both on the world body)."""
    flexes = []
    PIN = '\n      <pin id="0"/>'
    for dim in dims:
        (x, y), euler = _TERRAIN_AT[dim]
        n, sp, r, z = count, spacing, radius, height
        counts = {1: f"{n + 2} 1 1", 2: f"{n} {n} 1", 3: f"{n - 1} {n - 1} {n - 1}"}[dim]
        if dim == 1:
            r = 1.6 * radius
        if dim == 3:
            sp, z = 0.8 * spacing, height + 0.02
        flexes.append(f'<flexcomp name="flex{dim}" type="grid" count="{counts}" spacing="{sp:g} {sp:g} {sp:g}" '
                      f'pos="{x} {y} {z:g}" euler="{euler}" dim="{dim}" mass="{mass}" radius="{r}">\n'
                      f'      <edge equality="true" damping="{damping}"/>\n'
                      f'      <contact selfcollide="none" margin="{margin:g}"/>'
                      f'{PIN if pin else ""}\n'
                      '    </flexcomp>')  # fmt: skip
    body = ('<geom type="hfield" hfield="terrain" pos=".01 -.02 0" euler="4 -3 10"/>\n    ' + "\n    ".join(flexes))
    return _scene(body, option=option).replace(
        "<worldbody>", f'<asset><hfield name="terrain" nrow="6" ncol="7" size=".4 .3 .04 .05" '
                       f'elevation="{_TERRAIN}"/></asset>\n  <worldbody>', 1)  # fmt: skip
