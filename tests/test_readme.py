"""Every Python snippet of the README runs, from outside the repository (a fresh process in a temporary directory,
so bundled models must load by name and nothing depends on the working directory). The snippets import the
mjx_lite of this checkout (its root on PYTHONPATH, as an editable install puts it), so a worktree tests its own
README against its own code.

The snippets run as written except for their sizes, shrunk as the notebooks' MJX_LITE_SMALL mode shrinks theirs
(SMALL below: batch sizes, rollout lengths, image sizes; the same code paths at a fraction of the run time), and
all in one interpreter (one start of Python, JAX and mjx_lite instead of one per snippet), each in a fresh
namespace of its own, so that a snippet still fails on a name it does not define or import itself."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.test_notebooks import FAST_COMPILE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
SNIPPETS = re.findall(r"```python\n(.*?)```", open(README).read(), re.S)

# (pattern, replacement) applied to every snippet: the README's 1024 and 256 environments, 200-step rollouts and
# 240 x 320 picture become 8 environments, 20 steps and 24 x 32 pixels (a smoke test: compile quickly, run little)
SMALL = ((r"\b1024\b", "8"), (r"\b256\b", "8"), (r"\b200\b", "20"), (r"height=240, width=320", "height=24, width=32"))

RUNNER = """
import json, sys, traceback
results = {}
for i, path in enumerate(sys.argv[2:]):
    try:
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), {"__name__": "__main__", "__file__": path})
        results[i] = None
    except BaseException:  # SystemExit included: a snippet that exits has failed
        results[i] = traceback.format_exc()
with open(sys.argv[1], "w") as f:
    json.dump(results, f)
"""


def small(snippet: str) -> str:
    for pattern, replacement in SMALL:
        snippet = re.sub(pattern, replacement, snippet)
    return snippet


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """{snippet index: None (ran) or its traceback}, from one fresh interpreter in a temporary directory."""
    tmp = tmp_path_factory.mktemp("readme")
    paths = []
    for i, snippet in enumerate(SNIPPETS):
        paths.append(tmp / f"snippet_{i}.py")
        paths[-1].write_text(small(snippet))
    (tmp / "runner.py").write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = ROOT
    env["JAX_PLATFORMS"] = "cpu"
    # compile quickly rather than run fast, as the notebooks' small mode (measured: 86 -> 68 CPU s for the runner)
    env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), *FAST_COMPILE]).strip()
    out = subprocess.run([sys.executable, str(tmp / "runner.py"), str(tmp / "results.json"), *map(str, paths)],
                         cwd=tmp, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, f"the README runner failed:\n--- stderr ---\n{out.stderr[-3000:]}"
    return {int(k): v for k, v in json.loads((tmp / "results.json").read_text()).items()}


def test_readme_has_snippets():
    assert len(SNIPPETS) >= 1


def test_small_sizes_apply():
    """The shrinking changes the first snippet (the README's big batch) and nothing but numbers and sizes."""
    assert small(SNIPPETS[0]) != SNIPPETS[0]
    for snippet in SNIPPETS:
        assert re.sub(r"\d+", "0", small(snippet)) == re.sub(r"\d+", "0", snippet)


@pytest.mark.parametrize("i", range(len(SNIPPETS)))
def test_readme_snippet_runs(i, outcomes):
    assert outcomes[i] is None, f"README snippet {i} failed:\n{SNIPPETS[i]}\n--- traceback ---\n{outcomes[i][-3000:]}"
