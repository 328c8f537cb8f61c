"""Run Triton's own unit tests on spyre (and on Triton's interpreter, for reference) and summarise them.

    python tools/run_upstream_tests.py run [--mode spyre|interpreter|both] [--repo PATH] [--commit 6559dea9d]
                                           [-n 2] [--timeout 300] [-k EXPR] [--work DIR] [FILE ...]
    python tools/run_upstream_tests.py summarize [--work DIR] [--out docs/conformance]
    python tools/run_upstream_tests.py snapshot [--rev HEAD] [--dest DIR]

`snapshot` copies a commit of this repository (git archive) to --dest (default /tmp/spyre-snapshot), builds its
extensions in place and records the commit; `run --spyre-src DIR` then runs against that frozen build (prepended
to PYTHONPATH, ahead of the editable install). Use it for long runs while the working tree keeps changing: a
half-rebuilt working tree gives spurious failures (e.g. "invalid Spyre binary: ISA version").

`run` extracts `python/test` and the root `pyproject.toml` of a Triton checkout (a bare repository works: the
`fetch` of lightseekorg/triton; commit 6559dea9d is the 3.7 branch point matching the triton==3.7.1 wheel) into a
temporary folder and runs pytest there, one invocation per test file, writing one junit XML per (mode, file) into
--work (default /tmp/spyre-upstream-tests; reused between calls, so files can be run in batches and re-run).
FILE names are relative to python/test/unit (e.g. `language/test_core.py`); the default is every test file in
`language/` and `runtime/`.

  spyre:        TRITON_BACKEND=spyre       pytest --device spyre
  interpreter:  TRITON_INTERPRET=1         pytest -m interpreter --device cpu

`summarize` reads every junit XML in --work and writes to --out:
  summary.md     pass/fail/error/skip counts per file and mode, interpreter-vs-spyre comparison, failure
                 categories (root-cause rules in CATEGORIES below) with counts and examples, top skip reasons
  failures.tsv   one line per spyre failure: test id, category, exception type, first line of the message
  interpreter_failures.tsv   the same for the interpreter run

Requirements in the venv: pytest, pytest-xdist, scipy and expecttest (Triton's tests import them; expecttest
only runtime/test_cache.py), and pytest-timeout for per-test timeouts (`pip install pytest-timeout expecttest`).
Timeouts use the signal method: the spyre runtime polls for signals while a launch runs, so a hung kernel becomes
a test failure "Timeout". Without pytest-timeout the run still works, but a hung test stalls its file. Worker
crashes (segfault/abort) are restarted by xdist and reported as failures "worker 'gwN' crashed while running ..."
(category `crash`).
"""
from __future__ import annotations

import argparse
import collections
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

DEFAULT_REPO = "/work/.mirror/lightseekorg+triton/repo"
DEFAULT_COMMIT = "6559dea9d"
DEFAULT_WORK = "/tmp/spyre-upstream-tests"
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "conformance")
# The interpreter reference (issue 4) is over these files.
REFERENCE_FILES = ["language/test_core.py", "language/test_standard.py", "language/test_random.py",
                   "language/test_block_pointer.py", "language/test_tuple.py"]

