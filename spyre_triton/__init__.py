"""spyre-triton: Triton on a simulated IBM Spyre accelerator."""
def _autoload():
    from . import device
    device.register()
