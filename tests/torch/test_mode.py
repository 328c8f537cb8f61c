"""torch.mode on spyre. ATen's mode.values, the out= form of torch.mode, is CompositeExplicitAutograd and
refuses devices other than CPU, CUDA and XPU (16 of PyTorch's test_reductions.py tests failed on it); the
device registers it on its CPU fallback (spyre_triton/csrc/device.cpp), so it runs on the host over the
device bytes like the other fallback ops."""
import pytest
import torch


def _sample(dtype):
    # few distinct values, so each row has a clear mode and ties are exercised too
    g = torch.Generator().manual_seed(0)
    return torch.randint(-3, 4, (5, 7, 6), generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8])
@pytest.mark.parametrize("dim, keepdim", [(-1, False), (1, True), (0, False)])
def test_mode_out_matches_cpu(dtype, dim, keepdim):
    x = _sample(dtype)
    want = torch.mode(x, dim, keepdim)
    values = torch.empty(0, dtype=dtype, device="spyre")       # empty: mode resizes them, as on the CPU
    indices = torch.empty(0, dtype=torch.long, device="spyre")
    got = torch.mode(x.to("spyre"), dim, keepdim, out=(values, indices))
    assert got.values is values and got.indices is indices
    assert values.device.type == "spyre" and indices.device.type == "spyre"
    torch.testing.assert_close(values.cpu(), want.values)
    torch.testing.assert_close(indices.cpu(), want.indices)


def test_mode_functional_and_noncontiguous_input():
    x = _sample(torch.float32).transpose(0, 2)
    want = torch.mode(x, 1)
    got = torch.mode(x.to("spyre"), 1)
    torch.testing.assert_close(got.values.cpu(), want.values)
    torch.testing.assert_close(got.indices.cpu(), want.indices)


def test_mode_out_counts_as_a_host_fallback():
    x = _sample(torch.float32).to("spyre")
    out = (torch.empty(0, device="spyre"), torch.empty(0, dtype=torch.long, device="spyre"))
    torch.spyre.reset_fallback_counts()
    torch.mode(x, 0, out=out)
    assert torch.spyre.fallback_counts(overloads=True).get("aten::mode.values") == 1


def test_mode_bad_dim_is_the_cpu_error():
    x = _sample(torch.float32).to("spyre")
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.mode(x, 5, out=(torch.empty(0, device="spyre"), torch.empty(0, dtype=torch.long, device="spyre")))