# Root-cause rules, first match wins: (category, regex). A rule is matched against "[test id]", then
# "ExceptionType: first line of the message", then the failure's "E   " lines (the exception and pytest's assertion details), never against the
# traceback's source lines. A named group `detail` is appended to the category ("unsupported op: tt.sort").
# A category names what a compiler/runtime owner would fix; keep them few and actionable.
CATEGORIES: list[tuple[str, str]] = [
    ("crash (worker died)", r"worker '\w+' crashed|Fatal Python error|Segmentation fault|core dumped|Aborted"),
    ("timeout (per-test limit)", r"Timeout \(>[\d.]+s\) from pytest-timeout|Failed: Timeout"),
    ("device_print output differs from the GPU format (per-thread scalar lines, 2-D idx)",
     r"^\[language/test_subprocess\.py::test_print\["),
    ("launcher: arguments not flattened (tuple / TensorDescriptor / None)",
     r"takes \d+ arguments, got \d+|'torch\.Size' object cannot be interpreted|'tuple' object cannot be interpreted|"
     r"TensorDescriptor"),
    ("test writes out of bounds (`X + 3` on a 1-element tensor: a GPU ignores it, spyre's bounds check reports it)",
     r"^\[language/test_annotations\.py::test_int_annotation\["),
    ("scaled dot: one element of 4096 differs from the reference by f32 summation order (cancellation)",
     r"^\[language/test_core\.py::test_scaled_dot\[.*(?s:.*)Mismatched elements: 1 / 4096"),
    ("compiler emits a binary the loader rejects", r"invalid Spyre binary"),
    ("dot input_precision not allowed", r"input_precision must be one of .* Got (?P<detail>\w+)"),
    ("fp8 type not in supported_fp8_dtypes (tests expect CUDA's set)",
     r"type (?P<detail>fp8\w+) not supported in this architecture"),
    ("host memory pointer passed to a kernel (GPU: pinned memory / UVA)", r"is on device 'cpu', not on spyre"),
    ("unsupported op", r"the op (?P<detail>[\w.]+) is not supported by the Spyre backend"),
    ("backend option missing", r"'SpyreOptions' object has no attribute '(?P<detail>\w+)'|"
                               r"Keyword argument (?P<detail2>\w+) was specified but unrecognised"),
    ("libdevice function missing", r"module 'spyre_triton\.libdevice' has no attribute '(?P<detail>\w+)'"),
    ("LX scratchpad budget exceeded", r"LX|scratchpad|live tiles"),
    ("test needs CUDA/HIP (torch.cuda, ttgir/ptx stages, GPU expectations)",
     r"Torch not compiled with CUDA|compiled without CUDA|torch\.cuda|get_device_capability|make_ttgir|"
     r"Unknown key: '(ttgir|llir|ptx|amdgcn|cubin|hsaco)'|\bptx\b|cubin|amdgcn|DID NOT RAISE"),
    ("device fault (out of bounds / misaligned)", r"DeviceError: (?P<detail>out-of-bounds|misaligned|[\w -]{0,30})"),
    ("not supported on spyre (other)", r"not supported (on|by) (the )?[Ss]pyre|NotImplementedError"),
    ("compile error", r"CompilationError|MLIRError|PassManager"),
    ("torch device op missing", r"from the 'PrivateUse1'|from the 'spyre'|aten::"),
    ("wrong result", r"^(AssertionError|Failed|ValueError: \d+ elements mismatch)|Mismatch|not close|Arrays are not|"
                     r"assert_close|allclose|array_equal"),
    ("other", r"^(?P<detail>\w+)"),
]


def test_files(repo: str, commit: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", commit, "python/test/unit/language/",
                          "python/test/unit/runtime/"], capture_output=True, text=True, check=True).stdout
    return [p[len("python/test/unit/"):] for p in out.splitlines()
            if os.path.basename(p).startswith("test_") and p.endswith(".py")]


def extract(repo: str, commit: str, dest: str) -> None:
    archive = subprocess.run(["git", "-C", repo, "archive", commit, "python/test", "pyproject.toml"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)


def junit_path(work: str, mode: str, file: str) -> str:
    return os.path.join(work, f"junit-{mode}-{file.replace('/', '__')}.xml")


def snapshot(args) -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rev = subprocess.run(["git", "-C", here, "rev-parse", args.rev], capture_output=True, text=True,
                         check=True).stdout.strip()
    if os.path.exists(args.dest):
        subprocess.run(["rm", "-rf", args.dest], check=True)
    os.makedirs(args.dest)
    archive = subprocess.run(["git", "-C", here, "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", args.dest], input=archive, check=True)
    # setup.py maps the package spyre_triton.backend to backend/: mirror that so a plain path import finds it
    os.symlink(os.path.join(args.dest, "backend"), os.path.join(args.dest, "spyre_triton", "backend"))
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=args.dest, check=True)
    with open(os.path.join(args.dest, "SNAPSHOT_COMMIT"), "w") as f:
        f.write(rev + "\n")
    print(f"snapshot of {rev} built in {args.dest}; use: run --spyre-src {args.dest}")
    return 0


