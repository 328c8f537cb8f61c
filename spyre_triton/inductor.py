"""TorchInductor on the `spyre` device: `torch.compile(model.to("spyre"))` makes Triton kernels
that the spyre backend compiles and the runtime launches.

What Inductor needs from an out-of-tree device, and where it is registered here:
  torch._dynamo.device_interface   register_interface_for_device("spyre", SpyreInterface):
                                   properties, streams, events, device index, compute capability
  torch._inductor.codegen.common   register_device_op_overrides("spyre", ...): the lines the Python
                                   wrapper writes for device guards, streams and synchronisation
  torch._inductor.codegen.triton   register_backend_for_device("spyre", SpyreScheduling,
                                   SpyreWrapperCodegen): Inductor's Triton scheduling and Python
                                   wrapper, plus host-fallback warnings and kernel origins for errors
  torch._inductor.runtime.benchmarking
                                   register_benchmarker("spyre", ...): autotuning times launches
                                   on spyre, not through the CUDA default
  torch._inductor.template_heuristics.triton
                                   block sizes for the mm/bmm/addmm/baddbmm Triton templates, in
                                   every mode (one per problem outside max-autotune)
  torch._inductor.config           inductor_choices_class = spyre_choices: on spyre, matmuls get the
                                   Triton templates instead of extern aten calls (host CPU)
  torch._inductor.decomposition    convolution and its backward on spyre as im2col + matmul
plus the workarounds in `inductor_compat` for what Inductor hard-codes for known devices.

Where compute runs: every mm/bmm/addmm/baddbmm/convolution (and SDPA, which Inductor decomposes
into bmm and softmax) of a compiled graph on spyre becomes a Triton kernel. Ops Inductor has no
kernel for run on the host through the eager CPU fallback; the graph warns once per op
(SpyreHostFallbackWarning) and `host_fallbacks()` lists them; `spyre_triton.track()` counts them.

Registration is lazy. `import torch` loads the device (autoload) and `spyre_triton.device.register()`
calls `register()` below, which does not import Dynamo or Inductor (importing
`torch._dynamo.device_interface` alone costs ~0.9 s): it installs a post-import hook that performs
each registration right after the module it registers with has finished executing, in whichever
process that happens (Inductor's compile workers import torch, so they are covered too).
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
import time
import traceback
import warnings
from typing import Any, Callable

from spyre_triton import config

DEVICE = "spyre"

# Properties Inductor and Triton read. There are no warps, SMs or L2 on Spyre: 32 AI cores stand
# for SMs (Inductor sizes persistent/split reductions by `multi_processor_count`), `warp_size` is
# the number Triton's launch arithmetic wants, and each core's LX scratchpad is the on-chip memory.
_PROPERTIES = dict(
    name="Spyre (simulated)",
    type=DEVICE,
    arch=config.ARCH,
    multi_processor_count=config.NUM_CORES,
    warp_size=config.WARP_SIZE,
    lx_size=config.LX_BYTES,
    shared_memory_per_block=config.LX_TILE_BYTES,
    shared_memory_per_multiprocessor=config.LX_BYTES,
    regs_per_multiprocessor=config.MAX_NUM_REGS,
    max_threads_per_multi_processor=2048,
    max_threads_per_block=1024,
    # No cache sits between the cores and device memory. Inductor's GPU benchmarker flushes a
    # buffer this large between runs (256 MB if 0/absent); the spyre benchmarker does not.
    L2_cache_size=0,
)


class SpyreDeviceProperties:
    """What `torch.spyre.get_device_properties(i)` would return: attribute access, like CUDA's."""

    def __init__(self, index: int, total_memory: int):
        self.__dict__.update(_PROPERTIES)
        self.index = index
        self.total_memory = total_memory

    def __repr__(self):
        return (f"SpyreDeviceProperties(name={self.name!r}, arch={self.arch!r}, "
                f"multi_processor_count={self.multi_processor_count}, lx_size={self.lx_size}, "
                f"total_memory={self.total_memory >> 20}MB)")


_props_cache: dict[int, SpyreDeviceProperties] = {}


def get_device_properties(device=None) -> SpyreDeviceProperties:
    """Static figures of the simulated card: safe to call in compile workers (no device init
    beyond loading the runtime module)."""
    idx = _index(device)
    p = _props_cache.get(idx)
    if p is None:
        from spyre_triton import _runtime
        p = _props_cache[idx] = SpyreDeviceProperties(idx, _runtime.device_memory_capacity())
    return p


def _index(device) -> int:
    import torch
    if device is None:
        return torch.spyre.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != DEVICE:
            raise ValueError(f"expected a spyre device, got {device}")
        return torch.spyre.current_device() if device.index is None else device.index
    return int(device)


def get_raw_stream(device_index: int) -> int:
    """The stream handle the Python wrapper passes to launches: one in-order stream, 0."""
    return 0


# --- registrations, one per Inductor module ------------------------------------------------------

