"""Test-only helpers shared by the test modules: MuJoCo models and states (the oracle), conversions between
MuJoCo's MjData and our Data, row matching and scaled comparisons. The runtime never imports `mujoco`."""

from __future__ import annotations

import dataclasses
import glob
import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from mjx_lite import io, types
from mjx_lite.collision import driver
from mjx_lite.data import make_data
from mjx_lite.mjcf.compile import load_mjcf_string
from mjx_lite.mjcf.mesh import hull_tables, polygon_tables_from_vert
from mjx_lite.mjcf.spec import MJCFError
from mjx_lite.pipeline import constraint, kinematics, tendon, velocity
from mjx_lite.pipeline.forward import forward as _forward
from mjx_lite.pipeline.step import step as _step

_OBJ = {
    "body": mujoco.mjtObj.mjOBJ_BODY, "joint": mujoco.mjtObj.mjOBJ_JOINT, "geom": mujoco.mjtObj.mjOBJ_GEOM,
    "site": mujoco.mjtObj.mjOBJ_SITE, "camera": mujoco.mjtObj.mjOBJ_CAMERA, "light": mujoco.mjtObj.mjOBJ_LIGHT,
    "mesh": mujoco.mjtObj.mjOBJ_MESH, "hfield": mujoco.mjtObj.mjOBJ_HFIELD, "pair": mujoco.mjtObj.mjOBJ_PAIR,
    "exclude": mujoco.mjtObj.mjOBJ_EXCLUDE, "equality": mujoco.mjtObj.mjOBJ_EQUALITY,
    "tendon": mujoco.mjtObj.mjOBJ_TENDON, "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR,
    "sensor": mujoco.mjtObj.mjOBJ_SENSOR, "key": mujoco.mjtObj.mjOBJ_KEY,
    "material": mujoco.mjtObj.mjOBJ_MATERIAL, "texture": mujoco.mjtObj.mjOBJ_TEXTURE,
    "skin": mujoco.mjtObj.mjOBJ_SKIN,
}  # fmt: skip
_COUNT = {"body": "nbody", "joint": "njnt", "geom": "ngeom", "site": "nsite", "camera": "ncam", "light": "nlight",
          "mesh": "nmesh", "hfield": "nhfield", "pair": "npair", "exclude": "nexclude", "equality": "neq",
          "tendon": "ntendon", "actuator": "nactuator", "sensor": "nsensor", "key": "nkey", "material": "nmat",
          "texture": "ntex", "skin": "nskin"}  # fmt: skip

SITE_PACKAGES = os.path.dirname(os.path.dirname(mujoco.__file__))
MJX_TEST_DATA = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
DM_SUITE = os.path.join(SITE_PACKAGES, "dm_control", "suite")


# Every kind of constraint row: connect (bodies and sites), weld, joint and tendon equalities, dof and tendon friction
# loss, slide / hinge / ball / tendon limits, contacts of a box (condim {condim}) and a sphere (condim {g_condim})
# against the plane. Prefix an <option> element: EVERY_ROW_XML.format(option=..., condim=..., g_condim=...).
EVERY_ROW_XML = """<mujoco>{option}
<worldbody>
<geom type="plane" size="5 5 .1"/>
<body name="a" pos="0 0 1"><freejoint/><geom type="box" size=".1 .2 .3" contype="0" conaffinity="0"/>
 <site name="sa" pos=".1 0 0"/></body>
<body name="b" pos="1 0 1"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/>
 <site name="sb" pos="0 .1 0"/></body>
<body name="c" pos="0 1 1"><joint name="j1" type="hinge" axis="1 0 0" range="-5 5" frictionloss=".2"/>
  <joint name="j2" type="slide" axis="0 1 0" range="-.01 .01" margin=".02"/>
  <geom type="sphere" size=".1" contype="0" conaffinity="0"/>
  <site name="s1" pos="0 0 .1"/></body>
<body name="e" pos="0 2 1"><joint name="bj" type="ball" range="0 5"/>
  <geom type="capsule" fromto="0 0 0 0 0 .3" size=".05" contype="0" conaffinity="0"/>
  <site name="s2" pos="0 0 .3"/></body>
<body name="f" pos="2 0 .2"><freejoint/><geom type="box" size=".1 .1 .1" condim="{condim}" friction="0.7 0.005 0.0001"
  solimp="0.8 0.95 0.2 0.4 3" solref="0.03 0.9"/></body>
<body name="g" pos="2 2 .2"><freejoint/><geom type="sphere" size=".1" condim="{g_condim}" solref="-1000 -10"/></body>
</worldbody>
<tendon><spatial name="t1" limited="true" range="0 .9" frictionloss=".1">
  <site site="s1"/><site site="s2"/></spatial></tendon>
<equality>
<connect body1="a" body2="b" anchor=".2 .1 0" solref="0.04 1" solimp="0.5 0.95 1.0 0.5 2"/>
<connect site1="sa" site2="sb"/>
<weld body1="a" body2="b" torquescale="2" solimp="0.5 0.95 1.0 0.5 2" anchor="0.1 0.2 0.3"/>
<weld body1="a" torquescale="1"/>
<joint joint1="j1" joint2="j2" polycoef="0.1 0.5 0.2 0 0"/>
<joint joint1="j2" polycoef="0 0 0 0 0"/>
<tendon tendon1="t1" polycoef="1.2 0 0 0 0"/>
</equality></mujoco>"""