def run(args) -> int:
    files = args.files or test_files(args.repo, args.commit)
    modes = ["spyre", "interpreter"] if args.mode == "both" else [args.mode]
    have_timeout = importlib.util.find_spec("pytest_timeout") is not None
    if not have_timeout:
        print("warning: pytest-timeout not installed: no per-test timeouts", file=sys.stderr)
    os.makedirs(args.work, exist_ok=True)
    status = 0
    with tempfile.TemporaryDirectory(prefix="triton-tests-") as tmp:
        extract(args.repo, args.commit, tmp)
        for mode in modes:
            env = dict(os.environ)
            env.pop("TRITON_INTERPRET", None)
            if args.spyre_src:
                env["PYTHONPATH"] = os.path.abspath(args.spyre_src) + os.pathsep + env.get("PYTHONPATH", "")
            if mode == "spyre":
                env["TRITON_BACKEND"] = "spyre"
                extra = ["--device", "spyre"]
            else:
                env.pop("TRITON_BACKEND", None)
                env["TRITON_INTERPRET"] = "1"
                extra = ["-m", "interpreter", "--device", "cpu"]
            for f in files:
                xml = junit_path(args.work, mode, f)
                log = xml[:-4] + ".log"
                cmd = [sys.executable, "-m", "pytest", f"python/test/unit/{f}", *extra, "-q", "-rN", "-p",
                       "no:cacheprovider", f"--junitxml={xml}", "-o", "junit_logging=no",
                       "--confcutdir=python/test"]
                if args.n > 0:
                    cmd += ["-n", str(args.n), "--max-worker-restart=100000"]
                if have_timeout and args.timeout > 0:
                    cmd += [f"--timeout={args.timeout}", "--timeout-method=signal"]
                if args.k:
                    cmd += ["-k", args.k]
                t = time.time()
                print(f"[{mode}] {f} ...", flush=True)
                with open(xml[:-4] + ".meta", "w") as mf:
                    mf.write(f"spyre_commit={spyre_commit(args.spyre_src)}\ntriton_commit={args.commit}\n"
                             f"started={time.strftime('%Y-%m-%d %H:%M:%S')}\ncmd={' '.join(cmd)}\n")
                with open(log, "w") as lf:
                    lf.write(" ".join(cmd) + "\n")
                    lf.flush()
                    proc = subprocess.run(cmd, cwd=tmp, env=env, stdout=lf, stderr=subprocess.STDOUT)
                dt = time.time() - t
                with open(log) as lf:
                    tail = [ln.rstrip() for ln in lf if ln.strip()][-1:]
                with open(xml[:-4] + ".time", "w") as tf:
                    tf.write(f"{dt:.1f}\n")
                print(f"[{mode}] {f}: {tail[0] if tail else '?'} (exit {proc.returncode}, {dt:.0f} s)", flush=True)
                # pytest: 0 all passed, 1 some failed, 5 nothing collected (e.g. -m interpreter deselected all)
                if proc.returncode not in (0, 1, 5):
                    status = 1
    return status


def spyre_commit(src: str | None) -> str:
    if src:
        p = os.path.join(src, "SNAPSHOT_COMMIT")
        return open(p).read().strip() if os.path.exists(p) else src
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rev = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return rev + ("+dirty-working-tree" if dirty else "")


def categorize(text: str) -> str:
    for name, rx in CATEGORIES:
        m = re.search(rx, text, re.M)
        if m:
            d = m.groupdict().get("detail") or m.groupdict().get("detail2")
            return f"{name}: {d.strip()}" if d else name
    return "other"