def _register_device_interface(mod) -> None:
    import torch
    from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device

    class SpyreEvent(torch.Event):
        """A torch.Event on spyre (Dynamo requires the subclass). Launches complete before they
        return, so an event is complete when recorded; it keeps the host time of recording."""

        def __new__(cls, device=None, *, enable_timing=False, blocking=False, interprocess=False):
            return super().__new__(cls, device=DEVICE if device is None else device,
                                   enable_timing=enable_timing)

        def __init__(self, device=None, *, enable_timing=False, blocking=False, interprocess=False):
            self._t = None

        def record(self, stream=None):
            super().record(stream)
            self._t = time.perf_counter()

        def elapsed_time(self, end_event) -> float:
            if self._t is None or getattr(end_event, "_t", None) is None:
                raise RuntimeError("spyre: elapsed_time needs two recorded events")
            return (end_event._t - self._t) * 1e3

    class SpyreStream(torch.Stream):
        """The device's one in-order stream (index 0)."""

        def __new__(cls, device=None, priority=0, **kwargs):
            return super().__new__(cls, device=DEVICE if device is None else device, priority=priority,
                                   **kwargs)

    class SpyreInterface(DeviceInterface):
        device = torch.spyre.device
        Event = SpyreEvent
        Stream = SpyreStream

        class Worker:
            # The properties are constants of the simulated card, so workers compute them
            # directly rather than from a copy recorded by the parent before forking.
            _current = [None]

            @staticmethod
            def set_device(device: int) -> None:
                SpyreInterface.Worker._current[0] = device

            @staticmethod
            def current_device() -> int:
                cur = SpyreInterface.Worker._current[0]
                return torch.spyre.current_device() if cur is None else cur

            @staticmethod
            def get_device_properties(device=None):
                if device is None:
                    device = SpyreInterface.Worker.current_device()
                return get_device_properties(device)

        current_device = staticmethod(torch.spyre.current_device)
        set_device = staticmethod(torch.spyre.set_device)
        device_count = staticmethod(torch.spyre.device_count)
        is_available = staticmethod(torch.spyre.is_available)
        synchronize = staticmethod(torch.spyre.synchronize)
        current_stream = staticmethod(torch.spyre.current_stream)
        set_stream = staticmethod(torch.spyre.set_stream)
        stream = staticmethod(torch.spyre.stream)
        memory_allocated = staticmethod(torch.spyre.memory_allocated)
        is_bf16_supported = staticmethod(torch.spyre.is_bf16_supported)
        get_raw_stream = staticmethod(get_raw_stream)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            pass

        @staticmethod
        def exchange_device(device: int) -> int:
            prev = torch.spyre.current_device()
            if device >= 0:
                torch.spyre.set_device(device)
            return prev

        maybe_exchange_device = exchange_device

        @classmethod
        def get_device_properties(cls, device=None):
            return get_device_properties(device)

        @staticmethod
        def get_compute_capability(device=None) -> str:
            # Becomes GPUTarget.arch of the kernels Inductor compiles (and part of its cache keys).
            return config.ARCH

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return True

        @staticmethod
        def raise_if_triton_unavailable(device=None) -> None:
            import triton.backends
            if DEVICE not in triton.backends.backends:
                raise RuntimeError("triton does not see the 'spyre' backend: is spyre-triton installed "
                                   "(its `triton.backends` entry point)?")

    SpyreInterface.__name__ = SpyreInterface.__qualname__ = "SpyreInterface"
    register_interface_for_device(DEVICE, SpyreInterface)
    globals()["SpyreInterface"] = SpyreInterface


def _register_device_op_overrides(mod) -> None:
    from torch._inductor.codegen.common import DeviceOpOverrides, register_device_op_overrides

    class SpyreDeviceOpOverrides(DeviceOpOverrides):
        """Python wrapper code for spyre (no C++ wrapper: cpp_wrapper/AOTInductor are not supported)."""

        def import_get_raw_stream_as(self, name: str) -> str:
            return f"from spyre_triton.inductor import get_raw_stream as {name}"

        def set_device(self, device_idx: int) -> str:
            return f"torch.spyre.set_device({device_idx})"

        def synchronize(self) -> str:
            return "torch.spyre.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.spyre.device({device_idx})"

        def current_stream(self) -> str:
            return "torch.spyre.current_stream()"

    register_device_op_overrides(DEVICE, SpyreDeviceOpOverrides())
    globals()["SpyreDeviceOpOverrides"] = SpyreDeviceOpOverrides


class SpyreHostFallbackWarning(UserWarning):
    """A compiled graph for spyre calls an op on the host CPU: Inductor had no lowering (or no
    Triton kernel) for it on spyre. The result is correct; the op just does not run on the
    accelerator."""


# op name -> number of compiled graphs that call it on the host (see host_fallbacks())
_host_ops: dict[str, int] = {}
_warned: set[str] = set()


def host_fallbacks() -> dict[str, int]:
    """Ops that compiled graphs for spyre call on the host CPU, with the number of graphs that
    do. `spyre_triton.track()` counts the calls themselves, as host fallbacks."""
    return dict(_host_ops)


