"""PyTorch's own device-generic test files, unchanged, on spyre and on the CPU device: the scoreboard.

    python tools/run_torch_upstream.py run --tests DIR [--files test_view_ops.py,...]
                                           [--device spyre|cpu|both] [--timeout 120] [--file-timeout 3600]
                                           [-k EXPR] [--no-compat]
                                           [--out docs/conformance] [--xml-dir /tmp/torch-upstream-junit]
    python tools/run_torch_upstream.py summarize [--out docs/conformance]

The test files are not part of this repository. Take them from PyTorch's repository at the tag that matches
the installed wheel (v2.13.0 for torch 2.13.0): `test/test_view_ops.py`, `test/test_binary_ufuncs.py`,
`test/test_reductions.py`, `test/test_ops.py`, copied unchanged into DIR. They import only
torch.testing._internal, which the wheel ships.

Each file runs in its own pytest process, in DIR, once per device. PyTorch's device-type machinery
(torch.testing._internal.common_device_type) instantiates one class per device type; the run keeps one:
  spyre  PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1 (spyre is the PrivateUse1 backend; the wheel's
         `torch.backends` entry point registers it when torch is imported, so PrivateUse1TestBase is there)
  cpu    PYTORCH_TESTING_DEVICE_ONLY_FOR=cpu
pytest gets `--timeout T` (pytest-timeout, per test) and writes junit XML into --xml-dir. This module is
also loaded into that pytest as a plugin (`-p run_torch_upstream`): it records the test that is running, so
when the process dies (segfault, abort) that test is marked `crash` and the file runs again without it (a
dead process writes no junit report). A file that outlives --file-timeout is stopped with SIGINT, which
keeps the report of what ran; the running test is marked `timeout` and the rest of the file does not run
(the summary's test count shows the shortfall).

`run` writes docs/conformance/torch-upstream-<file>-<device>.csv (test id, outcome, reason) and then
`summarize`: docs/conformance/torch-upstream-summary.md, the counts per file and device, every spyre
test that does not pass with the CPU device's outcome on the same test, the CPU device's own failures
(a test file from another PyTorch version than the wheel shows up there) and the skip reasons.
Outcomes: pass, fail, error, skip, xfail, xpass, timeout (pytest-timeout or --file-timeout), crash.

Version gap. The copies of the test files that can be had may come from another PyTorch commit than the
wheel, and import a name of torch.testing._internal that the wheel spells elsewhere. The plugin then adds
the wheel's own object under the old name (COMPAT_ALIASES) before the file is imported, and only when the
name is missing, so a file of the wheel's own version sees no change; the test files stay unchanged.
Each alias it adds is printed and written to <xml-dir>/<file>-<device>.aliases; --no-compat turns it off.
-k EXPR selects tests as pytest's -k does (for test_ops.py, whose full run takes many hours); the rows of a
-k run replace those of the same tests in the file's CSV, and the CSV keeps its other rows.
"""
from __future__ import annotations

import argparse
import csv
import glob
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "docs", "conformance")
DEFAULT_XML = "/tmp/torch-upstream-junit"
DEFAULT_FILES = ("test_view_ops.py", "test_binary_ufuncs.py", "test_reductions.py", "test_ops.py")
ONLY_FOR = {"spyre": "privateuse1", "cpu": "cpu"}
OUTCOMES = ("pass", "fail", "error", "skip", "xfail", "xpass", "timeout", "crash")
FIELDS = ("test", "outcome", "reason")
REASON_CHARS = 240

# Environment variables through which the runner talks to the plugin half of this module.
_PROGRESS_ENV = "SPYRE_UPSTREAM_PROGRESS"   # file the plugin appends "start <nodeid>" / "done <nodeid>" to
_DESELECT_ENV = "SPYRE_UPSTREAM_DESELECT"   # file of node ids the plugin removes from the collection
_COMPAT_ENV = "SPYRE_UPSTREAM_COMPAT"       # file the plugin lists the aliases it added in ("" = no aliases)


def _binary_ufuncs_and_refs(cmi):
    # the old name for the BinaryUfuncInfos of op_db + python_ref_db, which the wheel's binary_ufuncs is
    return tuple(cmi.binary_ufuncs)


def _from_common_device_type(name):
    def get(_cmi):
        from torch.testing._internal import common_device_type
        return getattr(common_device_type, name)
    return get


