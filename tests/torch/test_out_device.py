"""An op on spyre tensors refuses out= and in-place tensors on another device, as PyTorch requires (CUDA
raises; test_ops.py's TestCommon.test_out checks it for every OpInfo). The CPU fallback would otherwise
write the CPU tensor and succeed (spyre_triton/csrc/device.cpp, run_on_cpu). CPU scalar inputs stay allowed."""
import pytest
import torch


def _spy(*shape):
    return torch.randn(*shape).to("spyre")


def test_out_on_the_cpu_is_refused_and_left_alone():
    a, b = _spy(3, 4), _spy(4, 5)
    out = torch.full((3, 5), 7.0)
    with pytest.raises(RuntimeError, match=r"argument 'out' is written by the op but is on device cpu, not on spyre"):
        torch.mm(a, b, out=out)
    assert torch.equal(out, torch.full((3, 5), 7.0))


def test_every_out_of_a_multi_output_op_is_checked():
    x = _spy(4, 6)
    values, indices = torch.empty(0, device="spyre"), torch.empty(0, dtype=torch.long)
    # max.dim_max names its outs max and max_values (the indices)
    with pytest.raises(RuntimeError, match="argument 'max_values' .* on device cpu"):
        torch.max(x, 1, out=(values, indices))


def test_inplace_on_a_cpu_tensor_with_a_spyre_operand_is_refused():
    # refused before the fallback (ATen's device check) or by it, as on CUDA
    with pytest.raises(RuntimeError, match="argument 'self' is written .* on device cpu|on the same device"):
        torch.ones(3).atan2_(_spy(3))


def test_cpu_scalar_inputs_and_spyre_outs_still_work():
    x = _spy(3, 4)
    got = torch.mul(x, torch.tensor(2.5))         # a CPU 0-dim tensor as an input, as on CUDA
    torch.testing.assert_close(got.cpu(), x.cpu() * 2.5)
    out = torch.empty(0, device="spyre")
    torch.mm(x, _spy(4, 2), out=out)              # out= on the op's device
    assert out.device.type == "spyre" and out.shape == (3, 2)
