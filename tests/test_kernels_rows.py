"""The fused constraint rows (kernels/rows.py: make_constraint's rows as one Pallas kernel) against the XLA rows
(pipeline/constraint.py).

The rows run alone here (`kernels.make_constraint` on Data whose earlier stages ran on the XLA path), so each test
compiles one kernel in Pallas' interpret mode. ROWS: joint equalities (two joints with a polynomial, one joint
alone), dof friction loss, hinge and slide limits (one-row and two-row), contacts of condim 1, 3, 4 and 6
(frictionless and pyramidal; free spheres and a capsule, and a sphere on a hinge chain) on states with
contacts; the MJX humanoid (hinge limits, condim-3 contacts of its feet) in the slow selection. Both compare every
efc_* field, nefc, contact.efc_address and the warnings, then qacc after the (XLA) solve. Elliptic contacts
(test_kernels_solver.ELLIPTIC: condim 3, 4, 6, a pair with solreffriction) on both kernels, and a batch of Models
(vmapped friction, sizes, ranges, solref, impratio: domain randomisation) x environments on the row tiles. EQ
(connect and weld: bodies, sites, the world, relpose, torquescale, own solref/solimp), TEN (tendon equalities,
friction and limits, ball limits) and FLEX (flex edge equalities of a 2-d and a 1-d flexcomp, beside a tendon limit)
on both kernels, 2 vmapped Models of each on the tiles, their twins' inputs and Triton lowering; slow: their fused
forward against mj_forward and gradients.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from jax._src.interpreters import partial_eval as pe

import mjx_lite as mjl
from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint, flex, inertia, kernels, kinematics, tendon
from mjx_lite.pipeline.kernels import launch, rows
from mjx_lite.solver.solve import solve
from mjx_lite.types import ConstraintType
from tests import oracle
from tests import test_constraint_forward as tcf
from tests import test_kernels as tk
from tests import test_kernels_solver as tks

# float64: the kernel sums the Jacobian's components and J qvel in its own order: round-off, relative to
# max(1, max |field|) (the requirement: 1e-10)
ROWS_TOL = 1e-12
# qacc after the XLA solver on either path's rows (Newton iterates on rows that differ by round-off)
QACC_TOL = 1e-10
# float32 against float32's XLA rows: float32 round-off of the same formulas, relative to max(1, max |field|)
F32_TOL = 1e-5
# derivatives run through the XLA twin on both paths
GRAD_TOL = 1e-10

ROWS = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1" condim="1"/>
    <body name="ball" pos="0.4 0 0.08">
      <freejoint/>
      <geom type="sphere" size="0.1" condim="1"/>
    </body>
    <body name="top" pos="0 0.5 0.08">
      <freejoint/>
      <geom type="sphere" size="0.1" condim="4"/>
    </body>
    <body name="cap" pos="-0.3 -0.6 0.02">
      <freejoint/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.04" condim="6"/>
    </body>
    <body name="arm" pos="-0.6 0 0.8">
      <joint name="h0" type="hinge" axis="0 1 0" range="-30 30" frictionloss="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" contype="0" conaffinity="0"/>
      <body name="fore" pos="0.3 0 0">
        <joint name="h1" type="hinge" axis="0 1 0" range="-10 60" frictionloss="0.1" margin="0.1"/>
        <joint name="s1" type="slide" axis="1 0 0" range="-0.05 0.05" margin="0.06"/>
        <geom type="sphere" pos="0.2 0 -0.76" size="0.05"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint joint1="h1" joint2="h0" polycoef="0 0.5 0.1 0 0"/>
    <joint joint1="s1" polycoef="0.01 0 0 0 0"/>
  </equality>
</mujoco>
"""

EFC = ("efc_J", "efc_pos", "efc_margin", "efc_frictionloss", "efc_diagA", "efc_R", "efc_D", "efc_vel", "efc_aref")
EXACT = ("efc_mask", "efc_type", "efc_id", "nefc", "warning_number")


def _states(mjm, m, n, seed=0, scale=0.02):
    rng = np.random.default_rng(seed)
    ds = []
    for _ in range(n):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, rng, qpos_scale=scale)
        ds.append(mjl.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    # host numpy (CI time: jp.stack would compile one tiny program per Data leaf)
    return jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *ds)


def _prepare(m, d):
    """The stages before the rows (fwd_position's, collision included) on the XLA path, and a smooth acceleration
    for the solver (M^-1 of a fixed force: the solver's input, whatever the velocity stages would give)."""
    for stage in (kinematics.kinematics, kinematics.com_pos, flex.flex, tendon.tendon, inertia.crb, inertia.factor_m,
                  driver.collision):  # fmt: skip
        d = stage(m, d)
    return d.replace(qacc_smooth=inertia.solve_m(m, d, jp.cos(jp.arange(m.nv, dtype=d.qpos.dtype)) * 10.0))


_prepared = jax.jit(jax.vmap(_prepare, in_axes=(None, 0)))
_rows = jax.jit(jax.vmap(kernels.make_constraint, in_axes=(None, 0)))
_solve = jax.jit(jax.vmap(solve, in_axes=(None, 0)))


def _setup(mjm, n=3, seed=0, scale=0.02, **config):
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla", **config)
    return m, _prepared(m, _states(mjm, m, n, seed, scale))


@pytest.fixture(scope="module")
def small():
    """(MjModel, Model, batch of 3 states before the rows) of ROWS, float64."""
    mjm = mujoco.MjModel.from_xml_string(ROWS)
    m, ds = _setup(mjm)
    return mjm, m, ds


@pytest.fixture(scope="module")
def small_rows(small):
    """(fused, XLA) rows of `small`'s states, float64."""
    _, m, ds = small
    want = _rows(m, ds)
    live = np.asarray(want.efc_mask)
    types = set(np.asarray(want.efc_type)[live].tolist())
    assert {int(t) for t in (ConstraintType.EQUALITY, ConstraintType.FRICTION_DOF,
                             ConstraintType.LIMIT_JOINT, ConstraintType.CONTACT_FRICTIONLESS,
                             ConstraintType.CONTACT_PYRAMIDAL)} <= types, types  # fmt: skip
    assert np.any(~np.asarray(m.jnt_limit_onerow)[constraint.plan(m).lim_jnt])  # a two-row limit
    return _rows(mjl.configure(m, kernels="fused"), ds), want


