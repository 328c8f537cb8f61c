"""Launch graphs: record a sequence of kernel launches once and replay it from C, with no Python per
kernel (Spyre's own execution model: the runtime runs a prepared job plan).

    g = torch.spyre.SpyreGraph()
    with torch.spyre.graph(g):
        static_y = f(static_x)       # runs as usual, and every launch is recorded
    static_x.copy_(new_x)
    g.replay()                       # the same launches on the same buffers: static_y holds f(new_x)

As with torch.cuda.graph, what is replayed is the kernels on the buffers they used during capture: new
inputs are copied into the captured input tensors, and results are read from the captured outputs. The
graph keeps every tensor a recorded launch used alive (their device addresses are in the plan), as a
CUDA graph keeps its private memory pool. Unlike CUDA, capture runs the kernels (launches on the
simulator are synchronous), so the captured outputs are valid after capture too.

Only kernel launches are recorded. An op that runs on the host during capture (a host fallback) would be
skipped by a replay, so capture raises GraphCaptureError naming it; host-side control flow (a Python `if`
on a tensor's value) is frozen at capture, as on CUDA.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

from spyre_triton import tracking

_capturing: list["SpyreGraph"] = []  # the graph being captured (backend/driver.py records into it)
_lock = threading.Lock()
stats = {"captures": 0, "replays": 0}  # graphs captured and replayed in this process


class GraphCaptureError(RuntimeError):
    pass


class SpyreGraph:
    """A recorded sequence of kernel launches (torch.cuda.CUDAGraph's interface)."""

    def __init__(self):
        self._plan: list = []
        self._sealed: tuple | None = None
        self._tracker = None

    def capture_begin(self, *args, **kwargs) -> None:
        if self._sealed is not None:
            raise GraphCaptureError("this SpyreGraph was already captured: make a new one (or reset() it)")
        with _lock:
            if _capturing:
                raise GraphCaptureError("a SpyreGraph capture is already in progress")
            self._cm = tracking.track()  # routes launches through the Python launcher, which records them
            self._tracker = self._cm.__enter__()
            _capturing.append(self)

    def capture_end(self) -> None:
        with _lock:
            if _capturing and _capturing[-1] is self:
                _capturing.pop()
        self._cm.__exit__(None, None, None)
        fallbacks = dict(self._tracker.fallbacks)
        self._sealed = tuple(self._plan)
        self._plan = []
        stats["captures"] += 1
        if fallbacks:
            self.reset()
            ops = ", ".join(f"{k} ({v}x)" for k, v in sorted(fallbacks.items()))
            raise GraphCaptureError(
                f"ops ran on the host during SpyreGraph capture and would not be replayed: {ops}. "
                "Capture only device work (compiled code whose ops all have spyre kernels).")

    def record(self, function, device: int, grid, kargs) -> None:
        """Called by the launcher (backend/driver.py) for each launch during capture."""
        self._plan.append((function, device, grid[0], grid[1], grid[2], tuple(kargs)))

    def replay(self) -> None:
        if self._sealed is None:
            raise GraphCaptureError("replay() of a SpyreGraph that was not captured")
        stats["replays"] += 1
        from spyre_triton.perf import capture as perf
        if perf.listeners or tracking._active:
            self._replay_observed(perf)  # a profile or a tracker sees each launch, as without a graph
            return
        from spyre_triton import _runtime
        _runtime.replay(self._sealed)

    def _replay_observed(self, perf) -> None:
        for function, device, gx, gy, gz, kargs in self._sealed:
            name = getattr(function, "name", "kernel")
            t0 = tracking.now_ns()
            if perf.listeners:
                res = function.launch(device, gx, gy, gz, kargs, perf=perf.params(function, gx * gy * gz))
            else:
                function.launch(device, gx, gy, gz, kargs)
            ns = tracking.now_ns() - t0
            if tracking._active:
                tracking.record_launch(name, ns)
            if perf.listeners:
                perf.record(name, function, (gx, gy, gz), res, ns)

    def abort(self) -> None:
        """Ends a capture that failed: nothing is kept."""
        with _lock:
            if _capturing and _capturing[-1] is self:
                _capturing.pop()
        self._cm.__exit__(None, None, None)
        self.reset()

    def reset(self) -> None:
        self._plan = []
        self._sealed = None

    def launches(self) -> int:
        return len(self._sealed or ())

    def pool(self):
        return None  # no private pool: the graph holds its tensors (see the module docstring)


@contextmanager
def graph(g: SpyreGraph, pool=None, stream=None, capture_error_mode=None):
    """torch.spyre.graph(g): capture the launches of the block into g (torch.cuda.graph's signature)."""
    g.capture_begin()
    try:
        yield g
    except BaseException:
        g.abort()
        raise
    g.capture_end()


def make_graphed_callable(fn, sample_args: tuple):
    """fn(*args) replayed through a graph captured on sample_args: each call copies its tensor arguments
    into the captured ones and returns the captured outputs (torch.cuda.make_graphed_callables, forward
    only). Arguments must keep the captured shapes, dtypes and devices."""
    import torch
    static_in = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in sample_args)
    fn(*static_in)  # warm-up: compiles and autotunes outside the capture
    g = SpyreGraph()
    with graph(g):
        static_out = fn(*static_in)

    def replayed(*args):
        for s, a in zip(static_in, args):
            if isinstance(s, torch.Tensor):
                if a.shape != s.shape or a.dtype != s.dtype:
                    raise ValueError(f"graphed callable captured for {tuple(s.shape)} {s.dtype}, "
                                     f"called with {tuple(a.shape)} {a.dtype}")
                if a.data_ptr() != s.data_ptr():
                    s.copy_(a)
        g.replay()
        return static_out

    replayed.graph = g
    return replayed


