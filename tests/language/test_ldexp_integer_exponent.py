"""libdevice.ldexp(x, n) with an integer n, as CUDA's libdevice takes it and Inductor's frexp passes it
(int32), for every float type; torch.ldexp on the CPU is the reference, bit for bit. Before, only
float n was accepted and torch.frexp under torch.compile failed with a CompilationError."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from conftest import DEVICE
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


@triton.jit
def ldexp_kernel(x_ptr, n_ptr, o_ptr, size, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < size
    tl.store(o_ptr + offs, libdevice.ldexp(tl.load(x_ptr + offs, mask=m), tl.load(n_ptr + offs, mask=m)), mask=m)


def special_values(dtype):
    info = torch.finfo(dtype)
    return torch.tensor([0.0, -0.0, 1.0, -1.5, 3.0, info.tiny, info.tiny * info.eps, info.max, -info.max,
                         float("inf"), float("-inf"), float("nan")], dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("n_dtype", [torch.int32, torch.int64, torch.int16])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_ldexp_integer_exponent(dtype, n_dtype):
    base = special_values(dtype)
    exps = torch.tensor([0, 1, -1, 5, -20, 100, -130, 257, -257, 1100, -1100, 30000], dtype=n_dtype)
    x = base.repeat_interleave(len(exps))
    n = exps.repeat(len(base))
    out = torch.empty_like(x, device=DEVICE)
    ldexp_kernel[(1,)](x.to(DEVICE), n.to(DEVICE), out, len(x), BLOCK=triton.next_power_of_2(len(x)))
    # C's ldexp in float64 (exact where the dtype's result is not 0 or inf), rounded once to dtype.
    # (torch.ldexp is x * 2.0**n: 0 * 2^1100 would be NaN.)
    want = torch.from_numpy(np.ldexp(x.double().numpy(), n.numpy().astype(np.int32))).to(dtype)
    got = out.cpu()
    assert torch.equal(got.isnan(), want.isnan())
    ok = got.isnan() | (got == want)
    assert ok.all(), list(zip(x[~ok].tolist(), n[~ok].tolist(), got[~ok].tolist(), want[~ok].tolist()))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_compiled_frexp(dtype):
    x = torch.cat([special_values(dtype), torch.randn(20, generator=torch.Generator().manual_seed(0)).to(dtype)])
    torch._dynamo.reset()
    mantissa, exponent = torch.compile(torch.frexp)(x.to("spyre"))
    want_m, want_e = torch.frexp(x)
    assert torch.equal(mantissa.cpu().nan_to_num(7.0), want_m.nan_to_num(7.0))
    assert torch.equal(exponent.cpu(), want_e)
