"""`python -m mjx_lite check`: compile a model, list every unsupported feature, compare a forward pass with MuJoCo C
and explain a difference.

- Unsupported features: the loader stops at the first `MJCFUnsupportedError`; `load_collecting` records it, takes
  the offending attribute (or, failing that, element) out of the parsed XML and loads again, until the model loads
  or an error that is not an unsupported feature stops it, so every unsupported feature is listed at once.
- A difference is explained by the pipeline stage where it starts: MuJoCo's stages (mj_kinematics, mj_comPos,
  mj_makeM, mj_factorM, mj_collision, mj_makeConstraint, ..., mj_fwdConstraint, the sensors) are run one by one on
  an MjData holding the same state, and after each the fields that stage writes are compared with ours (from one
  forward pass; contacts and constraint rows as sorted values, since their order is not MuJoCo's). For each
  differing field, the first stage (up to the one that writes it) whose output differs is named.
- When a constraint solver stopped at its iteration limit on either side, both sides' iteration counts and final
  improvement and gradient are printed: an unconverged solver, not a bug, then explains a difference in qacc.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite import interop, models, types
from mjx_lite.mjcf import compile as mjcf_compile
from mjx_lite.mjcf import document
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from mjx_lite.pipeline import inertia
from mjx_lite.types import SIZE_FIELDS, GeomType, Model

EXIT_OK, EXIT_FAILURE, EXIT_UNSUPPORTED = 0, 1, 2
# float64 forward pass vs MuJoCo C, relative to each field's scale (max(1, max|field|)). Looser than the test
# suite's 1e-7 because any model may be given, with more ill-conditioned inertia and constraint systems.
CHECK_TOL = 1e-6
CHECK_FIELDS = (
    "xpos", "xquat", "geom_xpos", "site_xpos", "cam_xpos", "subtree_com", "ten_length", "actuator_length",
    "qfrc_bias", "qfrc_passive", "qfrc_actuator", "qacc_smooth", "ncon", "nefc", "qacc", "sensordata",
)  # fmt: skip
MAX_RELOADS = 100  # bound on the load-record-remove rounds of `load_collecting`


# ---- every unsupported feature -------------------------------------------------------------------------------


@dataclasses.dataclass
class Loaded:
    """What `load_collecting` found: the Model (None when it did not load), every unsupported feature, and the
    error that stopped loading (None when it loaded or when only unsupported features stopped it)."""

    model: Model | None
    unsupported: list[MJCFUnsupportedError]
    error: Exception | None = None


def _nodes(raw):
    yield raw
    for k in raw.children:
        yield from _nodes(k)


def _drop(root, e: MJCFUnsupportedError, level: int) -> bool:
    """Take the feature of `e` out of the raw tree: level 0 its attribute on its element, level 1 that attribute in
    every <default> element of the same tag too (a class may have set it), level 2 the element. False: not found."""
    hits = [(p, k) for p in _nodes(root) for k in p.children
            if k.file == e.file and k.line == e.line and k.tag == e.element]  # fmt: skip
    if not hits:
        return False
    if level < 2 and e.attribute is not None:
        found = False
        for _, k in hits:
            found |= k.attrib.pop(e.attribute, None) is not None
        if level == 1:
            for d in (n for n in _nodes(root) if n.tag == "default"):
                for k in d.children:
                    if k.tag == e.element:
                        found |= k.attrib.pop(e.attribute, None) is not None
        return found
    for p, k in hits:
        p.children.remove(k)
    return True


def load_collecting(path: str, assets: dict | None = None) -> Loaded:
    """Load the MJCF file at `path`, recording every unsupported feature (see the module docstring)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        raw, loader, model_dir, loading = document.read_file(path, assets)
    except MJCFError as e:
        return Loaded(None, [], e)

    def tree():
        if raw is None:  # URDF: no include-expanded MJCF to edit
            return document.parse_file(path, assets)
        return document.build(copy.deepcopy(raw), loader, model_dir, loading)

    found: list[MJCFUnsupportedError] = []
    tries: dict[tuple, int] = {}
    for _ in range(MAX_RELOADS):
        try:
            with np.errstate(all="ignore"):
                root = tree()
            source = types.ModelSource(data, path=os.path.abspath(path), model_dir=model_dir, assets=assets)
            model = mjcf_compile.compile_model(root, model_dir=model_dir, assets=assets, source=source)
            return Loaded(None if found else model, found)
        except MJCFUnsupportedError as e:
            key = (e.file, e.line, e.element, e.attribute, str(e))
            level = tries.get(key, -1) + 1
            if level == 0:
                found.append(e)
            if raw is None:  # a URDF document: its first unsupported feature only
                return Loaded(None, found)
            while level <= 2 and not _drop(raw, e, level):
                level += 1
            if level > 2:
                return Loaded(None, found, e if not found else None)
            tries[key] = level
        except MJCFError as e:
            return Loaded(None, found, e)
    return Loaded(None, found)