@jax.jit
def constraint_rows(m: types.Model, d: types.Data) -> types.Data:
    """The constraint rows of d's state: kinematics, tendons, velocities, collision, then make_constraint."""
    d = kinematics.kinematics(m, d)
    d = kinematics.com_pos(m, d)
    d = tendon.tendon(m, d)
    d = velocity.com_vel(m, d)
    d = driver.collision(m, d)
    return constraint.make_constraint(m, d)


def host_array(x) -> jax.Array:
    """A copy of the host array x on the device, compiling nothing: an eager jp.asarray of a host array compiles a
    `stage` program per shape and dtype (jax 0.10; see mjx_lite.data._full), and may alias host memory that MuJoCo
    mutates in place later."""
    return jax.device_put(np.array(x))


def cast_floats(tree, dtype):
    """tree with every floating leaf cast to dtype through the host, compiling nothing (an eager astype compiles a
    `convert` program per shape: 46 of them, 14 s at load 7, to cast the pendula Model to float32)."""

    def cast(x):
        return host_array(np.asarray(x, np.dtype(dtype))) if jp.issubdtype(jp.result_type(x), jp.floating) else x

    return jax.tree.map(cast, tree)


def posed_data(m: types.Model, xpos, xmat) -> types.Data:
    """A batch of Data whose geoms are placed at xpos (B, ngeom, 3) and xmat (B, ngeom, 3, 3) (sequences of per-pose
    arrays are stacked): the input of the collision tests, which call `driver.collision` on geom poses directly."""
    d0 = make_data(m)
    xpos, xmat = host_array(np.stack(xpos)), host_array(np.stack(xmat))
    return jax.vmap(lambda a, b: d0.replace(geom_xpos=a, geom_xmat=b))(xpos, xmat)


def assert_both_refuse(xml: str, attribute: str) -> None:
    """MuJoCo refuses the model at load and so does mjx_lite, its MJCFError naming `attribute`."""
    import pytest  # noqa: PLC0415 - benchmarks import this module too, without pytest

    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError) as info:
        load_mjcf_string(xml)
    assert info.value.attribute == attribute, str(info.value)


def reference_models() -> list[str]:
    """Paths of the reference MJCF models shipped with mujoco-mjx and dm_control."""
    files = sorted(glob.glob(os.path.join(MJX_TEST_DATA, "**", "*.xml"), recursive=True))
    files += sorted(glob.glob(os.path.join(DM_SUITE, "*.xml")))
    return files


