"""The Spyre performance model and profiler (docs/perf-model.md).

    with spyre_triton.profile() as prof:
        ...                                   # any code launching kernels on spyre
    print(prof.table())

The interpreter models each launch only while a profile (or a modelled benchmark) is active;
otherwise launches run the plain dispatch loop and the model costs nothing.
"""
from .bench import do_bench, modeled_ms, use_modeled  # noqa: F401
from .hardware import HardwareConfig, get_hardware, set_hardware  # noqa: F401
from .model import LaunchRecord  # noqa: F401
from .profiler import Profile, profile  # noqa: F401