# ---- stage by stage against MuJoCo ---------------------------------------------------------------------------


def _scaled_diff(a, b) -> tuple[float, float]:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.size != b.size:
        return np.inf, 1.0
    return float(np.abs(a - b).max(initial=0.0)), max(1.0, float(np.abs(b).max(initial=0.0)))


def _sorted(x) -> np.ndarray:
    return np.sort(np.asarray(x, np.float64).ravel())


def _compare(ours: dict, theirs: dict) -> str | None:
    """None when every value agrees within CHECK_TOL x its scale, else the first difference in words."""
    for k, a in ours.items():
        b = theirs[k]
        err, scale = _scaled_diff(a, b)
        if np.size(a) != np.size(b):
            return f"{k}: {np.size(a)} values vs MuJoCo's {np.size(b)}"
        if not err <= CHECK_TOL * scale:
            return f"{k}: max |diff| {err:.2e}"
    return None


def _our_values(m: Model, d) -> dict:
    """Our side of every stage comparison, from one forward pass `d`."""
    act = np.asarray(d.contact.active)
    mask = np.asarray(d.efc_mask)
    x = np.linspace(1.0, 2.0, m.nv)
    v = {f: np.asarray(getattr(d, f)) for f in (
        "xpos", "xquat", "xipos", "geom_xpos", "site_xpos", "cam_xpos", "subtree_com", "cinert", "cdof",
        "ten_length", "actuator_length", "qfrc_bias", "qfrc_passive", "ten_velocity", "actuator_velocity",
        "actuator_force", "qfrc_actuator", "act_dot", "qfrc_smooth", "qacc_smooth", "qacc", "qfrc_constraint",
        "sensordata")}  # fmt: skip
    v.update(qM=np.asarray(mjx_lite.full_m(m, d)), Minv_x=np.asarray(inertia.solve_m(m, d, jp.asarray(x))),
             ncon=int(act.sum()), contact_dist=_sorted(np.asarray(d.contact.dist)[act]), nefc=int(mask.sum()),
             **{f: _sorted(np.asarray(getattr(d, f))[mask]) for f in ("efc_pos", "efc_R", "efc_aref", "efc_force")})
    return v


# (stage name, MuJoCo functions run in order, fields it writes that are compared)
STAGES = (
    ("mj_kinematics", ("mj_kinematics",), ("xpos", "xquat", "xipos", "geom_xpos", "site_xpos")),
    ("mj_comPos", ("mj_comPos",), ("subtree_com", "cinert", "cdof")),
    ("mj_camlight", ("mj_camlight",), ("cam_xpos",)),
    ("mj_tendon", ("mj_flex", "mj_tendon"), ("ten_length",)),
    ("mj_makeM (mj_crb)", ("mj_makeM",), ("qM",)),
    ("mj_factorM", ("mj_factorM",), ("Minv_x",)),
    ("mj_collision", ("mj_collision",), ("ncon", "contact_dist")),
    ("mj_makeConstraint", ("mj_makeConstraint", "mj_island", "mj_projectConstraint"), ("nefc", "efc_pos", "efc_R")),
    ("mj_transmission", ("mj_transmission",), ("actuator_length",)),
    ("mj_fwdVelocity", ("mj_sensorPos", "mj_energyPos", "mj_fwdVelocity"),
     ("qfrc_bias", "qfrc_passive", "ten_velocity", "actuator_velocity", "efc_aref")),
    ("mj_fwdActuation", ("mj_sensorVel", "mj_energyVel", "mj_fwdActuation"), ("actuator_force", "qfrc_actuator",
                                                                              "act_dot")),
    ("mj_fwdAcceleration", ("mj_fwdAcceleration",), ("qfrc_smooth", "qacc_smooth")),
    ("mj_fwdConstraint", ("mj_fwdConstraint",), ("qacc", "qfrc_constraint", "efc_force")),
    ("mj_sensorAcc (sensors)", ("mj_sensorAcc",), ("sensordata",)),
)  # fmt: skip


def _their_values(mjm, mjd, fields) -> dict:
    import mujoco  # optional dependency

    out = {}
    for f in fields:
        if f == "qM":
            M = np.zeros((mjm.nv, mjm.nv))
            mujoco.mj_fullM(mjm, mjd, M)
            out[f] = M
        elif f == "Minv_x":
            y = np.zeros(mjm.nv)
            mujoco.mj_solveM(mjm, mjd, y.reshape(1, -1), np.linspace(1.0, 2.0, mjm.nv).reshape(1, -1))
            out[f] = y
        elif f == "ncon":
            out[f] = mjd.ncon
        elif f == "contact_dist":
            out[f] = _sorted(mjd.contact.dist[: mjd.ncon])
        elif f == "nefc":
            out[f] = mjd.nefc
        elif f.startswith("efc_"):
            out[f] = _sorted(getattr(mjd, f)[: mjd.nefc])
        else:
            out[f] = np.array(getattr(mjd, f))
    return out


