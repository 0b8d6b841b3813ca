"""The report scripts' command line: `--help` prints the script's usage and an unknown option is an error, instead
of a run of the whole (long) benchmark."""

from __future__ import annotations

import sys


def check(doc: str, flags: tuple[str, ...] = ("--quick",), valued: tuple[str, ...] = ()) -> None:
    """Exit with the usage (`doc`) on -h/--help (status 0) or on an argument that is neither one of `flags` nor one
    of `valued` followed by its value (status 2)."""
    args, bad = sys.argv[1:], []
    i = 0
    while i < len(args):
        if args[i] in valued and i + 1 < len(args):
            i += 2
            continue
        if args[i] not in flags:
            bad.append(args[i])
        i += 1
    if not bad:
        return
    print(doc)
    if set(bad) & {"-h", "--help"}:
        sys.exit(0)
    print(f"unknown argument(s): {' '.join(bad)}", file=sys.stderr)
    sys.exit(2)


def add_saved_runs(p, json_help: str = "write the results here (rewritten after every training)") -> None:
    """The saved-runs options of a training benchmark's argparse parser `p`: --json, --from-json, --command."""
    p.add_argument("--json", default=None, help=json_help)
    p.add_argument("--from-json", nargs="+", default=None, metavar="JSON",
                   help="print the markdown of saved runs (merged) and train nothing")  # fmt: skip
    p.add_argument("--command", default=None, help="with --from-json: the command to name in the markdown")


def load_saved_runs(paths: list[str]) -> list[dict]:
    """The JSON results saved by --json, one dict per path."""
    import json  # noqa: PLC0415

    out = []
    for path in paths:
        with open(path) as f:
            out.append(json.load(f))
    return out
