"""The `spyre` device as Dynamo and Inductor see it: its properties, the device interface
(streams, events, device index, compute capability) and the lines the Python wrapper writes for
device guards, streams and synchronisation."""
from __future__ import annotations

import time

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
    """`torch.spyre.get_device_properties(i)`: attribute access, like CUDA's. The compiler's figures
    above, and the performance model's card (`spyre_triton.get_hardware()`, `SPYRE_HW` applied):
    cores, corelets, clock, peak FLOP/s and device-memory bandwidth."""

    def __init__(self, index: int, total_memory: int):
        from spyre_triton.perf.hardware import get_hardware
        self.__dict__.update(_PROPERTIES)
        self.index = index
        self.total_memory = total_memory  # the card's capacity (SPYRE_DEVICE_MEMORY_BYTES)
        hw = get_hardware()
        self.major, self.minor = _capability()
        self.cores = hw.num_cores                          # modelled AI cores per card
        self.corelets_per_core = hw.corelets
        self.lx_bytes = hw.lx_bytes                        # LX scratchpad per core
        self.clock_rate = int(round(hw.clock_hz / 1e3))     # kHz, as torch.cuda's clock_rate
        self.peak_flops = hw.peak_flops                    # fp16 PE-array peak of the card, FLOP/s
        self.vector_peak_flops = hw.vector_peak_flops
        self.memory_bandwidth = hw.dram_read_bw            # B/s, one direction
        self.stick_bytes = hw.stick_bytes

    def __repr__(self):
        return (f"SpyreDeviceProperties(name={self.name!r}, arch={self.arch!r}, major={self.major}, "
                f"minor={self.minor}, cores={self.cores}, multi_processor_count={self.multi_processor_count}, "
                f"lx_bytes={self.lx_bytes}, clock_rate={self.clock_rate}kHz, "
                f"total_memory={self.total_memory >> 20}MB)")


def _capability() -> tuple[int, int]:
    """(major, minor) from the architecture name, "spyre1" -> (1, 0)."""
    digits = "".join(ch for ch in config.ARCH if ch.isdigit())
    if not digits:
        raise ValueError(f"spyre_triton.config.ARCH {config.ARCH!r} carries no version number")
    return int(digits), 0


_props_cache: dict[tuple, SpyreDeviceProperties] = {}


def get_device_properties(device=None) -> SpyreDeviceProperties:
    """Static figures of the simulated card: safe to call in compile workers (no device init
    beyond loading the runtime module)."""
    from spyre_triton.perf.hardware import get_hardware
    idx = _index(device)
    key = (idx, get_hardware())  # spyre_triton.set_hardware() gives new properties
    p = _props_cache.get(key)
    if p is None:
        from spyre_triton import _runtime
        p = _props_cache[key] = SpyreDeviceProperties(idx, _runtime.device_memory_capacity())
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
