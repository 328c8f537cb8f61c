"""The spyre backend's driver: device properties, binary loading and the kernel launcher.

The launcher works from the binary and the kernel's signature alone (Inductor unpickles compiled
kernels in other processes): the binary names the arguments the kernel reads, and the signature
says which of the launcher's arguments are constexprs to skip.
"""
from __future__ import annotations

import os
import time

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from spyre_triton import config, graphs, tracking
from spyre_triton.perf import capture as perf


def _runtime():
    from spyre_triton import _runtime
    return _runtime


class SpyreUtils:

    def load_binary(self, name, kernel, shared, device):
        k = _runtime().Kernel(bytes(kernel))
        perf.note_binary(k, kernel)  # the LX occupancy profile, for spyre_triton.profile()
        return k, k, 32, 0, 1 << 16

    def get_device_properties(self, device=None):
        return {
            "multiprocessor_count": config.NUM_CORES,
            "max_shared_mem": config.LX_TILE_BYTES,
            "max_num_regs": config.MAX_NUM_REGS,
            "warpSize": config.WARP_SIZE,
            "max_threads_per_sm": 2048,
            "sm_clock_rate": 1_500_000,
            "mem_clock_rate": 3_200_000,
            "mem_bus_width": 256,
        }


class SpyreLauncher:

    def __init__(self, src, metadata):
        signature = getattr(src, "signature", None) or {}
        constants = getattr(src, "constants", None) or {}
        self.arg_index = None  # the fast path: positions of the kernel's arguments among the launcher's
        self.plan = None  # the general path: tuples flattened, host tensor descriptors expanded
        if signature:
            names = list(signature)
            const_paths = {_path(k, names) for k in constants}
            self.arg_names = tuple(names)
            plan = _plan(list(signature.values()), (), const_paths)
            if all(kind == "arg" and len(path) == 1 for kind, path in plan):
                self.arg_index = tuple(path[0] for _, path in plan)
            else:
                self.plan = plan
        self.name = metadata.name

    def kernel_args(self, args):
        if self.plan is None:
            return args if self.arg_index is None else tuple(args[i] for i in self.arg_index)
        out = []
        for kind, path in self.plan:
            a = args
            for i in path:
                a = a[i]
            if kind == "arg":
                out.append(a)
            else:  # a host TensorDescriptor, as Triton's frontend decomposes it (see _plan)
                shape, strides = list(a.shape), list(a.strides)
                out += [a.base, *shape, *strides, a.padding == "nan", a.round_f32_to_tf32, *shape, *strides]
        return tuple(out)

    def __call__(self, gridX, gridY, gridZ, stream, function, packed_metadata, launch_metadata, enter_hook,
                 exit_hook, *args):
        if enter_hook is not None:
            enter_hook(launch_metadata)
        if gridX * gridY * gridZ > 0:
            kargs = self.kernel_args(args)
            if self.arg_index is None and len(kargs) != function.num_args:
                raise TypeError(f"kernel {self.name} takes {function.num_args} arguments, got {len(kargs)}")
            modelled = perf.listeners  # a profile or a modelled benchmark is running
            sens_wanted = perf.sensitivity_wanted() if modelled else None
            before = perf.snapshot(kargs) if sens_wanted else None
            sens = t1 = None
            t0 = tracking.now_ns() if tracking._active or modelled else 0
            try:
                if modelled:
                    res = function.launch(_current_device(), gridX, gridY, gridZ, kargs,
                                          perf=perf.params(function, gridX * gridY * gridZ))
                    t1 = tracking.now_ns()  # the host time of the launch, without the reruns below
                    if sens_wanted and res is not None:
                        sens = perf.sensitivity(function, _current_device(), (gridX, gridY, gridZ), kargs,
                                                self.name, before, *sens_wanted)
                else:
                    function.launch(_current_device(), gridX, gridY, gridZ, kargs)
            except _runtime().DeviceError as e:
                _explain_foreign_pointer(e, args, self)
                raise
            if graphs._capturing:
                graphs._capturing[-1].record(function, _current_device(), (gridX, gridY, gridZ), kargs)
            if tracking._active or modelled:
                ns = (t1 if t1 is not None else tracking.now_ns()) - t0
                if tracking._active:
                    tracking.record_launch(self.name, ns)
                if modelled:
                    perf.record(self.name, function, (gridX, gridY, gridZ), res, ns, sens)
        if exit_hook is not None:
            exit_hook(launch_metadata)

    def explain(self, err, args):
        """The C launcher's question after a DeviceError: raise a clearer error for it, or return."""
        _explain_foreign_pointer(err, args, self)


def make_launcher(src, metadata):
    """Triton's launcher_cls. The C launcher (runtime/interp_py.c) takes the common case, a plain argument
    list with no hooks, trackers or profiles, and hands every other case to SpyreLauncher."""
    py = SpyreLauncher(src, metadata)
    if py.plan is not None:
        return py
    _current_device()  # binds the device extension's C function once torch.spyre is registered
    return _runtime().Launcher(py, py.arg_index, _device_index or _current_device, tracking._active,
                               perf.listeners)


def _path(key, names):
    """A constants key (a name, an index, or a path of indices into nested tuples) as a path."""
    if isinstance(key, str):
        return (names.index(key),)
    return tuple(key) if isinstance(key, tuple) else (key,)


