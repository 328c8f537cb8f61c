"""PyTorch's OpInfos (torch.testing._internal's `op_db`) on spyre and on the CPU device: the scoreboard.

    python tools/run_torch_tests.py run [--suite eager|compiled|both] [--device spyre|cpu|both]
                                        [--ops NAME,...] [--limit N] [--samples 2] [--timeout 300]
                                        [--out docs/conformance]
    python tools/run_torch_tests.py summarize [--out docs/conformance]

Two suites, as PyTorch's own test files do them:
  eager     the op on DEVICE against the op on the CPU, same inputs (test_ops.py's reference check);
            on the CPU device this is the op against itself: it shows which OpInfos run at all;
  compiled  torch.compile (Inductor, dynamic=False) on DEVICE against eager on DEVICE
            (test/inductor/test_torchinductor_opinfo.py; with `fallback_random=True` as there, so
            random ops draw eager's numbers).

Each OpInfo (one row per name and variant) runs its first --samples float32 sample inputs (made on
DEVICE with a fixed seed; the CPU reference runs on copies). The OpInfo's own skips of the upstream test
a suite follows are honoured (test_compare_cpu; test_comprehensive, without the skip lists that live in
test_torchinductor_opinfo.py itself), and a failure it expects there is `xfail`. It passes when every output matches, by
torch.testing.assert_close with rtol=atol=1e-4 (equal_nan; dtypes must match; integer and bool
outputs exactly). OpInfos without float32 on the CPU, or without samples, are skipped with that reason.

Every OpInfo runs in a worker process: a worker that dies (segfault, abort) marks the OpInfo it was
running `crash`, one that is silent for --timeout seconds is killed and the OpInfo marked `timeout`,
and a fresh worker carries on with the rest.

For the compiled suite on spyre, a passing OpInfo also records the ops its compiled graph ran on the host
(spyre's CPU fallback), measured on a second call of the compiled function so that compiling is not
counted; `summarize` reports how many ran wholly on the device and which host ops the others use.

`run` writes docs/conformance/torch-<suite>-<device>.csv (op, result, reason, seconds, host); a run over
--ops or --limit merges its rows into the existing file, and --resume runs only the OpInfos the file has no
row for (rows are saved every 10 OpInfos, so an interrupted run loses little). `summarize` writes
docs/conformance/torch-summary.md (counts per suite with the CPU device's beside spyre's, and every
spyre failure with its reason) from the CSV files.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "docs", "conformance")
SUITES = ("eager", "compiled")
DEVICES = ("spyre", "cpu")
RTOL = ATOL = 1e-4


def op_names() -> list[str]:
    from torch.testing._internal.common_methods_invocations import op_db
    return [_name(op) for op in op_db]


def _name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


# --- the worker: runs OpInfos in this process ------------------------------------------------------
def _reason(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    first = next((l.strip() for l in msg if l.strip()), "")
    return f"{type(e).__name__}: {first}"[:300]


def _compare(got, want) -> None:
    import torch
    from torch.utils._pytree import tree_flatten
    g, gs = tree_flatten(got)
    w, ws = tree_flatten(want)
    if gs != ws:
        raise AssertionError(f"output structure differs: {gs} vs {ws}")
    for a, b in zip(g, w):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            a, b = a.detach().cpu(), b.detach().cpu()
            if a.is_floating_point() or a.is_complex():
                torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL, equal_nan=True)
            else:
                torch.testing.assert_close(a, b, rtol=0, atol=0)
        elif isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            raise AssertionError(f"a tensor against a {type(b).__name__}")
        elif isinstance(a, float) and isinstance(b, float):
            if not (a == b or (a != a and b != b) or abs(a - b) <= ATOL + RTOL * abs(b)):
                raise AssertionError(f"{a} != {b}")
        elif a != b:
            raise AssertionError(f"{a!r} != {b!r}")


# The upstream test whose OpInfo skips and expected failures each suite honours.
UPSTREAM_TEST = {"eager": ("TestCommon", "test_compare_cpu"),
                 "compiled": ("TestInductorOpInfo", "test_comprehensive")}


def upstream_mark(op, suite: str, device: str, dtype) -> str:
    """"skip" or "xfail" when the OpInfo's own DecorateInfos skip, or expect to fail, the upstream test
    this suite follows (test_ops.py's test_compare_cpu, test_torchinductor_opinfo.py's
    test_comprehensive); "" otherwise."""
    from torch.testing._internal.opinfo.core import DecorateInfo
    cls, test = UPSTREAM_TEST[suite]
    mark = ""
    for d in op.decorators:
        if not isinstance(d, DecorateInfo) or not d.is_active(cls, test, device, dtype, {}):
            continue
        for f in d.decorators:
            if getattr(f, "__qualname__", "").startswith("skip"):
                return "skip"
            if getattr(f, "__name__", "") == "expectedFailure":
                mark = "xfail"
    return mark


def run_one(op, suite: str, device: str, nsamples: int, host: set | None = None) -> tuple[str, str]:
    import torch
    dtype = torch.float32
    if dtype not in op.supported_dtypes("cpu"):
        return "skip", "no float32 on the CPU"
    mark = upstream_mark(op, suite, device, dtype)
    if mark == "skip":
        return "skip", f"the OpInfo skips {UPSTREAM_TEST[suite][1]}"
    result, reason = _run_samples(op, suite, device, dtype, nsamples, host)
    if result == "fail" and mark == "xfail":
        return "xfail", f"the OpInfo expects {UPSTREAM_TEST[suite][1]} to fail: {reason}"
    return result, reason


def _host_ops(call) -> set[str]:
    """The ops that ran on the host (spyre's CPU fallback) while `call()` ran."""
    import torch
    torch.spyre.reset_fallback_counts()
    call()
    return set(torch.spyre.fallback_counts())


def _run_samples(op, suite: str, device: str, dtype, nsamples: int, host: set | None = None) -> tuple[str, str]:
    """As upstream: samples made on the device (seeded), the CPU reference from copies of them. For the
    compiled suite on spyre, `host` collects the ops a compiled graph ran on the host: measured on a second
    call of the compiled function, so what compiling itself runs is not counted."""
    import torch
    torch.manual_seed(0)
    samples = []
    for s in op.sample_inputs(device, dtype, requires_grad=False):
        samples.append(s)
        if len(samples) >= nsamples:
            break
    if not samples:
        return "skip", "no sample inputs"
    fn = op.get_op() if hasattr(op, "get_op") else op.op
    for i, moved in enumerate(samples):
        s = moved.transform(lambda t: t.to("cpu") if isinstance(t, torch.Tensor) else t)
        try:
            if suite == "eager":
                torch.manual_seed(1)
                got = fn(moved.input, *moved.args, **moved.kwargs)
                torch.manual_seed(1)
                want = fn(s.input, *s.args, **s.kwargs)
            else:
                torch._dynamo.reset()
                with torch._inductor.config.patch(fallback_random=True):
                    compiled = torch.compile(lambda *a, **k: fn(*a, **k), dynamic=False)
                    torch.manual_seed(1)
                    got = compiled(moved.input, *moved.args, **moved.kwargs)
                    if host is not None and device == "spyre":
                        torch.manual_seed(1)
                        host |= _host_ops(lambda: compiled(moved.input, *moved.args, **moved.kwargs))
                torch.manual_seed(1)
                want = fn(moved.input, *moved.args, **moved.kwargs)
        except Exception as e:
            if suite == "compiled":
                # the reference failing too is the op's own error, not the compiler's
                try:
                    torch.manual_seed(1)
                    fn(moved.input, *moved.args, **moved.kwargs)
                except Exception:
                    return "skip", f"eager raises too on {device}: {_reason(e)}"
            return "fail", f"sample {i}: {_reason(e)}"
        try:
            _compare(got, want)
        except Exception as e:
            return "fail", f"sample {i}: mismatch: {_reason(e)}"
    return "pass", ""


def worker(args) -> None:
    import warnings
    warnings.filterwarnings("ignore")
    import torch  # noqa: F401  (autoloads spyre)
    from torch.testing._internal.common_methods_invocations import op_db
    by_name = {_name(op): op for op in op_db}
    for name in args.ops.split(","):
        print(json.dumps({"start": name}), flush=True)
        t0 = time.monotonic()
        host: set[str] = set()
        try:
            result, reason = run_one(by_name[name], args.suite, args.device, args.samples, host)
        except Exception as e:  # sample generation itself
            result, reason = "fail", f"sample inputs: {_reason(e)}"
        measured = args.suite == "compiled" and args.device == "spyre" and result == "pass"
        print(json.dumps({"op": name, "result": result, "reason": reason,
                          "seconds": round(time.monotonic() - t0, 2),
                          "host": (" ".join(sorted(host)) or "-") if measured else ""}), flush=True)


# --- the parent: workers, crashes, timeouts, CSV ----------------------------------------------------
def run_suite(suite: str, device: str, names: list[str], nsamples: int, timeout: float,
              path: str | None = None) -> dict[str, dict]:
    """Runs the OpInfos in workers; with `path`, merges the rows into that CSV every 10 OpInfos (so an
    interrupted run keeps what it measured) and at the end."""
    import select
    rows: dict[str, dict] = {}
    kept = read_csv(path) if path else {}

    def save():
        if path:
            kept.update(rows)
            write_csv(path, kept)
    todo = list(names)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    while todo:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", "--suite", suite,
                                 "--device", device, "--samples", str(nsamples), "--ops", ",".join(todo)],
                                # unbuffered bytes: with a buffered reader, select() can report the pipe empty
                                # while the reader holds an unread line (the worker timed out "before starting")
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, env=env)
        current, last = None, time.monotonic()
        started_any = False
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 5.0)
            if ready:
                line = proc.stdout.readline().decode()
                if not line:
                    break
                last = time.monotonic()
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if "start" in msg:
                    current = msg["start"]
                    started_any = True
                else:
                    rows[msg["op"]] = msg
                    todo.remove(msg["op"])
                    current = None
                    print(f"{suite}/{device} {len(rows)}/{len(names)} {msg['op']}: {msg['result']} "
                          f"{msg['reason'][:100]}", flush=True)
                    if len(rows) % 10 == 0:
                        save()
            elif time.monotonic() - last > timeout:
                proc.kill()
                break
        rc = proc.wait()
        if current is not None:
            why = "timeout" if time.monotonic() - last > timeout else "crash"
            reason = (f"no result within {timeout:.0f} s" if why == "timeout" else
                      f"worker died (signal {-rc})" if rc < 0 else f"worker exited with status {rc}")
            rows[current] = {"op": current, "result": why, "reason": reason,
                             "seconds": round(time.monotonic() - last, 2)}
            todo.remove(current)
            print(f"{suite}/{device} {current}: {why} ({reason})", flush=True)
        elif todo and rc != 0:
            # died between OpInfos (the host's OOM killer, a signal from outside): a fresh worker carries on;
            # one that dies again before its first OpInfo marks the rest
            if started_any:
                started_any = False
                continue
            for n in todo:
                rows[n] = {"op": n, "result": "crash", "reason": f"worker exited with status {rc} before starting",
                           "seconds": 0}
            break
    save()
    return rows


