"""Many devices and many hosts: a batch of environments sharded over JAX devices with JAX's own SPMD.

Nothing here is a distribution layer of its own: a 1-D `jax.sharding.Mesh` over the devices, `NamedSharding`s that
split the leading (environment) axis of every array over that mesh, and `jax.jit` of `jax.shard_map(jax.vmap(...))`
with those shardings. Environments never talk to each other during a step, so each device runs its slice of the
batch with no communication at all (shard_map keeps even the solver's stop-at-convergence test local to a device);
the same program runs on one CPU, on the GPUs of one node and on the hosts of a TPU pod slice.

    import mjx_lite as mjl
    from mjx_lite import parallel

    parallel.initialize()                     # multi-host only (one call per process, before anything else)
    mesh = parallel.make_mesh()               # every device of every process, axis "batch"
    m = parallel.replicate(mjl.load_mjcf("cartpole"), mesh)
    d0 = mjl.make_data(m)

    def init(index):                          # index: (n,) int, the environments this process builds
        qvel = np.stack([0.1 * np.random.default_rng(int(i)).standard_normal(m.nv) for i in index])
        return parallel.broadcast(d0, len(index)).replace(qvel=qvel.astype(d0.qvel.dtype))

    d = parallel.make_batch(init, 4096, mesh)  # Data with every leaf (4096, ...) sharded over the mesh
    rollout = parallel.rollout_fn(mesh, steps=100, observe=lambda m, d: d.qpos)
    d, qpos = rollout(m, d)                   # qpos: (4096, 100, nq), sharded like the batch
    qpos = parallel.to_host(qpos)             # numpy, the whole batch, in every process

Domain randomisation: a *batched* Model (every float leaf with a leading environment axis) is sharded like the
Data (`make_batch` builds it the same way) and the rollout is made with `model_axis=0`.

Shapes: `batch` must be a multiple of the number of devices in the mesh (each device holds `batch // ndevices`
environments); every helper checks it and says so.

Under multi-host (`initialize`), every process runs this same program on a *global* batch; `make_batch` calls
`init` only for the environments of the process's own devices (nothing is built or copied for the others), and
results stay sharded until `to_host` gathers them.

Float results do not depend on how many devices share the batch in exact arithmetic (no environment reads another),
but they may in the last bits: see docs/parallel.md ("How close are results across device counts").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from mjx_lite.pipeline.step import step as _step

__all__ = [
    "AXIS",
    "batch_sharding",
    "broadcast",
    "initialize",
    "make_batch",
    "make_mesh",
    "replicate",
    "replicated_sharding",
    "rollout_fn",
    "shard",
    "step_fn",
    "to_host",
]

AXIS = "batch"  # default name of the mesh axis the environments are split over


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: int | Sequence[int] | None = None,
    cpu_collectives: str | None = "gloo",
    **kwargs: Any,
) -> dict:
    """Join a multi-process (multi-host) JAX run: `jax.distributed.initialize` plus the CPU collectives choice.

    Call it once per process, first thing, before any JAX computation. On a TPU pod slice, under SLURM or Open MPI,
    or on a Kubernetes JobSet, JAX finds the coordinator, process count and id itself: call `initialize()` with no
    arguments. Elsewhere (e.g. two processes on one machine, or GPU hosts without a cluster manager) pass them:
    `initialize("10.0.0.1:1234", num_processes=2, process_id=0)` in the first process, `process_id=1` in the
    second. `local_device_ids` picks this process's GPUs (one process per GPU: `local_device_ids=[rank]`).

    Args:
      coordinator_address, num_processes, process_id, local_device_ids: as `jax.distributed.initialize`.
      cpu_collectives: the CPU backend's cross-process collectives ("gloo", "mpi"; None: JAX's default). Only
        the CPU backend reads it; it must be set before the backend starts, hence here.
      **kwargs: passed on to `jax.distributed.initialize` (e.g. `initialization_timeout`).

    Returns:
      {"process_index", "process_count", "local_devices", "devices"}: this process's place in the run.
    """
    if cpu_collectives is not None:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            local_device_ids=local_device_ids,
            **kwargs,
        )
    except RuntimeError as e:
        if "before" not in str(e):
            raise
        raise RuntimeError(
            "mjx_lite.parallel.initialize: JAX's backend was already started in this process (by a computation, "
            "jax.devices(), or an import that builds a jax array), so it can no longer join a multi-process run. "
            "Call initialize() first thing; if an import starts the backend, call "
            "jax.config.update('jax_cpu_collectives_implementation', 'gloo') and jax.distributed.initialize(...) "
            "before that import instead (docs/parallel.md, 'Multi-host')."
        ) from e
    return {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "local_devices": jax.local_device_count(),
        "devices": jax.device_count(),
    }


def make_mesh(devices: Sequence[jax.Device] | None = None, axis_name: str = AXIS) -> Mesh:
    """A 1-D mesh over `devices` (default: `jax.devices()`, every device of every process) named `axis_name`.

    The mesh's axis type is `Auto` (jit's in/out shardings decide the layout; no sharding-in-types rules apply to
    the step's own operations). Device order is `jax.devices()`' order, so under multi-host each process holds a
    contiguous block of environments.
    """
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("make_mesh: no devices given")
    return Mesh(np.asarray(devices, dtype=object), (axis_name,), axis_types=(AxisType.Auto,))


def _axis(mesh: Mesh) -> str:
    if len(mesh.axis_names) != 1:
        raise ValueError(f"expected a 1-D mesh (make_mesh), got axes {mesh.axis_names}")
    return mesh.axis_names[0]


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Split the leading (environment) axis of an array over the mesh; the other axes stay whole."""
    return NamedSharding(mesh, P(_axis(mesh)))


