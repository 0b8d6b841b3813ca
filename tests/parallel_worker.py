"""Subprocess side of tests/test_parallel.py (device-count flags must not leak into the test process).

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python tests/parallel_worker.py devices OUT.npz
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python tests/parallel_worker.py process RANK NPROC PORT OUT.npz
    python tests/parallel_worker.py reference OUT.npz

`devices`: one process with 4 CPU devices runs the batch on one device (the reference, once with the model and
once with the model without gravity and damping: one compiled program) and sharded over the 4 devices with a
batched Model (domain randomisation: odd environments have no gravity and no damping). `process`: one of NPROC
processes (2 devices each) joined by `jax.distributed` with gloo CPU collectives; together they run the sharded
rollout of the global batch with one replicated Model. `reference`: the whole batch on one device in a plain
process (the program `devices` compiles first, so with a shared compilation cache it loads instead of compiling).
Each writes an npz of the results and prints one JSON line of facts (timings, device counts, which environments
this process built).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

# a chaotic double pendulum (rounding differences grow quickly: a sensitive test of "same numbers")
XML = """
<mujoco model="double_pendulum">
  <option timestep="0.01" integrator="Euler"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="a" type="hinge" axis="0 1 0" damping="0.02"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03"/>
      <body pos="0 0 -0.4">
        <joint name="b" type="hinge" axis="0 1 0" damping="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
BATCH, STEPS = 8, 20


def init_fn(d0, built: list):
    """Environment i: qpos and qvel drawn from a generator seeded with i (the same whatever the device count)."""
    from mjx_lite import parallel  # noqa: PLC0415 - after the flags are set

    def init(index):
        built.extend(int(i) for i in index)
        rows = [np.random.default_rng(int(i)) for i in index]
        qpos = np.stack([1.5 * g.uniform(-1, 1, d0.qpos.shape) for g in rows])
        qvel = np.stack([g.standard_normal(d0.qvel.shape) for g in rows])
        dtype = d0.qpos.dtype
        return parallel.broadcast(d0, len(index)).replace(qpos=qpos.astype(dtype), qvel=qvel.astype(dtype))

    return init


def observe(m, d):
    return d.qpos


def devices(out: str) -> None:
    import jax  # noqa: PLC0415

    import mjx_lite as mjl  # noqa: PLC0415
    from mjx_lite import parallel  # noqa: PLC0415

    assert jax.device_count() == 4, jax.devices()
    m = mjl.load_mjcf_string(XML)
    d0 = mjl.make_data(m)
    built: list = []
    init = init_fn(d0, built)
    facts = {"devices": jax.device_count(), "dtype": str(d0.qpos.dtype)}
    res = {}

    # reference: the whole batch on one device
    mesh1 = parallel.make_mesh(jax.devices()[:1])
    t0 = time.perf_counter()
    ref = parallel.rollout_fn(mesh1, STEPS, observe=observe)
    d, q = ref(parallel.replicate(m, mesh1), parallel.make_batch(init, BATCH, mesh1))
    res["ref_qpos"], res["ref_qvel"] = parallel.to_host(q), parallel.to_host(d.qvel)
    facts["single_s"] = time.perf_counter() - t0
    # the same compiled reference with the other model of the randomised batch below
    m_free = m.replace(opt=m.opt.replace(gravity=0.0 * m.opt.gravity), dof_damping=0.0 * m.dof_damping)
    d, q = ref(parallel.replicate(m_free, mesh1), parallel.make_batch(init, BATCH, mesh1))
    res["ref_free_qpos"], res["ref_free_qvel"] = parallel.to_host(q), parallel.to_host(d.qvel)

    # sharded, with a batched model: odd environments have no gravity and no damping
    def model_init(index):
        mb = parallel.broadcast(m, len(index))
        odd = (np.asarray(index) % 2 == 1)[:, None]
        grav = np.where(odd, 0.0, np.asarray(m.opt.gravity)[None])
        damp = np.where(odd, 0.0, np.asarray(m.dof_damping)[None])
        return mb.replace(opt=mb.opt.replace(gravity=grav.astype(d0.qpos.dtype)),
                          dof_damping=damp.astype(d0.qpos.dtype))  # fmt: skip

    t0 = time.perf_counter()
    mesh = parallel.make_mesh()
    mb = parallel.make_batch(model_init, BATCH, mesh)
    built.clear()
    db = parallel.make_batch(init, BATCH, mesh)
    facts["built"] = sorted(built)
    facts["model_sharding"] = str(mb.dof_damping.sharding.spec)
    facts["data_sharding"] = str(db.qpos.sharding.spec)
    facts["shards"] = [[int(s.index[0].start or 0), int(s.data.shape[0])] for s in db.qpos.addressable_shards]
    d, q = parallel.rollout_fn(mesh, STEPS, observe=observe, model_axis=0)(mb, db)
    facts["out_sharding"] = str(q.sharding.spec)
    facts["out_devices"] = len(q.sharding.device_set)
    res["dr_qpos"], res["dr_qvel"] = parallel.to_host(q), parallel.to_host(d.qvel)
    facts["randomised_s"] = time.perf_counter() - t0
    try:
        parallel.make_batch(init, 6, mesh)
        facts["bad_batch_error"] = ""
    except ValueError as e:
        facts["bad_batch_error"] = str(e)
    np.savez(out, **res)
    print(json.dumps(facts), flush=True)