# host: for a passing compiled OpInfo on spyre, the ops its graph ran on the host (space-separated; "-": none);
# empty where not measured
CSV_FIELDS = ("op", "result", "reason", "seconds", "host")


def csv_path(out: str, suite: str, device: str) -> str:
    return os.path.join(out, f"torch-{suite}-{device}.csv")


def read_csv(path: str) -> dict[str, dict]:
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {r["op"]: r for r in csv.DictReader(f)}


def write_csv(path: str, rows: dict[str, dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(CSV_FIELDS), lineterminator="\n")
        w.writeheader()
        for name in sorted(rows):
            r = rows[name]
            w.writerow({k: r.get(k, "") for k in CSV_FIELDS})


def _host_section(rows: dict[str, dict]) -> list[str]:
    """Where the passing compiled OpInfos ran: wholly on the device, or with ops on the host (by op)."""
    measured = {n: r["host"] for n, r in rows.items() if r.get("host")}
    if not measured:
        return []
    on_device = sum(1 for h in measured.values() if h == "-")
    by_op: dict[str, list[str]] = {}
    for name, h in measured.items():
        for o in h.split() if h != "-" else ():
            by_op.setdefault(o, []).append(name)
    lines = ["", "## Where compiled graphs ran on spyre", "",
             f"Of {len(measured)} passing compiled OpInfos (measured on a second call of the compiled function), "
             f"**{on_device} ran wholly on the device** ({100 * on_device / len(measured):.0f}%); "
             f"{len(measured) - on_device} ran at least one op on the host through the CPU fallback. "
             "The host ops, by how many of those OpInfos use them:", "",
             "| host op | OpInfos | examples |", "|---|---:|---|"]
    for o, names in sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ex = ", ".join(f"`{n}`" for n in sorted(names)[:4]) + (", ..." if len(names) > 4 else "")
        lines.append(f"| `{o}` | {len(names)} | {ex} |")
    return lines


def summarize(out: str) -> str:
    import torch
    lines = [f"# PyTorch's OpInfos on spyre and on the CPU device",
             "", f"Generated by `python tools/run_torch_tests.py summarize` from the CSV files beside this one "
             f"(torch {torch.__version__}). Suites and rules: the docstring of tools/run_torch_tests.py.", "",
             "| suite | device | OpInfos | pass | fail | xfail | crash | timeout | skip | run time |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    failures = []
    for suite in SUITES:
        for device in DEVICES:
            rows = read_csv(csv_path(out, suite, device))
            if not rows:
                continue
            c = {k: sum(1 for r in rows.values() if r["result"] == k)
                 for k in ("pass", "fail", "xfail", "crash", "timeout", "skip")}
            secs = sum(float(r["seconds"] or 0) for r in rows.values())
            lines.append(f"| {suite} | {device} | {len(rows)} | {c['pass']} | {c['fail']} | {c['xfail']} | {c['crash']} | "
                         f"{c['timeout']} | {c['skip']} | {secs / 60:.0f} min |")
            if device == "spyre":
                cpu = read_csv(csv_path(out, suite, "cpu"))
                for name, r in sorted(rows.items()):
                    if r["result"] in ("fail", "xfail", "crash", "timeout"):
                        other = cpu.get(name, {}).get("result", "not run")
                        failures.append((suite, name, r["result"], other, r["reason"]))
    lines += _host_section(read_csv(csv_path(out, "compiled", "spyre")))
    lines += ["", f"## spyre's failures ({len(failures)}), with the CPU device's result on the same OpInfo", "",
              "| suite | OpInfo | spyre | CPU | reason |", "|---|---|---|---|---|"]
    for suite, name, res, other, reason in failures:
        lines.append(f"| {suite} | `{name}` | {res} | {other} | {reason.replace('|', '/')} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "torch-summary.md"), "w") as f:
        f.write(text)
    return text


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["run", "summarize", "worker"])
    ap.add_argument("--suite", default="both", choices=[*SUITES, "both"])
    ap.add_argument("--device", default="both", choices=[*DEVICES, "both"])
    ap.add_argument("--ops", default="", help="comma-separated OpInfo names (name or name.variant)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N OpInfos of op_db")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a worker may stay silent")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--resume", action="store_true",
                    help="skip the OpInfos the suite's CSV already has a result for (an interrupted run goes on)")
    args = ap.parse_args(argv)
    if args.command == "worker":
        return worker(args)
    if args.command == "summarize":
        print(summarize(args.out))
        return
    names = op_names()
    if args.ops:
        wanted = args.ops.split(",")
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise SystemExit(f"run_torch_tests: no OpInfo named {', '.join(unknown)} in op_db")
        names = wanted
    if args.limit:
        names = names[:args.limit]
    suites = SUITES if args.suite == "both" else (args.suite,)
    devices = DEVICES if args.device == "both" else (args.device,)
    for suite in suites:
        for device in devices:
            t0 = time.monotonic()
            path = csv_path(args.out, suite, device)
            todo = names
            if args.resume:
                done = read_csv(path)
                todo = [n for n in names if n not in done]
                print(f"{suite}/{device}: {len(names) - len(todo)} OpInfos already recorded, {len(todo)} to run",
                      flush=True)
            rows = run_suite(suite, device, todo, args.samples, args.timeout, path)
            print(f"{suite}/{device}: {len(rows)} OpInfos in {time.monotonic() - t0:.0f} s -> {path}", flush=True)
    summarize(args.out)


if __name__ == "__main__":
    main()