def replicated_sharding(mesh: Mesh) -> NamedSharding:
    """A full copy of the array on every device of the mesh."""
    return NamedSharding(mesh, P())


def _check_batch(batch: int, mesh: Mesh, what: str) -> None:
    n = mesh.devices.size
    if batch <= 0 or batch % n:
        raise ValueError(
            f"{what}: the batch size {batch} must be a positive multiple of the number of devices in the mesh ({n}); "
            f"each device holds batch // {n} environments"
        )


def _batch_size(tree: Any, what: str) -> int:
    sizes = {np.shape(x)[0] if np.ndim(x) else None for x in jax.tree.leaves(tree)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            f"{what}: every leaf needs the same leading environment axis; found: {sorted(map(str, sizes))}"
        )
    return sizes.pop()


def broadcast(tree: Any, batch: int) -> Any:
    """`batch` copies of a pytree (Model or Data): every leaf `x` becomes `(batch,) + x.shape`."""
    return jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + jp.shape(x)), tree)


def replicate(tree: Any, mesh: Mesh) -> Any:
    """A pytree (e.g. a Model) copied onto every device of the mesh, as global arrays (multi-host safe).

    Every process must pass the same values (in a multi-host run each process loads the same model).
    """
    sharding = replicated_sharding(mesh)

    def put(x):
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

    return jax.tree.map(put, tree)


def shard(tree: Any, mesh: Mesh) -> Any:
    """A batched pytree already whole in this process, split over the mesh along its leading axis.

    Convenient on one host. Under multi-host every process would have to hold the whole batch: use `make_batch`,
    which builds only this process's environments.
    """
    batch = _batch_size(tree, "shard")
    _check_batch(batch, mesh, "shard")
    sharding = batch_sharding(mesh)

    def put(x):
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

    return jax.tree.map(put, tree)


def make_batch(init: Callable[[np.ndarray], Any], batch: int, mesh: Mesh) -> Any:
    """A pytree of `batch` environments, built shard by shard and split over the mesh along the leading axis.

    Args:
      init: `init(index) -> pytree`, `index`: (n,) int64, the global environment numbers of one shard (a
        contiguous range); returns a pytree whose every leaf has leading size n (a batched Data, or a batched Model
        for domain randomisation). It must depend only on `index` (not on which process calls it), so that the
        global batch is the same whatever the device count; seed random draws from the environment numbers.
        It is called once per shard this process holds (never for other processes' shards), on the host;
        its results are copied to the devices.
      batch: the global number of environments, a multiple of the mesh's device count.
      mesh: a 1-D mesh (`make_mesh`).

    Returns:
      The pytree with every leaf a global `jax.Array` of shape (batch, ...) sharded as `batch_sharding(mesh)`.
    """
    _check_batch(batch, mesh, "make_batch")
    sharding = batch_sharding(mesh)
    slices = sorted({(s[0].start or 0, batch if s[0].stop is None else s[0].stop)
                     for s in sharding.addressable_devices_indices_map((batch,)).values()})  # fmt: skip
    blocks = {}
    for start, stop in slices:
        out = init(np.arange(start, stop, dtype=np.int64))
        leaves, treedef = jax.tree.flatten(out)
        for x in leaves:
            if np.ndim(x) == 0 or np.shape(x)[0] != stop - start:
                raise ValueError(
                    f"make_batch: init(index) with {stop - start} indices returned a leaf of shape {np.shape(x)}; "
                    f"every leaf needs leading size {stop - start}"
                )
        blocks[(start, stop)] = (treedef, [np.asarray(x) for x in leaves])
    treedefs = {t for t, _ in blocks.values()}
    if len(treedefs) != 1:
        raise ValueError(f"make_batch: init returned different pytree structures for different shards: {treedefs}")
    treedef = treedefs.pop()
    first = next(iter(blocks.values()))[1]

    def leaf(i):
        x = first[i]
        shape = (batch,) + x.shape[1:]

        def cb(idx):
            s = idx[0]
            key = (s.start or 0, batch if s.stop is None else s.stop)
            return blocks[key][1][i][(slice(None),) + tuple(idx[1:])]

        return jax.make_array_from_callback(shape, sharding, cb, dtype=x.dtype)

    return jax.tree.unflatten(treedef, [leaf(i) for i in range(len(first))])


