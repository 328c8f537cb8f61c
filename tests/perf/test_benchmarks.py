"""Smoke test of the benchmark runner (benchmarks/run.py): it runs in --quick mode and its JSON has
every section. No timing is asserted - only what does not depend on the machine: results match torch,
and a warm cache compiles nothing."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_benchmark_runner_quick_json():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--json"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout)
    for key in ("machine", "kernels", "threads", "interp", "launch", "models", "summary"):
        assert key in r, key
    for row in r["kernels"]["rows"]:
        assert row["max_abs_err"] <= row["atol"], row["kernel"]
    assert {row["kernel"] for row in r["interp"]["rows"]} == {row["kernel"] for row in r["kernels"]["rows"]}
    if "skipped" not in r["models"]:
        for m in r["models"]["models"].values():
            assert m["spyre_cold"]["compile"]["lower_module"], "the cold run lowered nothing"
            assert m["spyre_warm"]["compile"]["lower_module"] == [], "a warm cache recompiled"
            assert not m["spyre_warm"]["host_fallbacks"]
