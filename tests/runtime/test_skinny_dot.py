"""Skinny tl.dot (M <= 4 rows: a decode step's matrix-vector products) takes its own paths in
runtime/dot.c, reading B once without packing it. With B as stored ([K, N]) the arithmetic is the packed
path's in the same order, so each row must equal, bit for bit, the same row computed inside a 16-row
product. With B transposed (a Linear's weight) each output is a dot product in eight lanes: a row's bits
then depend on its own data only, so they must be equal whether the product has 1, 2, 3 or 4 rows (a
decode batch is batch-invariant). Every result is checked against torch in float64 with the f32 bound of
a K-term dot product."""
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sbk, sbn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = pid * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(a, b, transposed, BM, BN, BK):
    M, K = a.shape
    N = b.shape[1]
    bd = b.t().contiguous().to(DEVICE) if transposed else b.to(DEVICE)  # B^T rows: a Linear's weight
    sbk, sbn = (1, K) if transposed else (N, 1)
    c = torch.empty(M, N, dtype=torch.float32, device=DEVICE)
    dot_kernel[(triton.cdiv(N, BN),)](a.to(DEVICE), bd, c, M, N, K, sbk, sbn, BM=BM, BN=BN, BK=BK)
    return c.cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("transposed", [False, True], ids=["b", "bt"])
@pytest.mark.parametrize("M,BM,N,BN,K,BK", [
    (1, 1, 64, 32, 600, 512),   # K blocks longer than the runtime's KC (256): per-block sums
    (1, 1, 200, 128, 600, 512), # one row: 64 columns per pass of B's rows, two passes a tile; ragged N
    (3, 4, 40, 16, 72, 64),     # ragged N (a partial group of 8 columns) and K (a partial 8 x 8 block)
    (4, 4, 4, 4, 20, 32),       # fewer than eight columns
    (2, 2, 128, 128, 512, 64),  # a decode step's shape: several K steps accumulating
    (2, 2, 48, 16, 136, 128),   # groups of eight columns one at a time (16-wide tiles), a ragged K step
    (4, 4, 100, 64, 300, 256),  # four rows: groups of 32 columns taken as two of 16; ragged N and K
])
def test_skinny_rows_are_batch_invariant(dtype, transposed, M, BM, N, BN, K, BK):
    g = torch.Generator().manual_seed(M * 1000 + N + K)
    a = torch.randn(M, K, generator=g).to(dtype)
    b = torch.randn(K, N, generator=g).to(dtype)
    skinny = run(a, b, transposed, BM, BN, BK)
    if transposed:  # each row alone (a batch of one): the same bits as inside the M-row product
        same = torch.cat([run(a[i:i + 1], b, transposed, 1, BN, BK) for i in range(M)])
    else:           # the same rows inside a 16-row product, which takes the packed path
        same = run(torch.cat([a, torch.randn(16 - M, K, generator=g).to(dtype)]), b, transposed, 16, BN, BK)[:M]
    assert torch.equal(skinny, same), (skinny - same).abs().max()
    ref = a.double() @ b.double()
    bound = (K + 2) * 2.0 ** -24 * (a.double().abs() @ b.double().abs())
    assert ((skinny.double() - ref).abs() <= bound).all()