def process(rank: int, nproc: int, port: int, out: str) -> None:
    import jax  # noqa: PLC0415

    t0 = time.perf_counter()
    # what mjx_lite.parallel.initialize does; called before `import mjx_lite` because that import currently starts
    # JAX's backend (a module-level jax array in collision/primitive.py), after which no process can join a run
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=nproc, process_id=rank, initialization_timeout=120)

    import mjx_lite as mjl  # noqa: PLC0415
    from mjx_lite import parallel  # noqa: PLC0415

    facts = {"process_index": jax.process_index(), "process_count": jax.process_count(),
             "local_devices": jax.local_device_count(), "devices": jax.device_count(),
             "init_s": time.perf_counter() - t0}  # fmt: skip
    m = mjl.load_mjcf_string(XML)
    d0 = mjl.make_data(m)
    built: list = []
    mesh = parallel.make_mesh()
    t0 = time.perf_counter()
    db = parallel.make_batch(init_fn(d0, built), BATCH, mesh)
    facts["built"] = sorted(built)
    d, q = parallel.rollout_fn(mesh, STEPS, observe=observe)(parallel.replicate(m, mesh), db)
    facts["fully_addressable"] = q.is_fully_addressable
    qpos, qvel = parallel.to_host(q), parallel.to_host(d.qvel)
    facts["rollout_s"] = time.perf_counter() - t0
    res = {"qpos": qpos, "qvel": qvel}
    np.savez(out, **res)
    print(json.dumps(facts), flush=True)
    jax.distributed.shutdown()


def reference(out: str) -> None:
    import jax  # noqa: PLC0415

    import mjx_lite as mjl  # noqa: PLC0415
    from mjx_lite import parallel  # noqa: PLC0415

    m = mjl.load_mjcf_string(XML)
    d0 = mjl.make_data(m)
    t0 = time.perf_counter()
    mesh1 = parallel.make_mesh(jax.devices()[:1])
    d, q = parallel.rollout_fn(mesh1, STEPS, observe=observe)(parallel.replicate(m, mesh1),
                                                              parallel.make_batch(init_fn(d0, []), BATCH, mesh1))
    np.savez(out, qpos=parallel.to_host(q), qvel=parallel.to_host(d.qvel))
    print(json.dumps({"single_s": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "devices":
        devices(sys.argv[2])
    elif sys.argv[1] == "reference":
        reference(sys.argv[2])
    elif sys.argv[1] == "process":
        process(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]!r}")
