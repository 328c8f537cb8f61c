"""Eager ops whose plain host fallback would round differently from an accelerator.

PyTorch's CPU layer norm in half precision keeps its mean and 1/std in half precision and
accumulates the weight and bias gradients in half precision; CUDA, and Spyre's fp32 accumulators,
keep statistics in fp32 and accumulate in fp32. For these ops on spyre tensors of fp16/bf16 we
compute in fp32 on the host and round the outputs once, returning fp32 statistics as CUDA does, so
eager results on spyre have an accelerator's accuracy (the bias-gradient error on a 1151x8192 layer
norm drops from ~0.06 to ~0.009). They are still host fallbacks and are counted as such.
"""
from __future__ import annotations

import torch

_HALF = (torch.float16, torch.bfloat16)
_lib = None


def _host_fp32(t):
    return None if t is None else t.detach().cpu().float()


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    from . import _device
    _device.record_fallback("aten::native_layer_norm_backward")
    grads = torch.ops.aten.native_layer_norm_backward(
        _host_fp32(grad_out), _host_fp32(input), normalized_shape, _host_fp32(mean), _host_fp32(rstd),
        _host_fp32(weight), _host_fp32(bias), output_mask)
    like = (input, weight, bias)
    return tuple(None if g is None else g.to(ref.dtype if ref is not None else input.dtype).to(input.device)
                 for g, ref in zip(grads, like))


def _layer_norm_backward_dispatch(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    if input.dtype in _HALF:
        return native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    # full precision: the same host computation without rounding changes
    from . import _device
    _device.record_fallback("aten::native_layer_norm_backward")
    cpu = lambda t: None if t is None else t.detach().cpu()
    grads = torch.ops.aten.native_layer_norm_backward(cpu(grad_out), cpu(input), normalized_shape, cpu(mean),
                                                      cpu(rstd), cpu(weight), cpu(bias), output_mask)
    return tuple(None if g is None else g.to(input.device) for g in grads)


def _layer_norm_dispatch(input, normalized_shape, weight, bias, eps):
    from . import _device
    _device.record_fallback("aten::native_layer_norm")
    half = input.dtype in _HALF
    host = _host_fp32 if half else (lambda t: None if t is None else t.detach().cpu())
    out, mean, rstd = torch.ops.aten.native_layer_norm(host(input), normalized_shape, host(weight), host(bias), eps)
    # statistics stay fp32 for half inputs (CUDA's accumulate type); the output is rounded once
    return out.to(input.dtype).to(input.device), mean.to(input.device), rstd.to(input.device)


def register():
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("native_layer_norm", _layer_norm_dispatch, "PrivateUse1")
    _lib.impl("native_layer_norm_backward", _layer_norm_backward_dispatch, "PrivateUse1")