def _tiled(tile: int):
    """kernels.launch_of asking for the row-tiled kernel (kernels/rows_tiled.py), `tile` environments per program
    (interpreted on the CPU)."""
    return lambda m: launch.Launch(layout=m.config.kernel_layout, interpret=jax.default_backend() != "gpu",
                                   rows_tile=tile)  # fmt: skip


# its own jit: launch_of is read at trace time, and `_rows`'s cache holds the lane kernel's trace
_rows_tiled = jax.jit(jax.vmap(lambda m, d: kernels.make_constraint(m, d), in_axes=(None, 0)))


def _tiled_rows(m, ds, tile: int):
    """The rows of `ds` (batched) by the row-tiled kernel, `tile` environments per program."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", _tiled(tile))
        mf = mjl.configure(m, kernels="fused")
        assert "constraint_rows_tiled" in str(jax.make_jaxpr(_rows_tiled)(mf, ds))
        return _rows_tiled(mf, ds)


@pytest.fixture(scope="module")
def small_tiled(small):
    """The row-tiled kernel's rows of `small`'s 3 states, 2 environments per program (the second program padded)."""
    _, m, ds = small
    return _tiled_rows(m, ds, 2)


def _first(ds):
    """The first environment of a batch, host numpy (CI time: slicing jax arrays leaf by leaf compiles one tiny
    program per leaf)."""
    return jax.tree.map(lambda x: np.asarray(x)[0], ds)


def _compare(got, want, tol, what):
    tk._assert_close(got, want, EFC, tol, what)
    for f in EXACT:
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f), err_msg=f"{what}: {f}")
    np.testing.assert_array_equal(got.contact.efc_address, want.contact.efc_address, err_msg=what)


def test_fusable_selection(small):
    """The model's rows are all of the kernel's kinds (also with elliptic cones); the sparse efc_J layout and the
    exact diagonal keep the XLA rows (traced only)."""
    mjm, m, _ = small
    assert rows.fusable(m)
    d = mjl.make_data(m)

    def names(m):
        return str(jax.make_jaxpr(lambda d: kernels.make_constraint(m, d))(d))

    assert "constraint_rows" in names(mjl.configure(m, kernels="fused"))
    assert "pallas_call" not in names(m)
    assert "pallas_call" not in names(mjl.configure(m, kernels="fused", efc_jacobian="sparse"))
    mjm_e = mujoco.MjModel.from_xml_string(ROWS)
    mjm_e.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    me = mjl.configure(oracle.model_from_mujoco(mjm_e), kernels="fused")
    assert rows.fusable(me) and "constraint_rows" in names(me)
    mc = mjl.configure(oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(tks.ROWS)), kernels="fused")
    assert rows.fusable(mc)  # a connect equality and a ball limit: fused too (EQ, TEN below)
    mx = mjl.configure(mc, efc_jacobian="sparse")
    assert not rows.fusable(mx)
    mdx = mc.replace(opt=mc.opt.replace(enableflags=mc.opt.enableflags | mjl.EnableBit.DIAGEXACT))
    assert not rows.fusable(mdx)  # the exact diagonal: XLA
    # the static slot bodies are the collision driver's
    con = small[2].contact
    b1, b2 = rows.slot_bodies(m)
    gb = np.asarray(m.geom_bodyid)
    act = np.asarray(con.active)
    geom = np.asarray(con.geom)
    np.testing.assert_array_equal(np.broadcast_to(b1, act.shape)[act], gb[geom[..., 0]][act])
    np.testing.assert_array_equal(np.broadcast_to(b2, act.shape)[act], gb[geom[..., 1]][act])


def test_rows_equal_xla(small_rows):
    """Every efc_* field, nefc, efc_address and the warnings of the fused rows equal the XLA rows' (float64)."""
    _compare(*small_rows, ROWS_TOL, "ROWS")


def test_tiled_rows_equal_xla(small_tiled, small_rows):
    """The row-tiled kernel (`Launch.rows_tile`): every efc_* field, nefc, efc_address and the warnings equal the XLA
    rows' (float64; the same tolerance as the lane kernel's: only summation orders differ)."""
    _compare(small_tiled, small_rows[1], ROWS_TOL, "ROWS, tiled")


@pytest.mark.slow  # CI time (the kernel compiles again, for one environment)
def test_tiled_rows_unbatched(small, small_rows):
    """The row-tiled kernel called without vmap (one environment: every input broadcast to one program)."""
    _, m, ds = small
    one = jax.jit(lambda m, d: kernels.make_constraint(m, d))  # a fresh function: jit's cache keys on it
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", _tiled(4))
        mf = mjl.configure(m, kernels="fused")
        got = [one(mf, jax.tree.map(lambda x, i=i: x[i], ds)) for i in range(3)]
    _compare(jax.tree.map(lambda *x: jp.stack(x), *got), small_rows[1], ROWS_TOL, "ROWS, tiled, unbatched")


@pytest.mark.slow
def test_solve_on_fused_rows(small, small_rows):
    """qacc and efc_force after the (XLA) solver on either path's rows."""
    _, m, _ = small
    got, want = small_rows
    tk._assert_close(_solve(m, got), _solve(m, want), ("qacc", "efc_force"), QACC_TOL, "ROWS solve")


@pytest.mark.slow
def test_rows_equal_xla_humanoid():
    """The MJX humanoid (its benchmark model): hinge limits and condim-3 foot contacts (lowered onto the floor),
    the rows and qacc after the solver."""
    mjm = mujoco.MjModel.from_xml_path(tk.MJX_HUMANOID)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    ds = _states(mjm, m, 3, scale=0.1)
    ds = _prepared(m, ds.replace(qpos=ds.qpos - 0.35 * (np.arange(ds.qpos.shape[1]) == 2)))
    assert np.all(np.asarray(ds.contact.active).sum(axis=1) > 0)
    assert rows.fusable(m)
    got, want = _rows(mjl.configure(m, kernels="fused"), ds), _rows(m, ds)
    _compare(got, want, ROWS_TOL, "humanoid")
    tk._assert_close(_solve(m, got), _solve(m, want), ("qacc", "efc_force"), QACC_TOL, "humanoid solve")
    _compare(_tiled_rows(m, ds, 1), want, ROWS_TOL, "humanoid, tiled")


