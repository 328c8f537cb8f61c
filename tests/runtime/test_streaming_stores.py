"""Streaming stores: an elementwise result written straight into device memory (a view register), in a
launch whose results add up to more than the host's last-level cache, goes out with non-temporal
stores, a sub-tile at a time through an L1 buffer (runtime/interp.c, stream_elementwise). The results
must be the bits of the cached path for every kind of elementwise instruction, at tails that end
inside a sub-tile, with broadcast operands, misaligned outputs and in-place updates.

The tests lower the threshold (`stream_store_bytes`) so that small launches stream, and check from the
kernel's statistics that the streamed path ran."""
import contextlib

import pytest
import torch
import triton
import triton.language as tl

from spyre_triton import _runtime as rt

from conftest import DEVICE


@contextlib.contextmanager
def threshold(n):
    """Launches inside stream results once a launch writes n bytes (1: every result big enough for the
    sub-tiling; 0: none)."""
    old = rt.stream_store_bytes(n)
    try:
        yield
    finally:
        rt.stream_store_bytes(old)


def streamed_count(handle):
    return handle.function.stats()["streamed_results"]


def run_both(launch):
    """(output with streaming stores, output without, results streamed) for launch() -> (handle, out)"""
    with threshold(0):
        _, cached = launch()
    with threshold(1):
        handle, streamed = launch()
        before = streamed_count(handle)
        launch()
    return streamed, cached, streamed_count(handle) - before


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    ia = a.cpu().contiguous().view(torch.uint8)
    ib = b.cpu().contiguous().view(torch.uint8)
    assert torch.equal(ia, ib)


@triton.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    if OP == 0:
        r = x + y
    elif OP == 1:
        r = x * 3.0           # a broadcast operand
    elif OP == 2:
        r = tl.where(x > y, x, y - 1.0)
    elif OP == 3:
        r = tl.exp(x)
    else:
        r = x * y + x         # fma or mul-add, as the lowering fuses it
    tl.store(out_ptr + offs, r, mask=m)


def special_values(n, dtype):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g, dtype=torch.float32) * 10
    x[::97] = float("nan")
    x[1::89] = float("inf")
    x[2::83] = -0.0
    return x.to(dtype)


@pytest.mark.parametrize("op", [0, 1, 2, 3, 4], ids=["add", "bcast-mul", "select", "exp", "mul-add"])
@pytest.mark.parametrize("n", [4096 * 3, 4096 * 3 - 1, 4096 * 2 + 37])
def test_streamed_results_have_the_bits_of_cached_ones(op, n):
    x, y = special_values(n, torch.float32).to(DEVICE), special_values(n + 1, torch.float32)[:n].to(DEVICE)

    def launch():
        out = torch.full((n,), 7.0, device=DEVICE)
        h = binary_kernel[(triton.cdiv(n, 4096),)](x, y, out, n, OP=op, BLOCK=4096)
        return h, out

    streamed, cached, count = run_both(launch)
    same_bits(streamed, cached)
    # the full blocks stream; a masked tail block goes through LX and its st, as before
    assert count == n // 4096


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int64])
def test_element_sizes_one_to_eight_bytes(dtype):
    n = 8192 * 2
    if dtype.is_floating_point:
        x, y = special_values(n, dtype).to(DEVICE), special_values(n + 3, dtype)[:n].to(DEVICE)
    else:
        g = torch.Generator().manual_seed(3)
        x = torch.randint(-100, 100, (n,), generator=g, dtype=dtype).to(DEVICE)
        y = torch.randint(-100, 100, (n,), generator=g, dtype=dtype).to(DEVICE)

    def launch():
        out = torch.zeros(n, dtype=dtype, device=DEVICE)
        return binary_kernel[(2,)](x, y, out, n, OP=0, BLOCK=8192), out

    streamed, cached, count = run_both(launch)
    same_bits(streamed, cached)
    assert count == 2


@triton.jit
def cast_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(out_ptr.dtype.element_ty))


@pytest.mark.parametrize("dst", [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.int32, torch.float64])
def test_conversions_change_the_element_size_on_the_way_out(dst):
    n = 4096 * 4
    x = special_values(n, torch.float32)
    if not dst.is_floating_point:
        x = torch.nan_to_num(x, nan=0.0, posinf=1e6, neginf=-1e6)
    x = x.to(DEVICE)

    def launch():
        out = torch.zeros(n, dtype=dst, device=DEVICE)
        return cast_kernel[(4,)](x, out, BLOCK=4096), out

    streamed, cached, count = run_both(launch)
    same_bits(streamed, cached)
    assert count == 4


