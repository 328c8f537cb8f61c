"""The DMA engine's prefetch of the next programs' runs (runtime/dma.c prefetch_next, issued a few lines
between instructions by spy_prefetch_drip) is a guess: it may point past either end of an allocation,
at memory freed since, or at rows a program never reads. None of that may fault or change a result.
These kernels make the stride predictor guess wrong in each of those ways and check the results."""
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE


@triton.jit
def row_affine(X, Y, order, N, REVERSE: tl.constexpr, PERMUTED: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if PERMUTED:
        row = tl.load(order + pid)
    elif REVERSE:
        row = tl.num_programs(0) - 1 - pid
    else:
        row = pid
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N)
    y = x * 3.0 - tl.sum(x, axis=0) / N
    tl.store(Y + row * N + cols, y, mask=cols < N)


def _run(rows, N, reverse=False, permuted=False, threads="1", monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.setenv("SPYRE_NUM_THREADS", threads)
    x = torch.randn(rows, N)
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(rows)).to(torch.int32)
    y = torch.empty(rows, N, device=DEVICE)
    xd = x.to(DEVICE)
    row_affine[(rows,)](xd, y, order.to(DEVICE), N, REVERSE=reverse, PERMUTED=permuted,
                        BLOCK=triton.next_power_of_2(N))
    expect = x * 3.0 - x.sum(1, keepdim=True) / N
    torch.testing.assert_close(y.cpu(), expect)
    return xd, y


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_predictions_past_either_end_of_the_allocation(reverse, threads, monkeypatch):
    # the last programs predict rows past the end (forward) or before the start (reverse) of x and y
    _run(700, 1024, reverse=reverse, threads=threads, monkeypatch=monkeypatch)


def test_predictions_into_memory_freed_since():
    # a launch ends with prefetches queued for rows past its tensors; those tensors are freed and the
    # next launch, over other memory, starts with nothing queued
    xd, y = _run(512, 1024)
    del xd, y
    _run(300, 1000)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_rows_in_an_order_no_stride_predicts(threads, monkeypatch):
    _run(257, 1024, permuted=True, threads=threads, monkeypatch=monkeypatch)


@pytest.mark.parametrize("N", [1, 16, 1000, 2048, 3000])
def test_runs_of_other_lengths(N):
    # a partial last line, runs shorter than a line, and runs longer than the prefetch's limit
    _run(40, N)
