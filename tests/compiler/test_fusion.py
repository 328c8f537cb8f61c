"""Multiply-add fusion (Triton's enable_fp_fusion, on by default as on GPUs): a product read only by an
add becomes one fma, rounded once; with the option off, the product and the sum round separately."""
import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import mnemonics

from conftest import DEVICE


@triton.jit
def mul_add_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    z = tl.load(z_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * y + z, mask=m)


@triton.jit
def product_used_twice_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    p = x * x
    tl.store(out_ptr + offs, p + 1.0)
    tl.store(out_ptr + BLOCK + offs, p)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("fuse", [True, False])
def test_fusion_rounds_once_and_can_be_turned_off(dtype, fuse):
    eps = 2.0 ** (-12 if dtype == torch.float32 else -27)
    n = 300
    x = torch.full((n,), 1 + eps, dtype=dtype)
    z = torch.full((n,), -(1 + 2 * eps), dtype=dtype)
    out = torch.empty(n, dtype=dtype, device=DEVICE)
    h = mul_add_kernel[(3,)](x.to(DEVICE), x.to(DEVICE), z.to(DEVICE), out, n, BLOCK=128, enable_fp_fusion=fuse)
    # (1 + e)^2 = 1 + 2e + e^2: rounding the product drops e^2 (a tie to even), the fused result keeps it
    expect = eps * eps if fuse else 0.0
    assert out.cpu().tolist() == [expect] * n
    t = str(dtype).replace("torch.float", "f")
    assert (f"fma.{t}" in mnemonics(h)) == fuse and f"mul.{t}" not in mnemonics(h)
    # unfused, the product and the sum still run as one pass: a binchain, which rounds each of them
    assert (f"binchain.{t}" in mnemonics(h)) != fuse


def test_a_product_with_another_reader_is_not_fused():
    x = torch.arange(64, dtype=torch.float32)
    out = torch.empty(128, device=DEVICE)
    h = product_used_twice_kernel[(1,)](x.to(DEVICE), out, BLOCK=64)
    torch.testing.assert_close(out.cpu(), torch.cat([x * x + 1, x * x]))
    assert "fma.f32" not in mnemonics(h)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_mul_add(dtype):
    x, y, z = (torch.randn(1000).to(dtype) for _ in range(3))
    out = torch.empty(1000, dtype=dtype, device=DEVICE)
    mul_add_kernel[(8,)](x.to(DEVICE), y.to(DEVICE), z.to(DEVICE), out, 1000, BLOCK=128)
    ref = (x.float() * y.float() + z.float()).to(dtype)  # one rounding to the half type, as an fma
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)


def test_the_global_knob_turns_fusion_off(monkeypatch):
    # TRITON_DEFAULT_FP_FUSION=0 / knobs.language.default_fp_fusion, as on Triton's GPU backends
    from triton import knobs
    monkeypatch.setattr(knobs.language, "default_fp_fusion", False)
    eps = 2.0 ** -12
    x = torch.full((128,), 1 + eps)
    z = torch.full((128,), -(1 + 2 * eps))
    out = torch.empty(128, device=DEVICE)
    h = mul_add_kernel[(1,)](x.to(DEVICE), x.to(DEVICE), z.to(DEVICE), out, 128, BLOCK=128)
    assert out.cpu().tolist() == [0.0] * 128 and "fma.f32" not in mnemonics(h)
