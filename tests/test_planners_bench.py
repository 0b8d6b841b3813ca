"""benchmarks/planners.py's --merge: some tasks' rows of the planners table replaced, every other line kept (no
planner runs)."""

import pytest

from benchmarks import planners

ROW = ("cartpole (200 steps)", "iLQR", "28/30 (converged)", "2196.2 -> 215.7", "0.04", "yes", "35 (min 34)", "31")


def _page(rows) -> str:
    mpc = planners.table_lines(planners.MPC_HEAD, [("cartpole (300 steps)",) + ("x",) * 8])
    return "\n".join(["# Benchmarks", "", planners.HEADING, "", "`python benchmarks/planners.py` (...)", "",
                      *planners.table_lines(planners.HEAD, rows), "", "MPC in closed loop:", "", *mpc, ""])


def test_merge_replaces_only_the_tasks_rows():
    acro = [("acrobot (400 steps)", name, "30/30", "1 -> 0", "9", "no", "1", "2") for name in ("iLQR", "MPPI (256)")]
    reacher = ("reacher (150 steps)",) + ROW[1:]
    text = _page([ROW, *acro, reacher])
    new = [("acrobot (400 steps)", "iLQR", "12/30 (converged)", "1 -> 0.5", "0.5", "yes", "3", "4")]
    merged = planners.merge_rows(text, ["acrobot"], new)
    assert merged == _page([ROW, *new, reacher])  # in place of the first old row, the closed-loop table untouched
    assert planners.merge_rows(_page([ROW]), ["acrobot"], new) == _page([ROW, *new])  # appended when absent
    assert planners.merge_rows(merged, ["acrobot"], new) == merged
    with pytest.raises(ValueError, match="no planners table"):
        planners.merge_rows("# Benchmarks\n", ["acrobot"], new)


def test_merge_into_notes_the_run(tmp_path):
    path = tmp_path / "planners.md"
    path.write_text("<!-- planners: stamp -->\n" + _page([ROW]))
    new = [("acrobot (400 steps)",) + ROW[1:]]
    planners.merge_into([str(path)], ["acrobot"], new)
    planners.merge_into([str(path)], ["acrobot"], new)  # a second run replaces its note
    lines = path.read_text().split("\n")
    notes = [ln for ln in lines if ln.startswith("<!-- planners rows of acrobot:")]
    assert len(notes) == 1 and "--tasks acrobot --mpc-steps 0 --merge" in notes[0]
    assert lines[0] == "<!-- planners: stamp -->" and lines[lines.index(planners.HEADING) - 1] == notes[0]
    assert planners.merge_rows(path.read_text(), ["acrobot"], new) == path.read_text()  # the row is in