def model_from_mujoco(mjm: mujoco.MjModel) -> types.Model:
    """Our Model built directly from MuJoCo's compiled arrays (to test the pipeline apart from our compiler)."""
    arrays = {}
    for f in dataclasses.fields(types.Model):
        if f.name in ("opt", "stat", "vis", "source", "names") or f.name in types.SIZE_FIELDS or f.name in (
                "nconmax", "njmax"):
            continue
        if hasattr(mjm, f.name):
            arrays[f.name] = np.array(getattr(mjm, f.name))
    # builtin textures: MuJoCo keeps their pixels (tex_data), not their description; without it they count as
    # file textures (the renderer draws no checker or sky gradient for such a model)
    arrays.update(tex_builtin=np.zeros(mjm.ntex, np.int32), tex_rgb1=np.full((mjm.ntex, 3), 0.8),
                  tex_rgb2=np.full((mjm.ntex, 3), 0.5))
    arrays["sensor_tangent"] = sensor_tangent_from_mujoco(mjm)
    # plugin actuators and sensors keep their configuration as text in MuJoCo (plugin_attr): not rebuilt here
    if np.any(mjm.actuator_plugin >= 0) or np.any(mjm.sensor_plugin >= 0):
        raise NotImplementedError("model_from_mujoco: plugin actuators and sensors (build with load_mjcf)")
    # (what io.build_model assumes for a model without them)
    arrays["actuator_pluginprm"] = np.zeros((mjm.nactuator, 5))
    arrays.update(rod_arrays_from_mujoco(mjm))
    # the mesh BVHs of the mesh-SDF collider are MuJoCo's (mjx_lite compiles them only for meshes of models with
    # sdf geoms; MuJoCo's arrays also hold the bodies' BVHs, which the addresses skip)
    arrays.update(mesh_sdfbvhadr=mjm.mesh_bvhadr, mesh_sdfbvhnum=mjm.mesh_bvhnum, sdfbvh_aabb=mjm.bvh_aabb,
                  sdfbvh_child=mjm.bvh_child, sdfbvh_nodeid=mjm.bvh_nodeid)
    sizes = {k: getattr(mjm, k) for k in types.SIZE_FIELDS}
    opt = {f.name: getattr(mjm.opt, f.name) for f in dataclasses.fields(types.Option)}
    opt["integrator"] = int(mjm.opt.integrator)
    stat = {k: getattr(mjm.stat, k) for k in ("meaninertia", "meanmass", "meansize", "extent", "center")}
    names = {
        k: tuple(mujoco.mj_id2name(mjm, _OBJ[k], i) or "" for i in range(getattr(mjm, _COUNT[k]))) for k in _OBJ
    }
    extra = [f for f in dataclasses.fields(types.Model) if f.name not in arrays and not f.metadata.get("static")]
    missing = [
        f.name
        for f in extra
        if f.name not in ("opt", "stat", "vis") and f.name not in arrays
    ]
    if missing:
        raise KeyError(f"model_from_mujoco: no MuJoCo array for {missing}")
    if "mesh_hullvert" not in arrays:  # MuJoCo keeps no hull tables of ours: build them from its vertices
        arrays.update(hull_tables(arrays["mesh_vert"], arrays["mesh_vertadr"], arrays["mesh_vertnum"]))
    if "mesh_polyvert" not in arrays:
        arrays.update(polygon_tables_from_vert(arrays["mesh_vert"], arrays["mesh_vertadr"], arrays["mesh_vertnum"]))
    return io.build_model(arrays, sizes, opt, stat, names, vis=visual_from_mujoco(mjm))


def rod_arrays_from_mujoco(mjm: mujoco.MjModel) -> dict:
    """Our rod tables that MuJoCo keeps elsewhere: flexedge_twistdof (the twist dof of each edge of an elastic rod,
    from the hinges in flex_bending: edge h + 1's dof at row + 7, edge 0's the one before) and flex_rodframe0 (the
    first edge's frame at qpos0, as mjcf/flex.py computes it)."""
    from mjx_lite.mjcf import flex as mjcf_flex

    twist = np.full(mjm.nflexedge, -1, np.int32)
    for f in range(mjm.nflex):
        badr, eadr = int(mjm.flex_bendingadr[f]), int(mjm.flex_edgeadr[f])
        if mjm.flex_dim[f] != 1 or badr < 0 or mjm.flex_plasticadr[f] < 0:
            continue
        dofs = [int(mjm.flex_bending[badr + 1 + 10 * h + 7]) for h in range(int(mjm.flex_bending[badr]))]
        twist[eadr : eadr + len(dofs) + 1] = [dofs[0] - 1] + dofs
    mjd = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, mjd)
    mujoco.mj_flex(mjm, mjd)
    A = {k: np.asarray(getattr(mjm, k)) for k in ("flex_dim", "flex_edgeadr", "flex_vertadr", "flex_edgenum",
                                                   "flex_elemdataadr", "flex_elem")}  # fmt: skip
    A["flexedge_twistdof"] = twist
    return {"flexedge_twistdof": twist, "flex_rodframe0": mjcf_flex._rod_frames0(A, mjm.nflex, mjd.flexvert_xpos)}


def sensor_tangent_from_mujoco(mjm: mujoco.MjModel) -> np.ndarray:
    """Model.sensor_tangent (nsensordata, 3) from MuJoCo's mesh_normal: the tangents of each tactile sensor's mesh
    vertices where the mesh holds 3 normals per vertex (normal, tangent 1, tangent 2), zero elsewhere."""
    out = np.zeros((mjm.nsensordata, 3))
    for i in np.nonzero(mjm.sensor_type == mujoco.mjtSensor.mjSENS_TACTILE)[0]:
        mesh, adr = mjm.sensor_objid[i], mjm.sensor_adr[i]
        n = mjm.mesh_vertnum[mesh]
        if mjm.mesh_normalnum[mesh] == 3 * n:
            frames = mjm.mesh_normal[mjm.mesh_normaladr[mesh] : mjm.mesh_normaladr[mesh] + 3 * n].reshape(n, 3, 3)
            out[adr + n : adr + 2 * n], out[adr + 2 * n : adr + 3 * n] = frames[:, 1], frames[:, 2]
    return out


