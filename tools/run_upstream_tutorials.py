"""Run Triton's own tutorials, unchanged, on spyre.

    python tools/run_upstream_tutorials.py --repo PATH_TO_TRITON_GIT [--commit 6559dea9d] [--bench] [01 02 ...]

The tutorial files are read from a Triton checkout (a bare repository works: use the `fetch` of
lightseekorg/triton, the 3.7 branch point 6559dea9d) into a temporary folder and run as they are.
Without --bench, `triton.testing.perf_report` benchmarks are skipped (they sweep sizes up to 2^28
elements and plot with matplotlib); every kernel launch and correctness check of the tutorial runs.
A tutorial passes when it exits 0 and prints no "❌" (the tutorials' mismatch marker).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

PRELUDE = r"""
import runpy, sys
import triton.testing

class _SkippedBenchmark:
    def __init__(self, fn):
        self.fn = fn
    def run(self, *args, **kwargs):
        print(f"[benchmark {self.fn.__name__} skipped: run with --bench]")
    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

if not BENCH:
    triton.testing.perf_report = lambda benchmarks: (lambda fn: _SkippedBenchmark(fn))
sys.argv = [PATH]
runpy.run_path(PATH, run_name="__main__")
"""

DEFAULT = ["01", "02", "03", "04", "05"]


def tutorial_files(repo: str, commit: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", commit, "python/tutorials/"],
                         capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if ln.endswith(".py")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--repo", required=True, help="Triton git repository (bare is fine)")
    ap.add_argument("--commit", default="6559dea9d")
    ap.add_argument("--bench", action="store_true", help="also run the tutorials' benchmarks")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("which", nargs="*", default=DEFAULT, help="tutorial numbers, e.g. 01 02")
    args = ap.parse_args()
    files = [f for f in tutorial_files(args.repo, args.commit) if os.path.basename(f)[:2] in args.which]
    env = dict(os.environ, TRITON_BACKEND="spyre")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            path = os.path.join(tmp, os.path.basename(f))
            with open(path, "w") as out:
                out.write(subprocess.run(["git", "-C", args.repo, "show", f"{args.commit}:{f}"],
                                         capture_output=True, text=True, check=True).stdout)
            code = f"BENCH = {args.bench!r}\nPATH = {path!r}\n" + PRELUDE
            t = time.time()
            try:
                proc = subprocess.run([sys.executable, "-c", code], cwd=tmp, env=env, capture_output=True, text=True,
                                      timeout=args.timeout)
                ok = proc.returncode == 0 and "❌" not in proc.stdout
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
            except subprocess.TimeoutExpired:
                ok, tail = False, [f"timed out after {args.timeout} s"]
            results.append((os.path.basename(f), ok, time.time() - t))
            print(f"{'PASS' if ok else 'FAIL'}  {os.path.basename(f)}  ({time.time() - t:.1f} s)")
            for ln in tail:
                print(f"    {ln}")
    passed = sum(ok for _, ok, _ in results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
