"""sort, topk, kthvalue and median compiled for spyre run on the device at any size along the sorted
dimension (spyre_triton/inductor/compat.py, sort_ops_on_device): Inductor's sort kernel and the lowerings it
builds from it, which Inductor otherwise keeps for config.triton.decompose_sort_ops. Other devices keep
Inductor's choice (an extern aten call)."""
import pytest
import torch
from torch._inductor.utils import run_and_get_code

import spyre_triton

ROWS = torch.randn(6, 300, generator=torch.Generator().manual_seed(0))
LONG = torch.randn(8000, generator=torch.Generator().manual_seed(1))

CASES = {
    "sort 8000": (lambda a: torch.sort(a), LONG),                      # past Inductor's 512-element limit
    "sort stable descending": (lambda a: torch.sort(a, dim=1, descending=True, stable=True), ROWS.round()),
    "topk": (lambda a: torch.topk(a, 5), LONG),
    "topk smallest": (lambda a: torch.topk(a, 4, 1, largest=False), ROWS),
    "kthvalue": (lambda a: torch.kthvalue(a, 3, 1), ROWS),
    "median": (lambda a: torch.median(a), LONG),
    "median dim": (lambda a: torch.median(a, 1, keepdim=True), ROWS),
}
# Values compare exactly; indices too, as these inputs have no ties except where the sort is stable (with
# ties an unstable sort, topk or kthvalue may pick another of the equal elements, on CUDA as here).


@pytest.mark.parametrize("name", CASES)
def test_sort_ops_run_on_the_device_and_match_eager(name):
    fn, x = CASES[name]
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    compiled(x.to("spyre"))
    with spyre_triton.track() as t:
        got = compiled(x.to("spyre"))
    assert not t.fallbacks, f"ran on the host: {t.fallbacks}"
    assert t.kernels
    want = fn(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0)


def test_other_devices_keep_inductors_choice():
    torch._dynamo.reset()
    _, (code,) = run_and_get_code(torch.compile(lambda a: torch.topk(a, 5)), LONG)
    assert "aten.topk" in code                          # the CPU graph calls the aten kernel, as before
    assert torch._inductor.config.triton.decompose_sort_ops is False


def test_mode_stays_with_the_eager_op():
    # its decomposition would pick another index among equal values than torch.mode does
    x = (ROWS * 2).round()
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: torch.mode(a, 1))
    compiled(x.to("spyre"))
    with spyre_triton.track() as t:
        got = compiled(x.to("spyre"))
    assert "aten::mode" in t.fallbacks
    want = torch.mode(x, 1)
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=0, atol=0)
    torch.testing.assert_close(got[1].cpu(), want[1], rtol=0, atol=0)
