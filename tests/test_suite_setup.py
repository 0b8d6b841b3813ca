"""The test suite's own setup: under `make test` (pytest-xdist, `--dist loadgroup`) a file's tests run on one worker,
so that its module-scoped fixtures compile once (tests/conftest.py)."""

import pytest


def test_loadgroup_keeps_a_file_on_one_worker(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker of --dist loadgroup")
    # xdist schedules by the group it appends to the node id; without it (a pytest that ignores the rewritten id, or
    # the marks added after xdist read them) the file's tests are spread over the workers
    assert request.node.nodeid.endswith("@test_suite_setup.py"), request.node.nodeid