def visual_from_mujoco(mjm: mujoco.MjModel) -> dict:
    """{group: {field: value}} of the mjVisual fields the Model keeps (`types.VISUAL_DEFAULTS`)."""
    return {g: {k: np.array(getattr(getattr(mjm.vis, g), k)) for k in fields}
            for g, fields in types.VISUAL_DEFAULTS.items()}  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# a compiled Model against MuJoCo's mjModel, field by field (the MJCF compiler's oracle; used by
# test_mjcf_compile.py and the differential fuzzer test_fuzz_mjcf.py)

RTOL = 1e-6  # float64 compile arithmetic, different operation order than MuJoCo's C
ATOL = 1e-10  # absolute slack for values that are zero up to round-off
QUAT_TOL = 1e-6  # quaternions (compared up to sign)
EIG_GAP = 1e-6  # principal moments closer than this (relative) leave the principal axes free

# MuJoCo stores mesh vertices and height-field data in float32: values computed from them (mesh frames, the
# boxes of mesh geoms) agree to float32 resolution of the geometry, not to float64 round-off
F32_FIELDS = ("mesh_vert", "hfield_data", "geom_aabb")
# offsets from a subtree centre of mass, which for mesh bodies inherits the float32 rounding of the mesh data
MESH_COM_FIELDS = ("light_poscom0", "cam_poscom0")
F32_TOL = 1e-6
# MuJoCo's Jacobi eigen-solver stops once the rotation angle is below ~1e-6 rad, so principal frames agree to
# about that much (not to round-off); the inertia tensor is compared relative to its largest entry.
_NAME_OBJ = _OBJ  # object type -> mjtObj
_NAME_COUNT = _COUNT


def _model_fields() -> list[str]:
    skip = {"opt", "stat", "vis", "source", "names", "nconmax", "njmax"}
    return [f.name for f in dataclasses.fields(types.Model) if f.name not in skip and f.name not in types.SIZE_FIELDS]


FIELDS = _model_fields()
POLY_FIELDS = ("mesh_polyadr", "mesh_polynum", "mesh_polyvert", "mesh_polyvertadr", "mesh_polyvertnum")


def mesh_polygons(m, i: int) -> list[tuple[int, ...]]:
    """Mesh i's polygons as vertex-id cycles (each from its own start vertex), in the model's order."""
    out = []
    for j in range(int(m.mesh_polyadr[i]), int(m.mesh_polyadr[i] + m.mesh_polynum[i])):
        a, n = int(m.mesh_polyvertadr[j]), int(m.mesh_polyvertnum[j])
        out.append(tuple(int(x) for x in np.asarray(m.mesh_polyvert)[a : a + n]))
    return out


def _compare_polygons(ours, mjm) -> list[str]:
    """Polygons of every mesh MuJoCo built them for (it skips meshes no collision geom uses): the same vertex cycles
    with the same start vertices; the order of the polygons is MuJoCo's hash-map order, not compared."""
    errs = []
    for i in range(mjm.nmesh):
        if mjm.mesh_polynum[i] == 0:
            continue
        a, b = mesh_polygons(ours, i), mesh_polygons(mjm, i)
        if sorted(a) != sorted(b):
            extra, missing = len(set(a) - set(b)), len(set(b) - set(a))
            errs.append(f"mesh {i} polygons: {extra} of ours not in MuJoCo's, {missing} of MuJoCo's missing")
    return errs


def _quat_rows_close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.reshape(-1, 4)
    b = b.reshape(-1, 4)
    nan = np.isnan(a) & np.isnan(b)  # NaN where MuJoCo has NaN (e.g. from a written nan) agrees
    same = np.all((np.abs(a - b) <= QUAT_TOL) | nan, axis=1)
    flip = np.all((np.abs(a + b) <= QUAT_TOL) | nan, axis=1)
    return same | flip


def _inertia_tensor(quat: np.ndarray, diag: np.ndarray) -> np.ndarray:
    out = []
    for q, i in zip(quat.reshape(-1, 4), diag.reshape(-1, 3)):
        r = np.zeros(9)
        mujoco.mju_quat2Mat(r, q)
        r = r.reshape(3, 3)
        out.append(r @ np.diag(i) @ r.T)
    return np.array(out).reshape(-1, 3, 3)


