"""Two CompositeExplicitAutograd ops that the device registers on its CPU fallback
(spyre_triton/csrc/device.cpp): conj_physical_ (its composite kernel calls an ATen DispatchStub that has no
spyre kernel: "DispatchStub: missing kernel for spyre") and addr.out (its composite kernel wrote an out=
tensor on the CPU instead of refusing it as CUDA does). PyTorch's test_ops.py covers both
(test_variant_consistency_eager_conj_physical, test_out_addr)."""
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_conj_physical_inplace_matches_cpu(dtype):
    x = torch.randn(4, 3, dtype=dtype)
    y = x.to("spyre")
    r = y.conj_physical_()
    assert r is y
    torch.testing.assert_close(y.cpu(), x.conj_physical())
    t = x.to("spyre").t()                                  # noncontiguous
    torch.conj_physical_(t)
    torch.testing.assert_close(t.cpu(), x.t().conj_physical())


def test_conj_physical_inplace_of_a_real_tensor_leaves_it():
    x = torch.randn(5)
    y = x.to("spyre")
    y.conj_physical_()
    torch.testing.assert_close(y.cpu(), x)


def test_addr_out_matches_cpu():
    a, u, v = torch.randn(3, 4), torch.randn(3), torch.randn(4)
    out = torch.empty(0, device="spyre")                    # resized by the op, as on the CPU
    got = torch.addr(a.to("spyre"), u.to("spyre"), v.to("spyre"), beta=0.5, alpha=2.0, out=out)
    assert got is out and out.device.type == "spyre"
    torch.testing.assert_close(out.cpu(), torch.addr(a, u, v, beta=0.5, alpha=2.0))


def test_addr_out_on_the_cpu_is_refused_and_left_alone():
    a, u, v = (torch.randn(*s).to("spyre") for s in ((3, 4), (3,), (4,)))
    out = torch.full((3, 4), 7.0)
    with pytest.raises(RuntimeError, match=r"argument 'out' is written by the op but is on device cpu"):
        torch.addr(a, u, v, out=out)
    assert torch.equal(out, torch.full((3, 4), 7.0))
