"""Workarounds for what TorchInductor (torch 2.13) hard-codes for the devices it knows.

Inductor's registration API (device interface, backend, op overrides, benchmarker: see
`spyre_triton.inductor`) covers most of what a new Triton device needs; the places below test
device names from fixed lists instead. Each function patches one such place, is applied by
the post-import hook (`hooks`) right after the module it patches has executed (so
modules that later `from ... import` the patched name get the patched one), is idempotent, and
leaves behaviour for other devices unchanged. Nothing here copies Inductor code.
"""
from __future__ import annotations

import functools
import inspect
import os

from .device import DEVICE


def _spyre_can_run_triton() -> bool:
    try:
        import triton.backends
        import torch
    except ImportError:
        return False
    return DEVICE in triton.backends.backends and torch.spyre.is_available()


def patch_has_triton(mod) -> None:
    """torch.utils._triton.has_triton() answers "is there a device Triton can run on?" from a
    fixed table (cuda, xpu, cpu, mtia). With `spyre` in GPU_TYPES (below), the scheduler calls it
    when it creates the backend for a spyre device and raises TritonMissing when it is False; Dynamo
    also consults it before tracing user-written Triton kernels. Answer True when the spyre
    backend is installed and a spyre device exists, else what the original says."""
    orig = mod.has_triton
    if getattr(orig, "_spyre_wrapped", False):
        return

    @functools.cache
    def has_triton() -> bool:
        return orig() or _spyre_can_run_triton()

    has_triton.__doc__ = orig.__doc__
    has_triton.__wrapped__ = orig
    has_triton._spyre_wrapped = True
    mod.has_triton = has_triton
    # Normally this runs before anything imports the name. If the device registered late (torch
    # imported with autoload off, Inductor imported first), rebind the copies already taken.
    import sys
    for m in list(sys.modules.values()):
        if getattr(m, "__name__", "").startswith("torch.") and getattr(m, "has_triton", None) is orig:
            m.has_triton = has_triton


def add_gpu_type(mod) -> None:
    """torch._inductor.utils.GPU_TYPES lists the devices `is_gpu()` accepts. Inductor gates on it
    what a Triton device needs: the device guard and raw stream in the wrapper
    (`device_need_guard`), index normalisation of the device, GPU fusion rules, and the
    Triton-template path for mm/addmm/bmm under max-autotune (`use_triton_template`).
    Caveat: `get_gpu_type()` asserts that at most one listed type is available, so on a machine
    where CUDA/XPU is also available it would fail; spyre's Triton driver is inactive there anyway
    (see backend/driver.py `is_active`)."""
    if DEVICE not in mod.GPU_TYPES:
        mod.GPU_TYPES.append(DEVICE)


def patch_is_big_gpu(mod) -> None:
    """torch._inductor.utils.is_big_gpu(device) gates Triton matmul templates (max-autotune) on
    >= 68 SMs (16 on XPU), a proxy for "a GPU where autotuned GEMMs beat the vendor library", and
    warns "Not enough SMs to use max_autotune_gemm mode" otherwise, even outside max-autotune.
    Spyre has 32 cores and no vendor GEMM library at all (aten mm runs on the host through the
    CPU fallback), so on spyre templates are always worth offering: True for spyre devices,
    the original answer for every other device."""
    orig = mod.is_big_gpu
    if getattr(orig, "_spyre_wrapped", False):
        return
    import torch

    @functools.cache
    def is_big_gpu(index_or_device=0) -> bool:
        if isinstance(index_or_device, torch.device) and index_or_device.type == DEVICE:
            return True
        return orig(index_or_device)

    is_big_gpu.__doc__ = orig.__doc__
    is_big_gpu.__wrapped__ = orig
    is_big_gpu._spyre_wrapped = True
    mod.is_big_gpu = is_big_gpu


def patch_set_driver_to_gpu(mod) -> None:
    """torch._inductor.runtime.triton_helpers.set_driver_to_gpu() makes the first active non-cpu
    Triton backend (in discovery order: amd, nvidia, then plugins) the active driver, before a
    kernel compiles and when a kernel module loads. On a CPU-only machine that is spyre. Where a
    GPU backend is also active it would win even with TRITON_DEFAULT_BACKEND=spyre, so: when
    TRITON_DEFAULT_BACKEND names an installed backend, make that one active; else the original."""
    orig = mod.set_driver_to_gpu
    if getattr(orig, "_spyre_wrapped", False):
        return

    def set_driver_to_gpu():
        chosen = os.environ.get("TRITON_DEFAULT_BACKEND")
        import triton
        backend = triton.backends.backends.get(chosen) if chosen else None
        if backend is None or chosen == "cpu":
            return orig()
        driver = triton.runtime.driver
        active = getattr(driver.active, "_obj", None) or driver.active
        if not isinstance(active, backend.driver):
            driver.set_active(backend.driver())

    set_driver_to_gpu.__doc__ = orig.__doc__
    set_driver_to_gpu.__wrapped__ = orig
    set_driver_to_gpu._spyre_wrapped = True
    mod.set_driver_to_gpu = set_driver_to_gpu


