"""The persistent compilation cache is on by default, goes where MJX_LITE_COMPILATION_CACHE says, and is off
with MJX_LITE_COMPILATION_CACHE=0 (fresh processes: the setting is read on import)."""

import os
import subprocess
import sys

SCRIPT = """
import jax, jax.numpy as jp
import mjx_lite as mjl
print("DIR", mjl.compilation_cache_dir())
jax.jit(lambda x: jp.sin(x) * 2)(jp.ones(3)).block_until_ready()
"""


def _run(tmp_path, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "MJX_LITE_COMPILATION_CACHE")}
    e.update(JAX_PLATFORMS="cpu", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    e.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=e, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("DIR ", 1)[1].split()[0]


def test_cache_on_by_default(tmp_path):
    where = _run(tmp_path)
    assert where == str(tmp_path / "xdg" / "mjx_lite" / "jax")
    assert os.listdir(where), "nothing was written to the cache"


def test_cache_directory_and_off_switch(tmp_path):
    chosen = tmp_path / "mine"
    assert _run(tmp_path, MJX_LITE_COMPILATION_CACHE=str(chosen)) == str(chosen) and os.listdir(chosen)
    assert _run(tmp_path, MJX_LITE_COMPILATION_CACHE="0") == "None"
    assert not (tmp_path / "xdg").exists()