@pytest.mark.slow  # CI time (the kernel compiles again in float32)
def test_rows_float32(small):
    """float32: the kernel's rows equal float32's XLA rows to float32 round-off."""
    _, m, ds = small
    m32, ds32 = tk._float32(m), tk._float32(ds)
    want = _rows(m32, ds32)
    got = _rows(mjl.configure(m32, kernels="fused"), ds32)
    assert got.efc_aref.dtype == jp.float32
    tk._assert_close(got, want, EFC, F32_TOL, "float32")
    np.testing.assert_array_equal(got.efc_mask, want.efc_mask)
    got = _tiled_rows(m32, ds32, 2)
    assert got.efc_aref.dtype == jp.float32
    tk._assert_close(got, want, EFC, F32_TOL, "float32, tiled")
    np.testing.assert_array_equal(got.efc_mask, want.efc_mask)


def _loss(m, d, qpos, qvel, cpos):
    """A nonlinear function of every row field (through qpos, qvel and the contact points)."""
    d = d.replace(qpos=qpos, qvel=qvel, contact=d.contact.replace(pos=cpos))
    d = kernels.make_constraint(m, d)
    return sum(jp.sum(jp.sin(getattr(d, f) * 1e-2)) for f in EFC if f != "efc_D")


@pytest.mark.slow  # CI time (~30 s: the kernel and both paths' gradients compile)
def test_gradients_equal_xla(small):
    """jax.grad through the fused rows (custom_jvp: the XLA twin) is the XLA rows', batched by vmap."""
    _, m, ds = small
    grad = jax.jit(jax.vmap(jax.grad(_loss, argnums=(2, 3, 4)), in_axes=(None, 0, 0, 0, 0)))
    args = (ds, ds.qpos, ds.qvel, ds.contact.pos)
    got, want = grad(mjl.configure(m, kernels="fused"), *args), grad(m, *args)
    tk.assert_grads_equal(got, want, GRAD_TOL)


def _check_twin_inputs(m, d):
    """The XLA twin of the rows kernel at (m, d) reads no float Model or Data leaf except through the kernel's
    inputs (custom_jvp's rule differentiates it with respect to those only)."""
    x = jax.eval_shape(lambda m, d: rows.kernel(m, d)[1], m, d)  # abstract: no eager op-by-op compiles (CI time)

    def twin(m, d, x):
        return rows.kernel(m, d)[0].xla(x)

    jaxpr = jax.make_jaxpr(twin)(m, d, x)
    leaves = jax.tree.leaves((m, d))
    used = pe.dce_jaxpr(jaxpr.jaxpr, [True] * len(jaxpr.out_avals))[1]
    floats = [i for i, v in enumerate(leaves) if jp.issubdtype(jp.asarray(v).dtype, jp.floating)]
    assert not any(used[i] for i in floats), [i for i in floats if used[i]]
    assert any(used[len(leaves) :])


def _check_lowers(m, batch, layouts=("lanes_last", "lanes_first")):
    """The vmapped fused rows of m lower to one Triton kernel for "cuda" in each of `layouts`."""
    for layout in layouts:
        mf = mjl.configure(m, kernels="fused", kernel_layout=layout)
        text = tk._lower_cuda(jax.vmap(kernels.make_constraint, in_axes=(None, 0)), mf, batch)
        assert text.count("__gpu$xla.gpu.triton") == 1, layout


@pytest.mark.parametrize("model", ["small", "elliptic"])
def test_twin_reads_only_the_kernel_inputs(request, model):
    """custom_jvp's rule differentiates the XLA twin with respect to the kernel's inputs only: no float Model or
    Data leaf may be read by the twin except through them (elliptic cones: contact.solreffriction too)."""
    fx = request.getfixturevalue(model)
    m, ds = fx[1:] if model == "small" else fx[:2]
    d = _first(ds)
    _check_twin_inputs(m, d)