def compare_models(ours: types.Model, mjm: mujoco.MjModel, skip_prefixes: tuple[str, ...] = ()) -> list[str]:
    """Differences between our Model and MuJoCo's (empty list when they match)."""
    errs = []
    for k in types.SIZE_FIELDS:
        if k.startswith(("nmesh",)) or any(k == s for s in skip_prefixes):
            continue
        if getattr(ours, k) != getattr(mjm, k):
            errs.append(f"{k}: {getattr(ours, k)} != {getattr(mjm, k)}")
    if errs:
        return errs  # shapes would not line up
    for f in dataclasses.fields(types.Option):
        a, b = np.asarray(getattr(ours.opt, f.name)), np.asarray(getattr(mjm.opt, f.name))
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
            errs.append(f"opt.{f.name}: {a} != {b}")
    for k in ("meaninertia", "meanmass", "meansize", "extent", "center"):
        if ("stat." + k).startswith(skip_prefixes):
            continue
        a, b = np.asarray(getattr(ours.stat, k)), np.asarray(getattr(mjm.stat, k))
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
            errs.append(f"stat.{k}: {a} != {b}")
    for g, fields in types.VISUAL_DEFAULTS.items():  # MuJoCo keeps mjVisual in float32: within RTOL
        for k in fields:
            a, b = np.asarray(getattr(getattr(ours.vis, g), k)), np.asarray(getattr(getattr(mjm.vis, g), k))
            if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
                errs.append(f"vis.{g}.{k}: {a} != {b}")
    for obj, cnt in _NAME_COUNT.items():
        if any(obj.startswith(p.rstrip("_")) for p in skip_prefixes):
            continue
        want = tuple(mujoco.mj_id2name(mjm, _NAME_OBJ[obj], i) or "" for i in range(getattr(mjm, cnt)))
        if ours.names.get(obj) != want:
            errs.append(f"names[{obj}]: {ours.names.get(obj)} != {want}")
    if not "mesh_polyvert".startswith(skip_prefixes):
        errs += _compare_polygons(ours, mjm)
    for name in FIELDS:
        if name.startswith(skip_prefixes) or not hasattr(mjm, name) or name in POLY_FIELDS:
            continue
        a = np.asarray(getattr(ours, name))
        b = np.asarray(getattr(mjm, name))
        if a.size != b.size:
            errs.append(f"{name}: shape {a.shape} != {b.shape}")
            continue
        a = a.reshape(b.shape) if a.ndim != b.ndim else a
        if name == "body_iquat":
            continue  # compared with body_inertia below
        if name == "body_inertia":
            ta = _inertia_tensor(np.asarray(ours.body_iquat), a)
            tb = _inertia_tensor(mjm.body_iquat, b)
            if not np.allclose(np.sort(a, 1), np.sort(b, 1), rtol=RTOL, atol=ATOL, equal_nan=True):
                errs.append(f"body_inertia (principal moments): {a} != {b}")
            elif not np.allclose(ta, tb, rtol=RTOL, atol=RTOL * max(1.0, np.abs(tb).max(initial=0.0)), equal_nan=True):
                errs.append("body_inertia (tensor R diag R^T) differs")
            # principal frames must agree where the moments are distinct
            gap = np.min(np.abs(np.diff(np.sort(b, 1), axis=1)), axis=1) > EIG_GAP * np.maximum(1, b.max(1))
            bad = gap & ~_quat_rows_close(np.asarray(ours.body_iquat), mjm.body_iquat)
            if np.any(bad):
                errs.append(f"body_iquat rows {np.nonzero(bad)[0].tolist()} differ")
            continue
        if b.dtype.kind in "iub":
            if not np.array_equal(a.astype(np.int64), b.astype(np.int64)):
                idx = np.argwhere(a.astype(np.int64) != b.astype(np.int64))[:5].tolist()
                errs.append(f"{name}: integer mismatch at {idx}: ours {a.reshape(-1)[:8]} mj {b.reshape(-1)[:8]}")
            continue
        if name.endswith("quat") or name in ("mesh_quat",):
            if b.size and not np.all(_quat_rows_close(a, b)):
                errs.append(f"{name}: quaternion mismatch")
            continue
        atol = ATOL
        if name in MESH_COM_FIELDS and mjm.nmesh:
            atol = F32_TOL * float(mjm.stat.extent)
        if name in F32_FIELDS:
            atol = F32_TOL * max(1.0, float(np.abs(b).max(initial=0.0))) if name != "geom_aabb" else F32_TOL
        if not np.allclose(a, b, rtol=RTOL, atol=atol, equal_nan=True):
            diff = np.abs(a - b) - RTOL * np.abs(b)
            i = np.unravel_index(np.argmax(diff), a.shape) if a.ndim else ()
            errs.append(f"{name}: max mismatch at {i}: ours {a[i]} mj {b[i]}")
    return errs


