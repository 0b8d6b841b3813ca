"""Running a fused kernel over blocks of environments: memory layout, the user's vmap, and exact derivatives.

A fused stage is a `Kernel`: named inputs and outputs, each with its per-environment shape, a `body(read, write)`
that computes every output of one block of environments, and `xla(inputs) -> outputs`, the stage's XLA twin
(the reference implementation of the same outputs). `call(kernel, inputs, ...)` is written for ONE environment,
like every stage; the environments come from the user's `jax.vmap`:

    jax.vmap(mjl.step, in_axes=(None, 0))(m, d)   # -> one pallas_call over all environments of d

Batching. JAX's own batching rule of `pallas_call` would add a grid dimension (one environment per program,
scalar code). Instead the launch is a `jax.custom_batching.custom_vmap` function whose rule receives the whole
batch: a batched input gains (or merges into) a leading environment axis, an unbatched one stays shared, and the
rule calls the launcher again with the new axis, so nested vmaps (models x environments, vmap inside scan) fold
into one environment axis of size A * E and one launch. Inputs without an environment axis (the Model's floats,
under the usual `in_axes=(None, 0)`) are shared by all environments: the kernel reads them as scalars; a Model
float vmapped for domain randomisation simply becomes a per-environment input.

Layout ("lanes" are the environments of a block, BLOCK of them per program, a power of two as Triton needs):
  "lanes_last":  per-environment inputs are packed into one (NX, E) array and the outputs come back as one
                 (NY, E) array: the environment index is fastest-varying, so each lane vector read or written by
                 the kernel is one contiguous, coalesced access. XLA transposes at the boundary (Data's fields
                 are (E, ...)).
  "lanes_first": the kernel reads and writes Data's own (E, n) arrays with strided accesses; no transposes.
  "lanes_mixed": inputs packed as in "lanes_last" (coalesced loads), outputs as in "lanes_first": one (E, n)
                 buffer per output in Data's layout, written with strided stores, so that no slice, reshape or
                 transpose of a packed output runs in XLA after the kernel (the reshape to the field's shape is
                 a bitcast).
Either way the kernel's body sees the same thing: `read(name, k)` returns element k (flat, per environment) of
input `name` as a lane vector (BLOCK,) or, for a shared input, a scalar; `gather(name, idx)` reads element idx[lane]
in each lane (idx an int lane vector: a gather, e.g. a height field's cells under each environment's geom); `write(name,
k, value)` stores a lane vector. The last block is masked when BLOCK does not divide E.

Derivatives. The launch is wrapped in `jax.custom_jvp` whose rule runs `jax.jvp` of the XLA twin: forward and
reverse mode (reverse by JAX's transposition of that rule) get the XLA stage's derivatives, exactly, whatever
the primal path. Under differentiation the twin's primal runs too (its residuals feed the tangents). The rule is
traced lazily, possibly in a later trace than the one that called the kernel (pipeline/step.py's RK4 step
differentiates its merged step inside its own jit, whose cached program's rules are traced again): so a twin reads
only its inputs, never an array of the Model or Data it closes over (their tracers may belong to a finished trace:
"No constant handler for type: DynamicJaxprTracer" when lowering); fields a kernel leaves out of its inputs (empty,
or not read) enter its twin as zeros (tests/test_kernels.py::test_twins_close_over_no_tracer).

On a GPU the kernel is lowered by Pallas' Triton backend; elsewhere `interpret=True` runs the same body as XLA
operations (tests, CPU). Lowering for "cuda" works on a CPU-only machine (no GPU needed to check that a kernel is
Triton-lowerable; tests/test_kernels.py does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

__all__ = ["BLOCK", "IO", "NUM_WARPS", "Kernel", "Launch", "call", "detach", "loop"]

# environments per program on a GPU: one per thread of 4 warps (a tuning knob to measure: a block's registers and
# the occupancy of an SM trade off with the kernel's size, see kernels/tree.py)
BLOCK = 128
NUM_WARPS = 4


@dataclasses.dataclass(frozen=True, eq=False)
class Kernel:
    """A fused stage. Shapes are per environment; `body(read, write)` runs once per block (see the module doc)."""

    name: str
    inputs: dict  # name -> shape (per environment)
    outputs: dict  # name -> shape (per environment); names starting with "_" are scratch, not returned
    tables: dict  # name -> 1-D int32 numpy array (the Model's static tables, read with io.table)
    body: Callable  # body(io: IO) -> None
    xla: Callable  # xla(inputs: dict) -> dict of the (non-scratch) outputs: the XLA twin
    # launcher(kernel, env, nenv, launch, x) -> outputs, in place of `_launch` (a kernel with its own block layout,
    # e.g. kernels/primal_tiled.py's (environments, rows, dofs) tiles); None: `_launch` runs `body`
    launcher: Callable | None = None


@dataclasses.dataclass(frozen=True)
class Launch:
    """How a kernel is launched (static): layout, environments per program, warps, interpret mode.

    dof_tile: 0, or the environments per program (a power of two) of the kernels that spread each environment's
    work over the threads of a program (kernels/primal_tiled.py: Newton's solver on (environments, rows, dofs)
    tiles); 0 keeps the one-environment-per-lane kernels (kernels/primal.py).
    hessian: the tiled kernel's Newton Hessian J' diag(h) J: "dot", one matrix product per environment (Triton's
    tl.dot at full float32 precision: Precision.HIGHEST lowers to its IEEE mode, not TF32), where the program holds
    one environment (dof_tile=1) and the tiles are at least 16 x 16 (tl.dot's minimum); "rank1", nefc rank-1
    updates of the tile (any dof_tile); "auto": "dot" where it applies.
    rows_tile: 0, or the environments per program (a power of two) of the constraint rows kernel on row tiles
    (kernels/rows_tiled.py: every row and dof of an environment at once); 0 keeps kernels/rows.py's one environment
    per lane."""

    layout: str = "lanes_last"
    block: int = BLOCK
    num_warps: int = NUM_WARPS
    interpret: bool = False
    dof_tile: int = 0
    hessian: str = "auto"
    rows_tile: int = 0


def unit_quat(q: tuple) -> tuple:
    """A quaternion given as 4 lane arrays, normalised as math.quat_normalize (identity below norm 1e-15), NaN-free
    in value and derivative at 0: for kernel bodies, which work on per-component lanes."""
    sq = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]
    zero = sq <= 0.0
    n = where(zero, 0.0, jp.sqrt(where(zero, 1.0, sq)))
    small = n < 1e-15
    safe = where(small, 1.0, n)
    return tuple(where(small, 1.0 if i == 0 else 0.0, q[i] / safe) for i in range(4))


def call(kernel: Kernel, inputs: dict, launch: Launch) -> dict:
    """The outputs of `kernel` for one environment (inputs without an environment axis; vmap to batch).

    inputs: name -> array of the declared per-environment shape (all of one float dtype). Returns name -> array.
    """

    @jax.custom_jvp
    def fused(x):
        out = _batched(kernel, {n: False for n in x}, None, launch)(x)
        return {n: v for n, v in out.items() if not n.startswith("_")}

    @fused.defjvp
    def fused_jvp(primals, tangents):
        (x,), (tx,) = primals, tangents
        _, tout = jax.jvp(kernel.xla, (x,), (tx,))
        return fused(x), tout

    return fused(inputs)


def loop(lo: int, hi: int, fn):
    """fn(i) for i in range(lo, hi) as one loop in a kernel body (i traced); nothing when the range is empty."""
    if hi > lo:
        jax.lax.fori_loop(np.int32(lo), np.int32(hi), lambda i, c: (fn(i), c)[1], np.int32(0))


def detach(obj, keep: dict):
    """obj (a Model or Data) with every traced array leaf replaced by zeros of its shape and dtype, then the fields
    `keep` (name -> array) set: for an XLA twin that runs a stage on the Model/Data it closes over, so that it reads
    its inputs (in `keep`) and nothing else of them (see the module docstring's "Derivatives")."""
    obj = jax.tree.map(lambda v: jp.zeros(jp.shape(v), v.dtype) if isinstance(v, jax.core.Tracer) else v, obj)
    return obj.replace(**keep)


def _batched(kernel: Kernel, env: dict, nenv: int | None, launch: Launch):
    """custom_vmap launcher: inputs with env[name] True have a leading environment axis of size nenv."""

    @jax.custom_batching.custom_vmap
    def f(x):
        return (kernel.launcher or _launch)(kernel, env, nenv, launch, x)

    @f.def_vmap
    def rule(axis_size, in_batched, x):
        (batched,) = in_batched
        e = 1 if nenv is None else nenv
        env2, x2 = {}, {}
        for name, v in x.items():
            if batched[name] or env[name]:
                if not batched[name]:
                    v = jp.broadcast_to(v[None], (axis_size,) + v.shape)
                if nenv is not None:  # merge into the environment axis (the first vmap's axis is that axis as is)
                    if not env[name]:
                        v = jp.broadcast_to(v[:, None], (axis_size, e) + v.shape[1:])
                    v = v.reshape((axis_size * e,) + v.shape[2:])
                x2[name], env2[name] = v, True
            else:
                x2[name], env2[name] = v, False
        out = _batched(kernel, env2, axis_size * e, launch)(x2)
        lead = (axis_size,) if nenv is None else (axis_size, nenv)
        out = {n: v.reshape(lead + v.shape[1:]) for n, v in out.items()}
        return out, {n: True for n in out}

    return f


def _number(v) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def where(c, a, b, dtype=None):
    """`jp.where` whose Python-number branches become constants before the select: a float one of `dtype`, or else
    of the other branch's float dtype (two Python floats need `dtype`: in a kernel, its float dtype `IO.dtype`), an
    int one int32, a bool one bool. Pallas' Triton lowering (seen in jax 0.11.2) gives a weakly typed literal
    branch of a select the predicate's type (i1) where no broadcast turned it into a value first, as in a 0-d select
    (an unbatched launch, or a condition on the model's tables): a lowering error for floats ("AssertionError:
    ('i1', 'f32')") and a truncated constant for integers. Kernel code selects with this function; the constants
    are what `jp.where`'s weak typing would give, so it is `jp.where` outside kernels too."""
    fdt = dtype
    if fdt is None:
        for v in (a, b):
            vdt = None if _number(v) else getattr(v, "dtype", None)
            if vdt is not None and jp.issubdtype(vdt, jp.floating):
                fdt = vdt
                break

    def const(v):
        if isinstance(v, (bool, np.bool_)):
            return jp.asarray(v)
        if isinstance(v, (int, np.integer)):
            return jp.asarray(v, jp.int32)
        if isinstance(v, (float, np.floating)):
            if fdt is None:
                raise ValueError("launch.where: a Python float branch beside no float array needs dtype= (a kernel's "
                                 "float dtype, IO.dtype)")  # fmt: skip
            return jp.asarray(v, fdt)
        return v

    return jp.where(c, const(a), const(b))


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _launch(kernel: Kernel, env: dict, nenv: int | None, launch: Launch, x: dict) -> dict:
    """One pallas_call over all environments. Outputs (nenv, *shape), or (*shape) when nenv is None."""
    e = 1 if nenv is None else nenv
    block = min(launch.block, pl.next_power_of_2(e))
    grid = pl.cdiv(e, block)
    dtype = jp.result_type(*x.values()) if x else jp.float32
    names = [n for n in kernel.inputs if n in x and _size(kernel.inputs[n])]
    shared = [n for n in names if not env[n]]
    per_env = [n for n in names if env[n]]
    outs = [n for n in kernel.outputs if _size(kernel.outputs[n])]
    lanes_last = launch.layout in ("lanes_last", "lanes_mixed")  # the inputs' layout
    out_last = launch.layout == "lanes_last"  # the outputs'

    def flat(n):  # (E, size) of a per-environment input
        return x[n].astype(dtype).reshape(e, -1)

    args, specs = [], []
    for n in shared:  # one ref each in the input's own shape (no reshape; read as scalars by flat index)
        v = x[n].astype(dtype)
        v = v.reshape(1) if v.ndim == 0 else v
        args.append(v)
        specs.append(pl.BlockSpec(v.shape, lambda i, nd=v.ndim: (0,) * nd))
    xoff, off = {}, 0
    for n in per_env:
        xoff[n], off = off, off + _size(kernel.inputs[n])
    nx = off
    if per_env and lanes_last:
        args.append(jp.concatenate([flat(n) for n in per_env], axis=1).T)  # (NX, E)
        specs.append(pl.BlockSpec((nx, block), lambda i: (0, i)))
    elif per_env:
        for n in per_env:
            args.append(flat(n))
            specs.append(pl.BlockSpec((block, _size(kernel.inputs[n])), lambda i: (i, 0)))
    yoff, off = {}, 0
    for n in outs:
        yoff[n], off = off, off + _size(kernel.outputs[n])
    ny = off
    if out_last:
        out_shape = [jax.ShapeDtypeStruct((ny, e), dtype)]
        out_specs = [pl.BlockSpec((ny, block), lambda i: (0, i))]
    else:
        out_shape = [jax.ShapeDtypeStruct((e, _size(kernel.outputs[n])), dtype) for n in outs]
        out_specs = [pl.BlockSpec((block, _size(kernel.outputs[n])), lambda i: (i, 0)) for n in outs]
    tables = [n for n in kernel.tables if np.asarray(kernel.tables[n]).size]
    for n in tables:
        args.append(jp.asarray(np.asarray(kernel.tables[n], np.int32)))
        specs.append(pl.BlockSpec((np.asarray(kernel.tables[n]).size,), lambda i: (0,)))
    # the last block's lanes past E are masked on a GPU (the interpreter pads the arrays to whole blocks itself)
    masked = e % block != 0 and not launch.interpret

    def body(*refs):
        nin = len(args)
        in_refs, out_refs = refs[:nin], refs[nin:]
        s_refs = dict(zip(shared, in_refs))
        k = len(shared)
        if per_env and lanes_last:
            x_refs, k = {n: in_refs[k] for n in per_env}, k + 1
        else:
            x_refs, k = dict(zip(per_env, in_refs[k:])), k + len(per_env)
        t_refs = dict(zip(tables, in_refs[k:]))
        o_refs = {n: out_refs[0] for n in outs} if out_last else dict(zip(outs, out_refs))
        mask = None
        if masked:
            lane = pl.program_id(0) * block + jax.lax.broadcasted_iota(jp.int32, (block,), 0)
            mask = lane < e
        xsize = {n: _size(kernel.inputs[n]) for n in per_env}
        ysize = {n: _size(kernel.outputs[n]) for n in outs}
        kernel.body(IO(s_refs, x_refs, t_refs, o_refs, xoff, yoff, lanes_last, mask, block, dtype, launch.interpret,
                       xsize, ysize, out_last))  # fmt: skip

    res = pl.pallas_call(
        body, out_shape=out_shape, grid=(grid,), in_specs=specs, out_specs=out_specs,
        compiler_params=plt.CompilerParams(num_warps=launch.num_warps, num_stages=1),
        interpret=launch.interpret, name=kernel.name,
    )(*args)  # fmt: skip
    if out_last:
        y = res[0].T  # (E, NY)
        # (scratch outputs are not returned: no slice of them)
        res = [None if n.startswith("_") else y[:, yoff[n] : yoff[n] + _size(kernel.outputs[n])] for n in outs]
    out = {}
    lead = () if nenv is None else (e,)
    for n, shape in kernel.outputs.items():
        if n.startswith("_"):  # scratch: not returned (no slice of it)
            continue
        if n in outs:
            out[n] = res[outs.index(n)].reshape(lead + tuple(shape))
        else:
            out[n] = jp.zeros(lead + tuple(shape), dtype)
    return out


def _index(i):
    """A static (Python int) or traced index, traced ones in JAX's default int type (the interpreter's own)."""
    return i if isinstance(i, (int, np.integer)) else jp.asarray(i).astype(_int())


def _unravel(shape: tuple, i):
    """The index into an array of `shape` of its flat (row-major) element i: i itself for one axis; a tuple of
    Python ints for a static i, of integer arrays (scalars or lane vectors) for a traced one. Shared inputs keep
    their shape in the kernel (no reshape outside it) and are read by flat index."""
    if len(shape) == 1:
        return i
    if isinstance(i, (int, np.integer)):
        return tuple(int(k) for k in np.unravel_index(int(i), shape))
    out, rest = [], i
    for k in range(len(shape) - 1, 0, -1):
        out.append(rest % shape[k])
        rest = rest // shape[k]
    return (rest,) + tuple(reversed(out))


def _int():
    """JAX's default int type (int64 with jax_enable_x64, else int32): the interpreter's own index type."""
    return jax.dtypes.canonicalize_dtype(jp.int64)


class IO:
    """What a kernel body sees of one block (see the module docstring). Indices are flat, per environment, and
    may be Python ints or traced integers (inside loops)."""

    def __init__(self, s_refs, x_refs, t_refs, o_refs, xoff, yoff, lanes_last, mask, block, dtype, interpret,
                 xsize=None, ysize=None, out_last=None):  # fmt: skip
        self._s, self._x, self._t, self._o = s_refs, x_refs, t_refs, o_refs
        self._xoff, self._yoff, self._last, self._mask = xoff, yoff, lanes_last, mask
        # lanes_last: the inputs' layout; _olast: the outputs' (they differ in "lanes_mixed")
        self._olast = lanes_last if out_last is None else out_last
        self.block, self.dtype = block, dtype
        self._xsize = xsize or {}  # per-environment inputs' sizes (`gather`'s clamp)
        self._ysize = ysize or {}  # outputs' sizes (`load_at` / `write_at`'s clamp)
        # interpret mode: n consecutive elements move as one (n, BLOCK) slice (fewer operations to compile); Triton
        # needs power-of-two tensor sizes, so there they move lane vector by lane vector
        self._wide = interpret and mask is None

    def _span(self, ref, i, n, last):
        """The n lane vectors at flat indices i.. of a block ref (`last`: its layout is (values, lanes)), as a
        tuple (interpret mode: one slice)."""
        if last:
            v = ref[pl.ds(i, n), :]
            return tuple(v[k] for k in range(n))
        v = ref[:, pl.ds(i, n)]
        return tuple(v[:, k] for k in range(n))

    def read_vec(self, name: str, i, n: int) -> tuple:
        """Elements n * i .. n * i + n - 1 of input `name` (`read` of each)."""
        if not self._wide or isinstance(i, (int, np.integer)):
            return tuple(self.read(name, n * i + k) for k in range(n))
        if name in self._s:
            ref = self._s[name]
            if ref.ndim == 2 and ref.shape[1] == n:  # row i of a shared (rows, n) input
                v = ref[pl.ds(_index(i), 1), :][0]
            elif ref.ndim == 1:
                v = ref[pl.ds(n * _index(i), n)]
            else:
                return tuple(self.read(name, n * i + k) for k in range(n))
            return tuple(v[k] for k in range(n))
        i = n * _index(i)
        return self._span(self._x[name], self._xoff[name] + i if self._last else i, n, self._last)

    def load_vec(self, name: str, i, n: int) -> tuple:
        """Elements n * i .. n * i + n - 1 of output `name` (`load` of each)."""
        if not self._wide:
            return tuple(self.load(name, n * i + k) for k in range(n))
        i = n * _index(i)
        return self._span(self._o[name], self._yoff[name] + i if self._olast else i, n, self._olast)

    def write_vec(self, name: str, i, values) -> None:
        """Store values (n of them) as elements n * i .. n * i + n - 1 of output `name` (`write` of each)."""
        n = len(values)
        if not self._wide:
            for k, v in enumerate(values):
                self.write(name, n * i + k, v)
            return
        i = n * _index(i)
        ref = self._o[name]
        if self._olast:
            ref[pl.ds(self._yoff[name] + i, n), :] = jp.stack([self.lanes(v) for v in values])
        else:
            ref[:, pl.ds(i, n)] = jp.stack([self.lanes(v) for v in values], axis=1)

    def _lanes(self, ref, i, last):
        """The lane vector at flat index i of a block ref (`last`: a row of (n, BLOCK), else a column of (BLOCK,
        n))."""
        if self._mask is None:  # a plain ref read (Pallas' masked load pads the whole block in interpret mode)
            return ref[pl.ds(i, 1), :][0] if last else ref[:, pl.ds(i, 1)][:, 0]
        if last:
            return plt.load(ref.at[pl.ds(i, 1), :], mask=self._mask[None, :])[0]
        return plt.load(ref.at[:, pl.ds(i, 1)], mask=self._mask[:, None])[:, 0]

    def read(self, name: str, i):
        """Element i of input `name`: a lane vector (BLOCK,), or a scalar for an input shared by the block."""
        i = _index(i)
        if name in self._s:
            return self._s[name][_unravel(self._s[name].shape, i)]
        return self._lanes(self._x[name], self._xoff[name] + i if self._last else i, self._last)

    def gather(self, name: str, idx):
        """Element idx[lane] of input `name` in each lane: idx an int lane vector (BLOCK,) of flat, per-environment
        indices (a gather: a height field's cells under each environment's geom). Indices are clamped into the
        input, so a masked lane's garbage index reads nothing out of bounds. Returns a lane vector."""
        size = _size(self._shape(name))
        idx = jp.clip(jp.asarray(idx).astype(jp.int32), 0, size - 1)
        if name in self._s:
            return self._s[name][_unravel(self._s[name].shape, idx)]
        lane = jax.lax.broadcasted_iota(jp.int32, (self.block,), 0)
        if self._last:
            return self._x[name][self._xoff[name] + idx, lane]
        return self._x[name][lane, idx]

    def _shape(self, name: str):
        return self._s[name].shape if name in self._s else (self._xsize[name],)

    def table_at(self, name: str, idx):
        """Entry idx[lane] of the static table `name` in each lane (idx an int lane vector, clamped into the
        table): an int32 lane vector."""
        t = self._t[name]
        return t[jp.clip(jp.asarray(idx).astype(jp.int32), 0, t.shape[0] - 1)]

    def _at(self, name: str, idx):
        """The ref of output `name` and the per-lane index (rows, lanes) of its element idx[lane] (clamped)."""
        idx = jp.clip(jp.asarray(idx).astype(jp.int32), 0, self._ysize[name] - 1)
        lane = jax.lax.broadcasted_iota(jp.int32, (self.block,), 0)
        if self._olast:
            return self._o[name], (self._yoff[name] + idx, lane)
        return self._o[name], (lane, idx)

    def load_at(self, name: str, idx):
        """Element idx[lane] of output `name` in each lane, as written before by this block (idx an int lane vector,
        clamped into the output): a gather from the kernel's own memory, for per-environment indices (PGS's shuffled
        blocks, kernels/pgs.py)."""
        ref, ix = self._at(name, idx)
        if self._mask is None:
            return ref[ix]
        return plt.load(ref.at[ix], mask=self._mask)

    def write_at(self, name: str, idx, value):
        """Store `value` as element idx[lane] of output `name` in each lane (idx an int lane vector, clamped): a
        scatter into the kernel's own memory (`load_at`'s counterpart)."""
        ref, ix = self._at(name, idx)
        v = self.lanes(value)
        if self._mask is None:
            ref[ix] = v
        else:
            plt.store(ref.at[ix], v, mask=self._mask)

    def valid(self):
        """The lanes that hold an environment (bool (BLOCK,)), or None when every lane does (no masked block)."""
        return self._mask

    def table(self, name: str, i):
        """Entry i of the static table `name` (a scalar in JAX's default int type)."""
        return self._t[name][_index(i)].astype(_int())

    def lanes(self, value):
        """value broadcast to a lane vector (BLOCK,) of the kernel's dtype."""
        return jp.broadcast_to(jp.asarray(value, self.dtype), (self.block,))

    def load(self, name: str, i):
        """Element i of output `name` as written before by this block (outputs double as the kernel's memory)."""
        i = _index(i)
        return self._lanes(self._o[name], self._yoff[name] + i if self._olast else i, self._olast)

    def write(self, name: str, i, value):
        """Store `value` (lane vector, scalar or Python float) as element i of output `name`."""
        i = _index(i)
        v = self.lanes(value)
        ref = self._o[name]
        if self._olast:
            i = self._yoff[name] + i
        if self._mask is None and self._olast:
            ref[pl.ds(i, 1), :] = v[None, :]
        elif self._mask is None:
            ref[:, pl.ds(i, 1)] = v[:, None]
        elif self._olast:
            plt.store(ref.at[pl.ds(i, 1), :], v[None, :], mask=self._mask[None, :])
        else:
            plt.store(ref.at[:, pl.ds(i, 1)], v[:, None], mask=self._mask[:, None])