def _host_op_name(node) -> str | None:
    """The op a lowered node calls on the host, or None if it is no host compute (Triton
    kernels, views, device copies, shape and control-flow plumbing, and RandomSeeds: the one
    `randint` per graph that draws the seeds of Inductor's in-kernel Philox random numbers, as
    on every device)."""
    from torch._inductor import ir
    benign = (ir.MultiOutput, ir.DeviceCopy, ir.UserDefinedTritonKernel, ir.DynamicScalar, ir.RandomSeeds,
              ir.AssertScalar, ir.DynamicSelectStorageOffset, ir.DynamicSliceSize, ir.TMADescriptor,
              ir.SubgraphBuffer, ir.InvokeSubgraph, ir.Conditional, ir.WhileLoop, ir.ComplexView,
              ir.SetSourceTensorKernel, ir.MemoryCheckKernel)
    if not isinstance(node, ir.ExternKernel) or isinstance(node, benign):
        return None
    devices = [node.get_device()] + [getattr(i, "get_device", lambda: None)() for i in node.inputs
                                     if isinstance(i, ir.IRNode)]
    if not any(d is not None and d.type == DEVICE for d in devices):
        return None
    op = getattr(node, "op_overload", None)
    if op is not None:
        name = str(op)
        if name.startswith("aten.") and name.count(".") == 2:
            name = name.rsplit(".", 1)[0]  # aten.mm.out -> aten.mm
        return name
    return getattr(node, "python_kernel_name", None) or type(node).__name__


def _graph_host_ops(graph) -> list[str]:
    ops = {_host_op_name(node) for node in getattr(graph, "operations", ())}
    return sorted(op for op in ops if op is not None)


def warn_host_ops(ops) -> None:
    """Called by the wrapper module of each compiled graph for spyre that calls ops on the host,
    when it loads (after compiling, and on a hit in Inductor's FX-graph cache): warns once per
    process and op (SpyreHostFallbackWarning) and counts the graph in host_fallbacks()."""
    for name in ops:
        _host_ops[name] = _host_ops.get(name, 0) + 1
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"spyre: torch.compile has no spyre kernel for {name}; it runs on the host CPU "
                          f"(the result is correct, the op does not run on the accelerator)",
                          SpyreHostFallbackWarning, stacklevel=2)


MAX_ORIGIN_LINES = 8


def _origin_lines(node_schedule) -> list[str]:
    """The model code a fused kernel comes from: for each FX node's stack trace, its innermost
    frame outside torch itself (an nn.Linear's own forward says little), as
    '  File "...", line N, in fn\n    source', in graph order, without repeats."""
    import os

    import torch
    from torch._inductor import ir
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    traces = []
    nodes = node_schedule if isinstance(node_schedule, (list, tuple)) else [node_schedule]
    for snode in nodes:
        node = getattr(snode, "node", snode)
        if isinstance(node, ir.IRNode) and hasattr(node, "get_stack_traces"):
            traces.extend(node.get_stack_traces())
    out: list[str] = []
    for trace in traces:
        lines = [ln for ln in trace.rstrip().splitlines() if ln.strip()]
        starts = [i for i, ln in enumerate(lines) if ln.lstrip().startswith('File "')]
        user = [i for i in starts if not lines[i].lstrip()[6:].startswith(torch_dir)]
        start = (user or starts or [len(lines) - 1])[-1]
        frame = lines[start:start + 2]
        text = "\n".join(frame)
        if frame and text not in out:
            out.append(text)
        if len(out) >= MAX_ORIGIN_LINES:
            break
    return out


def with_kernel_origins(call, origins: dict[str, list[str]]):
    """Wrap a compiled graph's `call` (done by its generated wrapper module) so that an error a
    kernel raises on the device (spyre_triton._runtime.DeviceError: it already names the
    generated kernel's file and line) also carries, as an exception note, the model source lines
    of the ops fused into that kernel."""
    import functools

    @functools.wraps(call)
    def call_with_origins(*args, **kwargs):
        try:
            return call(*args, **kwargs)
        except Exception as e:
            lines = origins.get(getattr(e, "kernel", None))
            if lines and hasattr(e, "add_note") and not getattr(e, "_spyre_origins_noted", False):
                e._spyre_origins_noted = True
                e.add_note(f"kernel '{e.kernel}' computes the model code:\n" + "\n".join(lines))
            raise

    return call_with_origins