@pytest.mark.parametrize("rows_tile", [0, 4])
@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64"])
def test_lowers_to_triton(small, monkeypatch, dtype, rows_tile):
    """The rows kernel (lanes, and on row tiles of 4 environments) lowers to Triton at a batch of 200 = 128 + 72
    (masked lanes; 50 programs of the tiled kernel). No GPU needed."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout,
                                                                      rows_tile=rows_tile))  # fmt: skip
    _, m, ds = small
    batch = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 67)[:200], ds)  # host numpy: no eager ops
    if dtype == "float32":
        m, batch = tk._float32(m), tk._float32(batch)
    # CI time: the row tiles (kernels/rows_tiled.py) have their own block layout, which kernel_layout does not reach:
    # lowered once; the lane kernel of ROWS in lanes_first here, in lanes_last (the default) by
    # tests/test_kernels_precision.py::test_fused_step_has_no_tf32_product (the whole fused step of ROWS lowered to
    # Triton's IR, 8 environments: masked lanes); float32 (slow) both
    layouts = ("lanes_first",) if dtype == "float64" else ("lanes_last", "lanes_first")
    layouts = ("lanes_last",) if rows_tile else layouts
    _check_lowers(m, batch, layouts)


# ---- elliptic contacts ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def elliptic():
    """(Model, batch of 3 sliding states before the rows, XLA rows) of test_kernels_solver.ELLIPTIC, float64."""
    mjm = mujoco.MjModel.from_xml_string(tks.ELLIPTIC)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    ds = _prepared(m, tks.sliding_states(mjm, m, 3))
    want = _rows(m, ds)
    live = np.asarray(want.efc_mask)
    typ = np.asarray(want.efc_type)
    assert (typ[live] == int(ConstraintType.CONTACT_ELLIPTIC)).sum() >= 20
    p = constraint.plan(m)
    for dim in (3, 4, 6):  # live contacts of each dimension, every row of a condim-6 one
        assert live[:, p.con_adr[p.con_dim == dim]].any(), dim
    assert live[:, p.con_adr[p.con_dim == 6][:, None] + np.arange(6)].all(axis=-1).any()
    assert live[:, p.con_adr[0]].any()  # the explicit pair: its friction rows' solreffriction
    return m, ds, want


@pytest.mark.parametrize("tile", [0, 2])
def test_elliptic_rows_equal_xla(elliptic, tile):
    """Elliptic contact rows (one per frame direction; friction rows with diagA (f0/fi)^2 / impratio, no stiffness,
    pos and margin 0, the pair's solreffriction) of the lane kernel and of the row tiles (2 environments per program):
    every efc_* field, nefc, efc_address and the warnings equal the XLA rows' (float64)."""
    m, ds, want = elliptic
    got = _tiled_rows(m, ds, tile) if tile else _rows(mjl.configure(m, kernels="fused"), ds)
    _compare(got, want, ROWS_TOL, f"elliptic, tile {tile}")


# ---- a batch of Models on the row tiles ----------------------------------------------------------------------------


def _randomised(m, n):
    """n Models' worth of the kernel's Model inputs and of what the collision reads (domain randomisation):
    geom_friction, geom_size, jnt_range, jnt_solref, dof_frictionloss, body_invweight0, opt.impratio, each model's
    scaled by its own factor in [0.8, 1.25]."""
    rng = np.random.default_rng(5)

    def scaled(x):  # (on the host, CI time: no eager multiply and stack programs)
        x = np.asarray(x)
        return np.stack([x * rng.uniform(0.8, 1.25, x.shape) for _ in range(n)])

    return dict(geom_friction=scaled(m.geom_friction), geom_size=scaled(m.geom_size), jnt_range=scaled(m.jnt_range),
                jnt_solref=scaled(m.jnt_solref), dof_frictionloss=scaled(m.dof_frictionloss),
                body_invweight0=scaled(m.body_invweight0), impratio=scaled(m.opt.impratio))  # fmt: skip


def _with_leaves(m, lv):
    return m.replace(opt=m.opt.replace(impratio=lv["impratio"]), **{k: v for k, v in lv.items() if k != "impratio"})


# the stages before the rows (XLA, whatever the kernels' configuration) compiled once for both paths (CI time)
_models_prepared = jax.jit(lambda m, leaves, ds: jax.vmap(lambda lv: jax.vmap(
    lambda d: _prepare(_with_leaves(m, lv), d))(ds))(leaves))  # fmt: skip


def _models_rows(m, leaves, prepared):
    """The rows of every Model of `leaves` (a vmap over them) at every state of `prepared` (`_models_prepared` of
    the raw states: a vmap inside): kernels.make_constraint."""

    def per_model(lv, pd):
        return jax.vmap(lambda d: kernels.make_constraint(_with_leaves(m, lv), d))(pd)

    return jax.jit(jax.vmap(per_model))(leaves, prepared)


@pytest.mark.parametrize("model", ["pyramidal", pytest.param("elliptic", marks=pytest.mark.slow)])
def test_vmapped_models_tiled_equal_xla(small, model):
    """2 Models (vmapped Model leaves) x 3 environments on the row tiles (2 environments per program): the Model
    inputs become per-environment channels; every efc_* field, nefc, efc_address and the warnings equal the XLA
    rows' of each Model (float64), and the Models' rows differ."""
    if model == "pyramidal":
        mjm, m, _ = small
        raw = _states(mjm, m, 3)
    else:
        mjm = mujoco.MjModel.from_xml_string(tks.ELLIPTIC)
        m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
        raw = tks.sliding_states(mjm, m, 3)
    leaves = _randomised(m, 2)
    prepared = _models_prepared(m, leaves, raw)
    want = _models_rows(m, leaves, prepared)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", _tiled(2))
        mf = mjl.configure(m, kernels="fused")
        assert "constraint_rows_tiled" in str(jax.make_jaxpr(lambda lv: _models_rows(mf, lv, prepared))(leaves))
        got = _models_rows(mf, leaves, prepared)
    _compare(got, want, ROWS_TOL, f"2 models x 3 environments, {model}")
    live = np.asarray(want.efc_mask).all(axis=0)
    for f in ("efc_R", "efc_aref", "efc_diagA"):  # the randomised leaves reach the rows
        a = np.asarray(getattr(want, f))
        assert np.any(np.abs(a[0] - a[1])[live] > 1e-6), f


# ---- connect, weld, tendon and ball-limit rows -------------------------------------------------------------------

# connect (body with anchor, world as body 2, sites) and weld (relpose and torquescale, to the world; sites; bodies
# with an anchor), own solref / solimp (direct and default forms); a hinge, a ball (quaternion dofs: Jdot's own-body
# cdof_dot), a free body, a slide + hinge body with a sphere touching the floor (contact rows beside them)
EQ = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="a" pos="0 0 1">
      <joint name="a0" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="sa" pos="0.3 0 0" euler="10 20 30"/>
      <body name="b" pos="0.3 0 0">
        <joint name="b0" type="ball"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <site name="sb" pos="0.3 0.01 0" euler="-20 5 40"/>
      </body>
    </body>
    <body name="c" pos="0.6 0.05 1">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05"/>
      <site name="sc" pos="0.05 0 0" euler="0 90 0"/>
    </body>
    <body name="d" pos="-0.5 0 0.04">
      <joint type="slide" axis="0 0 1"/>
      <joint type="hinge" axis="1 0 0"/>
      <geom type="sphere" size="0.05"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="c" body2="b" anchor="0.02 0 0.01"/>
    <connect site1="sc" site2="sb" solref="0.03 0.8"/>
    <connect body1="d" anchor="0 0.1 0" solimp="0.8 0.95 0.01 0.4 3"/>
    <weld body1="d" relpose="0.1 0 0.5 0.9 0.1 0.2 0.3" torquescale="0.5" solref="-100 -10"/>
    <weld site1="sa" site2="sc" torquescale="2"/>
    <weld body1="c" body2="a" anchor="0.1 0 0"/>
  </equality>
</mujoco>
"""

# tendon equalities (two tendons with a polynomial, one alone), tendon friction, tendon limits (spatial and fixed;
# one-row and two-row), ball limits (two balls, one with a margin)
TEN = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <site name="s0" pos="0 0 1.2"/>
    <body name="a" pos="0 0 1">
      <joint name="a0" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="s1" pos="0.2 0 0.05"/>
      <body name="b" pos="0.3 0 0">
        <joint name="b0" type="ball" range="0 8" margin="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <site name="s2" pos="0.25 0 0.03"/>
      </body>
    </body>
    <body name="c" pos="-0.5 0 1">
      <joint name="c0" type="slide" axis="0 0 1"/>
      <joint name="c1" type="hinge" axis="1 0 0"/>
      <joint name="c2" type="ball" range="0 12" armature="0.01"/>
      <geom type="sphere" size="0.05"/>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sp" limited="true" range="0.3 0.6" frictionloss="0.2" margin="0.02">
      <site site="s0"/><site site="s1"/><site site="s2"/>
    </spatial>
    <fixed name="fx" limited="true" range="-0.01 0.01" margin="0.05" solreflimit="0.03 0.9"
           solimpfriction="0.8 0.9 0.01 0.5 2" frictionloss="0.1">
      <joint joint="a0" coef="1"/><joint joint="c1" coef="-0.5"/><joint joint="c0" coef="0.3"/>
    </fixed>
    <fixed name="f2" limited="true" range="-0.1 0.05" margin="0.01">
      <joint joint="c0" coef="1"/>
    </fixed>
  </tendon>
  <equality>
    <tendon tendon1="fx" tendon2="sp" polycoef="0.01 0.5 0.2 0.1 0"/>
    <tendon tendon1="f2" polycoef="0.02 0 0 0 0" solref="0.05 1"/>
  </equality>
</mujoco>
"""

# flex edge equalities: a 2-d grid with <edge equality="true"/> (its own equality, default solref) and a 1-d one
# constrained by an explicit <equality><flex> (own solref); pinned vertices; beside them a hinge limit, a fixed
# tendon's two-row limit (the tendons' rows precede the edges' in the tile's Jacobian source) and a sphere's contacts
FLEX = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="a" pos="0 0 1">
      <joint name="a0" type="hinge" axis="0 1 0" range="-20 20"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" contype="0" conaffinity="0"/>
    </body>
    <body name="ball" pos="0.6 0 0.04">
      <freejoint/>
      <geom type="sphere" size="0.05"/>
    </body>
    <body name="fb" pos="-0.3 0 0.5">
      <flexcomp name="f" type="grid" dim="2" count="3 2 1" spacing=".1 .1 .1" mass=".3" radius=".01">
        <contact contype="0" conaffinity="0"/><edge equality="true"/><pin id="0"/>
      </flexcomp>
    </body>
    <body name="gb" pos="0.3 0.5 0.5">
      <flexcomp name="g" type="grid" dim="1" count="3 1 1" spacing=".1 .1 .1" mass=".2" radius=".01">
        <contact contype="0" conaffinity="0"/><pin id="0"/>
      </flexcomp>
    </body>
  </worldbody>
  <tendon>
    <fixed name="fx" limited="true" range="-0.01 0.01" margin="0.05">
      <joint joint="a0" coef="1"/>
    </fixed>
  </tendon>
  <equality>
    <flex flex="g" solref="0.03 0.9"/>
  </equality>
</mujoco>
"""


# EQ, TEN and FLEX in one model (their bodies apart: TEN's at y = 2, FLEX's at y = -2; names prefixed t_ and f_, the
# FLEX tendon f_fx), so that one compile of each path's rows serves every kind in the default selection (CI time: the
# three models' compiles were ~2/3 of this file's time); the three models alone stay in the slow tests below. Only
# EQ's slide + hinge sphere and FLEX's free sphere collide, with the floor (one pair type, a small collision program:
# the contact rows' kinds are ROWS' and ELLIPTIC's; these contact rows only sit beside the new kinds' rows), and
# efc_J is the three models' dense one (Config.efc_jacobian: at nv 49 "auto" is sparse, which the kernel leaves to XLA)
KINDS = """
<mujoco>
  <option timestep="0.005"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1" conaffinity="1"/>
    <body name="a" pos="0 0 1">
      <joint name="a0" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="sa" pos="0.3 0 0" euler="10 20 30"/>
      <body name="b" pos="0.3 0 0">
        <joint name="b0" type="ball"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <site name="sb" pos="0.3 0.01 0" euler="-20 5 40"/>
      </body>
    </body>
    <body name="c" pos="0.6 0.05 1">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05"/>
      <site name="sc" pos="0.05 0 0" euler="0 90 0"/>
    </body>
    <body name="d" pos="-0.5 0 0.04">
      <joint type="slide" axis="0 0 1"/>
      <joint type="hinge" axis="1 0 0"/>
      <geom type="sphere" size="0.05" contype="1"/>
    </body>
    <site name="t_s0" pos="0 2 1.2"/>
    <body name="t_a" pos="0 2 1">
      <joint name="t_a0" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="t_s1" pos="0.2 0 0.05"/>
      <body name="t_b" pos="0.3 0 0">
        <joint name="t_b0" type="ball" range="0 8" margin="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <site name="t_s2" pos="0.25 0 0.03"/>
      </body>
    </body>
    <body name="t_c" pos="-0.5 2 1">
      <joint name="t_c0" type="slide" axis="0 0 1"/>
      <joint name="t_c1" type="hinge" axis="1 0 0"/>
      <joint name="t_c2" type="ball" range="0 12" armature="0.01"/>
      <geom type="sphere" size="0.05"/>
    </body>
    <body name="f_a" pos="0 -2 1">
      <joint name="f_a0" type="hinge" axis="0 1 0" range="-20 20"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" contype="0" conaffinity="0"/>
    </body>
    <body name="f_ball" pos="0.6 -2 0.04">
      <freejoint/>
      <geom type="sphere" size="0.05" contype="1"/>
    </body>
    <body name="f_fb" pos="-0.3 -2 0.5">
      <flexcomp name="f" type="grid" dim="2" count="3 2 1" spacing=".1 .1 .1" mass=".3" radius=".01">
        <contact contype="0" conaffinity="0"/><edge equality="true"/><pin id="0"/>
      </flexcomp>
    </body>
    <body name="f_gb" pos="0.3 -1.5 0.5">
      <flexcomp name="g" type="grid" dim="1" count="3 1 1" spacing=".1 .1 .1" mass=".2" radius=".01">
        <contact contype="0" conaffinity="0"/><pin id="0"/>
      </flexcomp>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sp" limited="true" range="0.3 0.6" frictionloss="0.2" margin="0.02">
      <site site="t_s0"/><site site="t_s1"/><site site="t_s2"/>
    </spatial>
    <fixed name="fx" limited="true" range="-0.01 0.01" margin="0.05" solreflimit="0.03 0.9"
           solimpfriction="0.8 0.9 0.01 0.5 2" frictionloss="0.1">
      <joint joint="t_a0" coef="1"/><joint joint="t_c1" coef="-0.5"/><joint joint="t_c0" coef="0.3"/>
    </fixed>
    <fixed name="f2" limited="true" range="-0.1 0.05" margin="0.01">
      <joint joint="t_c0" coef="1"/>
    </fixed>
    <fixed name="f_fx" limited="true" range="-0.01 0.01" margin="0.05">
      <joint joint="f_a0" coef="1"/>
    </fixed>
  </tendon>
  <equality>
    <connect body1="c" body2="b" anchor="0.02 0 0.01"/>
    <connect site1="sc" site2="sb" solref="0.03 0.8"/>
    <connect body1="d" anchor="0 0.1 0" solimp="0.8 0.95 0.01 0.4 3"/>
    <weld body1="d" relpose="0.1 0 0.5 0.9 0.1 0.2 0.3" torquescale="0.5" solref="-100 -10"/>
    <weld site1="sa" site2="sc" torquescale="2"/>
    <weld body1="c" body2="a" anchor="0.1 0 0"/>
    <tendon tendon1="fx" tendon2="sp" polycoef="0.01 0.5 0.2 0.1 0"/>
    <tendon tendon1="f2" polycoef="0.02 0 0 0 0" solref="0.05 1"/>
    <flex flex="g" solref="0.03 0.9"/>
  </equality>
</mujoco>
"""

# KINDS' states: each part's qpos spread as its model's alone (EQ 0.3, TEN 0.5, FLEX 0.05: the flexes' vertices
# within a few cm of their rest lengths), from the first body of each part on
KINDS_SCALES = (("a", 0.3), ("t_a", 0.5), ("f_a", 0.05))


def _kinds(xml, n=3, scale=0.3, inactive=(), **config):
    """(MjModel, Model, batch of n states before the rows, XLA rows): equalities `inactive` ((state, eq id)) off;
    `scale` the qpos spread (a float, or one per dof); `config` more of the Model's Config."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    m, ds = _setup(mjm, n=n, scale=scale, **config)
    for i, e in inactive:
        ds = ds.replace(eq_active=ds.eq_active.at[i, e].set(False))
    return mjm, m, ds, _rows(m, ds)


def _live_rows(want, p, block, n):
    """(states, rows) liveness of a plan block's n rows."""
    return np.asarray(want.efc_mask)[:, p.adr[block] : p.adr[block] + n]


def _kinds_scale(mjm):
    """(nv,) KINDS' qpos spread per dof (KINDS_SCALES: each part from its first body on)."""
    scale = np.zeros(mjm.nv)
    for name, x in KINDS_SCALES:
        scale[mjm.dof_bodyid >= mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, name)] = x
    return scale


