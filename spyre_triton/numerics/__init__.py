"""How the simulated card represents numbers, and a report of what that does to a model.

    SPYRE_NUMERICS=dl16 python script.py           # f16 on spyre rounds through IBM's DLFloat16
    with spyre_triton.numerics.mode("dl16"): ...   # the same for a block (launches and copies in it)
    report = spyre_triton.numerics.compare(model, (x,))
    print(report.table())
    python -m spyre_triton.numerics --arch gpt2     # the report on a small transformers model

The modes are `isa.NUMERICS_MODES`: `ieee` (the default: f16 is IEEE binary16) and `dl16`. In `dl16`
the card's conversions round f16 values through DLFloat16 (`isa.DL16`: 6 exponent bits, 9 fraction
bits, bias 31, no subnormals, one special value for NaN and infinity); the instructions and the
performance model are the same. Where the card rounds, with a source for each rule:
docs/numerics.md.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import numpy as np

from .. import isa

MODES = tuple(isa.NUMERICS_MODES)
ENV = "SPYRE_NUMERICS"

__all__ = ["MODES", "get_mode", "set_mode", "mode", "round_dl16", "compare", "Report"]


def _check(name: str, where: str) -> int:
    if name not in MODES:
        raise ValueError(f"{where}: numerics mode {name!r} is not one of {', '.join(MODES)}")
    return MODES.index(name)


def _apply(index: int) -> int:
    """Set the mode in the runtime (launches) and, once it is loaded, the torch device (host-device
    copies; `device.register()` passes the mode on when it loads it). Return the previous mode."""
    from .. import _runtime
    prev = _runtime.set_numerics(index)
    dev = sys.modules.get("spyre_triton._device")
    if dev is not None:
        dev.set_numerics(index)
    return prev


def _sync_device() -> None:
    """Give the torch device, just loaded, the runtime's mode."""
    from .. import _device, _runtime
    _device.set_numerics(_runtime.get_numerics())


def get_mode() -> str:
    """The numerics mode launches and host-device copies use now."""
    from .. import _runtime
    return MODES[_runtime.get_numerics()]


def set_mode(name: str) -> str:
    """Use numerics mode `name` from now on (launches and copies that start later); return the previous one."""
    return MODES[_apply(_check(name, "set_mode"))]


@contextmanager
def mode(name: str):
    """Run the block in numerics mode `name` ('ieee' or 'dl16'), then restore the previous mode."""
    prev = set_mode(name)
    try:
        yield
    finally:
        set_mode(prev)


def _from_env() -> None:
    value = os.environ.get(ENV, "").strip().lower()
    if value:
        _apply(_check(value, ENV))


def round_dl16(x):
    """x (a NumPy array or a CPU tensor of float16 or float32) rounded through DLFloat16, by the NumPy
    reference of the runtime's conversion (the tests' oracle): to nearest, ties away from zero; below the
    smallest nonzero value to a zero of the same sign; beyond the largest finite value, inf and NaN to
    the special value, which reads back as NaN."""
    try:
        import torch
        if isinstance(x, torch.Tensor):
            return torch.from_numpy(round_dl16(x.detach().cpu().numpy()))
    except ImportError:
        pass
    a = np.asarray(x)
    if a.dtype not in (np.float16, np.float32):
        raise TypeError(f"round_dl16: expected float16 or float32 values, got {a.dtype}")
    f = a.astype(np.float32)
    u = f.view(np.uint32)
    fmt = isa.DL16
    shift = 23 - fmt.mbits
    mag = (u & np.uint32(0x7FFFFFFF)).astype(np.uint64)
    r = ((mag + (1 << (shift - 1))) & ~np.uint64((1 << shift) - 1)).astype(np.uint64)
    max_bits = (((1 << fmt.ebits) - 1 - fmt.bias + 127) << 23) | (((1 << fmt.mbits) - 2) << shift)
    min_bits = ((127 - fmt.bias) << 23) | (1 << shift)
    sign = (u & np.uint32(0x80000000)).astype(np.uint64)
    out = np.where(r < min_bits, sign, sign | r)
    out = np.where(r > max_bits, np.uint64(0x7FC00000), out).astype(np.uint32)
    with np.errstate(over="ignore"):  # back to float16: what DLFloat16 holds above 65504 is inf there
        return out.view(np.float32).astype(a.dtype)


# DLFloat16's extremes, from its format
DL16_MAX = float(np.float32(2.0 ** ((1 << isa.DL16.ebits) - 1 - isa.DL16.bias)
                            * (1 + ((1 << isa.DL16.mbits) - 2) / (1 << isa.DL16.mbits))))
DL16_MIN = float(2.0 ** -isa.DL16.bias * (1 + 2.0 ** -isa.DL16.mbits))


_from_env()


def __getattr__(name):  # compare imports torch: load it on first use
    if name in ("compare", "Report"):
        from . import report as _c
        return getattr(_c, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
