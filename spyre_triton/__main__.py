"""Command line: `python -m spyre_triton profile [options] script.py [args...]`.

Runs the script as __main__ (sys.argv = [script.py, args...]) with every kernel launched on spyre
modelled by the Spyre performance model, then prints the per-kernel table (docs/perf-model.md).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys


def _profile(argv: list) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m spyre_triton profile",
        description="Run a Python script with every spyre kernel launch modelled on a Spyre card and print "
                    "the per-kernel profile.")
    ap.add_argument("--trace", metavar="PATH", help="write a Chrome trace (Perfetto, chrome://tracing)")
    ap.add_argument("--roofline", metavar="PATH", help="write a roofline plot (needs matplotlib)")
    ap.add_argument("--detail", action="store_true",
                    help="trace the instructions of the first programs of each launch on per-unit tracks")
    ap.add_argument("--hw", metavar="NAME=VALUE,...", default="",
                    help="override HardwareConfig fields, as SPYRE_HW does (e.g. clock_hz=1e9)")
    ap.add_argument("--top", type=int, default=None, help="show only the N most expensive kernels")
    ap.add_argument("script", help="the Python script to run")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    opts = ap.parse_args(argv)

    import spyre_triton
    from spyre_triton.perf.hardware import from_string
    hw = from_string(opts.hw, spyre_triton.get_hardware()) if opts.hw else None
    sys.argv = [opts.script] + list(opts.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(opts.script)))
    code = 0
    with spyre_triton.profile(detail=opts.detail, hw=hw) as prof:
        try:
            runpy.run_path(opts.script, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    sys.stdout.flush()
    print()
    print(prof.table(top=opts.top))
    if opts.trace:
        prof.export_chrome_trace(opts.trace)
        print(f"chrome trace: {opts.trace}")
    if opts.roofline:
        prof.roofline(opts.roofline)
        print(f"roofline: {opts.roofline}")
    return code


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv[0] == "profile":
        return _profile(argv[1:])
    print(f"unknown command {argv[0]!r}; try: python -m spyre_triton profile script.py", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