def compare_textures_with_spec(ours: types.Model, spec: mujoco.MjSpec) -> list[str]:
    """The Model's description of builtin textures (tex_builtin, tex_rgb1, tex_rgb2: mjsTexture's fields, which
    mjModel replaces by generated pixels) against MuJoCo's parsed spec (defaults applied), texture by texture."""
    textures = list(spec.textures)
    if spec.compiler.discardvisual:
        textures = []  # MuJoCo deletes them at compile time
    if len(textures) != ours.ntex:
        return [f"ntex: {ours.ntex} != {len(textures)} textures in the spec"]
    errs = []
    for i, t in enumerate(textures):
        if int(ours.tex_builtin[i]) != int(t.builtin):
            errs.append(f"tex_builtin[{i}]: {int(ours.tex_builtin[i])} != {int(t.builtin)}")
        for k in ("rgb1", "rgb2"):
            a, b = np.asarray(getattr(ours, "tex_" + k)[i]), np.asarray(getattr(t, k))
            if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
                errs.append(f"tex_{k}[{i}]: {a} != {b}")
    return errs


# ---------------------------------------------------------------------------------------------------------
# states and comparisons

# sensors not compared by the sensor oracle tests: unsupported, or needing contacts (tests/test_sensor_contact.py)
UNSUPPORTED_SENSORS = {
    mujoco.mjtSensor.mjSENS_TOUCH,
    mujoco.mjtSensor.mjSENS_CONTACT, mujoco.mjtSensor.mjSENS_TACTILE, mujoco.mjtSensor.mjSENS_GEOMDIST,
    mujoco.mjtSensor.mjSENS_GEOMNORMAL, mujoco.mjtSensor.mjSENS_GEOMFROMTO,
}  # fmt: skip


def data_from_mujoco(m: types.Model, mjm: mujoco.MjModel, mjd: mujoco.MjData) -> types.Data:
    """Our Data with every field MuJoCo also has copied from `mjd` (dense layouts where ours are dense).

    qLD/qLDiagInv (factor layout is ours), contacts and constraint rows are left at make_data's values.
    """
    d = make_data(m)
    skip = {"qLD", "qLDiagInv", "contact", "ncon", "nefc"}
    kw = {}
    for f in dataclasses.fields(types.Data):
        name = f.name
        if name in skip or name.startswith("efc_"):
            continue
        ours = getattr(d, name)
        if name == "qM" and ours.ndim == 2:
            full = np.zeros((mjm.nv, mjm.nv))
            mujoco.mj_fullM(mjm, mjd, full)
            val = full
        elif name == "qM":
            continue  # sparse layout: ours differs from MuJoCo's
        elif name == "actuator_moment":
            val = np.zeros((mjm.nout, mjm.nv))
            mujoco.mju_sparse2dense(val, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr, mjd.moment_colind)
        elif name == "ten_J":
            val = np.zeros((mjm.ntendon, mjm.nv))
            if mjm.ntendon:
                mujoco.mju_sparse2dense(val, mjd.ten_J, mjm.ten_J_rownnz, mjm.ten_J_rowadr, mjm.ten_J_colind)
        elif name == "warning_number":
            val = np.array([w.number for w in mjd.warning])
        elif name == "solver_niter":
            val = np.asarray(mjd.solver_niter)[0]
        elif hasattr(mjd, name):
            val = np.asarray(getattr(mjd, name))
        else:
            continue
        kw[name] = host_array(np.array(val, dtype=ours.dtype).reshape(ours.shape))
    return d.replace(**kw)


def without_unsupported(spec: mujoco.MjSpec) -> mujoco.MjSpec:
    for s in list(spec.sensors):
        if s.type in UNSUPPORTED_SENSORS:
            spec.delete(s)
    return spec


def load_supported(path: str):
    """(our Model, MuJoCo's MjModel, its MjSpec) of a reference file; where our loader refuses its sensors (sensor.xml's
    camera projections), of the file without the UNSUPPORTED_SENSORS on both sides."""
    from mjx_lite.mjcf.compile import load_mjcf, load_mjcf_string
    from mjx_lite.mjcf.spec import MJCFUnsupportedError

    try:
        return load_mjcf(path), mujoco.MjModel.from_xml_path(path), mujoco.MjSpec.from_file(path)
    except MJCFUnsupportedError:
        spec = without_unsupported(mujoco.MjSpec.from_file(path))
        mjm = spec.compile()
        return load_mjcf_string(spec.to_xml(), model_dir=os.path.dirname(path)), mjm, spec


