"""mjx_lite.parallel: a batch sharded over devices (one process) and over processes (jax.distributed, gloo on CPU).

The multi-device cases run in subprocesses (tests/parallel_worker.py) so that the forced device count
(`--xla_force_host_platform_device_count`) and `jax.distributed` do not leak into the other tests. Both compare
with the whole batch run on one device, per environment, every step's qpos and the final qvel.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import parallel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "parallel_worker.py")
# a loaded 2-core machine runs each subprocess in under a minute; this only turns a hang into a failure (XLA:CPU
# deadlocked with more forced devices than cores when JAX's batched LAPACK kernels split a large per-device batch
# over the intra-op pool that the devices' programs occupy; mjx_lite no longer calls them: tests/test_no_hang.py)
TIMEOUT_S = 300

# Float64 rollouts, 20 steps of a chaotic double pendulum. Environments never read each other, so a sharded run
# computes the same operations on each environment as the single-device run; only XLA's choice of vectorisation for
# a different per-device batch (8 -> 2 here) could reorder a sum and change a last bit (~1e-16), which this
# pendulum amplifies by less than 1e3 in 20 steps. Measured: bitwise equal (0.0). An environment run with the wrong
# initial state or the wrong model row differs by 0.1-1.
SHARD_ATOL = 1e-12


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One compilation cache for this module's subprocesses: the two-process test's single-device reference is the
    program the four-device test compiled first."""
    return str(tmp_path_factory.mktemp("jax_cache"))


def _env(devices: int, cache: str) -> dict:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_ENABLE_X64"] = "1"
    env["MJX_LITE_COMPILATION_CACHE"] = cache
    return env


def _facts(stdout: str) -> dict:
    return json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def test_sharded_rollout_equals_single_device(tmp_path, cache_dir):
    """4 CPU devices in one process: a batched (domain-randomised) Model and the Data sharded over them give, per
    environment, the single-device rollout of that environment's model."""
    out = str(tmp_path / "devices.npz")
    p = subprocess.run([sys.executable, WORKER, "devices", out], env=_env(4, cache_dir), cwd=ROOT, capture_output=True,
                       text=True, timeout=TIMEOUT_S)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    facts = _facts(p.stdout)
    assert facts["devices"] == 4 and facts["dtype"] == "float64"
    assert facts["shards"] == [[0, 2], [2, 2], [4, 2], [6, 2]]  # 8 environments, 2 per device
    assert facts["model_sharding"] == facts["data_sharding"] == facts["out_sharding"] == "P('batch',)"
    assert facts["out_devices"] == 4
    assert facts["built"] == list(range(8))
    assert facts["bad_batch_error"], "a batch of 6 on 4 devices must be refused"
    r = np.load(out)
    assert r["dr_qpos"].shape == (8, 20, 2)
    # even environments: the model itself; odd ones: no gravity, no damping (the same compiled reference, other model)
    for name in ("qpos", "qvel"):
        np.testing.assert_allclose(r[f"dr_{name}"][0::2], r[f"ref_{name}"][0::2], rtol=0, atol=SHARD_ATOL)
        np.testing.assert_allclose(r[f"dr_{name}"][1::2], r[f"ref_free_{name}"][1::2], rtol=0, atol=SHARD_ATOL)
    assert _diff(r["dr_qpos"][1::2], r["ref_qpos"][1::2]) > 0.1  # the randomised rows really were used
    print(f"sharded vs single device: max |qpos| difference {_diff(r['dr_qpos'][0::2], r['ref_qpos'][0::2]):.1e}, "
          f"bitwise {np.array_equal(r['dr_qpos'][0::2], r['ref_qpos'][0::2])}; timings {facts}")  # fmt: skip