def exc_type_and_line(message: str, body: str) -> tuple[str, str]:
    msg = (message or "").strip()
    m = re.match(r"((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Failed|Interrupt|Exit|Warning|Fault|Skipped)):\s*(.*)",
                 msg, re.S)
    if m:
        etype, rest = m.group(1), m.group(2)
    elif "crashed while running" in msg:
        etype, rest = "WorkerCrash", msg
    elif msg.startswith("assert "):
        etype, rest = "AssertionError", msg
    else:
        # pytest puts "E   SomeError: ..." lines in the body
        em = re.search(r"^E\s+([A-Za-z_][\w.]*(?:Error|Exception)):?\s*(.*)$", body or "", re.M)
        etype, rest = (em.group(1), em.group(2)) if em else ("", msg)
    first = next((ln.strip() for ln in rest.splitlines() if ln.strip()), "")
    if re.match(r"at \d+:\d+:$", first):
        # Triton's CompilationError: source excerpt, then the cause on the last line
        elines = [ln[1:].strip() for ln in (body or "").splitlines() if ln.startswith("E ") and ln[1:].strip()]
        if elines:
            first = f"{first} {elines[-1]}"
    first = re.sub(r"0x[0-9a-fA-F]{8,}", "0x…", first)  # heap addresses change from run to run
    return etype.split(".")[-1], first[:300].replace("\t", " ")


durations: dict = {}  # (mode, test id) -> seconds, filled by parse()


def parse(work: str) -> dict:
    """{mode: {file: {test_id: (outcome, etype, line, category, skip_reason)}}}"""
    res: dict = collections.defaultdict(dict)
    durations.clear()
    for xml in sorted(glob.glob(os.path.join(work, "junit-*.xml"))):
        base = os.path.basename(xml)[len("junit-"):-len(".xml")]
        mode, f = base.split("-", 1)
        f = f.replace("__", "/")
        module = "python.test.unit." + f[:-3].replace("/", ".")
        tests = {}
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError:
            continue
        for tc in root.iter("testcase"):
            cls = tc.get("classname", "")
            name = tc.get("name", "")
            sub = cls[len(module) + 1:] if cls.startswith(module + ".") else ""
            tid = f"{f}::{sub + '::' if sub else ''}{name}"
            if not cls and name == module:
                tid = f"{f}::<collection>"  # the file failed to import or collect
            durations[(mode, tid)] = float(tc.get("time") or 0.0)
            fail = tc.find("failure")
            err = tc.find("error")
            skip = tc.find("skipped")
            if fail is not None or err is not None:
                el = fail if fail is not None else err
                body = el.text or ""
                etype, line = exc_type_and_line(el.get("message", ""), body)
                elines = "\n".join(ln[1:].strip() for ln in body.splitlines() if ln.startswith("E "))
                cat = categorize(f"[{tid}]\n{etype}: {line}\n{elines[-4000:]}")
                outcome = "failed" if fail is not None else "error"
                if err is not None and fail is None and tid in tests and tests[tid][0] == "passed":
                    outcome = "error"  # teardown error after a pass
                tests[tid] = (outcome, etype, line, cat, "")
            elif skip is not None:
                reason = (skip.get("message") or "").strip().splitlines()
                tests[tid] = ("skipped", "", "", "", reason[0][:200] if reason else "")
            else:
                tests.setdefault(tid, ("passed", "", "", "", ""))
        res[mode][f] = tests
    return res