def _shardings(mesh: Mesh, model_axis: int | None):
    b = batch_sharding(mesh)
    return (replicated_sharding(mesh) if model_axis is None else b), b


def _per_device(fn: Callable, mesh: Mesh, model_axis: int | None) -> Callable:
    """`fn(m, d)` vmapped over each device's own slice of the batch (shard_map), jitted with matching shardings.

    Why shard_map rather than jit(vmap(fn)) with shardings alone: a `lax.while_loop` under vmap (the solver's
    stop at convergence, GJK) runs until its *every* lane is done, and with the batch axis partitioned by the
    compiler that "every" spans all devices: an all-reduce across devices in each iteration, and each device
    iterating as long as the slowest environment anywhere. Under shard_map each device decides on its own lanes.
    Per environment the results are the same either way (finished lanes keep their values).
    """
    axis = _axis(mesh)
    m_sh, d_sh = _shardings(mesh, model_axis)
    local = jax.shard_map(jax.vmap(fn, in_axes=(model_axis, 0)), mesh=mesh,
                          in_specs=(m_sh.spec, d_sh.spec), out_specs=P(axis), check_vma=False)  # fmt: skip
    return local, (m_sh, d_sh)


def step_fn(
    mesh: Mesh,
    *,
    step: Callable[[Any, Any], Any] = _step,
    model_axis: int | None = None,
    donate: bool = False,
) -> Callable[[Any, Any], Any]:
    """`jit(vmap(step))` over a batch sharded on `mesh`, each device stepping its own slice (`shard_map`):
    `f(m, d) -> d` (a training loop's environment step).

    Args:
      mesh: a 1-D mesh (`make_mesh`).
      step: `step(m, d) -> d` for one environment (default `mjx_lite.step`; an env's step works the same way).
      model_axis: None: one Model for every environment (replicated on every device); 0: a batched Model
        (domain randomisation), sharded like the Data.
      donate: donate the input Data's buffers to the output (halves the memory of large batches; the input
        Data cannot be used after the call).
    """
    if model_axis not in (None, 0):
        raise ValueError(f"model_axis must be None (one model) or 0 (a batched model), not {model_axis!r}")
    f, (m_sh, d_sh) = _per_device(step, mesh, model_axis)
    return jax.jit(f, in_shardings=(m_sh, d_sh), out_shardings=d_sh, donate_argnums=(1,) if donate else ())


def rollout_fn(
    mesh: Mesh,
    steps: int,
    *,
    step: Callable[[Any, Any], Any] = _step,
    observe: Callable[[Any, Any], Any] | None = None,
    model_axis: int | None = None,
    donate: bool = False,
) -> Callable[[Any, Any], tuple[Any, Any]]:
    """`jit(vmap(scan(step)))` over a batch sharded on `mesh`, each device rolling out its own slice
    (`shard_map`): `f(m, d) -> (d_final, observations)`.

    Args:
      mesh, step, model_axis, donate: as `step_fn`.
      steps: number of steps (static: the scan's length).
      observe: `observe(m, d) -> pytree` recorded after every step (e.g. `lambda m, d: d.qpos`); None: nothing
        (observations is None).

    Returns:
      f(m, d) with d batched (batch, ...) and sharded as `batch_sharding(mesh)`; the final Data is sharded the
      same way and every observation leaf has shape (batch, steps, ...), sharded along the batch.
    """
    if model_axis not in (None, 0):
        raise ValueError(f"model_axis must be None (one model) or 0 (a batched model), not {model_axis!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, not {steps!r}")

    def rollout(m, d):
        def body(d, _):
            d = step(m, d)
            return d, (None if observe is None else observe(m, d))

        return jax.lax.scan(body, d, None, length=steps)

    f, (m_sh, d_sh) = _per_device(rollout, mesh, model_axis)
    return jax.jit(f, in_shardings=(m_sh, d_sh), out_shardings=d_sh, donate_argnums=(1,) if donate else ())


def to_host(tree: Any) -> Any:
    """Every leaf as a numpy array of its global shape, in every process (gathers other processes' shards)."""

    def get(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(x)

    return jax.tree.map(get, tree)