@pytest.fixture(scope="module")
def kinds_model():
    """KINDS, float64: 3 states and their XLA rows, with what eq_model, ten_model and flex_model check of theirs:
    an equality off in some states (a connect and a weld, the explicit flex equality); every connect and weld row
    live in some state and some off, with a nonzero Jdot qvel bias; live rows of every TEN kind (tendon
    equalities, tendon friction, ball limits, tendon limits with two-row limits' upper sides); every flex edge row
    live in some state and some off, stretched or compressed, both flex equalities' rows; contacts."""
    mjm = mujoco.MjModel.from_xml_string(KINDS)
    g = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_FLEX, "g")
    eq_g = int(np.nonzero((mjm.eq_type == mujoco.mjtEq.mjEQ_FLEX) & (mjm.eq_obj1id == g))[0][0])  # explicit
    mjm, m, ds, want = _kinds(KINDS, scale=_kinds_scale(mjm), inactive=((1, 1), (2, 4), (1, eq_g)),
                              efc_jacobian="dense")  # fmt: skip
    p = constraint.plan(m)
    # EQ's
    assert len(p.connect) == 3 and len(p.weld) == 3
    assert _live_rows(want, p, "connect", 9).any(axis=0).all() and _live_rows(want, p, "weld", 18).any(axis=0).all()
    assert not _live_rows(want, p, "connect", 9).all() and not _live_rows(want, p, "weld", 18).all()
    assert np.any(np.asarray(m.eq_objtype) == mujoco.mjtObj.mjOBJ_SITE)
    kb = jax.jit(constraint.efc_kbip)(m, _first(ds))  # jitted: eager, ~17 CPU-s of tiny compiles
    assert np.abs(np.asarray(kb[p.adr["connect"] : p.adr["connect"] + 27, 1])).min() > 0  # the bias enters aref
    # TEN's (and FLEX's tendon limit)
    assert len(p.tendon_eq) == 2 and len(p.fric_ten) == 2 and len(p.lim_ball) == 2 and len(p.lim_ten) == 4
    assert not p.lim_ten_one.all()
    for block, n in (("tendon_eq", 2), ("fric_ten", 2), ("lim_ball", 2), ("lim_ten", int(np.sum(2 - p.lim_ten_one)))):
        assert _live_rows(want, p, block, n).any(axis=0).all(), block
    assert np.abs(np.asarray(ds.ten_length)).min() > 0  # the tendon stage ran
    # FLEX's
    assert len(p.flex_eq_edge) == m.nflexedge == 11 and len(set(p.flex_eq_owner.tolist())) == 2
    live = _live_rows(want, p, "flex_eq", 11)
    assert live.any(axis=0).all() and not live.all()
    assert _live_rows(want, p, "contact", 4).any()
    assert np.abs(np.asarray(ds.flexedge_J)).max() > 0.5
    flex_pos = np.asarray(want.efc_pos)[:, p.adr["flex_eq"] : p.adr["flex_eq"] + 11]
    assert np.abs(flex_pos[live]).min() > 0  # stretched or compressed
    return mjm, m, ds, want


