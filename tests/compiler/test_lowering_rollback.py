"""A lowering that is tried and taken back (Lowering.checkpoint / rollback): a map_elementwise function
that cannot run on whole tiles falls back to element by element; a loop whose affine carry does not
hold is lowered again with the carry materialised. What the failed attempt emitted or cached must not
leak into what follows."""
import torch
import triton
import triton.language as tl

from spyre_triton.reference_kernels import collatz_steps, collatz_steps_ref

from conftest import DEVICE


@triton.jit
def _collatz_pair(a, b):
    return collatz_steps(a), collatz_steps(b)


@triton.jit
def k_collatz_of_range(o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.map_elementwise(_collatz_pair, offs + 3, pack=2)[0])


def test_map_elementwise_of_a_range_after_the_whole_tile_attempt_fails():
    # the attempt on whole tiles materialised `offs + 3` into a tile it then dropped; the element by
    # element lowering must not read that tile from the cache (it failed with a TypeError in finish)
    N = 32
    o = torch.empty(N, dtype=torch.int32, device=DEVICE)
    k_collatz_of_range[(1,)](o, N)
    assert o.cpu().tolist() == [collatz_steps_ref(v + 3) for v in range(N)]


@triton.jit
def k_transposed_weight_in_a_retried_loop(x_ptr, w_ptr, o_ptr, n, N: tl.constexpr):
    r = tl.arange(0, N)
    wt = tl.load(w_ptr + r[None, :] * N + r[:, None])  # w.T: a load the dot may read transposed
    acc = tl.zeros((N, N), tl.float32)
    rows = r
    for _ in range(n):
        x = tl.load(x_ptr + rows[:, None] * N + r[None, :])
        acc += tl.dot(x, wt)
        rows = (rows * 5 + 1) % N  # not affine: the loop is lowered a second time
    tl.store(o_ptr + r[:, None] * N + r[None, :], acc)


def test_a_loop_lowered_again_sees_the_loads_as_they_were():
    N, n = 16, 3
    x, w = torch.randn(N, N), torch.randn(N, N)
    o = torch.empty(N, N, device=DEVICE)
    k_transposed_weight_in_a_retried_loop[(1,)](x.to(DEVICE), w.to(DEVICE), o, n, N)
    rows, ref = torch.arange(N), torch.zeros(N, N)
    for _ in range(n):
        ref += x[rows] @ w.T
        rows = (rows * 5 + 1) % N
    torch.testing.assert_close(o.cpu(), ref, rtol=1e-4, atol=1e-4)