def _skip_ops_by_name(_cmi):
    """The old skipOps(test_case_name, base_test_name, to_skip), which named the test it decorates, over the
    wheel's skipOps(to_skip), which reads the same two names from the decorated function's __qualname__."""
    from torch.testing._internal.common_device_type import skipOps

    def old_skip_ops(test_case_name, base_test_name, to_skip):
        def wrapped(fn):
            if fn.__qualname__.split(".")[-2:] != [test_case_name, base_test_name]:
                raise ValueError(f"run_torch_upstream: skipOps({test_case_name!r}, {base_test_name!r}, ...) "
                                 f"decorates {fn.__qualname__}; the compatibility alias handles only its own test")
            return skipOps(to_skip)(fn)
        return wrapped
    return old_skip_ops


# (module, old name) -> the wheel's object under that name. Each entry is a rename or a move between two
# PyTorch versions (skipOps: the same decoration, called with the names the new one reads itself), never a
# behaviour of its own.
COMPAT_ALIASES = {
    # test_binary_ufuncs.py before torch merged the refs into binary_ufuncs
    ("torch.testing._internal.common_methods_invocations", "binary_ufuncs_and_refs"): _binary_ufuncs_and_refs,
    # test_ops.py from before the OpInfo skip/xfail helpers moved to common_device_type
    ("torch.testing._internal.common_methods_invocations", "xfail"): _from_common_device_type("xfail"),
    ("torch.testing._internal.common_methods_invocations", "skip"): _from_common_device_type("skip"),
    ("torch.testing._internal.common_methods_invocations", "skipOps"): _skip_ops_by_name,
}


def add_compat_aliases() -> list[str]:
    """Adds each COMPAT_ALIASES name that its module lacks; returns the names added (module.name)."""
    import importlib
    added = []
    for (module, name), make in COMPAT_ALIASES.items():
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            setattr(mod, name, make(mod))
            added.append(f"{module}.{name}")
    return added


# --- junit XML -> rows ---------------------------------------------------------------------------
def _first_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS - 3] + "..."


def test_id(classname: str, name: str, fname: str) -> str:
    """pytest's node id (which the plugin records too) from a junit testcase of file `fname`:
    `test_view_ops.TestViewOpsCPU` + `test_t_cpu` -> `test_view_ops.py::TestViewOpsCPU::test_t_cpu`;
    a test function outside a class has the module alone as its classname."""
    module = os.path.splitext(fname)[0].replace("/", ".")
    if classname == "":   # pytest's report of a module that failed to collect (import error, ...)
        return f"{fname}::(collection)"
    if classname == module:
        return f"{fname}::{name}"
    if classname.startswith(module + "."):
        return f"{fname}::{classname[len(module) + 1:]}::{name}"
    raise ValueError(f"run_torch_upstream: junit testcase {classname}.{name} is not from {fname}")


def _collection_error(child: ET.Element) -> str:
    """The exception line of a collection failure's traceback ("E   ImportError: ..."), which says why."""
    for line in (child.text or "").splitlines():
        if re.match(r"E\s+\w+(Error|Exception)\b", line):
            return line[1:].strip()
    return "collection failure"


def _outcome(case: ET.Element) -> tuple[str, str]:
    for child in case:
        msg = child.get("message") or child.text
        if child.tag == "skipped":
            return ("xfail" if child.get("type") == "pytest.xfail" else "skip"), _first_line(msg)
        if child.tag in ("failure", "error"):
            reason = _first_line(_collection_error(child) if msg == "collection failure" else msg)
            if "Timeout" in reason and re.search(r"Timeout \(?>?[\d.]+s\)?", reason):
                return "timeout", reason
            if child.tag == "failure" and reason.startswith("[XPASS(strict)]"):
                return "xpass", reason
            return ("fail" if child.tag == "failure" else "error"), reason
    return "pass", ""


def parse_junit(xml_text: str, fname: str) -> dict[str, dict]:
    """Rows keyed by test id from one junit XML report. A test with an error in setup or teardown as well
    as a result appears twice in junit; the worse outcome is kept."""
    rows: dict[str, dict] = {}
    root = ET.fromstring(xml_text)
    rank = {o: i for i, o in enumerate(("pass", "skip", "xfail", "xpass", "fail", "error", "timeout", "crash"))}
    for case in root.iter("testcase"):
        tid = test_id(case.get("classname", ""), case.get("name", ""), fname)
        outcome, reason = _outcome(case)
        if tid.endswith("::(collection)") and outcome == "pass":
            continue   # an interrupted run (SIGINT) reports the module once more, with no result
        old = rows.get(tid)
        if old is None or rank[outcome] > rank[old["outcome"]]:
            rows[tid] = {"test": tid, "outcome": outcome, "reason": reason}
    return rows