def _plan(sig, prefix, const_paths):
    """[(kind, path)] for the kernel's arguments in order: kind 'arg' passes args[path] on, 'desc'
    expands a host TensorDescriptor into base, shape, strides, padding, tf32 rounding, shape, strides
    (what the TTIR function takes once tensor descriptors are rewritten to pointers). Constexprs and
    constant-specialised arguments are skipped; tuples are flattened."""
    out = []
    for i, ty in enumerate(sig):
        path = prefix + (i,)
        if path in const_paths or ty == "constexpr":
            continue
        if isinstance(ty, tuple):
            out += _plan(list(ty), path, const_paths)
        elif isinstance(ty, str) and ty.startswith("tensordesc"):
            out.append(("desc", path))
        else:
            out.append(("arg", path))
    return out


def _explain_foreign_pointer(err, args, launcher):
    """Reword 'not in device memory' as Triton does on CUDA: which argument, and which device it is on."""
    import torch
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.device.type != "spyre":
            name = launcher.arg_names[i] if getattr(launcher, "arg_names", None) else str(i)
            raise ValueError(f"Pointer argument '{name}' (at {i}) of kernel {launcher.name} is on device "
                             f"'{a.device}', not on spyre: move it with .to('spyre')") from err


_current = [0]
_device_index = None  # the device extension's current_device(), bound once torch.spyre is registered


def _current_device():
    # every launch asks, twice (Triton's dispatch and the launcher): after the first call it is one C call
    global _device_index
    if _device_index is None:
        try:
            import torch
            torch.spyre.current_device()  # registers the device on first use
            from spyre_triton import _device
            _device_index = _device.current_device
            # Triton asks the driver on every launch: from now on that is the C function itself
            SpyreDriver.get_current_device = staticmethod(_device_index)
        except (ImportError, AttributeError):
            return _current[0]
    return _device_index()


class _Event:
    """A timing event. Launches are synchronous, so the host clock at record() is the device's."""

    def __init__(self, enable_timing=True):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class _DeviceInterface:
    Event = _Event

    @staticmethod
    def synchronize(device=None):
        pass

    @staticmethod
    def current_device():
        return _current_device()


def _skip_idle_launch_metadata() -> None:
    """Inductor's generated launchers evaluate `bin.launch_metadata(grid, stream, *args)` on every launch
    whenever Triton's launch_enter_hook is set, and Triton always sets it to a HookChain, empty unless a
    profiler adds a hook: each launch built a LazyDict no one reads (about 1 us of a 4-6 us Python
    launch path). With neither an enter nor an exit hook, launch_metadata returns None, as Triton's own
    does for an enter hook of None; once a hook is added it builds the metadata as before. The spyre
    driver is the process's only Triton driver when it is active, so the patch touches no other
    backend's launches."""
    from triton import knobs
    from triton.compiler.compiler import CompiledKernel
    from triton.knobs import HookChain
    orig = CompiledKernel.launch_metadata
    if getattr(orig, "_spyre_skips_idle", False):
        return

    def idle(hook):
        return hook is None or (type(hook) is HookChain and not hook.calls)

    def launch_metadata(self, grid, stream, *args):
        rt = knobs.runtime
        if idle(rt.launch_enter_hook) and idle(rt.launch_exit_hook):
            return None
        return orig(self, grid, stream, *args)

    launch_metadata._spyre_skips_idle = True
    launch_metadata.__wrapped__ = orig
    CompiledKernel.launch_metadata = launch_metadata


class SpyreDriver(DriverBase):

    def __init__(self):
        self.utils = SpyreUtils()
        self.launcher_cls = make_launcher
        super().__init__()
        _skip_idle_launch_metadata()
        from spyre_triton.perf import bench
        bench.install()  # triton.testing.do_bench measures modelled device time (docs/perf-model.md)

    @classmethod
    def is_active(cls):
        chosen = os.environ.get("TRITON_DEFAULT_BACKEND") or os.environ.get("TRITON_BACKEND")
        if chosen:
            return chosen == "spyre"
        try:
            import torch
            return not torch.cuda.is_available() and not (hasattr(torch, "xpu") and torch.xpu.is_available())
        except ImportError:
            return True

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_current_target(self):
        return GPUTarget("spyre", config.ARCH, config.WARP_SIZE)

    def get_current_device(self):
        return _current_device()

    def set_current_device(self, device):
        import torch
        torch.spyre.set_device(device)

    # one in-order stream per device, 0: a C function, as Triton asks on every launch
    get_current_stream = staticmethod(_runtime().current_stream)

    def get_active_torch_device(self):
        import torch
        return torch.device("spyre", self.get_current_device())

    def get_device_interface(self):
        return _DeviceInterface

    def get_benchmarker(self):
        # autotuning ranks configs by modelled device time (SPYRE_BENCH=wall: host time)
        from spyre_triton.perf.bench import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        import torch
        # Spyre has no cache between DMA and device memory; a small buffer keeps do_bench's protocol.
        return torch.empty(1024, dtype=torch.int8, device=self.get_active_torch_device())

    def clear_cache(self, cache):
        cache.zero_()