def random_state(mjm: mujoco.MjModel, mjd: mujoco.MjData, rng: np.random.Generator, qpos_scale: float = 0.3) -> None:
    """Perturb qpos around qpos0 (quaternions stay unit), random qvel/ctrl/act/xfrc_applied."""
    mjd.qpos[:] = mjm.qpos0
    mujoco.mj_integratePos(mjm, mjd.qpos, rng.normal(size=mjm.nv) * qpos_scale, 1.0)
    mjd.qvel[:] = rng.normal(size=mjm.nv)
    mjd.ctrl[:] = rng.normal(size=mjm.nu)
    mjd.act[:] = rng.uniform(0.0, 1.0, size=mjm.na)
    mjd.xfrc_applied[1:] = rng.normal(size=(mjm.nbody - 1, 6))
    mjd.time = rng.uniform(0.0, 3.0)




def match_rows(mjd, mjm, d):
    """Pair our live rows with MuJoCo's (same type; closest J, pos, vel)."""
    n = mjd.nefc
    live = np.nonzero(np.asarray(d.efc_mask))[0]
    assert len(live) == n, (len(live), n)
    Jm = mjd.efc_J[: n * mjm.nv].reshape(n, mjm.nv)
    Jo = np.asarray(d.efc_J)[live]
    tm, to = mjd.efc_type[:n], np.asarray(d.efc_type)[live]
    sig_m = np.concatenate([Jm, mjd.efc_pos[:n, None]], 1)
    sig_o = np.concatenate([Jo, np.asarray(d.efc_pos)[live, None]], 1)
    # cdist: (n, n) memory (broadcasting the difference needs n * n * nv: 32 GB on the 220-body pile)
    cost = cdist(sig_m, sig_o) + 1e6 * (tm[:, None] != to[None])
    r, c = linear_sum_assignment(cost)
    return r, live[c]




SMALL_XML = """
<mujoco>
  <option cone="{cone}" solver="{solver}" impratio="{impratio}" jacobian="dense" iterations="{iters}"
          ls_iterations="50" tolerance="{tol}"/>
  <default><geom contype="2" conaffinity="1"/></default>
  <worldbody>
    <geom type="plane" size="5 5 .1" condim="1" contype="1" conaffinity="2"/>
    <body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1" condim="1"/></body>
    <body pos=".5 0 .1"><freejoint/><geom type="sphere" size=".1" condim="3" friction="0.8 0.02 0.001"/></body>
    <body pos="1 0 .1"><freejoint/>
      <geom type="capsule" fromto="-.1 0 0 .1 0 0" size=".1" condim="4" friction="0.6 0.02 0.001"/></body>
    <body pos="1.5 0 .1"><freejoint/>
      <geom type="box" size=".1 .1 .1" condim="6" friction="0.7 0.01 0.002" solref="0.03 0.8"/></body>
    <body pos="0 1 .5">
      <joint name="h1" type="hinge" axis="0 1 0" range="-.2 .2" frictionloss="0.3"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/>
      <body pos=".3 0 0">
        <joint name="h2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="b3" pos="-.5 1 .5"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/></body>
    <body name="b4" pos="-1 1 .5"><freejoint/><geom type="box" size=".1 .05 .05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="b3" anchor="0 0 .2"/>
    <weld body1="b4" solref="0.05 1"/>
    <joint joint1="h1" joint2="h2" polycoef="0 .5 0 0 0"/>
  </equality>
</mujoco>
"""


def small_model(solver, cone, tol=1e-10, iters=100):
    """MuJoCo's model of SMALL_XML (free bodies on a plane, a limited hinge chain with friction loss, equalities)."""
    impratio = 1.5 if cone == "elliptic" else 1.0
    return mujoco.MjModel.from_xml_string(SMALL_XML.format(solver=solver, cone=cone, impratio=impratio, tol=tol,
                                                           iters=iters))  # fmt: skip




def small_state(mjm, mjd, rng):
    """Bodies 1-4 sunk into the floor and tilted, random velocities, hinge past its limit."""
    mjd.qpos[:] = mjm.qpos0
    mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.3
    for b in range(1, 5):
        adr = mjm.jnt_qposadr[mjm.body_jntadr[b]]
        mjd.qpos[adr + 2] = 0.1 - 0.005 - 0.01 * rng.random()
        q = np.r_[1.0, rng.normal(size=3) * 0.03]
        mjd.qpos[adr + 3 : adr + 7] = q / np.linalg.norm(q)
    h1 = mjm.jnt_qposadr[mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_JOINT, "h1")]
    mjd.qpos[h1] = 0.21 + 0.02 * rng.random()
    for name in ("b3", "b4"):
        b = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, name)
        adr = mjm.jnt_qposadr[mjm.body_jntadr[b]]
        mjd.qpos[adr : adr + 3] += rng.normal(size=3) * 0.02




