"""Spyre's libdevice: what `triton.language.extra.libdevice` resolves to when compiling for spyre.

Each function is an `extern_elementwise` whose symbol names an SFU function of the ISA
(`__spyre_<opcode>_<fn>`); the lowering turns the call into one `math1`/`math2` tile instruction.
The table below is the whole library: name -> (opcode, ISA function, number of arguments).
"""
from __future__ import annotations

from triton.language import core

from . import isa

# libdevice name -> (opcode, ISA function). Aliases (fast_*, *_rn) map onto the same SFU function.
FUNCTIONS = {name: ("math1", name) for name, _ in isa.ENUMS["math1"]}
FUNCTIONS.update({name: ("math2", name) for name, _ in isa.ENUMS["math2"]})
FUNCTIONS.update({
    "fast_expf": ("math1", "exp"), "fast_logf": ("math1", "log"), "fast_log2f": ("math1", "log2"),
    "fast_log10f": ("math1", "log10"), "fast_sinf": ("math1", "sin"), "fast_cosf": ("math1", "cos"),
    "fast_tanf": ("math1", "tan"), "fast_exp10f": ("math1", "exp10"), "fast_powf": ("math2", "pow"),
    "sqrt_rn": ("math1", "sqrt"), "rsqrt_rn": ("math1", "rsqrt"), "rcp_rn": ("math1", "rcp"),
    "finitef": ("math1", "isfinite"), "isfinited": ("math1", "isfinite"), "llrint": ("math1", "rint"),
    "div_rn": ("math2", "div"), "fmax": ("math2", "fmaxnum"), "fmin": ("math2", "fminnum"),
})
FUNCTIONS = {k: v for k, v in FUNCTIONS.items() if v[1] in dict(isa.ENUMS[v[0]])}
# Correctly rounded arithmetic (the _rn variants) and the fast approximations are the vector unit's
# ordinary instructions: IEEE results, so at least as accurate as asked.
_PLAIN_OPS = {"div_rn": "divf", "fast_dividef": "divf", "add_rn": "add", "sub_rn": "sub", "mul_rn": "mul",
              "fma_rn": "fma", "fma": "fma"}
FUNCTIONS.update({name: ("op", opcode) for name, opcode in _PLAIN_OPS.items()})
# The predicates give i1 (CUDA's libdevice gives int32; either converts the same way when stored).
FUNCTIONS.update({"isnan": ("pred", "isnan"), "isinf": ("pred", "isinf"), "finitef": ("pred", "isfinite"),
                  "isfinited": ("pred", "isfinite"), "signbit": ("pred", "signbit")})
_ARITY = {"math1": 1, "math2": 2, "pred": 1}
_OP_ARITY = {"divf": 2, "add": 2, "sub": 2, "mul": 2, "fma": 3}
# The predicates give booleans in CUDA's libdevice (int32 there); here they give i1 like tl.where wants.
_PREDICATES = {"isnan", "isinf", "isfinite", "signbit"}
_FLOATS = ["fp32", "fp64", "fp16", "bf16"]


def symbol(opcode: str, fn: str, dtype: str) -> str:
    return f"__spyre_{opcode}_{fn}_{dtype}"


def lookup(sym: str):
    """(opcode, fn) for a symbol made by `symbol` (fn None for a plain vector instruction), or None."""
    if not sym.startswith("__spyre_"):
        return None
    opcode, rest = sym[len("__spyre_"):].split("_", 1)
    fn = rest.rsplit("_", 1)[0]
    if opcode == "op":
        return (fn, None) if fn in _OP_ARITY else None
    if opcode == "pred":
        return (opcode, fn) if fn in _PREDICATES else None
    if opcode not in _ARITY or fn not in dict(isa.ENUMS[opcode]):
        return None
    return opcode, fn


def _make(name: str, opcode: str, fn: str):
    arity = _OP_ARITY[fn] if opcode == "op" else _ARITY[opcode]

    def impl(*args, _semantic=None):
        table = {}
        for t in _FLOATS:
            ret = core.dtype("int1") if opcode == "pred" else core.dtype(t)
            table[(core.dtype(t),) * arity] = (symbol(opcode, fn, t), ret)
        return core.extern_elementwise("spyre", "", list(args), table, is_pure=True, _semantic=_semantic)

    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = (f"the vector unit's `{fn}`" if opcode in ("op", "pred")
                    else f"{dict(isa.ENUMS[opcode])[fn]} (Spyre SFU `{opcode} fn={fn}`)")
    return core.extern(impl)


for _name, (_opcode, _fn) in FUNCTIONS.items():
    if _opcode == "pred" or _fn not in _PREDICATES:  # math1's float-valued predicates stay internal
        globals()[_name] = _make(_name, _opcode, _fn)