# --- torch.compile(mode="reduce-overhead") on spyre ---------------------------------------------------
#
# mode="reduce-overhead" turns on Inductor's config.triton.cudagraphs. Inductor's cudagraph trees are
# CUDA-only, but each compiled graph passes through `config.cudagraph_policy.cudagraphify` when it is set
# (torch._inductor.cudagraph_utils.CUDAGraphPolicy): that is the hook. inductor.py installs
# SpyreGraphPolicy, which wraps graphs whose inputs are on spyre in launch graphs and hands every other
# graph to Inductor's own cudagraphify (the policy's default), so CUDA keeps its trees. Inductor also
# refuses graphs on any device but CUDA (cudagraph_utils.check_multiple_devices_or_any_cpu_nodes):
# allow_single_spyre_device lets a one-spyre-device graph through.

def _make_policy_class():
    from torch._inductor.cudagraph_utils import CUDAGraphPolicy

    class SpyreGraphPolicy(CUDAGraphPolicy):
        def cudagraphify(self, model, example_inputs, static_input_idxs, **kwargs):
            if any(getattr(x, "device", None) is not None and x.device.type == "spyre" for x in example_inputs):
                return graphed_inductor_callable(model, static_input_idxs, kwargs.get("mutated_input_idxs", ()))
            return super().cudagraphify(model, example_inputs, static_input_idxs, **kwargs)

    SpyreGraphPolicy.__module__ = __name__
    return SpyreGraphPolicy


_policy_cls = None


def policy():
    global _policy_cls
    if _policy_cls is None:
        _policy_cls = _make_policy_class()
    return _policy_cls()


def allow_single_spyre_device(cudagraph_utils) -> None:
    """Inductor disables graphs for any device but one CUDA device ("multiple devices: spyre:0"): a graph
    on one spyre device is as graphable, so it passes; everything else keeps Inductor's check."""
    check = cudagraph_utils.check_multiple_devices_or_any_cpu_nodes

    def check_devices(device_node_mapping):
        devices = [d for d in device_node_mapping if d.type != "meta"]
        if len(devices) == 1 and devices[0].type == "spyre":
            return None
        return check(device_node_mapping)

    cudagraph_utils.check_multiple_devices_or_any_cpu_nodes = check_devices


_warned: set = set()


def graphed_inductor_callable(model, static_input_idxs, mutated_input_idxs=()):
    """An Inductor compiled callable (`model(inputs_list)`) replayed through launch graphs: one graph per
    distinct input signature (shapes, strides, and the buffers of static inputs: parameters, a static KV
    cache). Other tensor inputs are copied into the graph's own buffers, as cudagraph trees do (and copied
back when the graph mutates them). Outputs are
    the graph's buffers, overwritten by the next replay of the same graph (clone what must outlive it)."""
    import torch
    static = frozenset(static_input_idxs or ())
    mutated = [i for i in mutated_input_idxs or () if i not in static]
    graphs: dict = {}

    def key_of(inputs):
        return tuple((tuple(x.shape), x.stride(), x.dtype, x.data_ptr() if i in static else None)
                     if isinstance(x, torch.Tensor) else x for i, x in enumerate(inputs))

    def run(new_inputs):
        inputs = list(new_inputs)
        new_inputs.clear()  # Inductor's boxed calling convention: the callee frees its inputs
        key = key_of(inputs)
        entry = graphs.get(key)
        if entry is False:
            return model(inputs)
        if entry is None:
            ins = [x if i in static or not isinstance(x, torch.Tensor)
                   else torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
                   for i, x in enumerate(inputs)]
            g = SpyreGraph()
            g.capture_begin()
            try:
                outs = model(list(ins))
            except BaseException:
                g.abort()
                raise
            try:
                g.capture_end()
                graphs[key] = (g, ins, outs)
            except GraphCaptureError as e:  # the graph ran (on ins); it will not be captured again
                graphs[key] = False
                if "capture" not in _warned:
                    _warned.add("capture")
                    import warnings
                    warnings.warn(f"spyre: mode='reduce-overhead' runs this graph without launch graphs: {e}",
                                  RuntimeWarning, stacklevel=2)
        else:
            g, ins, outs = entry
            for i, (s, x) in enumerate(zip(ins, inputs)):
                if i not in static and isinstance(x, torch.Tensor) and x.data_ptr() != s.data_ptr():
                    s.copy_(x)
            g.replay()
        for i in mutated:
            if inputs[i].data_ptr() != ins[i].data_ptr():
                inputs[i].copy_(ins[i])
        return outs

    run._spyre_graphs = graphs
    return run