@pytest.mark.parametrize("shift", [1, 3, 5])
def test_misaligned_outputs(shift):
    # the output starts `shift` elements into its allocation: the first bytes before a 16-byte boundary
    # are written as ordinary stores
    n = 4096 * 2
    x, y = special_values(n, torch.float32).to(DEVICE), special_values(n, torch.float32).to(DEVICE)

    def launch():
        base = torch.full((n + 8,), -1.0, device=DEVICE)
        out = base[shift:shift + n]
        h = binary_kernel[(2,)](x, y, out, n, OP=0, BLOCK=4096)
        return h, base

    streamed, cached, count = run_both(launch)
    same_bits(streamed, cached)
    assert count == 2
    assert torch.all(streamed[:shift].cpu() == -1.0) and torch.all(streamed[shift + n:].cpu() == -1.0)


@triton.jit
def in_place_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 0.5 + tl.load(y_ptr + offs))


def test_in_place_updates_read_each_sub_tile_before_writing_it():
    n = 4096 * 3
    x0, y = special_values(n, torch.float32).to(DEVICE), special_values(n + 5, torch.float32)[:n].to(DEVICE)

    def launch():
        x = x0.clone()
        return in_place_kernel[(3,)](x, y, BLOCK=4096), x

    streamed, cached, count = run_both(launch)
    same_bits(streamed, cached)
    assert count == 3
    torch.testing.assert_close(streamed.cpu(), x0.cpu() * 0.5 + y.cpu(), equal_nan=True)


def test_small_results_and_zero_threshold_do_not_stream():
    n = 512 * 4   # 2 KB per instruction: under the sub-tiling's minimum
    x, y = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
    out = torch.empty(n, device=DEVICE)
    with threshold(1):
        h = binary_kernel[(4,)](x, y, out, n, OP=0, BLOCK=512)
        before = streamed_count(h)
        binary_kernel[(4,)](x, y, out, n, OP=0, BLOCK=512)
        assert streamed_count(h) == before
    torch.testing.assert_close(out.cpu(), x.cpu() + y.cpu(), rtol=0, atol=0)
    with threshold(0):
        big = torch.empty(4096 * 2, device=DEVICE)
        bx, by = torch.randn(4096 * 2, device=DEVICE), torch.randn(4096 * 2, device=DEVICE)
        h = binary_kernel[(2,)](bx, by, big, 4096 * 2, OP=0, BLOCK=4096)
        before = streamed_count(h)
        binary_kernel[(2,)](bx, by, big, 4096 * 2, OP=0, BLOCK=4096)
        assert streamed_count(h) == before


def test_the_default_threshold_is_the_host_cache_and_large_launches_stream():
    t = rt.stream_store_bytes()
    assert t >= 1 << 20
    with pytest.raises(ValueError, match="byte count >= 0"):
        rt.stream_store_bytes(-1)
    assert rt.stream_store_bytes() == t
    n = 1 << 22
    per_prog = 4096
    # a launch just over the threshold streams every full block; a launch of the same blocks that
    # writes less than the threshold does not
    x, y = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
    out = torch.empty(n, device=DEVICE)
    with threshold(n * 4 - 1):
        h = binary_kernel[(n // per_prog,)](x, y, out, n, OP=0, BLOCK=per_prog)
        before = streamed_count(h)
        binary_kernel[(n // per_prog,)](x, y, out, n, OP=0, BLOCK=per_prog)
        assert streamed_count(h) - before == n // per_prog
    torch.testing.assert_close(out.cpu(), x.cpu() + y.cpu(), rtol=0, atol=0)
    with threshold(n * 4 * 2):
        before = streamed_count(h)
        binary_kernel[(n // per_prog,)](x, y, out, n, OP=0, BLOCK=per_prog)
        assert streamed_count(h) == before


def test_two_threads_stream_the_same_bits():
    n = 4096 * 16
    x, y = special_values(n, torch.float32).to(DEVICE), special_values(n, torch.float32).to(DEVICE)
    outs = []
    for t in (0, 1):
        with threshold(t):
            out = torch.empty(n, device=DEVICE)
            h = binary_kernel[(16,)](x, y, out, n, OP=2, BLOCK=4096)
            before = streamed_count(h)
            h.function.launch(0, 16, 1, 1, (x.data_ptr(), y.data_ptr(), out.data_ptr(), n), num_threads=2)
            outs.append((out, streamed_count(h) - before))
    same_bits(outs[0][0], outs[1][0])
    assert outs[0][1] == 0 and outs[1][1] == 16