_DEVICE_CLASS = re.compile(r"(CPU|SPYRE|PRIVATEUSE1)$")
_DEVICE_NAME = re.compile(r"_(cpu|spyre|privateuse1)(?=_|$)")


def generic_id(tid: str) -> str:
    """The test id without its device: `...::TestViewOpsSPYRE::test_t_spyre_float32` ->
    `...::TestViewOps::test_t_float32`, so spyre's row and the CPU device's row of one test meet."""
    path, _, rest = tid.partition("::")
    cls, _, name = rest.partition("::")
    matches = list(_DEVICE_NAME.finditer(name))
    if matches:
        m = matches[-1]
        name = name[:m.start()] + name[m.end():]
    return f"{path}::{_DEVICE_CLASS.sub('', cls)}::{name}"


# --- the pytest plugin half (loaded with -p run_torch_upstream) -----------------------------------
def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def pytest_configure(config):
    path = os.environ.get(_COMPAT_ENV)
    if path:   # before collection, so the test file imports the names it expects
        added = add_compat_aliases()
        with open(path, "w") as f:
            f.write("".join(a + "\n" for a in added))
        for a in added:
            print(f"run_torch_upstream: added the alias {a} (a name of another PyTorch version)", flush=True)


def pytest_collection_modifyitems(config, items):
    path = os.environ.get(_DESELECT_ENV)
    if not path or not os.path.exists(path):
        return
    with open(path) as f:
        gone = {ln.strip() for ln in f if ln.strip()}
    keep = [it for it in items if it.nodeid not in gone]
    config.hook.pytest_deselected(items=[it for it in items if it.nodeid in gone])
    items[:] = keep


def pytest_runtest_logstart(nodeid, location):
    path = os.environ.get(_PROGRESS_ENV)
    if path:
        _append(path, f"start {nodeid}")


def pytest_runtest_logfinish(nodeid, location):
    path = os.environ.get(_PROGRESS_ENV)
    if path:
        _append(path, f"done {nodeid}")


# --- the runner ------------------------------------------------------------------------------------
def read_progress(path: str) -> tuple[set[str], str | None]:
    """(tests finished, the test started but not finished) from the plugin's progress file."""
    done: set[str] = set()
    current = None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                kind, _, nodeid = line.rstrip("\n").partition(" ")
                if kind == "start":
                    current = nodeid
                elif kind == "done":
                    done.add(nodeid)
                    if current == nodeid:
                        current = None
    return done, current


def _has_pytest_timeout() -> bool:
    import importlib.util
    return importlib.util.find_spec("pytest_timeout") is not None


def _pytest_cmd(fname: str, timeout: float, xml: str, select: str = "") -> list[str]:
    # per-test timeouts need pytest-timeout; without it only --file-timeout bounds a file
    per_test = [f"--timeout={timeout:g}"] if _has_pytest_timeout() else []
    k = ["-k", select] if select else []
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "run_torch_upstream",
            *per_test, *k, f"--junitxml={xml}", fname]


def _env(device: str, progress: str, deselect: str, compat: str = "") -> dict:
    env = dict(os.environ)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = ONLY_FOR[device]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(os.path.abspath(__file__)),
                                                    env.get("PYTHONPATH", "")) if p)
    env[_PROGRESS_ENV] = progress
    env[_DESELECT_ENV] = deselect
    env[_COMPAT_ENV] = compat
    return env


def _run_segment(cmd, cwd, env, file_timeout: float, log) -> tuple[int | None, bool]:
    """Runs one pytest process; (return code, whether --file-timeout killed it)."""
    # SIGINT back to its default in pytest: a runner started in the background (nohup, `cmd &` in a script)
    # has SIGINT ignored, a child inherits that, and Python then installs no KeyboardInterrupt handler,
    # so the --file-timeout interrupt below would be lost
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        return proc.wait(timeout=file_timeout), False
    except subprocess.TimeoutExpired:
        # SIGINT first: pytest stops as on Ctrl-C and still writes the junit report of what it ran
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)   # its own session: pytest and anything it started
            proc.wait()
        return proc.returncode, True


def _died(rc: int) -> str:
    if rc < 0:
        return f"pytest process killed by signal {-rc} ({signal.Signals(-rc).name})"
    return f"pytest process exited with status {rc} without finishing"