def _register_backend(mod) -> None:
    # Runs when torch._inductor.codegen.triton has executed (it imports .wrapper), which is inside
    # init_backend_registration() before it looks for a PrivateUse1 backend, or earlier.
    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    from torch._inductor.virtualized import V

    class SpyreWrapperCodegen(PythonWrapperCodegen):
        """Inductor's Python wrapper plus one header line: when the graph calls ops on the host
        (Inductor had no kernel for them on spyre), the generated module names them to
        `warn_host_ops` as it loads. The wrapper is created once the graph is lowered, so the
        ops are known; the warning also fires when the module comes from Inductor's cache."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                try:
                    warn_host_ops(_graph_host_ops(V.graph))
                except Exception:  # an account, never a reason for a compile to fail
                    pass
                return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper,
                                                   partition_signatures)
            return SpyreWrapperCodegen()

        def __init__(self, *args, **kwargs):
            self.spyre_kernel_origins: dict[str, list[str]] = {}
            super().__init__(*args, **kwargs)

        def generate_end(self, result) -> None:
            super().generate_end(result)
            if self.spyre_kernel_origins:
                result.writeline("from spyre_triton.inductor import with_kernel_origins")
                result.writeline(f"call = with_kernel_origins(call, {self.spyre_kernel_origins!r})")

        def write_header(self) -> None:
            super().write_header()
            try:
                ops = _graph_host_ops(V.graph)
            except Exception:
                ops = []
            if ops:
                self.header.writeline("from spyre_triton.inductor import warn_host_ops")
                self.header.writeline(f"warn_host_ops({ops!r})  # ops this graph runs on the host CPU")

    class SpyreScheduling(TritonScheduling):
        """Inductor's Triton scheduling, unchanged, except that it notes for each kernel it
        defines the model source lines (FX nodes' stack traces, as Dynamo recorded them) of the
        ops fused into it, for error messages (see `with_kernel_origins`)."""

        def define_kernel(self, src_code, node_schedule, kernel):
            name = super().define_kernel(src_code, node_schedule, kernel)
            table = getattr(V.graph.wrapper_code, "spyre_kernel_origins", None)
            if table is not None:
                try:
                    lines = _origin_lines(node_schedule)
                    if lines:
                        table.setdefault(name, lines)
                except Exception:  # an aid to debugging, never a reason for a compile to fail
                    pass
            return name

    register_backend_for_device(DEVICE, SpyreScheduling, SpyreWrapperCodegen)
    globals().update(SpyreWrapperCodegen=SpyreWrapperCodegen, SpyreScheduling=SpyreScheduling)


# Timed runs per benchmark at most: the simulator's run time is stable to a few percent, and
# every compiled graph benchmarks the configs of its reductions (and, under max-autotune, of its
# templates) on first use, so each run saved shortens compilation.
BENCHMARK_MAX_RUNS = 5


def _spyre_benchmark(self, fn: Callable[[], Any], *, warmup: int, rep: int,
                     is_vetted_benchmarking: bool = False, **kwargs) -> float:
    """The time in ms of `fn` on a Spyre card, as the performance model puts it (docs/perf-model.md),
    after one warm-up run. With SPYRE_BENCH=wall: the median host wall time of up to
    BENCHMARK_MAX_RUNS runs or about `rep` ms, whichever ends first.

    Launches on spyre run to completion before they return, so host time is device time (of the
    simulator). Unlike Inductor's GPU benchmarker there is no cache to flush between runs."""
    import statistics

    import torch
    from torch._inductor.runtime.benchmarking import may_ban_benchmarking
    if not is_vetted_benchmarking:
        may_ban_benchmarking()  # Inductor's deterministic mode allows only vetted benchmarking
    sync = torch.spyre.synchronize
    fn()
    sync()
    from spyre_triton.perf import modeled_ms, use_modeled  # rank choices by modelled device time
    if use_modeled() and (ms := modeled_ms(fn)) is not None:
        return ms
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        sync()
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1e3)
        if len(times) >= BENCHMARK_MAX_RUNS or (t1 - start) * 1e3 >= rep:
            return statistics.median(times)


def _register_benchmarker(mod) -> None:
    mod.register_benchmarker(DEVICE, _spyre_benchmark, override=True)