# slow (CI budget): sharding stays in test_sharded_rollout_equals_single_device, initialisation in the
# test_initialize_* tests; this one starts two jax.distributed processes
@pytest.mark.slow
def test_two_processes_agree_with_single_process(tmp_path, cache_dir):
    """Two processes with 2 CPU devices each, joined by jax.distributed (gloo): each builds only its own half of the
    global batch; together they run one sharded rollout, gathered in both, equal to the whole batch on one device
    in a third, plain process (started alongside; it loads the program the four-device test compiled)."""
    port = _free_port()
    outs = [str(tmp_path / f"p{r}.npz") for r in range(2)] + [str(tmp_path / "ref.npz")]
    cmds = [[WORKER, "process", str(r), "2", str(port), outs[r]] for r in range(2)] + [[WORKER, "reference", outs[2]]]
    # the reference process has 4 devices like the four-device test's (the device count is part of the topology
    # JAX's cache key hashes): its one-device program is then found in the cache
    procs = [subprocess.Popen([sys.executable, *c], env=_env(2 if i < 2 else 4, cache_dir), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, c in enumerate(cmds)]  # fmt: skip
    results = []
    try:
        for p in procs:
            results.append(p.communicate(timeout=TIMEOUT_S))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, e) in zip(procs, results):
        assert p.returncode == 0, e[-3000:]
    facts = [_facts(o) for o, _ in results]
    for r, f in enumerate(facts[:2]):
        assert (f["process_index"], f["process_count"], f["local_devices"], f["devices"]) == (r, 2, 2, 4)
        assert f["fully_addressable"] is False  # a global array: half of it lives in the other process
    assert facts[0]["built"] == [0, 1, 2, 3] and facts[1]["built"] == [4, 5, 6, 7]
    a, b, ref = (np.load(o) for o in outs)
    assert a["qpos"].shape == (8, 20, 2)
    np.testing.assert_array_equal(a["qpos"], b["qpos"])  # the same gathered global array in both processes
    for name in ("qpos", "qvel"):
        np.testing.assert_allclose(a[name], ref[name], rtol=0, atol=SHARD_ATOL)
    print(f"two processes vs one device: max |qpos| difference {_diff(a['qpos'], ref['qpos']):.1e}, "
          f"bitwise {np.array_equal(a['qpos'], ref['qpos'])}; timings {facts}")  # fmt: skip


def test_initialize_after_import():
    """`from mjx_lite import parallel; parallel.initialize(...)` joins a (here one-process) jax.distributed run:
    importing mjx_lite must not start JAX's backend (no module-level jax arrays)."""
    code = ("from mjx_lite import parallel; "
            f"info = parallel.initialize('127.0.0.1:{_free_port()}', num_processes=1, process_id=0); "
            "assert info['process_count'] == 1, info")  # fmt: skip
    p = subprocess.run([sys.executable, "-c", code], env=_env(1, "0"), cwd=ROOT, capture_output=True, text=True,
                       timeout=TIMEOUT_S)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]


def test_initialize_after_backend_start_says_what_to_do():
    jax.devices()  # the backend is running in this process
    with pytest.raises(RuntimeError, match="already started"):
        parallel.initialize("127.0.0.1:1", num_processes=2, process_id=0, cpu_collectives=None)


# --- argument checks (one device, nothing compiled) -------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    m = mjl.load_mjcf("pendulum")
    return m, mjl.make_data(m), parallel.make_mesh(jax.devices()[:1])


def test_make_mesh_is_1d_auto(small):
    mesh = parallel.make_mesh()
    assert mesh.axis_names == (parallel.AXIS,) and mesh.devices.size == jax.device_count()
    assert str(mesh.axis_types[0]) in ("Auto", "AxisType.Auto")
    with pytest.raises(ValueError, match="no devices"):
        parallel.make_mesh([])


def test_make_batch_builds_with_init(small):
    m, d0, mesh = small
    seen = []

    def init(index):
        seen.append(index.copy())
        return parallel.broadcast(d0, len(index)).replace(qpos=index[:, None].astype(d0.qpos.dtype))

    d = parallel.make_batch(init, 3, mesh)
    assert len(seen) == 1 and seen[0].tolist() == [0, 1, 2]
    assert d.qpos.shape == (3, 1) and np.asarray(d.qpos)[:, 0].tolist() == [0.0, 1.0, 2.0]
    assert d.qvel.shape == (3, 1) and d.qpos.sharding.spec == jax.sharding.PartitionSpec(parallel.AXIS)


def test_bad_arguments_are_named(small):
    m, d0, mesh = small
    with pytest.raises(ValueError, match="multiple of the number of devices"):
        parallel.make_batch(lambda i: parallel.broadcast(d0, len(i)), 0, mesh)
    with pytest.raises(ValueError, match="leading size 2"):
        parallel.make_batch(lambda i: parallel.broadcast(d0, 1), 2, mesh)
    with pytest.raises(ValueError, match="same leading environment axis"):
        parallel.shard({"a": np.zeros((2, 3)), "b": np.zeros((3,))}, mesh)
    with pytest.raises(ValueError, match="model_axis"):
        parallel.rollout_fn(mesh, 10, model_axis=1)
    with pytest.raises(ValueError, match="model_axis"):
        parallel.step_fn(mesh, model_axis=1)
    with pytest.raises(ValueError, match="steps"):
        parallel.rollout_fn(mesh, 0)
