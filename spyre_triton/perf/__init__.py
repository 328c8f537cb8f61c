"""The Spyre performance model and profiler (docs/perf-model.md): the modelled card."""
from .hardware import HardwareConfig, get_hardware, set_hardware  # noqa: F401
