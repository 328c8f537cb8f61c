"""Tensors whose meaning is in a bit, not in memory: conjugate and negative views, zero tensors.

Materialising one on spyre (copying it to the host, cloning, resolving, using it in an op that runs
through the CPU fallback) gives what the same steps give on the CPU. These used to overflow the stack
(a segfault): ATen's Conjugate/Negative fallbacks cloned the source of `_copy_from`, and the clone
copied through `_copy_from` again.
"""
import pytest
import torch

SPYRE = torch.device("spyre")


def cplx(*shape):
    return torch.randn(*shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))


def real(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


def conj(t):
    return t.conj()


def neg(t):
    return torch._neg_view(t)


def neg_conj(t):
    return torch._neg_view(t.conj())


BITS = {  # name: (source, view); complex sources for the conjugate views
    "conj": (cplx, conj),
    "neg": (real, neg),
    "neg_complex": (cplx, neg),
    "neg_conj": (cplx, neg_conj),
}

MATERIALISE = {
    "cpu": lambda v: v.cpu(),
    "clone": lambda v: v.clone().cpu(),
    "resolve": lambda v: v.resolve_conj().resolve_neg().cpu(),
    "contiguous_of_transpose": lambda v: v.mT.contiguous().cpu(),
    "add": lambda v: (v + v.resolve_conj().resolve_neg()).cpu(),
    "mul_scalar": lambda v: (v * 2).cpu(),
    "sum": lambda v: v.sum(0).cpu(),
    "item": lambda v: v[0, 0].item(),
    "to_dtype": lambda v: v.to(torch.complex128 if v.is_complex() else torch.float64).cpu(),
}


@pytest.mark.parametrize("how", MATERIALISE)
@pytest.mark.parametrize("bit", BITS)
def test_materialise_math_bit_view(bit, how):
    make, view = BITS[bit]
    src = make(2, 3)
    on_device, on_host = view(src.to(SPYRE)), view(src)
    assert (on_device.is_conj(), on_device.is_neg()) == (on_host.is_conj(), on_host.is_neg())
    got, want = MATERIALISE[how](on_device), MATERIALISE[how](on_host)
    if isinstance(want, torch.Tensor):
        assert not got.is_conj() or want.is_conj()
        torch.testing.assert_close(got.resolve_conj().resolve_neg(), want.resolve_conj().resolve_neg())
    else:
        assert got == pytest.approx(want)


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_write_through_math_bit_view(bit):
    make, view = BITS[bit]
    src, value = make(2, 3), make(2, 3) * 3
    d = src.to(SPYRE)
    view(d).copy_(value.to(SPYRE))       # writes the conjugate/negation of value into d
    view(d).mul_(2)
    h = src.clone()
    view(h).copy_(value)
    view(h).mul_(2)
    torch.testing.assert_close(d.cpu(), h)


def test_upload_math_bit_view():
    h = cplx(2, 3).conj()
    d = h.to(SPYRE)
    torch.testing.assert_close(d.cpu().resolve_conj(), h.resolve_conj())


def test_view_as_real_of_conjugate_is_an_error():
    d = cplx(2).to(SPYRE).conj()
    with pytest.raises(RuntimeError, match="resolve_conj"):
        torch.view_as_real(d)
    torch.testing.assert_close(torch.view_as_real(d.resolve_conj()).cpu(), torch.view_as_real(cplx(2).conj().resolve_conj()))


def test_zero_tensor():
    z = torch._efficientzerotensor(2, 3, device=SPYRE)
    assert z.device.type == "spyre" and z._is_zerotensor()
    assert torch.equal(z.cpu(), torch.zeros(2, 3))
    assert torch.equal(z.clone().cpu(), torch.zeros(2, 3))
    one = torch.ones(2, 3, device=SPYRE)
    assert torch.equal((z + one).cpu(), torch.ones(2, 3))
    assert torch.equal((z * one).cpu(), torch.zeros(2, 3))
    with pytest.raises(RuntimeError, match="ZeroTensors are immutable"):
        z.add_(one)


@pytest.mark.parametrize("fn", ["fft", "ifft", "hfft", "ihfft", "rfft", "irfft"])
def test_fft_on_device(fn):
    f = getattr(torch.fft, fn)
    x = real(8) if fn in ("rfft", "ihfft") else cplx(8)
    torch.testing.assert_close(f(x.to(SPYRE)).cpu(), f(x))


def test_complex_autograd():
    x = cplx(3)
    d = x.to(SPYRE).requires_grad_()
    (d * d.conj()).real.sum().backward()
    h = x.clone().requires_grad_()
    (h * h.conj()).real.sum().backward()
    torch.testing.assert_close(d.grad.cpu(), h.grad)


def test_compiled_hfft_twice():
    f = torch.compile(torch.fft.hfft)
    x = cplx(8)
    for _ in range(2):  # the second call used to segfault
        torch.testing.assert_close(f(x.to(SPYRE)).cpu(), torch.fft.hfft(x))


def test_tensor_past_its_storage_is_an_error():
    x = torch.randn(3).to(SPYRE)
    x.untyped_storage().resize_(0)  # x now reaches past the end of its storage
    for use in (x.cpu, x.clone, x.sum, lambda: x + 1):
        with pytest.raises(RuntimeError, match="reaches byte 12 of its storage, which has 0 bytes"):
            use()
