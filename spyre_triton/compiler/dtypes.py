"""TTIR types as Spyre dtypes, and constants as the bit patterns the ISA stores."""
from __future__ import annotations

import struct

import numpy as np

from .. import isa, isa_ref

_FLOAT_NAMES = {
    "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
    "f8E4M3FN": "f8e4m3fn", "f8E5M2": "f8e5m2", "f8E4M3FNUZ": "f8e4m3fnuz", "f8E5M2FNUZ": "f8e5m2fnuz",
}


def storage(ty) -> str:
    """The Spyre dtype that holds one element of ttir type `ty` (pointers are i64 addresses)."""
    t = ty.elem if ty.kind == "tensor" else ty
    if t.kind == "int":
        if t.width not in (1, 8, 16, 32, 64):
            raise ValueError(f"unsupported integer width {t.width}")
        return f"i{t.width}"
    if t.kind == "index":
        return "i64"
    if t.kind == "ptr":
        return "i64"
    if t.kind == "float":
        if t.name not in _FLOAT_NAMES:
            raise ValueError(f"unsupported float type {t.name}")
        return _FLOAT_NAMES[t.name]
    raise ValueError(f"type {t} has no Spyre storage type")


def pointee(ty) -> str:
    """Dtype of what a pointer (or tensor of pointers) points at."""
    t = ty.elem if ty.kind == "tensor" else ty
    return storage(t.elem)


def arg_kind(ty):
    """(ArgSpec kind, dtype) for a kernel argument of type ty."""
    if ty.kind == "ptr":
        return "ptr", storage(ty.elem) if ty.elem.kind in ("int", "float") else "i8"
    if ty.kind == "int":
        return "int", storage(ty)
    if ty.kind == "float":
        return "float", storage(ty)
    raise ValueError(f"unsupported kernel argument type {ty}")


def nbytes(dtype: str) -> int:
    return isa.DTYPE_BY_NAME[dtype].nbytes


def is_float(dtype: str) -> bool:
    return isa.DTYPE_BY_NAME[dtype].kind == "float"


def wrap(value: int, dtype: str) -> int:
    """Integer `value` wrapped to dtype's width, as a signed value (i1 as 0/1)."""
    bits = 1 if dtype == "i1" else nbytes(dtype) * 8
    value = int(value) & ((1 << bits) - 1)
    if dtype != "i1" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def const_bits(value, dtype: str) -> int:
    """The raw bits (as an unsigned 64-bit int) of `value` stored as dtype."""
    if dtype == "f32":
        return struct.unpack("<I", struct.pack("<f", float(value)))[0]
    if dtype == "f64":
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    if dtype == "f16":
        return int(np.array([value], dtype=np.float16).view(np.uint16)[0])
    if dtype == "bf16":
        import torch
        return int(torch.tensor([float(value)], dtype=torch.bfloat16).view(torch.int16).item()) & 0xFFFF
    if dtype.startswith("f8"):
        import torch
        tdt = {"f8e4m3fn": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
               "f8e4m3fnuz": torch.float8_e4m3fnuz, "f8e5m2fnuz": torch.float8_e5m2fnuz}[dtype]
        return int(torch.tensor([float(value)]).to(tdt).view(torch.uint8).item())
    bits = 1 if dtype == "i1" else nbytes(dtype) * 8
    return int(value) & ((1 << bits) - 1)


def fold(op: str, a, b, dtype: str):
    """a `op` b on constants, computed as the instruction computes it: by isa_ref, the executable
    definition of each opcode (integers wrap in their width, division by zero gives 0, floats round
    to dtype)."""
    if not is_float(dtype):
        return wrap(isa_ref.int_binary(op, dtype, const_bits(a, dtype), const_bits(b, dtype)), dtype)
    st = isa_ref.storage(dtype)
    bits = isa_ref.elementwise(op, dtype, [np.array([const_bits(x, dtype)], dtype=st) for x in (a, b)])
    return float(isa_ref.decode(dtype, bits)[0])
