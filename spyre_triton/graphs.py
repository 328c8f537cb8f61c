"""Launch graphs: record a sequence of kernel launches once and replay it from C, with no Python per
kernel (Spyre's own execution model: the runtime runs a prepared job plan).

    g = torch.spyre.SpyreGraph()
    with torch.spyre.graph(g):
        static_y = f(static_x)       # runs as usual, and every launch is recorded
    static_x.copy_(new_x)
    g.replay()                       # the same launches on the same buffers: static_y holds f(new_x)

As with torch.cuda.graph, what is replayed is the kernels on the buffers they used during capture: new
inputs are copied into the captured input tensors, and results are read from the captured outputs. The
plan holds each tensor argument's address, taken when the capture ends, and the graph keeps the memory
behind those addresses alive, as a CUDA graph keeps its private memory pool. Unlike CUDA, capture runs
the kernels (launches on the simulator are synchronous), so the captured outputs are valid after capture
too.

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


_c_replay = None  # _runtime.replay, and the profiler's list of listeners, bound on the first replay:
_perf_listeners: list = []  # a replay is a few attribute lookups and one C call


def _bind() -> None:
    global _c_replay, _perf_listeners
    from spyre_triton import _runtime
    from spyre_triton.perf import capture
    _perf_listeners = capture.listeners  # the list itself: the profiler appends to and removes from it
    _c_replay = _runtime.replay


class SpyreGraph:
    """A recorded sequence of kernel launches (torch.cuda.CUDAGraph's interface)."""

    def __init__(self):
        self._plan: list = []
        self._sealed: tuple | None = None  # the plan replay() hands to C: tensors as int addresses
        self._keep: tuple = ()  # the storages the plan's addresses point into: keeps that memory alive
        self._pointers: tuple = ()  # (entry, argument, address) of each argument recorded as a tensor
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
        self._seal()
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

    def _seal(self) -> None:
        """Packs the plan once: a tensor argument becomes its address (its data_ptr() at capture, as a CUDA
        graph bakes addresses in), so a replay calls no Python per argument; the tensors stay referenced."""
        import torch
        sealed, pointers, storages = [], [], {}
        for i, (function, device, gx, gy, gz, kargs) in enumerate(self._plan):
            args = list(kargs)
            for j, a in enumerate(args):
                if isinstance(a, torch.Tensor):
                    args[j] = a.data_ptr()
                    pointers.append((i, j, args[j]))
                    st = a.untyped_storage()  # the memory itself: alive even if the tensor is resized or set_
                    storages[st.data_ptr()] = st
            sealed.append((function, device, gx, gy, gz, tuple(args)))
        self._keep, self._sealed, self._pointers = tuple(storages.values()), tuple(sealed), tuple(pointers)
        self._plan = []

    def pointers_into(self, base: int, nbytes: int) -> list:
        """[(entry, argument, offset)]: the recorded pointer arguments inside [base, base + nbytes)."""
        return [(i, j, a - base) for i, j, a in self._pointers if base <= a < base + nbytes]

    def retarget(self, moves) -> None:
        """moves: [(pointers_into(...) of a buffer, its new base address)]. Later replays use buffers at the new
        addresses (same layout) instead; the caller keeps them alive and in the same device's memory (each
        launch checks its pointer arguments against the device's allocations)."""
        entries = list(self._sealed)
        for slots, base in moves:
            for i, j, off in slots:
                f, d, gx, gy, gz, args = entries[i]
                entries[i] = (f, d, gx, gy, gz, args[:j] + (base + off,) + args[j + 1:])
        self._sealed = tuple(entries)

    def replay(self) -> None:
        if self._sealed is None:
            raise GraphCaptureError("replay() of a SpyreGraph that was not captured")
        stats["replays"] += 1
        if _c_replay is None:
            _bind()
        if _perf_listeners or tracking._active:
            from spyre_triton.perf import capture as perf
            self._replay_observed(perf)  # a profile or a tracker sees each launch, as without a graph
            return
        _c_replay(self._sealed)

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
        self._keep = self._pointers = ()

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


def _picker(idxs):
    """A function list -> tuple of the items at idxs (operator.itemgetter, but always a tuple)."""
    import operator
    if not idxs:
        return lambda xs: ()
    if len(idxs) == 1:
        i = idxs[0]
        return lambda xs: (xs[i],)
    return operator.itemgetter(*idxs)


_ALIGN = 16  # the pointer alignment Triton specialises kernels on (tt.divisibility=16)


def _layout(x):
    return x.shape, x.stride(), x.dtype, x.device


class _Graphed:
    """One captured graph of a graphed Inductor callable, for one input signature. Each dynamic input (not a
    static one: a parameter, a static cache) is either rebound or copied. Rebound: the plan's pointers into
    the captured copy are moved to the caller's tensor, so a replay reads and writes the caller's memory and
    nothing is copied (a decode step's inputs and KV cache). Copied into the captured tensor, as cudagraph
    trees do, when an output shares the input's storage (the returned view must see the new values)."""

    __slots__ = ("g", "ins", "outs", "dyn_pos", "slots", "bound", "held")

    def __init__(self, g: SpyreGraph, ins: list, outs, dyn_pos: tuple):
        self.g, self.ins, self.outs, self.dyn_pos = g, ins, outs, dyn_pos
        out_storages = {o.untyped_storage().data_ptr() for o in _tensors(outs)}
        self.slots = []  # per dynamic input: the plan's pointers into it, or None (copy it in)
        for k in dyn_pos:
            s = ins[k]
            st = s.untyped_storage()  # the captured copy: its storage is exactly its extent
            shared = st.data_ptr() in out_storages
            self.slots.append(None if shared else g.pointers_into(s.data_ptr(), st.nbytes()))
        self.bound = [ins[k].data_ptr() for k in dyn_pos]  # where the plan reads each dynamic input now
        self.held = ()  # the caller's tensors the plan points at: alive until the next call

    def run(self, dyn: tuple):
        moves = []
        bound, slots = self.bound, self.slots
        for n, x in enumerate(dyn):
            p = x.data_ptr()
            if p == bound[n]:
                continue
            if slots[n] is not None and p % _ALIGN == 0:
                moves.append((slots[n], p))
                bound[n] = p
            else:
                self._copy_in(n, x, moves)
        if moves:
            self.g.retarget(moves)
        self.held = dyn
        self.g.replay()
        return self.outs

    def _copy_in(self, n: int, x, moves: list) -> None:
        """x into the captured tensor, and the plan back onto it if it was rebound elsewhere. Also the path
        of a caller's tensor less aligned than the captured one: Triton specialised the kernels on
        16-byte aligned pointers, as Inductor's copy_if_misaligned does for a plain call."""
        c = self.ins[self.dyn_pos[n]]
        c.copy_(x)
        if self.bound[n] != c.data_ptr():
            moves.append((self.slots[n], c.data_ptr()))
            self.bound[n] = c.data_ptr()

    def copy_back(self, n: int, x) -> None:
        """After a replay: a mutated dynamic input the plan did not write in place gets the captured result."""
        if self.bound[n] != x.data_ptr():
            x.copy_(self.ins[self.dyn_pos[n]])


def _tensors(outs):
    import torch
    if isinstance(outs, torch.Tensor):
        return [outs]
    if isinstance(outs, (list, tuple)):
        return [t for o in outs for t in _tensors(o)]
    return []


def graphed_inductor_callable(model, static_input_idxs, mutated_input_idxs=()):
    """An Inductor compiled callable (`model(inputs_list)`) replayed through launch graphs: one graph per
    distinct input signature (the addresses of static inputs: parameters, a static KV cache; the shapes,
    strides, dtypes and devices of the others; the non-tensor inputs). A call whose dynamic inputs are
    new tensors rebinds the plan to them when it can, else copies them into the graph's own (see
    _Graphed). Outputs are the graph's buffers, overwritten by the next replay of the same graph (clone
    what must outlive it)."""
    import torch
    static = frozenset(static_input_idxs or ())
    data_ptr = torch.Tensor.data_ptr
    graphs: dict = {}
    split = []  # on the first call: pickers of static tensors, dynamic tensors, other inputs; positions

    def prepare(inputs):
        tensor = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
        st = tuple(i for i in tensor if i in static)
        dy = tuple(i for i in tensor if i not in static)
        other = tuple(i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor))
        mutated = tuple(dy.index(i) for i in mutated_input_idxs or () if i in dy)
        split[:] = [_picker(st), _picker(dy), _picker(other), dy, mutated, len(inputs)]

    def run(new_inputs):
        inputs = list(new_inputs)
        new_inputs.clear()  # Inductor's boxed calling convention: the callee frees its inputs
        if not split:
            prepare(inputs)
        pick_static, pick_dyn, pick_other, dyn_pos, mutated, n = split
        if len(inputs) != n:
            raise TypeError(f"spyre launch graphs: the compiled graph takes {n} inputs, got {len(inputs)}")
        dyn = pick_dyn(inputs)
        key = (tuple(map(data_ptr, pick_static(inputs))), tuple(map(_layout, dyn)), pick_other(inputs))
        entry = graphs.get(key)
        if entry is None:
            entry, ins, outs = capture(inputs, dyn_pos)
            graphs[key] = entry
            for n_ in mutated:  # the capture ran on copies of the dynamic inputs
                dyn[n_].copy_(ins[dyn_pos[n_]])
            return outs
        if entry is False:
            return model(inputs)
        outs = entry.run(dyn)
        for n_ in mutated:
            entry.copy_back(n_, dyn[n_])
        return outs

    def capture(inputs, dyn_pos):
        """(a _Graphed, or False when the graph cannot be captured; the inputs it ran on; its outputs)."""
        ins = list(inputs)
        for i in dyn_pos:
            x = inputs[i]
            ins[i] = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
        g = SpyreGraph()
        g.capture_begin()
        try:
            outs = model(list(ins))
        except BaseException:
            g.abort()
            raise
        try:
            g.capture_end()
        except GraphCaptureError as e:  # the graph ran (on ins); it will not be captured again
            if "capture" not in _warned:
                _warned.add("capture")
                import warnings
                warnings.warn(f"spyre: mode='reduce-overhead' runs this graph without launch graphs: {e}",
                              RuntimeWarning, stacklevel=3)
            return False, ins, outs
        return _Graphed(g, ins, outs, dyn_pos), ins, outs

    run._spyre_graphs = graphs
    return run