def stage_report(m: Model, d, mjm, mjd_state) -> list[tuple[str, str | None]]:
    """[(stage, None or its first difference)] for the STAGES, MuJoCo's run one by one on `mjd_state` (an MjData
    holding the state; modified) and compared with our forward pass `d`."""
    import mujoco  # optional dependency

    ours = _our_values(m, d)
    report = []
    for name, fns, fields in STAGES:
        for fn in fns:
            getattr(mujoco, fn)(mjm, mjd_state)
        theirs = _their_values(mjm, mjd_state, fields)
        mine = {f: ours[f] for f in fields}
        for f in fields:  # our layout of the same values (cam_xpos etc. are (n, 3) on both sides)
            if np.size(mine[f]) == np.size(theirs[f]) and np.ndim(theirs[f]):
                theirs[f] = np.reshape(theirs[f], np.shape(mine[f]))
        report.append((name, _compare(mine, theirs)))
    return report


# the stage that writes each compared field (a difference there can start at that stage or any earlier one)
_WRITER = {"xpos": "mj_kinematics", "xquat": "mj_kinematics", "geom_xpos": "mj_kinematics",
           "site_xpos": "mj_kinematics", "cam_xpos": "mj_camlight", "subtree_com": "mj_comPos",
           "ten_length": "mj_tendon", "actuator_length": "mj_transmission", "qfrc_bias": "mj_fwdVelocity",
           "qfrc_passive": "mj_fwdVelocity", "qfrc_actuator": "mj_fwdActuation", "qacc_smooth": "mj_fwdAcceleration",
           "ncon": "mj_collision", "nefc": "mj_makeConstraint", "qacc": "mj_fwdConstraint",
           "sensordata": "mj_sensorAcc (sensors)"}  # fmt: skip


def first_differing_stage(report, field: str) -> tuple[str, str] | None:
    """(stage, its difference): the first stage up to the one writing `field` whose output differs."""
    for name, diff in report:
        if diff is not None:
            return name, diff
        if name == _WRITER.get(field):
            return None
    return None


def solver_note(m: Model, d, mjm, mjd) -> list[str]:
    """Lines on the constraint solvers when either stopped at its iteration limit, else [].

    With noslip on (`opt.noslip_iterations`), both sides' solver_niter also count the noslip sweeps, and MuJoCo's
    last solver statistics are the sweeps': MuJoCo's main solver is then read from a run of the same state with
    noslip off, and ours (whose improvement and gradient are the main solver's) counts as at the limit when its
    main solver may have reached it (solver_niter >= opt.iterations).
    """
    import mujoco  # optional dependency

    limit = int(m.opt.iterations)
    sweeps = int(m.opt.noslip_iterations)
    if sweeps > 0:
        main = copy.copy(mjd)
        saved = mjm.opt.noslip_iterations
        mjm.opt.noslip_iterations = 0
        try:
            mujoco.mj_forward(mjm, main)
        finally:
            mjm.opt.noslip_iterations = saved
        mjd = main
    nsolver = mujoco.mjNSOLVER
    theirs = []
    for i in range(max(1, int(mjd.nisland))):
        n = int(mjd.solver_niter[i])
        if n:
            st = mjd.solver[i * nsolver + min(n, nsolver) - 1]
            theirs.append((i, n, float(st.improvement), float(st.gradient)))
    n_ours = int(d.solver_niter)
    hit_ours = n_ours >= limit
    hit_theirs = any(n >= limit for _, n, _, _ in theirs)
    if not (hit_ours or hit_theirs):
        return []
    name = mujoco.mjtSolver(int(m.opt.solver)).name.replace("mjSOL_", "")
    lines = [f"solver ({name}, opt.iterations {limit}, tolerance {float(m.opt.tolerance):g}) stopped at its "
             f"iteration limit on {'both sides' if hit_ours and hit_theirs else 'one side'}:"]  # fmt: skip
    for i, n, imp, grad in theirs:
        isl = f" island {i}" if len(theirs) > 1 else ""
        lines.append(f"  MuJoCo C{isl}: {n} iterations, final improvement {imp:.3e}, gradient {grad:.3e}"
                     + (" (its main solver: the same state with noslip off)" if sweeps else ""))
    per_island = [int(n) for n in np.asarray(getattr(d, "solver_niter_island", np.zeros(0))).ravel() if n > 0]
    lines.append(f"  mjx_lite: {n_ours} iterations"
                 + (f" (per island: {', '.join(map(str, per_island))})" if len(per_island) > 1 else "")
                 + (f" (the main solver's and up to {sweeps} noslip sweeps)" if sweeps else "")
                 + f", final improvement {float(d.solver_improvement):.3e}, gradient {float(d.solver_gradient):.3e}")
    lines.append("  an unconverged solver explains differences from mj_fwdConstraint on (qacc, efc_force, ...): "
                 "raise <option iterations=...> to tell it from a bug")  # fmt: skip
    return lines


