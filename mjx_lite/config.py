"""`Config`: the settings that change what gets traced, as a value carried by the Model.

MuJoCo's own options (solver, iterations, integrator, flags) live in `Model.opt` as in mjModel. Everything else
that changes the traced program (how gradients go through the solver, how a diverged environment is reset,
collision grouping and capacities) is a field of `Config`, a frozen, hashable dataclass held in the static part of
the Model (`m.config`). It is therefore part of `jax.jit`'s cache key: a function jitted once and called with two
models of different configurations traces twice and each call gets its own configuration. There are no global
switches or context managers.

    m = mjx_lite.load_mjcf(path, config=mjx_lite.Config(gradients="unrolled"))
    m = mjx_lite.configure(m, exact_reset=True)          # a copy with a changed configuration

`configure` also recomputes what the configuration decides at load time (contact capacity `nconmax`, constraint
rows `njmax`); `m.replace(config=...)` is allowed only for fields that do not change those sizes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable

import jax

__all__ = ["AUTO_OFF_CPU", "CONTACT_GRADIENTS", "Config", "GRADIENT_MODES", "KERNELS", "KERNEL_LAYOUTS",
           "LAYOUT_FIELDS", "LINALGS", "MATMUL_PRECISIONS", "QACC_RESETS", "QUATERNION_OPS", "RK4_LOOPS", "kernels",
           "linalg", "matmul_precision", "qacc_reset", "quaternion_ops", "SOLVER_BATCHES", "solver_batch"]  # fmt: skip

GRADIENT_MODES = ("implicit", "unrolled")
CONTACT_GRADIENTS = ("exact", "smooth")
MATMUL_PRECISIONS = ("highest", "high", "default")
QUATERNION_OPS = ("auto", "einsum", "elementwise")
QACC_RESETS = ("auto", "all", "state")
RK4_LOOPS = ("auto", "split", "merged")
KERNELS = ("auto", "xla", "fused")
KERNEL_LAYOUTS = ("lanes_last", "lanes_first", "lanes_mixed")
LINALGS = ("auto", "own", "library")
SOLVER_BATCHES = ("auto", "lockstep", "refill")

# fields that decide the static layout of Data (contact/constraint capacities): changing them needs `configure`
LAYOUT_FIELDS = ("mesh_size_ratio", "mesh_class_merge", "broadphase_min_pairs", "broadphase_pairs_per_geom",
                 "broadphase_contacts_per_pair", "broadphase_mesh_min_pairs", "broadphase_mesh_fraction",
                 "broadphase_mesh_touch", "hfield_prisms", "hfield_occlusion", "flex_pairs_per_elem",
                 "flex_contacts_per_elem", "nconmax", "njmax")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Config:
    """Trace-time configuration of a Model (see the module docstring). All fields are hashable host values.

    Attributes:
      gradients: how reverse-mode gradients go through the constraint solver.
        "implicit" (default): the solver stops at convergence and the backward pass is one linear solve at the
        optimum (implicit function theorem): exact and cheap; forward-mode (`jax.jvp`, `jax.jacfwd`) is not
        available through the solver. "unrolled": the solver runs its full `opt.iterations` (converged
        iterations are no-ops) and every autodiff mode goes through every iteration (slower).
      exact_reset: MuJoCo's divergence recovery for a bad qacc: the environment is reset, forwarded and stepped
        once (as mj_step). False (default): the reset state itself is returned (half the compile time of step).
      mesh_size_ratio: mesh collision pairs are grouped by size classes spanning this factor; each group compiles
        its own collider: a larger ratio compiles faster, a smaller one runs faster (`inf`: one class).
      mesh_class_merge: size classes weighed against compile time: the pairs of one pair type (GJK/EPA and
        manifold colliders, whose compile time dominates a mesh model's) in two size classes share one group (one
        compiled collider instead of two) where the merged group's narrow-phase work (pairs x padded hull sizes)
        is at most this factor of the two groups' (default 2; 1: classes never merge).
      broadphase_min_pairs: a group of dynamic collision pairs with more candidates than this goes through the
        broadphase (only the most overlapping candidates reach the narrow phase).
      broadphase_pairs_per_geom: narrow-phase pairs per geom of a trimmed group.
      broadphase_contacts_per_pair: contact rows kept per narrow-phase pair of multi-contact colliders.
      broadphase_mesh_min_pairs: a group of dynamic mesh pairs (box-mesh, mesh-mesh, ...; not plane or height field)
        with more candidates than this runs its collider only on the max(broadphase_mesh_min_pairs,
        ceil(broadphase_mesh_fraction * candidates)) candidates whose bounding spheres and boxes (with margin)
        overlap most; more overlapping candidates than that are counted in warning CONTACTFULL.
      broadphase_mesh_fraction: the share of a mesh group's candidates that reach its collider (see above).
      broadphase_mesh_touch: box-mesh and mesh-mesh groups (dynamic pairs, multiccd) with more narrow-phase pairs
        than this run in two stages: the distance (separating axes or GJK/EPA) of every narrow-phase pair, then the
        contact manifold (feature search and face clipping, most of the collider's cost) of only the
        `broadphase_mesh_touch` pairs closest within the margin (MuJoCo computes a manifold only for a pair in
        contact); more pairs in contact than that are counted in warning CONTACTFULL.
      merge_curved_mesh: False (default) or True: the curved pairs without a mesh and the GJK/EPA pairs with one
        run one distance program and one manifold program instead of two each (the same contacts bitwise): less to
        compile (the Shadow Hand's shared stages ~20 % less), but under vmap every curved pair pays the mesh support
        maps (4-8x slower there).
      hfield_prisms: None (default: every prism of the window under the geom, up to MuJoCo's 50, as MuJoCo) or
        the contact slots per (height field, geom) pair: the exact prism collider then runs on at most this many
        prisms, those nearest by a cheap separating-axis lower bound on their distance, and more prisms within the
        margin by that bound are counted in warning CONTACTFULL (faster; equal to MuJoCo while none is counted).
      hfield_occlusion: True (default) or False: a height field of the world body lying wholly below a plane of the
        world body at load (dm_control's quadruped: its terrain under the floor) gets no contact slots for the geoms
        that collide with that plane; each step checks whether one of them sinks far enough through the plane to
        touch the field (current poses and samples) and counts such steps in warning CONTACTFULL
        (collision/occlusion.py; equal to MuJoCo while none is counted). False: every such pair keeps its slots.
      flex_pairs_per_elem: element pairs collided per step for flex self-collisions and flex-flex contacts, per
        element (the mean of the two flexes' counts): their broadphase keeps the first that many pairs whose element
        boxes overlap, and more are counted in warning CONTACTFULL (collision/flex_flex.py; default 8: MuJoCo's flex
        examples reach at most 3.2).
      flex_contacts_per_elem: contact slots of flex self-collisions and flex-flex contacts per element (the mean of
        the two flexes' counts): of the pairs collided, the first that many in contact become contacts, and more are
        counted in warning CONTACTFULL (collision/flex_flex.py; default 2: MuJoCo's flag example reaches 0.49, a
        cloth folded onto itself about 3 for the elements of its two layers). The constraint rows and the solver's
        work grow with these slots.
      sat_budget: box/mesh pairs whose separating-axis test costs more than this (face and edge-pair candidates)
        use GJK/EPA instead.
      mass_matrix: layout of qM: "dense" (nv, nv), "sparse" (nM,) tree-structured rows (MuJoCo's), or
        "auto" (default): sparse when nv > 60.
      mass_factorization: how qM is factored into qLD and solved with: "tree" (default): eliminated one tree
        level at a time (gathers and a scatter-add per level), "dense": one Cholesky factorisation of the dense
        qM (a tree-sparse qM is densified first: O(nv^3), for small trees) and two triangular solves per solve
        (`linalg`'s: `mjx_lite.linalg` on a CPU, cuSOLVER/cuBLAS on a GPU: a few library calls instead of the
        tree's two kernels or more per level). Same qLD to round-off. Meant for GPUs, where
        the tree's factorisation was the largest stage after the solver (docs/benchmarks.md; "dense" itself not
        yet timed there); on a 2-core CPU the humanoid's step took 1.18x as long with it (with LAPACK). A pivot
        below MINVAL is clamped as "tree" clamps it with `linalg` "own"; with "library" in D only (a matrix that is
        not positive definite gives a NaN factor: the step's qacc check resets the environment).
      contact_jacobian: how contact rows' Jacobians are built: "dense" (every dof), "chain" (only the dofs that
        move the two bodies, scattered into zeros: large scenes of short chains), or "auto" (default): chain when
        the longest chain is at most nv / 8.
      efc_jacobian: layout of the constraint Jacobian Data.efc_J: "dense" (njmax, nv); "sparse": fixed-width rows
        (njmax, w) with column indices efc_J_colind (w = the most dofs one row touches: two bodies' dof chains),
        kept sparse through the solver (products by gathers and scatter-adds; Newton and the implicit gradient
        assemble a dense H = M + J'DJ, CG's gradient solves with H matrix-free); or "auto" (default): sparse when
        nv >= 4 w and the solver is not PGS. PGS needs the dense layout.
      contact_gradients: the reverse-mode derivative of `step` (`mjx_lite.derivatives.step`).
        "exact" (default): the true derivative. "smooth": the value is unchanged, the derivative is the mean of
        the exact derivatives at `contact_smoothing_samples` copies of the state with positions perturbed by
        N(0, contact_smoothing_std^2) in the tangent space (randomised smoothing: informative gradients before
        a contact is made, e.g. for pushing; biased, and about `contact_smoothing_samples` times the cost of the
        exact backward pass). See docs/gradients.md.
      contact_smoothing_samples: number of perturbed copies (even numbers are used as antithetic pairs), >= 1.
      contact_smoothing_std: standard deviation of the position perturbation (metres or radians), > 0.
      contact_smoothing_dofs: the dofs that are perturbed (a tuple of dof indices), or None for all dofs.
      contact_smoothing_seed: seed of the perturbations (each step draws from it and its step count).
      nconmax: cap on the contact capacity `m.nconmax` (MuJoCo's `<size nconmax>`): None (default): the model's own
        `<size nconmax>` (`m.size_nconmax`) if it gives one; -1: no cap (the capacity the pair table needs); n >= 0:
        at most n contact rows. Below the pair table's rows, the deepest active contacts of all groups are kept and
        `d.warning_number[Warning.CONTACTFULL]` counts the steps where some were left out. See docs/capacity.md.
      njmax: cap on the constraint rows `m.njmax` (MuJoCo's `<size njmax>`), same conventions. Equality, friction
        and limit rows are static; the contact slots are cut until the rows fit (overflow counted in
        `Warning.CNSTRFULL`); a cap below the model's non-contact rows is an error.
      matmul_precision: precision of the matrix products the pipeline traces (`jax.default_matmul_precision`
        around step, forward, inverse and the solver's backward pass): "highest" (default): full float32 (or
        float64) products, as MuJoCo; "high" or "default" (JAX's own setting, which on recent NVIDIA GPUs computes
        float32 products in TF32 with a 10-bit mantissa): faster matrix units, less accurate (measured on an H100,
        MJX humanoid, 100 steps: 4.3e-2 in qpos from float64 against 5.0e-5 with "highest"; docs/benchmarks.md).
        No effect on CPUs, which compute float32 products in float32.
      quaternion_ops: how kinematics writes quaternion products, rotations and rotation matrices (same values to
        round-off): "einsum" (each as one contraction with a constant tensor: fewer operations for XLA to compile,
        faster to compile on the CPU), "elementwise" (scalar formulas that fuse with their neighbours into fewer
        kernels: on an H100 the humanoid step ran 8-14% faster, at batch 8192 and 1024; docs/benchmarks.md), or
        "auto" (default): "einsum" where JAX's default backend is the CPU, else "elementwise".
      qacc_reset: which fields of Data a bad qacc resets when `exact_reset` is False (the next step recomputes the
        others from the reset state either way): "all" (every field to `make_data`'s values), "state" (the state
        and every field from the actuation stage on; the position and velocity stages' fields keep the values
        computed at the step's start: one select fewer per field), or "auto" (default): "all" where JAX's
        default backend is the CPU (there the full select ran the smooth step faster: batch 256, walker 0.84 ->
        0.73 ms, humanoid 1.85 -> 1.64 ms), else "state" (H200, humanoid with contacts: 5% faster at 1k and 8k).
      rk4_loop: how `step` traces an RK4 step (same values to round-off): "split" (the step's own forward
        pass, then one `lax.scan` over the three later stages: two traced forward passes), "auto" (default: the split
        step's values, the merged step's derivatives: a `custom_jvp` whose rule is the merged step's jvp, so a step
        that is not differentiated runs the split step's program and `jax.grad` / `jax.jvp` trace one forward pass;
        the 50-step ant's gradient, interleaved in one process under load: XLA compile ~20 % less CPU time, run time
        not slower, benchmarks/grad_compile.py --ab) or "merged" (one
        `lax.scan` over all four stages, `integrate.rk4_forward`: one traced forward pass, so a gradient through an
        RK4 rollout compiles faster: the 50-step ant's StableHLO 28.5k -> 17.2k lines, XLA compile 11-49 % less
        CPU time (three rounds under load); but the step ran 4-12 % slower on a loaded 2-core CPU, batch 32-1024).
        Delayed sensors, plastic springs and `exact_reset` always use "split".
      kernels: which implementation runs the stages that have a fused kernel (`mjx_lite/pipeline/kernels/`, today
        kinematics + com_pos + crb + factor_m, com_vel + rne, the mass-matrix solves, and the Newton / CG
        constraint solver's iterations without elliptic cones or sparse efc_J): "xla" (the stages as XLA
        operations: the reference), "fused" (the Pallas kernels, for a block of environments per program;
        compiled with Triton on a GPU, run in Pallas' interpret mode elsewhere, which is slow and meant for tests),
        or "auto" (default): "xla" for now, on every backend (the fused path's first GPU run was slower than the
        XLA path: H200, humanoid, 0.62x its steps/s at batch 8192, 0.38x at 1024; docs/kernels.md).
        Same values to round-off; derivatives always go through the XLA stages or the solver's implicit rule
        (exact either way). The fused Newton / CG kernels solve the whole system at once (as with
        `<flag island="disable"/>`): the same optimum as the XLA path's
        per-island solve (MuJoCo 4.0's default), another stopping point and iteration count. The fused path
        is verified on the CPU (interpret mode, float64) and runs on a GPU.
      kernel_layout: memory layout of a fused kernel's block: "lanes_last" (default: the environment index is the
        fastest-varying one, (values, environments), for coalesced loads and stores; Data's (environments, ...)
        fields are transposed at the kernel's boundary by XLA) or "lanes_first" (the kernel reads and writes Data's
        own (environments, values) arrays with strided accesses and no transposes) or "lanes_mixed" (inputs as
        in "lanes_last", coalesced loads; outputs as in "lanes_first", one buffer per field in Data's layout
        written with strided stores, so no slice, reshape or transpose of a packed output block runs after the
        kernel). Which is faster on a GPU is to be measured (benchmarks/gpu_bench.py has the first two).
      linalg: the dense factorisations and solves of the step, the solvers, their gradients, the planners and
        fitting (Newton's and the implicit gradient's Cholesky, the implicit integrators, the dense mass matrix
        factorisation, iLQR, sysid): "own" (`mjx_lite.linalg`: plain array operations, batched by `vmap` like any
        other; systems of 20 x 20 or more as one unbatched LAPACK call per system), "library" (JAX's
        `jax.numpy.linalg` / `jax.scipy.linalg`: LAPACK on a CPU, cuSOLVER / cuBLAS on a GPU), or "auto"
        (default): "own" where JAX's default backend is the CPU, else "library". On a CPU JAX's batched LAPACK
        kernels wait on XLA's thread pool and can deadlock it (several CPU devices, or few cores and large
        batches): "library" there is for comparisons only.
      solver_batch: how the solvers' bounded while loops (Newton, CG, PGS under `gradients="implicit"`) run under
        `vmap`: "lockstep" (one loop over the batch: every environment waits for the batch's slowest, so each trip
        costs the whole batch), "refill" (batches of 64 or more: each trip runs one iteration of a quarter of the
        batch, refilled with unfinished environments, so the batch pays its total iterations, not the slowest
        one's count times the batch; the same iterations and values per environment), or "auto" (default):
        "refill" where JAX's default backend is the CPU, else "lockstep" (on a GPU, where a trip's cost is its
        kernel launches, not its width, refill is unmeasured).
      direct_solve_rows: constraint problems of at most this many rows, none of them an elliptic cone, are solved
        exactly by Newton and CG alike, without iterations (`mjx_lite.solver.direct`: every choice of piece per row,
        at most 3^n small linear solves; the same optimum the iterations converge to, to round-off); chosen by the
        padded row count, statically. Default 2 (the cartpole's one rail-limit row: a batched RK4 step compiles to
        417 kernels and 1 loop instead of 698 and 17; predictive sampling, 256 samples x 200 steps, ran 1.41x faster
        per iteration, interleaved at load 11-12, benchmarks/planners.py --ab); 0: never (the iterative solver
        always); at most 4. solver_niter is 1 where a force is nonzero, else 0.
      sensor_user: the values of `<user>` sensors (MuJoCo's `mjcb_sensor`), or None (default): every user sensor reads
        0, as in MuJoCo without a callback. A pure JAX function `sensor_user(m, d, i) -> (m.sensor_dim[i],)` array,
        called with a static sensor id `i` at the sensor's stage (`m.sensor_needstage[i]`: pos, vel or acc) with that
        stage's fields of `d` computed (at vel also subtree_linvel/angmom, at acc also cacc, cfrc_int and cfrc_ext, as
        MuJoCo computes them for user sensors); the sensor's cutoff is applied to what it returns. It is traced into
        `forward`/`step` like any stage (jit, vmap and grad go through it) and compared by identity in the jit cache
        key: define it once, not as a new lambda per call.
      contact_buckets: None (default), "large", "auto" (`pipeline.buckets.AUTO_BUCKETS`) or a tuple of contact
        capacities below m.nconmax: after collision, the live contacts are compacted into the smallest of these
        capacities that holds them (under `vmap`: that holds every environment's), and the constraint rows and the
        solver run on that bucket's rows instead of the padded nconmax slots; the results are scattered back, so
        Data's shapes and values are those of the full step (to round-off), with the full padded size as the
        fallback. Each capacity compiles its own rows and solver (compile time grows with the number of buckets).
        "large": "auto" on models whose padded constraint rows are many (at least `buckets.LARGE_MIN_ROWS`) and
        mostly dead (at least `buckets.LARGE_MIN_RATIO` times the rows of the smallest bucket) with few kinematic
        trees (`buckets.LARGE_MAX_TREES`) and no flex (dm_control's quadruped: 4.8x faster steps for 11-31 % more
        compile), else None, so other models compile their one padded program as before; None: never.
        See `mjx_lite.pipeline.buckets`.
    """

    gradients: str = "implicit"
    exact_reset: bool = False
    mesh_size_ratio: float = 8.0
    mesh_class_merge: float = 2.0
    broadphase_min_pairs: int = 256
    broadphase_pairs_per_geom: float = 2.0
    broadphase_contacts_per_pair: float = 2.0
    broadphase_mesh_min_pairs: int = 6
    broadphase_mesh_fraction: float = 0.25
    broadphase_mesh_touch: int = 4
    merge_curved_mesh: bool = False
    hfield_prisms: int | None = None
    hfield_occlusion: bool = True
    flex_pairs_per_elem: float = 8.0
    flex_contacts_per_elem: float = 2.0
    sat_budget: int = 200_000
    mass_matrix: str = "auto"
    mass_factorization: str = "tree"
    contact_jacobian: str = "auto"
    efc_jacobian: str = "auto"
    contact_gradients: str = "exact"
    contact_smoothing_samples: int = 16
    contact_smoothing_std: float = 0.02
    contact_smoothing_dofs: tuple[int, ...] | None = None
    contact_smoothing_seed: int = 0
    nconmax: int | None = None
    njmax: int | None = None
    matmul_precision: str = "highest"
    quaternion_ops: str = "auto"
    qacc_reset: str = "auto"
    rk4_loop: str = "auto"
    kernels: str = "auto"
    kernel_layout: str = "lanes_last"
    linalg: str = "auto"
    solver_batch: str = "auto"
    direct_solve_rows: int = 2
    sensor_user: Callable | None = None
    contact_buckets: str | tuple[int, ...] | None = None

    def __post_init__(self):
        if self.sensor_user is not None and not callable(self.sensor_user):
            raise TypeError(f"Config.sensor_user must be None or a function (m, d, i), not {self.sensor_user!r}")
        if self.gradients not in GRADIENT_MODES:
            raise ValueError(f"Config.gradients must be one of {GRADIENT_MODES}, not {self.gradients!r}")
        if not isinstance(self.exact_reset, bool):
            raise TypeError(f"Config.exact_reset must be a bool, not {self.exact_reset!r}")
        for name in ("mesh_size_ratio", "mesh_class_merge", "broadphase_pairs_per_geom", "broadphase_contacts_per_pair",
                     "broadphase_mesh_fraction", "flex_pairs_per_elem", "flex_contacts_per_elem"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v <= 0:
                raise ValueError(f"Config.{name} must be a positive number, not {v!r}")
        if self.mesh_size_ratio < 1:
            raise ValueError(f"Config.mesh_size_ratio must be >= 1, not {self.mesh_size_ratio!r}")
        if self.mesh_class_merge < 1:
            raise ValueError(f"Config.mesh_class_merge must be >= 1, not {self.mesh_class_merge!r}")
        for name, choices in (("mass_matrix", ("auto", "dense", "sparse")),
                              ("mass_factorization", ("tree", "dense")),
                              ("contact_jacobian", ("auto", "dense", "chain")),
                              ("efc_jacobian", ("auto", "dense", "sparse")),
                              ("matmul_precision", MATMUL_PRECISIONS),
                              ("quaternion_ops", QUATERNION_OPS),
                              ("qacc_reset", QACC_RESETS),
                              ("rk4_loop", RK4_LOOPS),
                              ("kernels", KERNELS),
                              ("kernel_layout", KERNEL_LAYOUTS),
                              ("linalg", LINALGS),
                              ("solver_batch", SOLVER_BATCHES)):  # fmt: skip
            if getattr(self, name) not in choices:
                raise ValueError(f"Config.{name} must be one of {choices}, not {getattr(self, name)!r}")
        for name in ("broadphase_min_pairs", "broadphase_mesh_min_pairs", "sat_budget"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Config.{name} must be a non-negative int, not {v!r}")
        for name in ("broadphase_mesh_touch", "hfield_prisms"):
            v = getattr(self, name)
            if (name != "hfield_prisms" or v is not None) and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"Config.{name} must be a positive int, not {v!r}")
        if not isinstance(self.hfield_occlusion, bool):
            raise TypeError(f"Config.hfield_occlusion must be a bool, not {self.hfield_occlusion!r}")
        if self.contact_gradients not in CONTACT_GRADIENTS:
            raise ValueError(
                f"Config.contact_gradients must be one of {CONTACT_GRADIENTS}, not {self.contact_gradients!r}"
            )
        n = self.contact_smoothing_samples
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"Config.contact_smoothing_samples must be a positive int, not {n!r}")
        v = self.contact_smoothing_std
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"Config.contact_smoothing_std must be a positive finite number, not {v!r}")
        dofs = self.contact_smoothing_dofs
        if dofs is not None:
            if isinstance(dofs, list):
                object.__setattr__(self, "contact_smoothing_dofs", dofs := tuple(dofs))
            if not isinstance(dofs, tuple) or not dofs or any(
                isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in dofs
            ):
                raise ValueError(
                    f"Config.contact_smoothing_dofs must be None or a non-empty tuple of dof indices, not {dofs!r}"
                )
        for name in ("nconmax", "njmax"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < -1):
                raise ValueError(f"Config.{name} must be None, -1 (no cap) or a non-negative int, not {v!r}")
        b = self.contact_buckets
        if isinstance(b, list):
            object.__setattr__(self, "contact_buckets", b := tuple(b))
        if b is not None and b not in ("auto", "large") and (not isinstance(b, tuple) or not b or any(
                isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in b)):  # fmt: skip
            raise ValueError(f"Config.contact_buckets must be None, 'auto', 'large' or a non-empty tuple of positive "
                             f"ints, not {b!r}")  # fmt: skip
        v = self.direct_solve_rows
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 4:
            raise ValueError(f"Config.direct_solve_rows must be an int in [0, 4], not {v!r}")
        seed = self.contact_smoothing_seed
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"Config.contact_smoothing_seed must be an int, not {seed!r}")

    def replace(self, **changes) -> Config:
        """A copy with `changes` applied (validated)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            fields = [f.name for f in dataclasses.fields(self)]
            raise TypeError(f"Config has no field(s) {sorted(unknown)}; fields: {fields}")
        return dataclasses.replace(self, **changes)

    def layout(self) -> tuple:
        """The values of the fields that decide Data's capacities (`LAYOUT_FIELDS`)."""
        return tuple(getattr(self, f) for f in LAYOUT_FIELDS)


# what the backend-resolved "auto" fields become off the CPU (GPU, TPU): the resolvers below read it, and program
# counts made on a CPU for a GPU (benchmarks/fused_program_size.py, tests/test_kernels.py) configure it explicitly
AUTO_OFF_CPU = {"quaternion_ops": "elementwise", "qacc_reset": "state", "linalg": "library", "solver_batch": "lockstep"}


def quaternion_ops(config: Config) -> str:
    """"einsum" or "elementwise": `config.quaternion_ops` with "auto" resolved by JAX's default backend (at trace
    time)."""
    if config.quaternion_ops != "auto":
        return config.quaternion_ops
    return "einsum" if jax.default_backend() == "cpu" else AUTO_OFF_CPU["quaternion_ops"]


def qacc_reset(config: Config) -> str:
    """"all" or "state": `config.qacc_reset` with "auto" resolved by JAX's default backend (at trace time)."""
    if config.qacc_reset != "auto":
        return config.qacc_reset
    return "all" if jax.default_backend() == "cpu" else AUTO_OFF_CPU["qacc_reset"]


def kernels(config: Config) -> str:
    """"xla" or "fused": `config.kernels` with "auto" resolved: "xla" on every backend for now. The fused kernels'
    first GPU run (H200, jax 0.11.2, the MJX humanoid with contacts, docs/benchmarks.md GPU run 5) was slower than
    the XLA path: 2.51M vs 4.03M steps/s at batch 8192, 0.47M vs 1.25M at 1024; its solver kernel alone took 1.7 of
    3.26 ms per step. "auto" picks the fused path on a GPU again once it is measured faster there."""
    if config.kernels != "auto":
        return config.kernels
    return "xla"


def linalg(config: Config) -> str:
    """"own" or "library": `config.linalg` with "auto" resolved by JAX's default backend (at trace time)."""
    if config.linalg != "auto":
        return config.linalg
    return "own" if jax.default_backend() == "cpu" else AUTO_OFF_CPU["linalg"]


def solver_batch(config: Config) -> str:
    """"lockstep" or "refill": `config.solver_batch` with "auto" resolved by JAX's default backend (at trace time)."""
    if config.solver_batch != "auto":
        return config.solver_batch
    return "refill" if jax.default_backend() == "cpu" else AUTO_OFF_CPU["solver_batch"]


def matmul_precision(config: Config):
    """Context (at trace time) that sets the matrix-product precision of `config` ("default": JAX's own)."""
    if config.matmul_precision == "default":
        return contextlib.nullcontext()
    return jax.default_matmul_precision(config.matmul_precision)
