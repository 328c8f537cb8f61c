"""spyre-triton: Triton on a simulated IBM Spyre accelerator.

`import torch` makes the `spyre` device available (autoload); `import triton` finds the `spyre`
backend plugin. `spyre_triton.track()` reports what ran on spyre and what fell back to the host;
`spyre_triton.profile()` models how long it would take on a Spyre card (docs/perf-model.md).
"""
from .tracking import track  # noqa: F401
from .perf import HardwareConfig, do_bench, get_hardware, profile, set_hardware  # noqa: F401
from . import numerics  # noqa: F401  (applies SPYRE_NUMERICS)


def _autoload():
    """Entry point `torch.backends: spyre`: register the device when torch is imported."""
    from . import device
    device.register()
