"""The PE array's f32 micro-kernels: the AVX-512 one (eight rows x 32 columns at a time) and the AVX2 one
(six rows x 16) accumulate each result element in the same order with the same fma, so a matmul gives the
same bits whichever the host runs. Shapes cover full and partial 8- and 6-row blocks, column tails of one
and of two 16-column panels, and K tails."""
import os
import subprocess
import sys

import pytest

from spyre_triton import _runtime

SCRIPT = r"""
import sys, torch, triton, triton.language as tl
DEV = triton.runtime.driver.active.get_active_torch_device()

@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        x = tl.load(a + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        y = tl.load(b + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y, input_precision="ieee")
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

g = torch.Generator().manual_seed(0)
out = []
for M, N, K, BM, BN, BK in [(36, 48, 40, 64, 64, 64), (50, 37, 29, 64, 64, 32), (128, 128, 96, 128, 128, 32),
                            (13, 16, 300, 16, 16, 128), (7, 5, 3, 16, 16, 16),
                            (40, 52, 70, 64, 64, 32), (200, 100, 33, 256, 128, 64)]:
    a, b = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
    c = torch.empty(M, N, device=DEV)
    mm[(triton.cdiv(M, BM), triton.cdiv(N, BN))](a.to(DEV), b.to(DEV), c, M, N, K, BM=BM, BN=BN, BK=BK)
    out.append(c.cpu())
torch.save(out, sys.argv[1])
"""


def run(tmp_path, name, env_extra):
    path, script = tmp_path / f"{name}.pt", tmp_path / "matmuls.py"  # @triton.jit needs a source file
    script.write_text(SCRIPT)
    env = dict(os.environ, **env_extra)
    subprocess.run([sys.executable, str(script), str(path)], env=env, check=True, timeout=300)
    import torch
    return torch.load(path)


@pytest.mark.skipif(_runtime.simd() != "avx512", reason="the AVX-512 kernels are not in use here (no AVX-512 on the host, or SPYRE_NO_AVX512 / SPYRE_NO_AVX2 set)")
def test_avx512_and_avx2_matmuls_give_the_same_bits(tmp_path):
    import torch
    wide = run(tmp_path, "avx512", {})
    narrow = run(tmp_path, "avx2", {"SPYRE_NO_AVX512": "1"})
    for w, n in zip(wide, narrow):
        assert torch.equal(w.view(torch.int32), n.view(torch.int32))
