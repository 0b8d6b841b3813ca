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