@pytest.fixture(scope="module")
def eq_model():
    """EQ, float64: 3 states (an equality off in two of them), their XLA rows: every connect and weld row live in
    some state, with a nonzero Jdot qvel bias (aref differs from the rows' without it)."""
    mjm, m, ds, want = _kinds(EQ, inactive=((1, 1), (2, 4)))
    p = constraint.plan(m)
    assert len(p.connect) == 3 and len(p.weld) == 3
    assert _live_rows(want, p, "connect", 9).any(axis=0).all() and _live_rows(want, p, "weld", 18).any(axis=0).all()
    assert not _live_rows(want, p, "connect", 9).all() and not _live_rows(want, p, "weld", 18).all()
    assert np.any(np.asarray(m.eq_objtype) == mujoco.mjtObj.mjOBJ_SITE)
    kb = jax.jit(constraint.efc_kbip)(m, _first(ds))  # jitted: eager, ~17 CPU-s of tiny compiles
    assert np.abs(np.asarray(kb[:27, 1])).min() > 0  # damping: the bias enters aref beside B vel
    return mjm, m, ds, want


@pytest.fixture(scope="module")
def ten_model():
    """TEN, float64: 3 states and their XLA rows; live rows of every kind (tendon equalities, tendon friction, ball
    limits, tendon limits with a two-row limit's upper side)."""
    mjm, m, ds, want = _kinds(TEN, scale=0.5)
    p = constraint.plan(m)
    assert len(p.tendon_eq) == 2 and len(p.fric_ten) == 2 and len(p.lim_ball) == 2 and len(p.lim_ten) == 3
    assert not p.lim_ten_one.all()
    for block, n in (("tendon_eq", 2), ("fric_ten", 2), ("lim_ball", 2), ("lim_ten", 4)):
        assert _live_rows(want, p, block, n).any(axis=0).all(), block
    assert np.abs(np.asarray(ds.ten_length)).min() > 0  # the tendon stage ran
    return mjm, m, ds, want


