"""Ops on spyre tensors refuse inputs on another device, as CUDA does, except 0-dim CPU tensors (scalars) and
the ops whose CUDA kernels take CPU tensors on purpose (indexing with CPU indices). The CPU fallback
(spyre_triton/csrc/device.cpp, run_on_cpu) would otherwise compute with the CPU tensor and succeed;
test_ops.py's test_errors of cat, dot and vdot require "Expected all tensors to be on the same device"."""
import pytest
import torch

SAME_DEVICE = "Expected all tensors to be on the same device"


def _spy(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype).to("spyre")


@pytest.mark.parametrize("op", [torch.dot, torch.vdot])
@pytest.mark.parametrize("cpu_first", [False, True])
def test_dot_with_a_cpu_vector_is_refused(op, cpu_first):
    a, b = _spy(3), torch.randn(3)
    args = (b, a) if cpu_first else (a, b)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        op(*args)


def test_cat_with_a_cpu_tensor_names_the_argument():
    with pytest.raises(RuntimeError, match=SAME_DEVICE + r".*spyre:0 and cpu.*aten::cat.*argument 'tensors'"):
        torch.cat([_spy(3, 3), torch.randn(3, 3)])


def test_mm_with_a_cpu_matrix_is_refused():
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.mm(_spy(2, 3), torch.randn(3, 4))


def test_cpu_scalar_tensors_stay_legal():
    x = _spy(4)
    s = torch.tensor(3.0)                                    # 0-dim CPU: a scalar, legal on CUDA too
    torch.testing.assert_close(torch.pow(x, s).cpu(), torch.pow(x.cpu(), s))
    torch.testing.assert_close(torch.where(x > 0, x, s).cpu(), torch.where(x.cpu() > 0, x.cpu(), s))
    y = x.clone()
    y.masked_fill_(x > 0, torch.tensor(-1.0))
    torch.testing.assert_close(y.cpu(), x.cpu().masked_fill(x.cpu() > 0, -1.0))


def test_indexing_with_cpu_indices_stays_legal():
    # CUDA accepts CPU index tensors for indexing and index_put; so does spyre
    x = _spy(5, 4)
    idx = torch.tensor([4, 0, 2])
    torch.testing.assert_close(x[idx].cpu(), x.cpu()[idx])
    mask = torch.tensor([True, False, True, False, True])
    torch.testing.assert_close(x[mask].cpu(), x.cpu()[mask])
    y = x.clone()
    y[idx] = _spy(3, 4)
    want = x.cpu().clone()
    want[idx] = y.cpu()[idx]
    torch.testing.assert_close(y.cpu(), want)


def test_copies_between_devices_stay_legal():
    x = _spy(3, 2)
    c = torch.randn(3, 2)
    x.copy_(c)
    torch.testing.assert_close(x.cpu(), c)
    torch.testing.assert_close(c.to("spyre").cpu(), c)
