"""Copy-on-write tensors (torch._lazy_clone) on spyre. The CPU fallback reads such a tensor without copying
it, and gives the storages an op writes memory of their own first (spyre_triton/csrc/device.cpp,
own_written_storages), so a write never reaches the tensor it was cloned from. PyTorch's test_ops.py checks
the same (TestCompositeCompliance.test_cow_input)."""
import pytest
import torch

is_cow = torch._C._is_cow_tensor


def _pair():
    a = torch.randn(3, 4).to("spyre")
    return a, torch._lazy_clone(a), a.cpu()


@pytest.mark.parametrize("name, read", [
    ("sin", torch.sin),
    ("sum", lambda t: t.sum(1)),
    ("to_sparse", lambda t: t.to_sparse()),
    ("cpu", lambda t: t.cpu()),
    ("copy from", lambda t: torch.empty(3, 4, device="spyre").copy_(t)),
])
def test_reading_a_lazy_clone_keeps_it_shared(name, read):
    _, b, _ = _pair()
    read(b)
    assert is_cow(b)


@pytest.mark.parametrize("name, write", [
    ("add_", lambda t: t.add_(1)),
    ("out=", lambda t: torch.sin(torch.ones(3, 4, device=t.device), out=t)),
    ("copy_", lambda t: t.copy_(torch.zeros(3, 4))),
    ("fill_", lambda t: t.fill_(7)),
])
def test_writing_a_lazy_clone_leaves_the_original(name, write):
    a, b, before = _pair()
    write(b)
    assert not is_cow(b)
    torch.testing.assert_close(a.cpu(), before, rtol=0, atol=0)
    expect = before.clone()
    write(expect)
    torch.testing.assert_close(b.cpu(), expect, rtol=0, atol=0)


def test_writing_the_original_leaves_the_lazy_clone():
    a, b, before = _pair()
    a.zero_()
    torch.testing.assert_close(b.cpu(), before, rtol=0, atol=0)


def test_batch_norm_updates_a_lazily_cloned_running_mean_alone():
    # native_batch_norm writes running_mean and running_var, which its schema does not mark as written
    mean = torch.zeros(4, device="spyre")
    var = torch.ones(4, device="spyre")
    m2, v2 = torch._lazy_clone(mean), torch._lazy_clone(var)
    x = torch.randn(8, 4)
    torch.nn.functional.batch_norm(x.to("spyre"), m2, v2, training=True, momentum=0.5)
    rm, rv = torch.zeros(4), torch.ones(4)
    torch.nn.functional.batch_norm(x, rm, rv, training=True, momentum=0.5)
    torch.testing.assert_close(m2.cpu(), rm)
    torch.testing.assert_close(v2.cpu(), rv)
    assert mean.cpu().abs().sum().item() == 0 and torch.equal(var.cpu(), torch.ones(4))
