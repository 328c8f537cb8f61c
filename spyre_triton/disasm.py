"""Disassemble Spyre binaries.

    python -m spyre_triton.disasm kernel.spyrebin [...]   # files Triton's cache holds
    python -m spyre_triton.disasm --cache NAME             # cached kernels (Triton's and Inductor's caches)
                                                           # whose name contains NAME
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

from .asm import Program


def disassemble(raw: bytes) -> str:
    return Program.decode(raw).to_asm()


def _cache_dirs() -> list:
    """Triton's cache, and Inductor's (which keeps its own Triton cache)."""
    from triton import knobs
    dirs = [knobs.cache.dir]
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        dirs.append(os.path.join(cache_dir(), "triton"))
    except ImportError:
        pass
    return dirs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spyre_triton.disasm", description=__doc__.strip().splitlines()[0])
    ap.add_argument("files", nargs="*", help=".spyrebin files")
    ap.add_argument("--cache", metavar="NAME", help="disassemble cached kernels whose name contains NAME")
    args = ap.parse_args(argv)
    files = list(args.files)
    if args.cache is not None:
        for d in _cache_dirs():
            files += sorted(glob.glob(os.path.join(d, "**", f"*{args.cache}*.spyrebin"), recursive=True))
    if not files:
        ap.error("no binaries given or found")
    status = 0
    for path in files:
        try:
            with open(path, "rb") as f:
                text = disassemble(f.read())
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            status = 1
            continue
        if len(files) > 1:
            print(f"; {path}")
        sys.stdout.write(text)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # piped into head
        sys.stderr.close()
        sys.exit(0)
