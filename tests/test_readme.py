"""Every Python snippet of the README runs as written, from outside the repository (a fresh process in a
temporary directory, so bundled models must load by name and nothing depends on the working directory). The
snippets import the mjx_lite of this checkout (its root on PYTHONPATH, as an editable install puts it), so a
worktree tests its own README against its own code."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
SNIPPETS = re.findall(r"```python\n(.*?)```", open(README).read(), re.S)


def test_readme_has_snippets():
    assert len(SNIPPETS) >= 1


@pytest.mark.parametrize("i", range(len(SNIPPETS)))
def test_readme_snippet_runs(i, tmp_path):
    script = tmp_path / f"snippet_{i}.py"
    script.write_text(SNIPPETS[i])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = ROOT
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, f"README snippet {i} failed:\n{SNIPPETS[i]}\n--- stderr ---\n{out.stderr[-3000:]}"