def _register_template_heuristics(mod) -> None:
    """Triton matmul templates (mm/bmm/addmm/baddbmm) take their block-size candidates from a
    heuristic registered per device; without one Inductor logs an error and offers no Triton
    choice. Spyre's heuristic differs from the GPU ones in two ways:

    - it runs in every mode, not only under max-autotune (`should_run`): on spyre the Triton
      template is how a matmul reaches the accelerator at all (see `SpyreChoices`);
    - outside max-autotune it gives exactly one block size, picked from the problem's shape, so
      nothing is benchmarked at compile time; under max-autotune it gives a few candidates.

    Candidates are stick-aligned (32 fp32 = 128 bytes), one stage (DMA into LX is explicit; there
    is no software pipelining to tune) and few, since each one is compiled and timed on the
    simulator."""
    from torch._inductor import config as inductor_config
    from torch._inductor.kernel.bmm import bmm_template
    from torch._inductor.kernel.mm import mm_template
    from torch._inductor.runtime.runtime_utils import next_power_of_2
    from torch._inductor.template_heuristics.registry import register_template_heuristic
    from torch._inductor.template_heuristics.triton import (BaseConfigHeuristic, GemmConfig,
                                                            MMTemplateConfigMixin)
    from torch._inductor.template_heuristics.triton_addmm import AddMMConfigMixin
    from torch._inductor.virtualized import V

    from spyre_triton import decode_configs

    class SpyreConfigHeuristic(BaseConfigHeuristic):
        def __init__(self) -> None:
            super().__init__()
            self.mm_configs = [
                GemmConfig(32, 32, 32, 1, 4),
                GemmConfig(64, 64, 32, 1, 4),
                GemmConfig(64, 128, 64, 1, 4),
                GemmConfig(128, 128, 64, 1, 4),
            ]
            # max_autotune_gemm_search_space="EXHAUSTIVE"
            self.exhaustive_configs = [GemmConfig(m, n, k, 1, 4) for m in (32, 64, 128, 256)
                                       for n in (32, 64, 128, 256) for k in (32, 64, 128)]

        def preprocess_mm_configs(self, m, n, k, configs, *args, **kwargs):
            if inductor_config.max_autotune or inductor_config.max_autotune_gemm:
                yield from super().preprocess_mm_configs(m, n, k, configs, *args, **kwargs)
                return
            yield from self._finalize_mm_configs([_default_gemm_config(m, n, k)])

    def _default_gemm_config(m, n, k) -> GemmConfig:
        """One tile for a problem: as large as the problem (rounded up to a power of two, at
        least 16) up to 128 x 128 x 64. Larger tiles mean fewer programs and fewer K steps, which
        is what the interpreter's run time follows; 128x128 fp32 accumulator plus the A and B
        tiles stay far below the LX budget. Dynamic sizes use their hints."""
        def hint(x, lo, hi):
            v = V.graph.sizevars.optimization_hint(x, fallback=hi)
            return max(lo, min(hi, next_power_of_2(max(int(v), 1))))
        if V.graph.sizevars.optimization_hint(m, fallback=128) <= 16:
            return decode_configs.skinny_gemm_config(m, n, k, hint, GemmConfig)
        return GemmConfig(hint(m, 16, 128), hint(n, 16, 128), hint(k, 16, 64), 1, 4)

    @register_template_heuristic(mm_template.uid, DEVICE)
    @register_template_heuristic(bmm_template.uid, DEVICE)
    class SpyreMMTemplateConfigHeuristic(MMTemplateConfigMixin, SpyreConfigHeuristic):
        """mm and bmm Triton templates on spyre."""

        def should_run(self, inputs) -> bool:
            return True  # not only under max-autotune: see the docstring above

    @register_template_heuristic(mm_template.uid, DEVICE, op_name="addmm")
    @register_template_heuristic(bmm_template.uid, DEVICE, op_name="baddbmm")
    class SpyreAddMMTemplateConfigHeuristic(AddMMConfigMixin, SpyreMMTemplateConfigHeuristic):
        """addmm and baddbmm Triton templates on spyre (alpha/beta epilogue)."""

    globals().update(SpyreConfigHeuristic=SpyreConfigHeuristic,
                     SpyreMMTemplateConfigHeuristic=SpyreMMTemplateConfigHeuristic,
                     SpyreAddMMTemplateConfigHeuristic=SpyreAddMMTemplateConfigHeuristic)


# --- matmuls become Triton templates in every mode -----------------------------------------------

_GEMM_OPS = {"mm": "mm", "addmm": "mm", "bmm": "bmm", "baddbmm": "bmm"}