def data_with_state(m, mjm, mjd):
    """make_data(m) with MuJoCo's state and inputs (qpos, qvel, ctrl, act, applied forces, and plastic where the
    model has plastic state: an elastic rod's reference frames) copied from mjd."""
    d = make_data(m).replace(qpos=host_array(mjd.qpos), qvel=host_array(mjd.qvel), ctrl=host_array(mjd.ctrl),
                             act=host_array(mjd.act), qfrc_applied=host_array(mjd.qfrc_applied),
                             xfrc_applied=host_array(mjd.xfrc_applied))  # fmt: skip
    return d.replace(plastic=host_array(mjd.plastic)) if mjm.nplastic else d




def close(ours, theirs, tol, msg=""):
    """assert_allclose with atol = tol * max(1, max|theirs|) (tolerances relative to the field's scale)."""
    theirs = np.asarray(theirs)
    scale = max(1.0, float(np.max(np.abs(theirs)))) if theirs.size else 1.0
    np.testing.assert_allclose(np.asarray(ours), theirs, atol=tol * scale, rtol=0, err_msg=msg)


GRAD_FD_RTOL = 1e-4  # a rollout gradient vs central differences (relative step 1e-4, float64)
VMAP_TOL = 1e-12  # vmapped rollouts vs unbatched ones (the same operations, batched)


def check_rollout_grad(m: types.Model, d0: types.Data, with_param, value: float, steps: int = 20) -> None:
    """The flex tests' gradient check: h(k) = mean flex vertex height after `steps` steps of the Model
    with_param(m, k) from d0. Asserts d h / d k (jax.grad) is finite, nonzero and equal to central differences
    (step 1e-4 k) to GRAD_FD_RTOL, and h vmapped over (k / 2, k) equal to unbatched calls to VMAP_TOL."""
    def height(k):
        mm = with_param(m, k)
        d = jax.lax.scan(lambda d, _: (_step(mm, d), None), d0, None, length=steps)[0]
        return jp.mean(d.flexvert_xpos[:, 2])

    vg = jax.jit(jax.value_and_grad(height))  # one compiled program for the gradient and the values
    g = float(vg(value)[1])
    h = 1e-4 * value
    fd = (float(vg(value + h)[0]) - float(vg(value - h)[0])) / (2 * h)
    assert np.isfinite(g) and g != 0
    np.testing.assert_allclose(g, fd, rtol=GRAD_FD_RTOL, atol=1e-10)
    ks = jp.array([0.5 * value, value])
    single = [float(vg(0.5 * value)[0]), float(vg(value)[0])]
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(height))(ks)), single, rtol=VMAP_TOL, atol=VMAP_TOL)


def check_steps(m: types.Model, mjm: mujoco.MjModel, mjd: mujoco.MjData, d0: types.Data, steps: int,
                fields: tuple[str, ...], atol: float) -> None:
    """`steps` steps of ours from d0 (one jitted scan) and of MuJoCo from mjd (advanced in place): each of `fields`
    equal to atol (rtol 0). The flex trajectory tests' comparison."""
    d = jax.jit(lambda d: jax.lax.scan(lambda d, _: (_step(m, d), None), d, None, length=steps)[0])(d0)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    for f in fields:
        np.testing.assert_allclose(np.asarray(getattr(d, f)), getattr(mjd, f), rtol=0, atol=atol, err_msg=f)


def grad_and_central_difference(f, x: float, h: float) -> tuple[float, float]:
    """(df/dx by jax.grad, central difference (f(x + h) - f(x - h)) / 2h) of a scalar f of a scalar, from ONE
    compiled program, jit(value_and_grad(f)): the values at x +- h come from it too (a separate jit(f) would compile
    the forward program a second time: most of a gradient test's time is compiling)."""
    vg = jax.jit(jax.value_and_grad(f))
    g = float(vg(x)[1])
    return g, (float(vg(x + h)[0]) - float(vg(x - h)[0])) / (2 * h)


def float32_forward(m: types.Model, qpos, qvel) -> types.Data:
    """`forward` of m in float32 (every floating Model and Data leaf cast) at (qpos, qvel), jitted."""

    m32, d32 = cast_floats(m, jp.float32), cast_floats(make_data(m), jp.float32)
    return jax.jit(_forward)(m32, d32.replace(qpos=np.asarray(qpos, np.float32),
                                              qvel=np.asarray(qvel, np.float32)))  # fmt: skip
