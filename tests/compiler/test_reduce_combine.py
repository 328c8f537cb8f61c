"""Max and min reductions written as a compare and a select (spyre_triton/compiler/ops.py select_minmax).

Inductor reduces every max and min (softmax's row max, `amax`, `max(dim)`) through triton_helpers.maximum
and minimum: `where(a > b, a, b)` on integers and `where((a > b) | (a != a), a, b)` on floats. Such a
combine region becomes one `red` (maxs/mins/maxu/minu, or maximum/minimum, which keep a NaN) instead of
a pairwise tree of compares and selects. The results are checked against torch's, NaN rows, infinities
and signed zeros included; combine regions that only look alike (`>=`, a float compare without the NaN
test, the operands swapped in the select) keep the tree and its exact results."""
import pytest
import torch
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers

from asm_helpers import mnemonics

from conftest import DEVICE


@triton.jit
def greater_equal(a, b):  # not a max of the recognised form: ties pick a
    return tl.where(a >= b, a, b)


@triton.jit
def plain_greater(a, b):  # a float max without the NaN test: NaN in b wins, NaN in a loses
    return tl.where(a > b, a, b)


@triton.jit
def swapped(a, b):  # where(a > b, b, a) is a min
    return tl.where(a > b, b, a)


@triton.jit
def first_of_two(a, b):  # no op at all: the region returns an argument
    return a


@triton.jit
def reduce_rows(x_ptr, y_ptr, N: tl.constexpr, COMBINE: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    if COMBINE == 0:
        y = triton_helpers.max2(x, 0)  # tl.reduce(x, 0, triton_helpers.maximum)
    elif COMBINE == 1:
        y = triton_helpers.min2(x, 0)
    elif COMBINE == 2:
        y = tl.reduce(x, 0, greater_equal)
    elif COMBINE == 3:
        y = tl.reduce(x, 0, plain_greater)
    elif COMBINE == 4:
        y = tl.reduce(x, 0, swapped)
    else:
        y = tl.reduce(x, 0, first_of_two)
    tl.store(y_ptr + row, y)


def run(x, combine):
    rows, n = x.shape
    y = torch.empty(rows, dtype=x.dtype, device=DEVICE)
    h = reduce_rows[(rows,)](x.to(DEVICE), y, N=n, COMBINE=combine)
    return y.cpu(), h


def float_rows(dtype, n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(8, n, generator=g).to(dtype)
    x[1, n // 3] = float("nan")                      # one NaN in the middle
    x[2, 0] = float("nan")                           # NaN first
    x[2, n - 1] = float("nan")
    x[3] = float("-inf")                             # all -inf (the reduction's identity)
    x[4, :] = -0.0                                   # zeros of both signs: a max of 0
    x[4, ::2] = 0.0
    x[5, n - 1] = float("inf")
    x[6] = -x[6].abs() - 1                           # all negative: min and max away from 0
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("combine", [0, 1], ids=["maximum", "minimum"])
@pytest.mark.parametrize("n", [2, 128, 1024])
def test_inductor_float_max_min_is_one_red(dtype, combine, n):
    x = float_rows(dtype, n)
    y, h = run(x, combine)
    want = x.amax(1) if combine == 0 else x.amin(1)     # torch's max and min propagate NaN
    torch.testing.assert_close(y, want, equal_nan=True, atol=0, rtol=0)
    names = mnemonics(h)
    assert [m for m in names if m.startswith("red.")], names
    assert not [m for m in names if m.split(".")[0] in ("select", "cmpf", "or")], names


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("combine", [0, 1], ids=["maximum", "minimum"])
def test_inductor_int_max_min_is_one_red(dtype, combine):
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(3)
    x = torch.randint(info.min, info.max, (6, 256), generator=g, dtype=torch.int64).to(dtype)
    x[1, 7], x[2, 200] = info.max, info.min
    y, h = run(x, combine)
    assert torch.equal(y, x.amax(1) if combine == 0 else x.amin(1))
    names = mnemonics(h)
    assert [m for m in names if m.startswith("red.")], names
    assert not [m for m in names if m.split(".")[0] in ("select", "cmpi")], names


@pytest.mark.parametrize("combine", [2, 3, 4], ids=["greater_equal", "no_nan_test", "swapped"])
def test_lookalike_combines_keep_the_tree(combine):
    # integers, so the pairwise tree's results are exact to compare; the float form (3) on a NaN-free row
    x = torch.randint(-1000, 1000, (4, 64), generator=torch.Generator().manual_seed(4), dtype=torch.int32)
    if combine == 3:
        x = x.float()
    y, h = run(x, combine)
    assert torch.equal(y, x.amin(1) if combine == 4 else x.amax(1))
    assert "select" in {m.split(".")[0] for m in mnemonics(h)}


def test_softmax_through_inductor_uses_one_red_for_the_row_max():
    torch._dynamo.reset()
    import spyre_triton
    x = torch.randn(64, 100)
    x[3, 5] = float("nan")
    f = torch.compile(lambda t: torch.softmax(t, -1))
    with spyre_triton.track() as t:
        got = f(x.to(DEVICE)).cpu()
    torch.testing.assert_close(got, torch.softmax(x, -1), equal_nan=True)
    assert [k for k in t.kernels if k.startswith(("triton_per_", "triton_red_"))], t.kernels


def test_combine_that_returns_an_argument():
    # the pairwise reduction keeps the first half's side at every step: the row's first element
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(5))
    y, _ = run(x, 5)
    assert torch.equal(y, x[:, 0])
