"""What a compiled graph tells its user: ops it runs on the host CPU (a warning once per op,
`host_fallbacks()`), and, on a device error, the model source lines of the failing kernel."""
from __future__ import annotations

import warnings

from .device import DEVICE


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
    kernels, views, device copies, shape and control-flow plumbing, collectives (communication run by
    the process group's backend, spyreccl) and RandomSeeds: the one
    `randint` per graph that draws the seeds of Inductor's in-kernel Philox random numbers, as
    on every device)."""
    from torch._inductor import ir
    benign = (ir.MultiOutput, ir.DeviceCopy, ir.UserDefinedTritonKernel, ir.DynamicScalar, ir.RandomSeeds,
              ir.AssertScalar, ir.DynamicSelectStorageOffset, ir.DynamicSliceSize, ir.TMADescriptor,
              ir.SubgraphBuffer, ir.InvokeSubgraph, ir.Conditional, ir.WhileLoop, ir.ComplexView,
              ir.SetSourceTensorKernel, ir.MemoryCheckKernel, ir._CollectiveKernel, ir._WaitKernel)
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