@pytest.fixture(scope="module")
def flex_model():
    """FLEX, float64: 3 states (the explicit flex equality off in one), their XLA rows: every edge row live in some
    state, both equalities' rows, one of them off somewhere; the flex stage ran (edge Jacobians, stretched edges)."""
    mjm, m, ds, want = _kinds(FLEX, scale=0.05, inactive=((1, 0),))
    p = constraint.plan(m)
    assert len(p.flex_eq_edge) == m.nflexedge == 11 and set(p.flex_eq_owner.tolist()) == {0, 1}
    live = _live_rows(want, p, "flex_eq", 11)
    assert live.any(axis=0).all() and not live.all()
    assert _live_rows(want, p, "lim_ten", 2).any() and _live_rows(want, p, "contact", 4).any()
    assert np.abs(np.asarray(ds.flexedge_J)).max() > 0.5
    assert np.abs(np.asarray(want.efc_pos)[:, : len(p.flex_eq_edge)][live]).min() > 0  # stretched or compressed
    return mjm, m, ds, want


# KINDS (EQ, TEN and FLEX in one model) by default; the three models alone in the slow selection (CI time: each model
# compiles both kernels and both paths' stages again), their rows' kinds covered by KINDS' params
@pytest.mark.parametrize("tile", [0, 2])
@pytest.mark.parametrize("model", ["kinds_model"] + [pytest.param(k, marks=pytest.mark.slow)
                                                     for k in ("eq_model", "ten_model", "flex_model")])  # fmt: skip
def test_more_kinds_rows_equal_xla(request, model, tile):
    """Connect and weld rows (EQ), tendon and ball-limit rows (TEN), flex edge equalities (FLEX) in the lane kernel
    and on the row tiles (2 environments per program): every efc_* field, nefc, efc_address and the warnings equal
    the XLA rows' (float64)."""
    _, m, ds, want = request.getfixturevalue(model)
    assert rows.fusable(m)
    got = _tiled_rows(m, ds, tile) if tile else _rows(mjl.configure(m, kernels="fused"), ds)
    _compare(got, want, ROWS_TOL, f"{model}, tile {tile}")


# slow (CI time: the kernels compile again in float32, 16-28 s per model for the lanes, 7 s for the tiles): the kinds'
# float64 equality is test_more_kinds_rows_equal_xla (both kernels), float32 rows of ROWS test_rows_float32 (slow)
@pytest.mark.slow
@pytest.mark.parametrize("tile", [0, 2])
@pytest.mark.parametrize("model", ["eq_model", "ten_model", "flex_model"])
def test_more_kinds_rows_float32(request, model, tile):
    """float32 (the inputs of `model`'s states cast): the row tiles' (2 environments per program) and the lane
    kernel's rows of the new kinds equal float32's XLA rows to float32 round-off (F32_TOL; measured: at most 1.2e-7
    relative, efc_vel and the tendons' efc_pos), with the same rows live."""
    _, m, ds, _ = request.getfixturevalue(model)
    m32, ds32 = tk._float32(m), tk._float32(ds)
    want = _rows(m32, ds32)
    got = _tiled_rows(m32, ds32, tile) if tile else _rows(mjl.configure(m32, kernels="fused"), ds32)
    assert got.efc_aref.dtype == want.efc_aref.dtype == jp.float32
    tk._assert_close(got, want, EFC, F32_TOL, f"{model} float32, tile {tile}")
    for f in EXACT:
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f), err_msg=f"{model} float32: {f}")


def _forward_state(mjm, mjd, rng):
    oracle.random_state(mjm, mjd, rng, qpos_scale=0.3)


def test_flex_rows_without_tendon_rows_tiled():
    """FLEX without its tendon limit: the edges' rows alone on the tendons' tile (their Jacobian source is
    flexedge_J alone, ten_J not among the kernel's inputs): the rows equal the XLA rows' (float64), at flex_model's
    states (the explicit flex equality off in one)."""
    mjm = mujoco.MjModel.from_xml_string(FLEX)
    mjm.tendon_limited[:] = 0
    mjm.geom_contype[:] = mjm.geom_conaffinity[:] = 0  # no contacts either (CI time: no collision program)
    m, ds = _setup(mjm, scale=0.05)
    ds = ds.replace(eq_active=ds.eq_active.at[1, 0].set(False))
    p = constraint.plan(m)
    assert len(p.lim_ten) == 0 and len(p.flex_eq_edge) == 11 and rows.fusable(m)
    assert "ten_J" not in jax.eval_shape(lambda d: rows.kernel(m, d)[1], _first(ds))
    _compare(_tiled_rows(m, ds, 2), _rows(m, ds), ROWS_TOL, "FLEX without tendon rows, tiled")