def summarize(args) -> int:
    res = parse(args.work)
    if not res:
        print(f"no junit XML in {args.work}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    outcomes = ["passed", "failed", "error", "skipped"]
    lines = ["# Triton's unit tests on spyre: results", "",
             f"Generated by `python tools/run_upstream_tests.py summarize` on {time.strftime('%Y-%m-%d')} "
             f"from Triton {DEFAULT_COMMIT} (python/test/unit). See docs/conformance.md for the command and "
             "the triage.", ""]
    for mode in sorted(res, reverse=True):
        if mode != "spyre":
            continue  # the interpreter run does not use this package
        metas = collections.Counter()
        for m in glob.glob(os.path.join(args.work, f"junit-{mode}-*.meta")):
            kv = dict(ln.split("=", 1) for ln in open(m).read().splitlines() if "=" in ln)
            metas[kv.get("spyre_commit", "?")] += 1
        if metas:
            lines.append(f"- {mode} run: spyre-triton build " +
                         ", ".join(f"`{c}` ({n} files)" for c, n in metas.most_common()))
    lines.append("")
    for mode in sorted(res, reverse=True):
        lines += [f"## {mode}", "", "| file | passed | failed | error | skipped | total | time (s) |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        tot = collections.Counter()
        for f in sorted(res[mode]):
            c = collections.Counter(v[0] for v in res[mode][f].values())
            tpath = junit_path(args.work, mode, f)[:-4] + ".time"
            secs = float(open(tpath).read()) if os.path.exists(tpath) else 0.0
            tot.update(c)
            tot["time"] += secs
            lines.append(f"| {f} | " + " | ".join(str(c[o]) for o in outcomes) + f" | {sum(c.values())} | "
                         f"{secs:.0f} |")
        lines.append("| **total** | " + " | ".join(f"**{tot[o]}**" for o in outcomes) +
                     f" | **{sum(tot[o] for o in outcomes)}** | {tot['time']:.0f} |")
        lines.append("")
    if "spyre" in res and "interpreter" in res:
        lines += ["## spyre vs Triton's interpreter", "",
                  "Over tests the interpreter passes (`-m interpreter --device cpu`), how spyre does:", "",
                  "| files | interpreter passed | spyre passed | spyre failed/error | spyre skipped | not run on spyre | "
                  "share |", "|---|---:|---:|---:|---:|---:|---:|"]
        groups = [("reference five (" + ", ".join(os.path.basename(f) for f in REFERENCE_FILES) + ")",
                   [f for f in REFERENCE_FILES]),
                  ("all files run in both modes", sorted(set(res["spyre"]) & set(res["interpreter"])))]
        for label, fs in groups:
            fs = [f for f in fs if f in res["spyre"] and f in res["interpreter"]]
            ip = [t for f in fs for t, v in res["interpreter"][f].items() if v[0] == "passed"]
            sp = {t: v[0] for f in fs for t, v in res["spyre"][f].items()}
            c = collections.Counter(sp.get(t, "missing") for t in ip)
            share = 100.0 * c["passed"] / len(ip) if ip else 0.0
            lines.append(f"| {label} | {len(ip)} | {c['passed']} | {c['failed'] + c['error']} | {c['skipped']} | "
                         f"{c['missing']} | {share:.1f}% |")
        sp_pass = sum(v[0] == "passed" for f in res["spyre"] for v in res["spyre"][f].values())
        beyond = sum(1 for f in res["spyre"] for t, v in res["spyre"][f].items()
                     if v[0] == "passed" and res["interpreter"].get(f, {}).get(t, ("",))[0] != "passed")
        lines += ["", f"spyre passes {sp_pass} tests in all; {beyond} of them are not passed by the interpreter "
                  "(deselected by `-m interpreter`, skipped, or failing there).", ""]
    for mode, fname in (("spyre", "failures.tsv"), ("interpreter", "interpreter_failures.tsv")):
        if mode not in res:
            continue
        fails = sorted((t, v) for f in res[mode] for t, v in res[mode][f].items() if v[0] in ("failed", "error"))
        with open(os.path.join(args.out, fname), "w") as out:
            out.write("test_id\tcategory\texception\tmessage\n")
            for t, v in fails:
                out.write(f"{t}\t{v[3]}\t{v[1]}\t{v[2]}\n")
        if mode != "spyre":
            continue
        cats = collections.defaultdict(list)
        for t, v in fails:
            cats[v[3]].append((t, v))
        lines += ["## spyre failures by category", "",
                  f"{len(fails)} failures/errors; rules in `CATEGORIES` of tools/run_upstream_tests.py; "
                  "full list in failures.tsv.", "",
                  "| category | count | by test function (top 6) | example | message |", "|---|---:|---|---|---|"]
        for cat, items in sorted(cats.items(), key=lambda kv: -len(kv[1])):
            fn = collections.Counter(re.sub(r"\[.*", "", t.split("::")[-1]) for t, _ in items)
            t0, v0 = items[0]
            lines.append(f"| {cat} | {len(items)} | " + ", ".join(f"{k} {n}" for k, n in fn.most_common(6)) +
                         f" | `{t0}` | {md(v0[1] + ': ' + v0[2])} |")
        lines += ["", "### most frequent messages (numbers and ids masked)", "", "| count | category | message |",
                  "|---:|---|---|"]
        msgs = collections.Counter((v[3], mask(f"{v[1]}: {v[2]}")) for _, v in fails)
        for (cat, m), n in msgs.most_common(args.top):
            lines.append(f"| {n} | {cat} | {md(m)} |")
        lines.append("")
        skips = collections.Counter(mask(v[4]) for f in res[mode] for v in res[mode][f].values() if v[0] == "skipped")
        lines += ["## spyre skip reasons (top)", "", "| count | reason |", "|---:|---|"]
        for r, n in skips.most_common(15):
            lines.append(f"| {n} | {md(r)} |")
        lines.append("")
    slow = sorted(((d, t) for (m, t), d in durations.items() if m == "spyre"), reverse=True)[:15]
    if slow:
        lines += ["## slowest spyre tests", "", "| seconds | test | outcome |", "|---:|---|---|"]
        for d, t in slow:
            f = t.split("::")[0]
            lines.append(f"| {d:.0f} | `{t}` | {res['spyre'].get(f, {}).get(t, ('?',))[0]} |")
        lines.append("")
    with open(os.path.join(args.out, "summary.md"), "w") as out:
        out.write("\n".join(lines))
    print("\n".join(lines))
    return 0


def mask(s: str) -> str:
    s = re.sub(r"0x[0-9a-fA-F]+", "0x…", s)
    s = re.sub(r"\[[^\]]{0,200}\]", "[…]", s)
    s = re.sub(r"(?<![A-Za-z_])-?\d+(\.\d+)?(e[-+]?\d+)?", "N", s)
    return s[:200]


def md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")[:220]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the tests, write junit XML into --work")
    r.add_argument("--repo", default=DEFAULT_REPO, help="Triton git repository (bare is fine)")
    r.add_argument("--commit", default=DEFAULT_COMMIT)
    r.add_argument("--mode", choices=["spyre", "interpreter", "both"], default="spyre")
    r.add_argument("-n", type=int, default=2, help="pytest-xdist workers (0: no xdist)")
    r.add_argument("--timeout", type=int, default=300, help="per-test timeout in seconds (pytest-timeout)")
    r.add_argument("-k", default=None, help="pytest -k expression")
    r.add_argument("--work", default=DEFAULT_WORK)
    r.add_argument("--spyre-src", default=None, help="a `snapshot` directory to run instead of the installed package")
    r.add_argument("files", nargs="*", help="files under python/test/unit, e.g. language/test_core.py")
    s = sub.add_parser("summarize", help="write summary.md and failures.tsv from the junit XML in --work")
    s.add_argument("--work", default=DEFAULT_WORK)
    s.add_argument("--out", default=DEFAULT_OUT)
    s.add_argument("--top", type=int, default=40, help="rows of the most-frequent-message table")
    p = sub.add_parser("snapshot", help="copy and build a commit of this repository for a frozen run")
    p.add_argument("--rev", default="HEAD")
    p.add_argument("--dest", default="/tmp/spyre-snapshot")
    args = ap.parse_args()
    return {"run": run, "summarize": summarize, "snapshot": snapshot}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
