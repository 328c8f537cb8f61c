"""An op given the same spyre tensor in two arguments sees one CPU alias for both in the fallback
(spyre_triton/csrc/device.cpp, Aliaser::to_cpu), as a CPU op sees the same tensor twice. With two aliases,
TensorIterator took `mul.out(self, other, out=self)` (what ldexp_ runs) for an out= that it may resize, so an
in-place op that must not broadcast its self grew it instead (test_ops.py test_variant_consistency_eager_ldexp)."""
import pytest
import torch

NO_INPLACE_BROADCAST = r"output with shape \[5, 1\] doesn't match the broadcast shape \[5, 5\]"


def test_inplace_ldexp_that_would_broadcast_self_is_refused():
    x, e = torch.randn(5, 1).to("spyre"), torch.randint(-3, 3, (5,)).float().to("spyre")
    with pytest.raises(RuntimeError, match=NO_INPLACE_BROADCAST):
        x.ldexp_(e)
    assert x.shape == (5, 1)


def test_out_aliasing_an_input_that_would_broadcast_is_refused():
    x, y = torch.randn(5, 1).to("spyre"), torch.randn(5).to("spyre")
    with pytest.raises(RuntimeError, match=NO_INPLACE_BROADCAST):
        torch.mul(x, y, out=x)


def test_same_tensor_twice_computes_as_on_the_cpu():
    x = torch.randn(4, 3)
    s = x.to("spyre")
    torch.testing.assert_close(torch.mul(s, s).cpu(), x * x)
    s.ldexp_(torch.tensor([1.0, 2.0, -1.0]).to("spyre"))
    torch.testing.assert_close(s.cpu(), torch.ldexp(x, torch.tensor([1.0, 2.0, -1.0])))
    t = x.to("spyre")
    torch.addcmul(t, t, t, value=0.5, out=t)                 # out= is also every input
    torch.testing.assert_close(t.cpu(), torch.addcmul(x, x, x, value=0.5))
