"""A smoke selection of PyTorch's OpInfos (torch.testing._internal's op_db) on spyre, by the rules of
tools/run_torch_tests.py (its run_one): eager on spyre against the CPU, and torch.compile (Inductor)
on spyre against eager on spyre, the first two float32 samples of each. The full scoreboard over every
OpInfo is docs/conformance/torch-summary.md, made by that script."""
import importlib.util
import os

import pytest

_spec = importlib.util.spec_from_file_location(
    "run_torch_tests", os.path.join(os.path.dirname(__file__), "..", "..", "tools", "run_torch_tests.py"))
rtt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rtt)

EAGER = ["abs", "add", "sub", "mul", "div.no_rounding_mode", "exp", "log", "sin", "tanh", "sigmoid", "rsqrt",
         "neg", "clamp", "where", "sum", "mean", "amax", "argmax", "softmax", "log_softmax", "mm", "bmm",
         "addmm", "cat", "index_select", "gather", "cumsum", "topk", "sort", "nn.functional.gelu",
         "nn.functional.layer_norm", "var", "pow", "conj_physical"]
COMPILED = ["add", "mul", "exp", "sum", "amax", "softmax", "mm", "nn.functional.gelu"]


@pytest.fixture(scope="module")
def ops():
    from torch.testing._internal.common_methods_invocations import op_db
    return {rtt._name(op): op for op in op_db}


@pytest.mark.parametrize("name", EAGER)
def test_opinfo_eager_matches_cpu(ops, name):
    result, reason = rtt.run_one(ops[name], "eager", "spyre", 2)
    assert result == "pass", reason


@pytest.mark.parametrize("name", COMPILED)
def test_opinfo_compiled_matches_eager(ops, name):
    result, reason = rtt.run_one(ops[name], "compiled", "spyre", 2)
    assert result == "pass", reason


def test_the_runner_reports_a_mismatch(ops, monkeypatch):
    # the comparison is real: a wrong result on spyre is a failure with the sample and the difference
    import torch
    op = ops["abs"]
    monkeypatch.setattr(op, "op", lambda x, *a, **k: torch.abs(x) + (x.device.type == "spyre"))
    result, reason = rtt.run_one(op, "eager", "spyre", 1)
    assert result == "fail" and reason.startswith("sample 0: mismatch")


@pytest.mark.parametrize("name, expect", [("add", set()), ("mode", {"aten::mode"})])
def test_the_runner_records_the_ops_a_compiled_graph_ran_on_the_host(ops, name, expect):
    host: set = set()
    result, reason = rtt.run_one(ops[name], "compiled", "spyre", 1, host)
    assert result == "pass", reason
    assert host == expect


def test_the_summary_counts_opinfos_run_wholly_on_the_device():
    rows = {"add": {"host": "-"}, "mul": {"host": "-"}, "mode": {"host": "aten::mode"},
            "nanmedian": {"host": "aten::nanmedian aten::mode"}, "old": {"host": ""}}
    text = "\n".join(rtt._host_section(rows))
    assert "Of 4 passing compiled OpInfos" in text and "**2 ran wholly on the device** (50%)" in text
    assert "| `aten::mode` | 2 | `mode`, `nanmedian` |" in text