def _sources_digest() -> str:
    """A digest of this module and inductor_compat: part of Inductor's FX-graph cache key (through
    `SpyreChoices.uuid`), so graphs cached under other lowering decisions are not reused."""
    global _digest
    if _digest is None:
        import hashlib
        import os
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        for name in ("inductor.py", "inductor_compat.py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(f.read())
        _digest = h.hexdigest()[:16]
    return _digest


_digest = None
def _make_choices_class():
    """Inductor's choices handler (`torch._inductor.choices.InductorChoices`) is the documented
    way to change its heuristics from out of tree (`config.inductor_choices_class`). For spyre
    devices only, this one changes which implementations a matmul lowering may pick from:

    - By default (no max-autotune) Inductor lowers mm/addmm/bmm/baddbmm to extern aten calls,
      which on spyre run on the host CPU through the eager fallback. On spyre the lowering gets
      Inductor's Triton template instead (mm_template or bmm_template, with the one block size
      the spyre heuristic gives outside max-autotune), so nothing is benchmarked and the matmul,
      with its fused epilogue, runs as a Triton kernel on the accelerator.
    - Under max-autotune the extern aten choices are dropped on spyre: they would be timed on the
      host CPU against kernels timed on the simulator, and always win.

    The aten choice stays where no Triton template applies (integer matmuls, `out_dtype`,
    zero-size problems, max_autotune_gemm_backends without TRITON); such a matmul runs on the host
    and `inductor` warns about it (see `SpyreWrapperCodegen`). Every other device gets
    Inductor's own choices."""
    from torch._inductor import config as inductor_config
    from torch._inductor import ir
    from torch._inductor.choices import InductorChoices
    from torch._inductor.kernel.bmm import bmm_template
    from torch._inductor.kernel.mm import mm_template
    from torch._inductor.kernel.mm_common import _is_static_problem
    from torch._inductor.kernel_inputs import MMKernelInputs
    from torch._inductor.select_algorithm import ExternKernelChoice, realize_inputs
    from torch._inductor.utils import use_triton_template

    templates_for = {"mm": mm_template, "bmm": bmm_template}

    def spyre_gemm_templates(kernel_inputs, templates, op_name):
        layout = kernel_inputs.output_layout()
        if (not isinstance(kernel_inputs, MMKernelInputs) or kernel_inputs._out_dtype is not None
                or not use_triton_template(layout, check_max_autotune=False)
                or not _is_static_problem(layout)[1]):
            return kernel_inputs, templates
        triton = [t for t in templates if not isinstance(t, ExternKernelChoice)]
        if inductor_config.max_autotune or inductor_config.max_autotune_gemm:
            # Inductor offers the Triton templates (in this call or, for addmm, a sibling one).
            return kernel_inputs, triton
        if not triton:
            triton = [templates_for[_GEMM_OPS[op_name]]]
            if op_name == "addmm":
                # The aten-only call passes the bias unexpanded; the template's epilogue reads
                # it at the output's indices, as tuned_addmm's max-autotune path gives it.
                from torch._inductor.lowering import expand
                inp, mat1, mat2 = kernel_inputs.nodes()
                if not isinstance(inp, ir.TensorBox):
                    inp = ir.TensorBox(inp)
                inp = realize_inputs(expand(inp, layout.size))
                kernel_inputs = MMKernelInputs([inp, mat1, mat2], scalars=kernel_inputs._scalars)
        return kernel_inputs, triton

    class SpyreChoices(InductorChoices):
        def get_template_configs(self, kernel_inputs, templates, op_name, kwarg_overrides=None):
            if kernel_inputs.device_type == DEVICE and op_name in _GEMM_OPS:
                kernel_inputs, templates = spyre_gemm_templates(kernel_inputs, templates, op_name)
            return super().get_template_configs(kernel_inputs, templates, op_name, kwarg_overrides)

        def _need_to_fix_layout(self, adjusted_choices, op_name) -> bool:
            # A Triton template writes the layout it was generated for: fix it (as Inductor
            # does under max-autotune) rather than leave it flexible as for aten-only choices.
            if adjusted_choices and adjusted_choices[0].inputs.device_type == DEVICE and any(
                    not isinstance(c.template, ExternKernelChoice) for c in adjusted_choices):
                return True
            return super()._need_to_fix_layout(adjusted_choices, op_name)

        def uuid(self) -> str:
            return f"spyre-{_sources_digest()}"

    SpyreChoices.__module__ = __name__
    return SpyreChoices


_choices_cls = None


def spyre_choices():
    """Factory for `torch._inductor.config.inductor_choices_class` (called per compiling thread)."""
    global _choices_cls
    if _choices_cls is None:
        _choices_cls = _make_choices_class()
        globals()["SpyreChoices"] = _choices_cls
    return _choices_cls()


def _register_choices(mod) -> None:
    if mod.inductor_choices_class is None:
        mod.inductor_choices_class = spyre_choices
    elif mod.inductor_choices_class is not spyre_choices:
        warnings.warn("spyre: torch._inductor.config.inductor_choices_class is already set, so "
                      "matmuls compiled for spyre may run on the host CPU", RuntimeWarning, stacklevel=2)


def _register_graph_policy(mod) -> None:
    """mode="reduce-overhead" on spyre replays launch graphs (spyre_triton/graphs.py says how). Installed
    when cudagraph_utils (the policy's base class) is imported: output_code imports it before any graph
    reaches post_compile."""
    from torch._inductor import config

    from spyre_triton import graphs
    graphs.allow_single_spyre_device(mod)
    if config.cudagraph_policy is None:
        config.cudagraph_policy = graphs.policy()


# --- convolution as im2col + matmul --------------------------------------------------------------
#
# Inductor lowers aten.convolution to an extern aten call unless max-autotune offers its conv
# template, and convolution_backward always to an extern call: on spyre both would run on the
# host. For spyre tensors the decompositions below, added to Inductor's decomposition table by
# inductor_compat.add_spyre_decompositions (the table is applied while AOTAutograd traces the
# graph, so forward and backward are covered), rewrite a
# 1-D or 2-D convolution (any stride, padding, dilation, groups; transposed too) as an im2col
# gather, a matmul that becomes the Triton mm/bmm template, and, for the gradient of the input, a
# col2im sum of shifted copies (pointwise, no atomics). Other devices, and 3-D convolutions,
# keep Inductor's behaviour (NotImplemented defers to it).

def _conv_geometry(w, stride, padding, dilation):
    nd = w.dim() - 2
    return [list(v) * nd if len(v) == 1 else list(v) for v in (stride, padding, dilation)]


def _im2col(x, kh, kw, stride, padding, dilation, groups):
    """x (N, C, H, W) -> columns (G, C/G*kh*kw, N*oh*ow), and (oh, ow)."""
    import torch.nn.functional as F
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c = x.shape[0], x.shape[1]
    if ph or pw:
        x = F.pad(x, (pw, pw, ph, ph))
    # (N, C, oh, ow, kh_span, kw_span), then every dilation-th kernel tap: (N, C, oh, ow, kh, kw)
    patches = x.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)[..., ::dh, ::dw]
    oh, ow = patches.shape[2], patches.shape[3]
    cols = patches.reshape(n, groups, c // groups, oh, ow, kh, kw).permute(1, 2, 5, 6, 0, 3, 4)
    return cols.reshape(groups, c // groups * kh * kw, n * oh * ow), oh, ow


def _col2im(cols, n, c, size, kh, kw, oh, ow, stride, padding, dilation, groups):
    """The adjoint of _im2col: columns (G, C/G*kh*kw, N*oh*ow) -> (N, C, H, W) with H, W = size,
    each input position summing the columns that read it. Built from pads of strided copies, so
    Inductor fuses it into one pointwise kernel."""
    import torch.nn.functional as F
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    hp, wp = size[0] + 2 * ph, size[1] + 2 * pw  # the padded input that _im2col read
    taps = cols.reshape(groups, c // groups, kh, kw, n, oh, ow).permute(4, 0, 1, 2, 3, 5, 6)
    taps = taps.reshape(n, c, kh, kw, oh, ow)
    total = None
    for i in range(kh):
        for j in range(kw):
            t = taps[:, :, i, j]
            if sh > 1 or sw > 1:  # spread the rows/columns `stride` apart
                t = F.pad(t[:, :, :, None, :, None], (0, sw - 1, 0, 0, 0, sh - 1))
                t = t.reshape(n, c, oh * sh, ow * sw)[:, :, :sh * (oh - 1) + 1, :sw * (ow - 1) + 1]
            top, left = i * dh, j * dw
            t = F.pad(t, (left, wp - left - (sw * (ow - 1) + 1), top, hp - top - (sh * (oh - 1) + 1)))
            total = t if total is None else total + t
    return total[:, :, ph:ph + size[0], pw:pw + size[1]]


def _as_2d(nd, *tensors):
    return [t.unsqueeze(2) if nd == 1 else t for t in tensors]


def _matmul_groups(a, b):
    """(G, M, K) @ (G, K, N): an mm when there is one group, else a bmm."""
    import torch
    return torch.mm(a[0], b[0]).unsqueeze(0) if a.shape[0] == 1 else torch.bmm(a, b)


def _spyre_conv_applies(x, w) -> bool:
    return x.device.type == DEVICE and w.dim() in (3, 4) and x.dim() == w.dim() and x.dtype.is_floating_point


def spyre_convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """aten.convolution on spyre as im2col + matmul (transposed: matmul + col2im)."""
    if not _spyre_conv_applies(x, w):
        return NotImplemented
    nd = w.dim() - 2
    stride, padding, dilation = _conv_geometry(w, stride, padding, dilation)
    output_padding = list(output_padding) * nd if len(output_padding) == 1 else list(output_padding)
    if nd == 1:
        stride, padding, dilation, output_padding = ([1, *stride], [0, *padding], [1, *dilation],
                                                     [0, *output_padding])
    x, w = _as_2d(nd, x, w)
    n, g = x.shape[0], groups
    kh, kw = w.shape[2], w.shape[3]
    if not transposed:
        out_ch = w.shape[0]
        cols, oh, ow = _im2col(x, kh, kw, stride, padding, dilation, g)
        out = _matmul_groups(w.reshape(g, out_ch // g, -1), cols)  # (G, O/G, N*oh*ow)
        out = out.reshape(out_ch, n, oh, ow).permute(1, 0, 2, 3)
    else:
        # w: (Cin, Cout/G, kh, kw); the output is the input-gradient of a convolution by w.
        cin, h, wd = x.shape[1], x.shape[2], x.shape[3]
        out_ch = w.shape[1] * g
        size = [(h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1,
                (wd - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1]
        xg = x.reshape(n, g, cin // g, h * wd).permute(1, 2, 0, 3).reshape(g, cin // g, n * h * wd)
        wg = w.reshape(g, cin // g, -1).transpose(1, 2)  # (G, Cout/G*kh*kw, Cin/G)
        out = _col2im(_matmul_groups(wg, xg), n, out_ch, size, kh, kw, h, wd, stride, padding,
                      dilation, g)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    out = out.contiguous()
    return out.squeeze(2) if nd == 1 else out


def spyre_convolution_backward(inductor_decomp, grad_out, x, w, bias_sizes, stride, padding, dilation,
                               transposed, output_padding, groups, output_mask):
    """aten.convolution_backward on spyre from the same pieces (else Inductor's decomposition)."""
    if not _spyre_conv_applies(x, w):
        if inductor_decomp is None:
            return NotImplemented
        return inductor_decomp(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed,
                               output_padding, groups, output_mask)
    nd = w.dim() - 2
    stride, padding, dilation = _conv_geometry(w, stride, padding, dilation)
    if nd == 1:
        stride, padding, dilation = [1, *stride], [0, *padding], [1, *dilation]
    grad_out, x, w = _as_2d(nd, grad_out, x, w)
    n, g = x.shape[0], groups
    kh, kw = w.shape[2], w.shape[3]
    grad_x = grad_w = grad_b = None
    if output_mask[2]:
        grad_b = grad_out.sum([0, 2, 3])
    if not transposed:
        out_ch, oh, ow = grad_out.shape[1], grad_out.shape[2], grad_out.shape[3]
        go = grad_out.permute(1, 0, 2, 3).reshape(g, out_ch // g, n * oh * ow)
        if output_mask[1]:
            cols = _im2col(x, kh, kw, stride, padding, dilation, g)[0]
            grad_w = _matmul_groups(go, cols.transpose(1, 2)).reshape(w.shape)
        if output_mask[0]:
            gcols = _matmul_groups(w.reshape(g, out_ch // g, -1).transpose(1, 2), go)
            grad_x = _col2im(gcols, n, x.shape[1], [x.shape[2], x.shape[3]], kh, kw, oh, ow, stride,
                             padding, dilation, g)
    else:
        # The forward was a col2im of w^T @ x; its adjoints are im2col of grad_out.
        cin, h, wd = x.shape[1], x.shape[2], x.shape[3]
        cols = _im2col(grad_out, kh, kw, stride, padding, dilation, g)[0]  # (G, Cout/G*k, N*h*w)
        if output_mask[0]:
            gx = _matmul_groups(w.reshape(g, cin // g, -1), cols)  # (G, Cin/G, N*h*w)
            grad_x = gx.reshape(cin, n, h, wd).permute(1, 0, 2, 3)
        if output_mask[1]:
            xg = x.reshape(n, g, cin // g, h * wd).permute(1, 2, 0, 3).reshape(g, cin // g, n * h * wd)
            grad_w = _matmul_groups(xg, cols.transpose(1, 2)).reshape(w.shape)
    if grad_x is not None:
        grad_x = grad_x.contiguous()
        grad_x = grad_x.squeeze(2) if nd == 1 else grad_x
    if grad_w is not None and nd == 1:
        grad_w = grad_w.squeeze(2)
    return grad_x, grad_w, grad_b


def _warn_uncompiled_generate(mod) -> None:
    from spyre_triton import llm
    llm.patch_optimized_module(mod)


# --- the post-import hook ----------------------------------------------------------------------

def _compat(name: str) -> Callable[[Any], None]:
    def run(mod):
        from spyre_triton import inductor_compat
        getattr(inductor_compat, name)(mod)
    run.__name__ = name
    return run


# module -> registrations to run once it has executed (in this order)
_HOOKS: dict[str, list[Callable[[Any], None]]] = {
    "torch.utils._triton": [_compat("patch_has_triton")],
    "torch._inductor.utils": [_compat("add_gpu_type"), _compat("patch_is_big_gpu")],
    "torch._inductor.runtime.triton_helpers": [_compat("patch_set_driver_to_gpu")],
    "torch._dynamo.device_interface": [_register_device_interface],
    "torch._inductor.codegen.common": [_register_device_op_overrides],
    "torch._inductor.codegen.triton": [_register_backend],
    "torch._inductor.runtime.benchmarking": [_register_benchmarker],
    "torch._inductor.runtime.triton_heuristics": [_compat("patch_reduction_configs")],
    "torch._inductor.template_heuristics.triton": [_register_template_heuristics],
    "torch._inductor.config": [_register_choices],
    "torch._inductor.cudagraph_utils": [_register_graph_policy],
    "torch._inductor.decomposition": [_compat("add_spyre_decompositions")],
    "torch._dynamo.eval_frame": [_warn_uncompiled_generate],
}
_done: set[str] = set()
_lock = threading.RLock()
_registered = False


def _run_hooks(name: str, mod) -> None:
    with _lock:
        if name in _done:
            return
        _done.add(name)
    for hook in _HOOKS[name]:
        try:
            hook(mod)
        except Exception:  # a failed registration must not break `import torch._inductor`
            warnings.warn(f"spyre: registering with {name} failed ({hook.__name__}); torch.compile on "
                          f"spyre will not work:\n{traceback.format_exc()}", RuntimeWarning, stacklevel=2)
    if len(_done) == len(_HOOKS) and _finder in sys.meta_path:  # all done: stop watching imports
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a hooked module it asks the other finders for the spec and wraps
    that loader's exec_module so the registrations run right after the module body."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _HOOKS or fullname in _done:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _run_hooks(fullname, module)

        loader.exec_module = exec_then_register  # this loader instance serves this one module
        return spec


_finder = _PostImportFinder()


def register() -> None:
    """Make torch.compile/Inductor target spyre (idempotent, cheap: nothing of Dynamo or Inductor
    is imported here). Called by spyre_triton.device.register()."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
        if _finder not in sys.meta_path and len(_done) < len(_HOOKS):
            sys.meta_path.insert(0, _finder)
    for name in _HOOKS:  # modules imported before the device registered
        mod = sys.modules.get(name)
        if mod is not None:
            _run_hooks(name, mod)