def patch_reduction_configs(mod) -> None:
    """Outside max-autotune Inductor gives most reductions one config, a GPU's choice: a persistent
    reduction over rows of 256 elements or more XBLOCK 1 when the kernel has five loads and stores or
    more (one row per block of warps), a looped inner reduction over rows of 128 XBLOCK 2. On spyre a
    program is a core's work, and so little is too little to amortise its instructions: BERT's
    residual + layer norm over 1024 x 256 took 0.46 ms per launch at XBLOCK 1 and 0.28 ms at 8, its
    padded-mask softmax over 4096 x 128 1.82 ms at XBLOCK 2 and 1.44 ms at 8, and the performance
    model ranks the larger blocks first too (0.031 vs 0.062 ms and 0.058 vs 0.099 ms of device time).
    So on spyre a reduction gets the candidates Inductor would tune under max-autotune, and the
    benchmarker picks; other devices keep Inductor's heuristics."""
    for name in ("_reduction_configs", "_persistent_reduction_configs"):
        orig = getattr(mod, name)
        if getattr(orig, "_spyre_wrapped", False):
            continue
        setattr(mod, name, _with_all_candidates_on_spyre(orig))


def _with_all_candidates_on_spyre(orig):
    signature = inspect.signature(orig)

    def configs(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        device = (bound.arguments.get("triton_meta") or {}).get("device")
        if getattr(device, "type", None) == DEVICE:  # the unfiltered list, as under max-autotune
            bound.arguments["inductor_meta"] = dict(bound.arguments.get("inductor_meta") or {},
                                                    max_autotune_pointwise=True)
        return orig(*bound.args, **bound.kwargs)

    functools.update_wrapper(configs, orig)
    configs._spyre_wrapped = True
    return configs


def add_spyre_decompositions(mod) -> None:
    """torch._inductor.decomposition.decompositions is the table AOTAutograd applies when Inductor
    traces a graph (forward and backward). It is one table for all devices, with no registration
    API for out-of-tree ones, so spyre's entries go into it directly:

    - aten.convolution -> `inductor.spyre_convolution` (im2col + matmul, so the matmul becomes
      the Triton template), new: Inductor has no decomposition for it;
    - aten.convolution_backward -> `inductor.spyre_convolution_backward`, which wraps Inductor's
      own decomposition of it (splitting off the bias gradient on GPUs) and calls it for every
      tensor that is not on spyre.

    Both return NotImplemented (so Inductor lowers the op as before) unless the inputs are spyre
    tensors of a 1-D or 2-D floating-point convolution: other devices are unaffected."""
    import torch

    from spyre_triton import inductor
    aten = torch.ops.aten
    table = mod.decompositions
    if getattr(table.get(aten.convolution.default), "_spyre_wrapped", False):
        return
    fwd = inductor.spyre_convolution
    prev_fwd = table.get(aten.convolution.default)
    if prev_fwd is not None:  # none in torch 2.13; keep one if a later version adds it
        fwd = functools.partial(_first_implemented, fwd, prev_fwd)
    bwd = functools.partial(inductor.spyre_convolution_backward,
                            table.get(aten.convolution_backward.default))
    for op, fn in ((aten.convolution.default, fwd), (aten.convolution_backward.default, bwd)):
        table[op] = _marked(fn, f"spyre_{op._name.split('::')[-1]}")
    # batch norm in inference: empty statistics outputs on spyre, as its eager ops give
    # (decompositions.spyre_batch_norm_inference)
    for op, training_arg in ((aten.native_batch_norm.default, 5), (aten._native_batch_norm_legit.default, 5),
                             (aten._native_batch_norm_legit_functional.default, 5),
                             (aten._native_batch_norm_legit_no_training.default, None)):
        if table.get(op) is not None:
            fn = functools.partial(inductor.spyre_batch_norm_inference, table[op], training_arg)
            table[op] = _marked(fn, f"spyre_{op._name.split('::')[-1]}")


def sort_ops_on_device(mod) -> None:
    """Inductor lowers sort to a Triton kernel only up to 512 elements along the sorted dimension, and
    topk, kthvalue and median not at all, unless `config.triton.decompose_sort_ops` is set: past that
    size aten.sort is faster on a GPU. On spyre the alternative is the host CPU, so for spyre tensors
    these lowerings run with the option on (a sort kernel of any size with int32 indices, and the others
    built from it); for other devices they run as before. The option is read only while lowering, so
    this changes no generated code for other devices. Not mode: its decomposition picks another index
    among equal values than the eager op does, so a compiled graph would disagree with eager spyre."""
    import torch
    from torch._inductor import config
    aten = torch.ops.aten
    for op in (aten.sort.default, aten.sort.stable, aten.topk.default, aten.kthvalue.default,
               aten.median.default, aten.median.dim):
        orig = mod.lowerings.get(op)
        if orig is None or getattr(orig, "_spyre_wrapped", False):
            continue

        def lowering(x, *args, _orig=orig, **kwargs):
            device = x.get_device() if hasattr(x, "get_device") else None
            if getattr(device, "type", None) != DEVICE or config.triton.decompose_sort_ops:
                return _orig(x, *args, **kwargs)
            with config.patch({"triton.decompose_sort_ops": True}):
                return _orig(x, *args, **kwargs)

        functools.update_wrapper(lowering, orig)
        lowering._spyre_wrapped = True
        mod.lowerings[op] = lowering


def _marked(fn, name):
    def decomposition(*args, **kwargs):
        return fn(*args, **kwargs)
    decomposition.__name__ = decomposition.__qualname__ = name
    decomposition._spyre_wrapped = True
    return decomposition


def _first_implemented(first, then, *args, **kwargs):
    out = first(*args, **kwargs)
    return then(*args, **kwargs) if out is NotImplemented else out