# ---- the command -------------------------------------------------------------------------------------------------


def _fail(msg: str, code: int) -> int:
    print(f"mjx_lite: {msg}", file=sys.stderr)
    return code


def run(model: str, no_mujoco: bool = False, seed: int = 0) -> int:
    """The `check` subcommand; returns its exit code (0 agrees, 1 invalid or differs, 2 unsupported)."""
    jax.config.update("jax_enable_x64", True)
    try:
        path = os.fspath(models.resolve(model))
    except FileNotFoundError as e:
        return _fail(str(e), EXIT_FAILURE)
    try:
        got = load_collecting(path)
    except MJCFError as e:
        return _fail(f"invalid model: {e}", EXIT_FAILURE)
    if got.unsupported:
        for e in got.unsupported:
            print(f"mjx_lite: unsupported feature: {e}", file=sys.stderr)
        if got.error is not None:
            print(f"mjx_lite: (listing stopped at: {got.error})", file=sys.stderr)
        print(f"unsupported: {len(got.unsupported)} feature{'s' * (len(got.unsupported) != 1)} (listed above)")
        return EXIT_UNSUPPORTED
    if got.error is not None:
        return _fail(f"invalid model: {got.error}", EXIT_FAILURE)
    m = got.model
    print(f"{path}: compiled")
    sizes = [f"{k} {getattr(m, k)}" for k in SIZE_FIELDS if getattr(m, k)] + [f"nconmax {m.nconmax}",
                                                                              f"njmax {m.njmax}"]  # fmt: skip
    print("sizes: " + ", ".join(sizes))
    notes = []
    if np.any(np.asarray(m.geom_type) == GeomType.SDF):
        notes.append("SDF geoms are not drawn by mjx_lite.render")
    print("unsupported: " + ("; ".join(notes) if notes else "none (every element compiled)"))
    if no_mujoco:
        return EXIT_OK
    try:
        mjm = interop.mujoco_model(m)
    except ImportError:
        print("mujoco is not installed: no comparison with MuJoCo C")
        return EXIT_OK
    d = _random_state(m, seed)
    mjd = interop.to_mujoco(m, d, mjm)
    ours = jax.jit(mjx_lite.forward)(m, d)
    report = stage_report(m, ours, mjm, interop.to_mujoco(m, d, mjm, forward=False))
    bad = 0
    print(f"forward pass vs MuJoCo C (float64, tolerance {CHECK_TOL:g} x field scale):")
    for f in CHECK_FIELDS:
        a_ = np.asarray(getattr(ours, f), np.float64)
        b_ = np.asarray(getattr(mjd, f), np.float64)
        if a_.size != b_.size:
            print(f"  {f:16s} skipped (layout differs: {a_.shape} vs {b_.shape})")
            continue
        err, scale = _scaled_diff(a_, b_)
        ok = err <= CHECK_TOL * scale
        bad += not ok
        where = ""
        if not ok:
            first = first_differing_stage(report, f)
            where = f" (first stage that differs: {first[0]}: {first[1]})" if first else ""
        print(f"  {f:16s} max |diff| {err:.2e}  {'ok' if ok else 'DIFFERS'}{where}")
    for line in solver_note(m, ours, mjm, mjd):
        print(line)
    print("result: " + ("agrees with MuJoCo C" if not bad else f"{bad} fields differ from MuJoCo C"))
    return EXIT_OK if not bad else EXIT_FAILURE


def _random_state(m: Model, seed: int):
    """The compared state: the first keyframe (or qpos0), hinge and slide joints moved and small random velocities
    and controls."""
    rng = np.random.default_rng(seed)
    d = mjx_lite.make_data(m)
    if m.nkey:
        d = d.replace(qpos=m.key_qpos[0], ctrl=m.key_ctrl[0], plastic=m.key_plastic[0].astype(d.plastic.dtype))
    scalar = np.isin(np.asarray(m.jnt_type), (mjx_lite.JointType.HINGE, mjx_lite.JointType.SLIDE))
    adr = np.asarray(m.jnt_qposadr)[scalar]
    return d.replace(qpos=d.qpos.at[adr].add(jp.asarray(0.1 * rng.standard_normal(len(adr)))),
                     qvel=jp.asarray(0.1 * rng.standard_normal(m.nv)),
                     ctrl=d.ctrl + jp.asarray(0.1 * rng.standard_normal(m.nu)))  # fmt: skip