def run_file(tests_dir: str, fname: str, device: str, timeout: float, file_timeout: float,
             xml_dir: str, select: str = "", compat: bool = True) -> dict[str, dict]:
    """Runs one upstream file for one device. A process that dies takes its junit report with it, so the
    file runs again without the tests that killed a process, until a process finishes."""
    stem = os.path.splitext(fname)[0]
    os.makedirs(xml_dir, exist_ok=True)
    base = os.path.join(xml_dir, f"{stem}-{device}")
    for old in glob.glob(base + ".*"):
        os.remove(old)
    deselect = base + ".deselect"
    open(deselect, "w").close()
    aliases = base + ".aliases" if compat else ""
    lost: dict[str, dict] = {}   # the tests that were running when a process died or was killed
    for segment in range(100):
        xml, progress = f"{base}.{segment}.xml", f"{base}.{segment}.progress"
        with open(f"{base}.{segment}.log", "w") as log:
            t0 = time.monotonic()
            rc, killed = _run_segment(_pytest_cmd(fname, timeout, xml, select), tests_dir,
                                      _env(device, progress, deselect, aliases), file_timeout, log)
        _, current = read_progress(progress)
        print(f"{fname} [{device}] process {segment}: status {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if current is None:
            break
        if killed:   # out of time: what ran is in the report; the file does not start again
            lost[current] = {"test": current, "outcome": "timeout",
                             "reason": f"running when --file-timeout {file_timeout:g} s stopped the file; "
                                       "the tests after it did not run"}
            print(f"{fname} [{device}] stopped by --file-timeout in {current}", flush=True)
            break
        lost[current] = {"test": current, "outcome": "crash", "reason": _died(rc)}
        print(f"{fname} [{device}] {current}: crash ({_died(rc)})", flush=True)
        with open(deselect, "a") as f:
            f.write(current + "\n")
    else:
        raise SystemExit(f"run_torch_upstream: {fname} on {device}: 100 processes died; see {base}.*.log")
    if not os.path.exists(xml):
        if rc in (0, 1):
            raise SystemExit(f"run_torch_upstream: {fname} on {device} wrote no report; see {base}.{segment}.log")
        # it died outside any test (collection, interpreter exit): one row says so
        lost[f"{fname}::(process)"] = {"test": f"{fname}::(process)", "outcome": "crash", "reason": _died(rc)}
        return lost
    with open(xml) as f:
        rows = parse_junit(f.read(), fname)
    rows.update(lost)
    return rows


def csv_path(out: str, fname: str, device: str) -> str:
    return os.path.join(out, f"torch-upstream-{os.path.splitext(fname)[0]}-{device}.csv")


def write_csv(path: str, rows: dict[str, dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        for tid in sorted(rows):
            w.writerow({k: rows[tid].get(k, "") for k in FIELDS})


def read_csv(path: str) -> dict[str, dict]:
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {r["test"]: r for r in csv.DictReader(f)}


# --- the summary -----------------------------------------------------------------------------------
def counts(rows: dict[str, dict]) -> dict[str, int]:
    c = {o: 0 for o in OUTCOMES}
    for r in rows.values():
        if r["outcome"] not in c:
            raise ValueError(f"run_torch_upstream: unknown outcome {r['outcome']!r} for {r['test']}")
        c[r["outcome"]] += 1
    return c


def _files_in(out: str) -> list[str]:
    names = {re.sub(r"^torch-upstream-(.*)-(spyre|cpu)\.csv$", r"\1", os.path.basename(p))
             for p in glob.glob(os.path.join(out, "torch-upstream-*-*.csv"))}
    return sorted(n + ".py" for n in names)


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def summary_text(tables: dict[str, dict[str, dict[str, dict]]]) -> str:
    """tables[file][device] = rows. Markdown: counts per file and device, then each spyre non-pass."""
    import torch
    lines = ["# PyTorch's own test files on spyre and on the CPU device", "",
             f"Generated by `python tools/run_torch_upstream.py summarize` from the CSV files beside this one "
             f"(torch {torch.__version__}). How the files run: the docstring of tools/run_torch_upstream.py.", "",
             "| file | device | tests | " + " | ".join(OUTCOMES) + " |",
             "|---|---|---:|" + "---:|" * len(OUTCOMES)]
    bad, cpu_bad = [], []
    for fname in sorted(tables):
        for device in ("spyre", "cpu"):
            rows = tables[fname].get(device)
            if not rows:
                continue
            c = counts(rows)
            lines.append(f"| {fname} | {device} | {len(rows)} | " + " | ".join(str(c[o]) for o in OUTCOMES) + " |")
        cpu = {generic_id(t): r for t, r in tables[fname].get("cpu", {}).items()}
        for tid, r in sorted(tables[fname].get("spyre", {}).items()):
            if r["outcome"] not in ("pass", "skip", "xfail"):
                other = cpu.get(generic_id(tid), {}).get("outcome", "not run")
                bad.append((tid, r["outcome"], other, r["reason"]))
        cpu_bad += [(t, r["outcome"], r["reason"]) for t, r in sorted(tables[fname].get("cpu", {}).items())
                    if r["outcome"] not in ("pass", "skip", "xfail")]
    lines += ["", f"## spyre's tests that do not pass ({len(bad)}), with the CPU device's outcome", "",
              "| test | spyre | CPU | reason |", "|---|---|---|---|"]
    lines += [f"| `{t}` | {o} | {c} | {_cell(why)} |" for t, o, c, why in bad]
    lines += ["", f"## The CPU device's tests that do not pass ({len(cpu_bad)})", "",
              "| test | CPU | reason |", "|---|---|---|"]
    lines += [f"| `{t}` | {o} | {_cell(why)} |" for t, o, why in cpu_bad]
    lines += ["", "## Skip reasons (tests per reason)", "", "| file | device | tests | reason |", "|---|---|---:|---|"]
    for fname in sorted(tables):
        for device, rows in sorted(tables[fname].items()):
            reasons: dict[str, int] = {}
            for r in rows.values():
                if r["outcome"] == "skip":
                    reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
            for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
                lines.append(f"| {fname} | {device} | {n} | {_cell(why)} |")
    return "\n".join(lines) + "\n"


def summarize(out: str) -> str:
    tables = {f: {d: read_csv(csv_path(out, f, d)) for d in ("spyre", "cpu")} for f in _files_in(out)}
    text = summary_text(tables)
    with open(os.path.join(out, "torch-upstream-summary.md"), "w") as f:
        f.write(text)
    return text


def _check_tests_dir(tests_dir: str, files: list[str]) -> None:
    missing = [f for f in files if not os.path.isfile(os.path.join(tests_dir, f))]
    if missing:
        raise SystemExit(f"run_torch_upstream: {', '.join(missing)} not found in --tests {tests_dir}; copy them "
                         "from PyTorch's repository (tag v2.13.0, folder test/) unchanged")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["run", "summarize"])
    ap.add_argument("--tests", help="folder holding PyTorch's test files (run)")
    ap.add_argument("--files", default="", help=f"comma-separated file names (default: those of {DEFAULT_FILES} "
                                                "found in --tests)")
    ap.add_argument("--device", default="both", choices=["spyre", "cpu", "both"])
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per test (pytest-timeout)")
    ap.add_argument("--file-timeout", type=float, default=3600.0, help="seconds per pytest process")
    ap.add_argument("-k", dest="select", default="", help="pytest -k expression: run only these tests")
    ap.add_argument("--no-compat", action="store_true", help="add no COMPAT_ALIASES (see the docstring)")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--xml-dir", default=DEFAULT_XML)
    args = ap.parse_args(argv)
    if args.command == "run":
        if not args.tests:
            raise SystemExit("run_torch_upstream: run needs --tests DIR (PyTorch's test/ files, tag v2.13.0)")
        files = args.files.split(",") if args.files else [
            f for f in DEFAULT_FILES if os.path.isfile(os.path.join(args.tests, f))]
        _check_tests_dir(args.tests, files)
        if not _has_pytest_timeout():
            print("run_torch_upstream: pytest-timeout is not installed, so a hanging test is stopped only by "
                  "--file-timeout (pip install pytest-timeout for per-test timeouts)", flush=True)
        os.makedirs(args.xml_dir, exist_ok=True)
        for fname in files:
            for device in (("spyre", "cpu") if args.device == "both" else (args.device,)):
                rows = run_file(os.path.abspath(args.tests), fname, device, args.timeout, args.file_timeout,
                                args.xml_dir, args.select, not args.no_compat)
                path = csv_path(args.out, fname, device)
                if args.select:   # a partial re-run: its rows replace those tests' rows, the others stay
                    rows = {**read_csv(path), **rows}
                write_csv(path, rows)
                print(f"{fname} [{device}]: {counts(rows)}", flush=True)
    print(summarize(args.out))


if __name__ == "__main__":
    main()
