"""TorchInductor on the `spyre` device: `torch.compile(model.to("spyre"))` makes Triton kernels
that the spyre backend compiles and the runtime launches.

What Inductor needs from an out-of-tree device, and where it is registered here:
  torch._dynamo.device_interface   register_interface_for_device("spyre", SpyreInterface):
                                   properties, streams, events, device index, compute capability
  torch._inductor.codegen.common   register_device_op_overrides("spyre", ...): the lines the Python
                                   wrapper writes for device guards, streams and synchronisation
  torch._inductor.codegen.triton   register_backend_for_device("spyre", SpyreScheduling,
                                   SpyreWrapperCodegen): Inductor's Triton scheduling (pointwise
                                   kernels tiled by their index dimensions) and Python wrapper, plus
                                   host-fallback warnings and kernel origins for errors
  torch._inductor.runtime.benchmarking
                                   register_benchmarker("spyre", ...): autotuning times launches
                                   on spyre, not through the CUDA default
  torch._inductor.template_heuristics.triton
                                   block sizes for the mm/bmm/addmm/baddbmm Triton templates, in
                                   every mode (one per problem outside max-autotune)
  torch._inductor.config           inductor_choices_class = spyre_choices: on spyre, matmuls get the
                                   Triton templates instead of extern aten calls (host CPU)
  torch._inductor.decomposition    convolution and its backward on spyre as im2col + matmul
plus the workarounds in `compat` for what Inductor hard-codes for known devices.

Where compute runs: every mm/bmm/addmm/baddbmm/convolution (and SDPA, which Inductor decomposes
into bmm and softmax) of a compiled graph on spyre becomes a Triton kernel. Ops Inductor has no
kernel for run on the host through the eager CPU fallback; the graph warns once per op
(SpyreHostFallbackWarning) and `host_fallbacks()` lists them; `spyre_triton.track()` counts them.

Registration is lazy. `import torch` loads the device (autoload) and `spyre_triton.device.register()`
calls `register()` (in `hooks`), which does not import Dynamo or Inductor (importing
`torch._dynamo.device_interface` alone costs ~0.9 s): it installs a post-import hook that performs
each registration right after the module it registers with has finished executing, in whichever
process that happens (Inductor's compile workers import torch, so they are covered too).

The package, one module per concern:
  device         the device's properties, Dynamo's device interface, the wrapper's device lines
  codegen        Inductor's Triton scheduling and Python wrapper registered for spyre
  diagnostics    host-fallback warnings (`host_fallbacks()`) and kernel origins on device errors
  benchmarker    autotuning times launches on spyre
  choices        matmul template heuristics and the choices class
  decompositions convolution and its backward as im2col + matmul
  compat         patches for what Inductor hard-codes for the devices it knows
  hooks          the post-import hook and `register()`
"""
from __future__ import annotations

from .benchmarker import BENCHMARK_MAX_RUNS
from .choices import spyre_choices
from .decompositions import spyre_batch_norm_inference, spyre_convolution, spyre_convolution_backward
from .device import DEVICE, SpyreDeviceProperties, get_device_properties, get_raw_stream
from .diagnostics import (MAX_ORIGIN_LINES, SpyreHostFallbackWarning, host_fallbacks,
                          warn_host_ops, with_kernel_origins)
from .hooks import register

__all__ = ["DEVICE", "SpyreDeviceProperties", "SpyreHostFallbackWarning", "get_device_properties",
           "get_raw_stream", "host_fallbacks", "register", "spyre_choices", "spyre_convolution",
           "spyre_batch_norm_inference", "spyre_convolution_backward", "warn_host_ops", "with_kernel_origins"]
