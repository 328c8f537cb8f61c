"""The PE array's packers convert every input value exactly, whichever build packs.

`tl.dot` packs its operands into panels (runtime/dot.c), converting f16 and bf16 to f32 on the way: with
AVX2 + F16C eight at a time and transposed in registers, elsewhere one element at a time. A product with
an identity matrix passes every value through a packer unchanged (x * 1 + the +0 products of the other
k), so the result must be the input converted to f32, bit for bit, with -0 giving +0. Each finite f16 and
bf16 pattern goes through each of the three packers (A, B, and B read transposed for `x @ w.T`), in tile
shapes with partial A panels (eight rows with AVX-512, six with AVX2), partial 16-column panels and K
shorter than the eight k converted at a time. The same runs again in a process refused AVX-512 (six-row
panels) and in one refused AVX2 (the one-element packers)."""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

DEV = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def eye_times(a_ptr, out_ptr, WHICH: tl.constexpr, S: tl.constexpr):
    # tile t of the input: an S x S block; out = I @ x (B packer), x @ I (A packer) or I @ x^T (B^T packer)
    base = tl.program_id(0) * S * S
    r = tl.arange(0, S)
    x = tl.load(a_ptr + base + r[:, None] * S + r[None, :])
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0).to(x.dtype)
    if WHICH == 0:
        y = tl.dot(x, eye)
    elif WHICH == 1:
        y = tl.dot(eye, x)
    else:
        y = tl.dot(eye, tl.trans(x))
    tl.store(out_ptr + base + r[:, None] * S + r[None, :], y)


def finite_patterns(dtype):
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    return bits[torch.isfinite(bits.float())]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("which", [0, 1, 2], ids=["a", "b", "bt"])
@pytest.mark.parametrize("S", [4, 16, 64])
def test_packers_convert_exactly(dtype, which, S):
    if dtype == torch.float32:  # a spread of magnitudes and subnormals, not every pattern
        vals = finite_patterns(torch.float16).float() * torch.tensor([1.0, 2.0 ** -130, 2.0 ** 100]).repeat(21846)[:63488]
    else:
        vals = finite_patterns(dtype)
    tiles = triton.cdiv(vals.numel(), S * S)
    x = torch.zeros(tiles * S * S, dtype=dtype)
    x[:vals.numel()] = vals
    out = torch.empty(tiles * S * S, device=DEV)
    eye_times[(tiles,)](x.to(DEV), out, WHICH=which, S=S)
    want = x.float().view(tiles, S, S)
    if which == 2:
        want = want.transpose(1, 2)
    want = want + 0.0  # -0 -> +0, as the sum does
    got = out.cpu().view(tiles, S, S)
    assert torch.equal(got.view(torch.int32), want.contiguous().view(torch.int32))


@pytest.mark.parametrize("refuse", ["SPYRE_NO_AVX2", "SPYRE_NO_AVX512"])
def test_packers_of_the_narrower_builds(refuse):
    # SPYRE_NO_AVX2: the one-element packers; SPYRE_NO_AVX512: the six-row panels of the AVX2 kernel (on an
    # AVX-512 host the eight-row ones run by default)
    env = {k: v for k, v in os.environ.items() if k not in ("SPYRE_NO_AVX2", "SPYRE_NO_AVX512")}
    env[refuse] = "1"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "exactly"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