@pytest.mark.slow  # CI time (every kernel of the forward compiles in interpret mode)
@pytest.mark.parametrize("xml", ["EQ", "TEN", "FLEX"])
def test_more_kinds_forward_matches_mujoco(xml):
    """The fused forward (rows kernel with connect/weld, tendon/ball or flex edge rows, the Newton kernel) reaches
    MuJoCo's converged Newton optimum (qacc, qfrc_constraint, efc_force row by row; test_constraint_forward's
    tolerance)."""
    mjm = mujoco.MjModel.from_xml_string(globals()[xml])
    m = oracle.model_from_mujoco(mjm)
    m = mjl.configure(m.replace(opt=m.opt.replace(iterations=100, tolerance=jp.asarray(1e-12))), kernels="fused")
    assert "constraint_rows" in str(jax.make_jaxpr(kernels.make_constraint)(m, mjl.make_data(m)))
    tcf.check_forward(mjm, m, _forward_state, seeds=(0, 1), min_nefc=8)


def _loss_fields(m, d, names, values):
    """A nonlinear function of every row field (through the Data fields `names`, set to `values`)."""
    d = kernels.make_constraint(m, d.replace(**dict(zip(names, values))))
    return sum(jp.sum(jp.sin(getattr(d, f) * 1e-2)) for f in EFC if f != "efc_D")


@pytest.mark.slow  # CI time (the kernel and both paths' gradients compile)
@pytest.mark.parametrize("model", ["eq_model", "ten_model", "flex_model"])
def test_more_kinds_gradients_equal_xla(request, model):
    """jax.grad through the fused rows (custom_jvp: the XLA twin; com_vel before it, which makes cvel from qvel) is the
    XLA rows', batched by vmap: with respect to qvel and the bodies' positions (EQ), qvel, qpos (ball limits) and the
    tendon lengths (TEN), qvel and the edges' lengths and Jacobians (FLEX)."""
    _, m, ds, _ = request.getfixturevalue(model)
    names = {"eq_model": ("qvel", "xpos", "xquat"), "ten_model": ("qvel", "qpos", "ten_length"),
             "flex_model": ("qvel", "flexedge_length", "flexedge_J")}[model]  # fmt: skip
    values = tuple(getattr(ds, n) for n in names)
    grad = jax.jit(jax.vmap(jax.grad(lambda m, d, v: _loss_fields(m, d, names, v), argnums=2), in_axes=(None, 0, 0)))
    got, want = grad(mjl.configure(m, kernels="fused"), ds, values), grad(m, ds, values)
    tk.assert_grads_equal(got, want, GRAD_TOL)


@pytest.mark.parametrize("model", ["kinds_model"] + [pytest.param(k, marks=pytest.mark.slow)
                                                     for k in ("eq_model", "ten_model", "flex_model")])  # fmt: skip
def test_more_kinds_twin_reads_only_the_kernel_inputs(request, model):
    """As test_twin_reads_only_the_kernel_inputs, for the new kinds' inputs (poses, cvel, cdof_dot, ten_J,
    flexedge_J, ...)."""
    _, m, ds, _ = request.getfixturevalue(model)
    d = jax.jit(rows.prepare)(m, _first(ds))  # jitted: no eager op-by-op compiles (CI time)
    _check_twin_inputs(m, d)


@pytest.mark.parametrize("rows_tile", [0, 4])
@pytest.mark.parametrize("model", ["kinds_model"] + [pytest.param(k, marks=pytest.mark.slow)
                                                     for k in ("eq_model", "ten_model", "flex_model")])  # fmt: skip
def test_more_kinds_lower_to_triton(request, monkeypatch, model, rows_tile):
    """The rows kernels with the new kinds lower to Triton (float64, a batch of 200: masked lanes); float32 in
    test_lowers_to_triton's slow selection is the same code. One layout (CI time): the kinds' code reads and writes
    through the same lane I/O as ROWS' rows, whose lanes_first lowering is test_lowers_to_triton[float64-0]; the row
    tiles have no kernel_layout."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout,
                                                                      rows_tile=rows_tile))  # fmt: skip
    _, m, ds, _ = request.getfixturevalue(model)
    batch = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 67)[:200], ds)  # host numpy: no eager ops
    _check_lowers(m, batch, ("lanes_last",))


def _randomised_kinds(m, n):
    """n Models' worth of the new kinds' Model inputs (domain randomisation), each scaled in [0.8, 1.25]."""
    rng = np.random.default_rng(7)
    names = ("eq_data", "eq_solref", "body_invweight0", "jnt_range", "jnt_margin", "dof_invweight0", "tendon_range",
             "tendon_margin", "tendon_invweight0", "tendon_frictionloss", "tendon_solref_lim", "tendon_length0",
             "flexedge_length0", "flexedge_invweight0")
    out = {}
    for k in names:
        x = jp.asarray(getattr(m, k))
        if x.size:
            out[k] = jp.stack([x * rng.uniform(0.8, 1.25, x.shape) for _ in range(n)])
    return out


# slow (CI time, ~18 s for EQ): vmapped Model leaves as the row tiles' per-environment channels stay in CI through
# test_vmapped_models_tiled_equal_xla[pyramidal]; the kinds' rows through test_more_kinds_rows_equal_xla
@pytest.mark.slow
@pytest.mark.parametrize("model", ["eq_model", "ten_model", "flex_model"])
def test_more_kinds_vmapped_models_tiled_equal_xla(request, model):
    """2 Models (vmapped Model leaves: eq_data, solref, invweight0, ranges, margins, edge rest lengths, ...) x 2
    environments on the row tiles (2 environments per program): the rows equal the XLA rows of each Model (float64),
    and the Models' differ."""
    mjm, m, _, _ = request.getfixturevalue(model)
    raw = _states(mjm, m, 2, scale={"eq_model": 0.3, "ten_model": 0.5, "flex_model": 0.05}[model])
    leaves = _randomised_kinds(m, 2)

    def models_rows(m, leaves, ds):
        def per_model(lv):
            mm = m.replace(**lv)
            return jax.vmap(lambda d: kernels.make_constraint(mm, _prepare(mm, d)))(ds)

        return jax.jit(jax.vmap(per_model))(leaves)

    want = models_rows(m, leaves, raw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", _tiled(2))
        mf = mjl.configure(m, kernels="fused")
        assert "constraint_rows_tiled" in str(jax.make_jaxpr(lambda lv: models_rows(mf, lv, raw))(leaves))
        got = models_rows(mf, leaves, raw)
    _compare(got, want, ROWS_TOL, f"2 models x 2 environments, {model}")
    live = np.asarray(want.efc_mask).all(axis=0)
    a = np.asarray(want.efc_aref)
    assert np.any(np.abs(a[0] - a[1])[live] > 1e-6)
