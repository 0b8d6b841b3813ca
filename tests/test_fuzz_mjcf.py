"""Differential fuzzing of the MJCF loader against MuJoCo (tests/mjcf_fuzz.py has the mutations and the rules).

- test_fuzz_fast: a fixed-seed slice (FAST_SEEDS cases on the small reference models), in CI.
- test_fuzz_long (slow): LONG_CASES cases on all the reference models; prints the counts per mutation kind and
  outcome. Run it with:  pytest tests/test_fuzz_mjcf.py -m slow -s   (MJCF_FUZZ_CASES / MJCF_FUZZ_START change
  the number of cases and the first seed).
A case fails on a crash (an exception that is not an MJCFError), a hang, a model MuJoCo rejects and we accept, a
model MuJoCo accepts and we reject (unless the feature is a documented unsupported one), or compiled fields that
differ. The cases that found bugs are kept as plain regression tests in test_mjcf_faults.py.
"""

from __future__ import annotations

import collections
import os

import pytest

from tests import mjcf_fuzz as fz

FAST_SEEDS = range(0, 300)  # ~0.1 s a case on the small models: 300 cases in 25-40 s on a loaded 2-core machine
# the first FAST_DEFAULT of them run by default (CI time; 150 -> 100 at the 2026-12-01 cut, ~2.7 worker-s), the rest
# with -m slow (more of the same random sample of mutations on the same small models; test_fuzz_long samples 5000 on
# all of them)
FAST_DEFAULT = 100
LONG_CASES = int(os.environ.get("MJCF_FUZZ_CASES", "5000"))
LONG_START = int(os.environ.get("MJCF_FUZZ_START", "100000"))
FAST_TIMEOUT = 30.0  # s per case: a small model loads in well under a second, so this is a hang
LONG_TIMEOUT = 120.0  # s per case: the largest models compile their qpos0 constants with XLA


@pytest.fixture(scope="module")
def runner():
    r = fz.Runner(timeout=FAST_TIMEOUT)
    yield r
    r.close()


@pytest.mark.parametrize("seed", [s if s < FAST_DEFAULT else pytest.param(s, marks=pytest.mark.slow)
                                  for s in FAST_SEEDS])  # fmt: skip
def test_fuzz_fast(runner, seed):
    case = fz.make_case(seed, fz.FAST_BASES)
    result = runner.run(case)
    assert result.outcome not in fz.FAILURES, f"{result.outcome}: {case.title()}\n{result.detail}"


# Seeds of the long run (on ALL_BASES) whose cases found bugs, kept as regressions (the bugs themselves, reduced, are
# plain cases in test_mjcf_faults.py): mesh/texcoord/normal checks, unnamed materials, childclass="", orientation
# alternatives with huge or repeated values, fromto overriding alternatives, empty orientation attributes, sdf
# sites, nan sizes, NaN geom masses, sensor cutoff on quaternions, a tendon actuator without joints (crash), frame
# attributes, fixed-tendon armature and simple bodies, empty ReadAttrInt values, muscle shortcut values, the ipc
# flag, light type/directional, a singular inertia from actuator armature (crash), and runtime or round-off
# differences now documented in mjcf_fuzz.compare.
FOUND_BUGS = (100163, 100258, 100749, 101092, 101216, 101234, 101532, 101615, 101705, 101851, 102227, 102750,
              102866, 102974, 103157, 103580, 103634, 104141, 104229, 104361, 104903,
              200487, 201001, 201541, 201804, 202364, 202973, 203288, 203746)  # fmt: skip


@pytest.mark.parametrize("seed", FOUND_BUGS)
def test_fuzz_found_bugs(runner, seed):
    case = fz.make_case(seed, fz.ALL_BASES)
    result = runner.run(case)
    assert result.outcome not in fz.FAILURES, f"{result.outcome}: {case.title()}\n{result.detail}"


@pytest.mark.slow
def test_fuzz_long():
    runner = fz.Runner(timeout=LONG_TIMEOUT)
    results, failures = [], []
    try:
        for i, seed in enumerate(range(LONG_START, LONG_START + LONG_CASES)):
            case = fz.make_case(seed, fz.ALL_BASES)
            r = runner.run(case)
            results.append(r)
            if r.outcome in fz.FAILURES:
                failures.append(f"[{r.outcome}] {case.title()}\n    {r.detail}")
            if (i + 1) % 500 == 0:
                fz.clear_caches()  # compiled qpos0 stages of thousands of distinct models
    finally:
        runner.close()
    table = fz.format_counts(fz.counts(results))
    allowed = collections.Counter(r.detail.split(":")[0] for r in results if r.outcome == "allowed_reject")
    print(f"\n{len(results)} cases from seed {LONG_START}\n{table}\nallowed rejections: {dict(allowed)}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:30])
