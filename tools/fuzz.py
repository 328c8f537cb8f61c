"""Differential fuzzer: random @triton.jit kernels run on spyre and on Triton's interpreter.

    python tools/fuzz.py N [--seed S] [--family F] [--verbose]

Each case is built from one integer seed (the run's seed plus the case number), so a failure is
reproduced by its seed alone: `python tools/fuzz.py 1 --seed <seed>`. A failure prints the seed, the
family and the kernel source.

The reference is Triton's interpreter run in-process on CPU tensors. It shares Triton's front end (types,
promotion, broadcasting) with the compiled path and differs only in how each op is evaluated, so what
it disagrees on is a spyre bug unless it is one of the interpreter's own (INTERPRETER_BUGS): the
generator does not emit those patterns. A pattern that hits a known open spyre defect is tagged with it
(KNOWN_DEFECTS); its mismatches are counted apart and do not fail a run.
"""
import argparse
import dataclasses
import hashlib
import importlib.util
import os
import pickle
import random
import struct
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import torch

# Patterns where Triton 3.7's interpreter itself is wrong; the generator never emits them.
INTERPRETER_BUGS = {
    "bf16-arith": "the interpreter does bf16 arithmetic on the raw bits: bf16 values are only loaded, "
                  "stored and widened to f32",
    "f32-to-bf16": "the interpreter truncates f32 to bf16 instead of rounding: nothing narrows to bf16",
    "int-other-bf16": "the interpreter bit-casts an integer `other=` to bf16: bf16 loads take a float other",
    "fma": "the interpreter computes fma as x * y + z, rounding twice (in f16 and, near overflow, in "
           "f32 too): no fma",
    "umulhi-signed": "the interpreter's umulhi is wrong on signed operands: umulhi only on unsigned",
    "minmax-zero-sign": "the interpreter's min/max ignore the sign of zero: a float min/max result gets "
                        "+ 0.0, which makes every zero +0.0",
    "minmax-nan": "the interpreter's maxnum/minnum (tl.maximum/minimum's default) propagate NaN: float "
                  "min/max take propagate_nan=ALL",
    "invert-unsigned": "the interpreter builds ~x on an unsigned x from the constant -1 and raises "
                       "OverflowError: ~ only on signed integers",
    "argminmax-nan": "argmin/argmax over NaN depend on the combine order (NaN compares false): no NaN in "
                     "their inputs",
}

# Open spyre defects: a case that carries the tag counts its mismatches as known, not as failures.
# Empty while none is open. (Issue 25's D1, a signed integer product of an index value by a scalar
# that did not wrap, is fixed: its pattern, tagged "D1" below, now counts as a failure like any other.)
KNOWN_DEFECTS: dict[str, str] = {}

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32,
        "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}
TORCH = {name: getattr(torch, name) for name in INTS + FLOATS}


@dataclasses.dataclass
class Case:
    seed: int
    family: str
    source: str                 # the module text; the kernel is `kernel`
    args: list                  # torch CPU tensors and Python scalars, in kernel order
    outputs: list               # indices into args of the tensors to compare
    grid: tuple
    constexprs: dict
    tags: set = dataclasses.field(default_factory=set)
    exact: bool = False         # compare floats bit for bit too (pure data movement)
    tol: tuple = None           # (rtol, atol) instead of PyTorch's defaults for the dtype


# ---------------------------------------------------------------------------------------------- data

def special_values(dtype):
    """The values a dtype's edge cases live at: extremes, zeros of both signs, inf, NaN, denormals."""
    if dtype in INTS:
        info = torch.iinfo(TORCH[dtype])
        return [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.min + 1, info.max - 1]
    info = torch.finfo(TORCH[dtype])
    return [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, info.tiny / 4, -info.tiny, info.max,
            -info.max, 1.0, -1.5]


def random_tensor(rng, dtype, n, special=True):
    """n values of dtype: mostly small (so sums and products stay meaningful), some at the edges."""
    t = TORCH[dtype]
    if dtype in INTS:
        info = torch.iinfo(t)
        lo, hi = max(info.min, -100), min(info.max, 100)
        vals = [rng.randint(lo, hi) for _ in range(n)]
        if rng.random() < 0.3:  # full range: wrap-around territory
            vals = [rng.randint(info.min, info.max) for _ in range(n)]
    else:
        vals = [round(rng.uniform(-4, 4), 3) for _ in range(n)]
    if special:
        edges = special_values(dtype)
        for _ in range(rng.randint(0, max(1, n // 8))):
            vals[rng.randrange(n)] = rng.choice(edges)
    if dtype in ("uint32", "uint64", "uint16"):  # torch builds unsigned tensors from in-range ints only
        return torch.tensor(np.array(vals, dtype=dtype))
    return torch.tensor(vals, dtype=t)


# ------------------------------------------------------------------------------------ expression trees

class Expr:
    """Builds an expression over named leaves; every node knows its dtype (Triton's promotion is not
    re-implemented: each binary op casts its operands to one chosen dtype explicitly)."""

    def __init__(self, rng, leaves, index_leaf=None):
        self.rng = rng
        self.leaves = leaves          # [(text, dtype)]
        self.index_leaf = index_leaf  # (text, dtype) of an index value, for D1-style products
        self.tags = set()

    def cast(self, text, src, dst):
        if src == dst:
            return text
        if dst == "bfloat16" or src == "bfloat16" and dst != "float32":
            dst = "float32" if src == "bfloat16" else dst
        if src in FLOATS and dst in INTS:  # out-of-range and NaN float->int are undefined: clamp first
            lo = "0.0" if dst.startswith("u") else "-100.0"
            text = f"tl.where({text} == {text}, tl.minimum(tl.maximum({text}, {lo}), 100.0), 0.0)"
        return f"({text}).to(tl.{dst})"

    def leaf(self, want):
        text, dt = self.rng.choice(self.leaves)
        if dt == "bfloat16":  # INTERPRETER_BUGS["bf16-arith"]: widen at once
            text, dt = f"{text}.to(tl.float32)", "float32"
        if want is None:
            return text, dt
        if self.rng.random() < 0.15:
            return self.const(want), want
        return self.cast(text, dt, want), want

    def const(self, dt):
        if dt in INTS:
            v = self.rng.choice([0, 1, 3, 7, 100, -1, -5]) if dt.startswith("int") else self.rng.choice([0, 1, 3, 7, 100])
            return f"tl.full([], {v}, tl.{dt})"
        v = self.rng.choice(["0.0", "-0.0", "1.5", "-2.0", "float('inf')", "float('nan')"])
        return f"tl.full([], {v}, tl.{dt})"

    def gen(self, depth, dt):
        """A random expression of dtype dt (never bf16: see INTERPRETER_BUGS)."""
        r = self.rng
        if depth == 0 or r.random() < 0.2:
            return self.leaf(dt)[0]
        if dt in INTS:
            return self.gen_int(depth, dt)
        return self.gen_float(depth, dt)

    def gen_int(self, depth, dt):
        r, bits = self.rng, BITS[dt]
        a = self.gen(depth - 1, dt)
        kind = r.choice(["bin", "bin", "bin", "shift", "div", "minmax", "where", "unary", "cast", "umulhi",
                         "index"])
        if kind == "bin":
            op = r.choice(["+", "-", "*", "&", "|", "^"])
            return f"({a} {op} {self.gen(depth - 1, dt)})"
        if kind == "shift":
            amt = r.randrange(bits)
            return f"({a} {r.choice(['<<', '>>'])} {amt})"
        if kind == "div":  # a nonzero divisor that cannot be -1 (INT_MIN // -1 overflows: undefined)
            b = self.gen(depth - 1, dt)
            return f"({a} {r.choice(['//', '%'])} (({b} & 15) + 2))"
        if kind == "minmax":
            return f"tl.{r.choice(['minimum', 'maximum'])}({a}, {self.gen(depth - 1, dt)})"
        if kind == "where":
            c = f"({self.gen(depth - 1, dt)} {r.choice(['<', '<=', '==', '!=', '>', '>='])} {a})"
            return f"tl.where({c}, {a}, {self.gen(depth - 1, dt)})"
        if kind == "unary":
            if dt.startswith("u"):  # INTERPRETER_BUGS["invert-unsigned"]
                return f"({a} ^ {self.gen(depth - 1, dt)})"
            return r.choice([f"(-{a})", f"(~{a})", f"tl.abs({a})"])
        if kind == "umulhi" and dt in ("uint32", "uint64"):  # INTERPRETER_BUGS["umulhi-signed"]
            return f"tl.umulhi({a}, {self.gen(depth - 1, dt)})"
        if kind == "index" and self.index_leaf and dt.startswith("int"):
            # an index value times a runtime scalar, the shape of issue 25's D1
            idx, idt = self.index_leaf
            self.tags.add("D1")
            if r.random() < 0.5:
                return f"({self.cast(idx, idt, dt)} * {self.cast('s0', 'int32', dt)} + {a})"
            return f"({self.cast(f'{idx} * s0', 'int32', dt)} + {a})"  # the product in int32, then cast
        src = r.choice([t for t in INTS + ["float32", "float64", "float16"] if t != dt])
        return self.cast(self.gen(depth - 1, src), src, dt)

    def gen_float(self, depth, dt):
        r = self.rng
        a = self.gen(depth - 1, dt)
        kind = r.choice(["bin", "bin", "bin", "minmax", "where", "unary", "math", "cast"])
        if kind == "bin":
            return f"({a} {r.choice(['+', '-', '*', '/'])} {self.gen(depth - 1, dt)})"
        if kind == "minmax":  # INTERPRETER_BUGS["minmax-zero-sign"]
            fn = r.choice(["minimum", "maximum"])
            return f"(tl.{fn}({a}, {self.gen(depth - 1, dt)}, tl.PropagateNan.ALL) + 0.0)"  # "minmax-nan"
        if kind == "where":
            c = f"({self.gen(depth - 1, dt)} {r.choice(['<', '<=', '==', '!=', '>', '>='])} {a})"
            return f"tl.where({c}, {a}, {self.gen(depth - 1, dt)})"
        if kind == "unary":
            return r.choice([f"(-{a})", f"tl.abs({a})"])
        if kind == "math":
            fn = r.choice(["sqrt", "exp", "log", "sin", "cos", "floor", "ceil"])
            if dt == "float16":  # Triton's math functions take f32 and f64 only
                return f"tl.{fn}({a}.to(tl.float32)).to(tl.float16)"
            return f"tl.{fn}({a})"
        src = r.choice([t for t in INTS + ["float16", "float32", "float64"] if t != dt])
        return self.cast(self.gen(depth - 1, src), src, dt)


# ------------------------------------------------------------------------------------------ families

HEADER = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"


def pick_dtype(rng, allow_bf16=False):
    pool = INTS + FLOATS if allow_bf16 else INTS + [f for f in FLOATS if f != "bfloat16"]
    return rng.choice(pool)


def other_for(rng, dt):
    """A load's `other=`: a float literal for float loads (INTERPRETER_BUGS["int-other-bf16"])."""
    if dt in FLOATS:
        return rng.choice(["0.0", "-1.5", "float('nan')", "float('-inf')"])
    return rng.choice(["0", "1", "-1"]) if dt.startswith("int") else rng.choice(["0", "1"])


def family_expr(rng, seed):
    """Elementwise expression trees over 1-3 loaded tensors of any dtypes, masked, with other=."""
    n_in = rng.randint(1, 3)
    dts = [pick_dtype(rng, allow_bf16=True) for _ in range(n_in)]
    out_dt = pick_dtype(rng)
    BLOCK = rng.choice([16, 32, 64])
    n = rng.randint(1, 2 * BLOCK)
    grid = ((n + BLOCK - 1) // BLOCK + rng.randint(0, 1),)
    lines = ["    pid = tl.program_id(0)", "    i = pid * BLOCK + tl.arange(0, BLOCK)", "    m = i < n"]
    leaves = []
    for k, dt in enumerate(dts):
        if rng.random() < 0.7:
            lines.append(f"    x{k} = tl.load(X{k} + i, mask=m, other={other_for(rng, dt)})")
        else:
            lines.append(f"    x{k} = tl.load(X{k} + i, mask=m)")
        leaves.append((f"x{k}", dt))
    leaves.append(("s1", "int32"))
    expr = Expr(rng, leaves, index_leaf=("i", "int32"))
    body = expr.gen(rng.randint(1, 4), out_dt)
    lines.append(f"    y = {body}")
    lines.append(f"    tl.store(O + i, y, mask=m)")
    params = ", ".join([f"X{k}" for k in range(n_in)] + ["O", "n", "s0", "s1", "BLOCK: tl.constexpr"])
    src = HEADER + f"def kernel({params}):\n" + "\n".join(lines) + "\n"
    size = grid[0] * BLOCK
    args = [random_tensor(rng, dt, size) for dt in dts]
    args.append(torch.zeros(size, dtype=TORCH[out_dt]))
    s0 = rng.choice([3, -13, 2**30, -(2**31) + 5, 100000])
    args += [n, s0, rng.choice([-37, -2, 0, 2, 5, 44])]  # not 1: Triton makes an int 1 a constexpr
    return Case(seed, "expr", src, args, [n_in], grid, {"BLOCK": BLOCK}, expr.tags)


def family_index(rng, seed):
    """Inductor-style index arithmetic: x0 = xindex % K, x1 = xindex // K; strided, transposed,
    broadcast and gathered loads; a masked store."""
    dt = pick_dtype(rng, allow_bf16=True)
    K = rng.choice([1, 3, 4, 7, 16])
    R = rng.choice([1, 2, 5, 8])
    xnumel = K * R
    XBLOCK = rng.choice([8, 16, 32])
    grid = ((xnumel + XBLOCK - 1) // XBLOCK,)
    transposed = rng.random() < 0.5
    s0, s1 = (R, 1) if transposed else (1, K)   # x0 strides R in the transposed source
    pad = rng.choice([0, 1, 3])
    s0, s1 = (s0 + (pad if not transposed else 0), s1) if s0 != 1 else (s0, s1 + pad)
    lines = ["    xoffset = tl.program_id(0) * XBLOCK", "    xindex = xoffset + tl.arange(0, XBLOCK)",
             "    xmask = xindex < xnumel", f"    x0 = xindex % {K}", f"    x1 = xindex // {K}",
             f"    tmp0 = tl.load(in_ptr0 + (x0 * {s0} + x1 * {s1}), xmask, other={other_for(rng, dt)})",
             f"    tmp1 = tl.load(in_ptr1 + x1, xmask, eviction_policy='evict_last')",
             "    g = tl.load(idx_ptr + x0, xmask, other=0)",
             "    tmp2 = tl.load(in_ptr2 + g, xmask)"]
    size0 = max(s0 * (K - 1) + s1 * (R - 1) + 1, 1)
    out_dt = rng.choice(["float32", "int32", "int64", "float16", dt if dt != "bfloat16" else "float32"])
    expr = Expr(rng, [("tmp0", dt), ("tmp1", "float32"), ("tmp2", dt)])
    lines.append(f"    tmp3 = {expr.gen(rng.randint(1, 3), out_dt)}")
    lines.append("    tl.store(out_ptr0 + xindex, tmp3, xmask)")
    src = HEADER + "def kernel(in_ptr0, in_ptr1, idx_ptr, in_ptr2, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n" \
        + "\n".join(lines) + "\n"
    G = rng.randint(1, 20)
    args = [random_tensor(rng, dt, size0), random_tensor(rng, "float32", R),
            torch.tensor([rng.randrange(G) for _ in range(K)], dtype=torch.int32),
            random_tensor(rng, dt, G), torch.zeros(xnumel, dtype=TORCH[out_dt]), xnumel]
    return Case(seed, "index", src, args, [4], grid, {"XBLOCK": XBLOCK}, expr.tags)


def family_reduce(rng, seed):
    """A 2-D tile reduced or scanned along one axis: sum, max, min, argmax, argmin, xor_sum, cumsum, cumprod."""
    M, N = rng.choice([1, 2, 4, 8]), rng.choice([2, 8, 16, 32])
    dt = rng.choice(INTS + ["float16", "float32", "float64"])
    op = rng.choice(["sum", "max", "min", "argmax", "argmin", "xor_sum", "cumsum", "cumprod"])
    if op == "xor_sum" and dt not in INTS:
        op = "sum"
    axis = rng.randint(0, 1)
    nvalid = rng.randint(1, N)
    special = op not in ("argmax", "argmin", "sum", "cumsum", "cumprod") or dt in INTS
    other = other_for(rng, dt)
    if op in ("argmax", "argmin") and "nan" in other:  # INTERPRETER_BUGS["argminmax-nan"]
        other = "-1.5"
    lines = ["    rm = tl.arange(0, M)[:, None]", "    rn = tl.arange(0, N)[None, :]",
             f"    x = tl.load(X + rm * N + rn, mask=rn < nvalid, other={other})"]
    if op in ("cumsum", "cumprod"):
        lines += [f"    y = tl.{op}(x, axis={axis})", "    tl.store(O + rm * N + rn, y)"]
        out_shape = M * N
        out_dt = dt if dt in FLOATS else ("int64" if dt == "int64" or dt == "uint64" else None)
    else:
        lines.append(f"    y = tl.{op}(x, axis={axis})")
        other = "tl.arange(0, N)" if axis == 0 else "tl.arange(0, M)"
        lines.append(f"    tl.store(O + {other}, y)")
        out_shape = N if axis == 0 else M
        out_dt = None
    src = HEADER + "def kernel(X, O, nvalid, M: tl.constexpr, N: tl.constexpr):\n" + "\n".join(lines) + "\n"
    x = random_tensor(rng, dt, M * N, special=special)
    if dt in FLOATS and op in ("sum", "cumsum", "cumprod"):
        x = (x.abs() % 2 + 0.5).to(TORCH[dt]) * torch.sign(x).to(TORCH[dt])
    out_t = _result_dtype(op, dt) if out_dt is None else TORCH[out_dt]
    # A float sum, scan or product is as exact as its order: spyre accumulates f16 in f32 and rounds
    # once (docs/isa.md, red), the interpreter rounds every step; both are Triton (the order is free)
    tol = SUM_TOL[dt] if dt in FLOATS and op in ("sum", "cumsum", "cumprod") else None
    return Case(seed, "reduce", src, [x, torch.zeros(out_shape, dtype=out_t), nvalid], [1], (1,),
                {"M": M, "N": N}, tol=tol)


SUM_TOL = {"float16": (1e-2, 1e-2), "float32": (1e-5, 1e-4), "float64": (1e-12, 1e-12)}


def _result_dtype(op, dt):
    if op in ("argmax", "argmin"):
        return torch.int32
    if op in ("sum", "cumsum", "cumprod") and dt in INTS and BITS[dt] < 32:
        return torch.int32
    return TORCH[dt]


def family_loop(rng, seed):
    """A runtime-bounded loop accumulating chunks, and a static_range loop carrying a value."""
    dt = rng.choice(["float32", "int32", "int64", "float64", "uint32"])
    BLOCK = rng.choice([8, 16, 32])
    chunks = rng.randint(0, 5)
    step = rng.choice([1, 2])
    op = rng.choice(["+", "^", "max"]) if dt in INTS else rng.choice(["+", "max"])
    upd = "tl.maximum(acc, x, tl.PropagateNan.ALL)" if op == "max" else f"acc {op} x"  # "minmax-nan"
    init = "tl.full([BLOCK], 0, tl.%s)" % dt
    lines = ["    r = tl.arange(0, BLOCK)", f"    acc = {init}",
             f"    for c in range(start, nchunks, {step}):",
             f"        x = tl.load(X + c * BLOCK + r, mask=r < nvalid, other={other_for(rng, dt)})",
             f"        acc = {upd}",
             "    for j in tl.static_range(3):",
             "        acc = acc * 2 if j == 1 else acc + j",
             "    tl.store(O + r, acc)"]
    src = HEADER + "def kernel(X, O, start, nchunks, nvalid, BLOCK: tl.constexpr):\n" + "\n".join(lines) + "\n"
    x = random_tensor(rng, dt, max(chunks, 1) * BLOCK, special=dt in INTS)
    if dt in FLOATS:
        x = x.round()
    return Case(seed, "loop", src, [x, torch.zeros(BLOCK, dtype=TORCH[dt]), rng.randint(0, 1), chunks,
                                    rng.randint(1, BLOCK)], [1], (1,), {"BLOCK": BLOCK})


def family_dot(rng, seed):
    """tl.dot of masked tiles: f16 and f32 (ieee) into f32, int8 into int32; an accumulator argument."""
    a_dt, acc = rng.choice([("float16", "float32"), ("float32", "float32"), ("int8", "int32")])
    M, N, K = rng.choice([16, 32]), rng.choice([16, 32]), rng.choice([16, 32])
    kvalid = rng.randint(1, K)
    prec = ", input_precision='ieee'" if a_dt == "float32" else ""
    trans = rng.random() < 0.4
    b_load = "tl.load(B + rn[None, :] * K + rk[:, None], mask=rk[:, None] < kvalid, other=0)" if trans else \
        "tl.load(B + rk[:, None] * N + rn[None, :], mask=rk[:, None] < kvalid, other=0)"
    lines = ["    rm = tl.arange(0, M)", "    rn = tl.arange(0, N)", "    rk = tl.arange(0, K)",
             "    a = tl.load(A + rm[:, None] * K + rk[None, :], mask=rk[None, :] < kvalid, other=0)",
             f"    b = {b_load}",
             f"    c = tl.load(C + rm[:, None] * N + rn[None, :])",
             f"    d = tl.dot(a, b, c{prec})" if rng.random() < 0.5 and a_dt != "int8" else f"    d = tl.dot(a, b{prec}) + c",
             "    tl.store(O + rm[:, None] * N + rn[None, :], d)"]
    src = HEADER + "def kernel(A, B, C, O, kvalid, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):\n" \
        + "\n".join(lines) + "\n"
    a = random_tensor(rng, a_dt, M * K, special=False)
    b = random_tensor(rng, a_dt, K * N, special=False)
    if a_dt == "int8":
        a, b = a.clamp(-100, 100), b.clamp(-100, 100)
    c = random_tensor(rng, acc, M * N, special=False)
    return Case(seed, "dot", src, [a, b, c, torch.zeros(M * N, dtype=TORCH[acc]), kvalid], [3], (1,),
                {"M": M, "N": N, "K": K})


def family_atomic(rng, seed):
    """Atomics from several programs onto colliding addresses (integers: any order gives the same final
    memory) or onto distinct ones (then the returned old values are checked too)."""
    dt = rng.choice(["int32", "int64", "uint32", "float32"])
    ops = ["add", "max", "min", "and", "or", "xor", "xchg"] if dt != "float32" else ["add", "max", "min"]
    op = rng.choice(ops)
    BLOCK = rng.choice([8, 16])
    P = rng.randint(1, 4)
    collide = rng.random() < 0.5 and op != "xchg"
    T = rng.randint(1, BLOCK) if collide else P * BLOCK
    addr = f"(pid * BLOCK + r) % {T}" if collide else "pid * BLOCK + r"
    mask = rng.choice(["", ", mask=r < nvalid"])
    lines = ["    pid = tl.program_id(0)", "    r = tl.arange(0, BLOCK)",
             "    v = tl.load(V + pid * BLOCK + r)",
             f"    old = tl.atomic_{op}(T + {addr}, v{mask})",
             f"    tl.store(R + pid * BLOCK + r, old{mask})"]
    src = HEADER + "def kernel(T, V, R, nvalid, BLOCK: tl.constexpr):\n" + "\n".join(lines) + "\n"
    v = random_tensor(rng, dt, P * BLOCK, special=dt in INTS)
    if dt == "float32":
        v = v.round()
    outputs = [0] if collide else [0, 2]
    return Case(seed, "atomic", src, [random_tensor(rng, dt, T, special=False), v,
                                      torch.zeros(P * BLOCK, dtype=TORCH[dt]), rng.randint(1, BLOCK)],
                outputs, (P,), {"BLOCK": BLOCK})


def family_alias(rng, seed):
    """One tensor passed twice, in place or shifted by some elements (one program: the loads come
    before the store in program order)."""
    dt = pick_dtype(rng)
    BLOCK = rng.choice([16, 32])
    shift = rng.choice([0, 0, 1, 5])
    expr = Expr(rng, [("a", dt), ("b", dt)])
    body = expr.gen(rng.randint(1, 3), dt)
    lines = ["    i = tl.arange(0, BLOCK)", "    m = i < n", f"    a = tl.load(X + i, mask=m, other={other_for(rng, dt)})",
             f"    b = tl.load(Y + i, mask=m, other={other_for(rng, dt)})", f"    tl.store(O + i, {body}, mask=m)"]
    src = HEADER + "def kernel(X, Y, O, n, BLOCK: tl.constexpr):\n" + "\n".join(lines) + "\n"
    buf = random_tensor(rng, dt, BLOCK + shift)
    # X and O are views of one buffer: the runner passes args[0][shift:] as O
    return Case(seed, "alias", src, [buf, random_tensor(rng, dt, BLOCK), ("view", 0, shift, BLOCK),
                                     rng.randint(1, BLOCK)], [0], (1,), {"BLOCK": BLOCK}, expr.tags)


def family_copy(rng, seed):
    """Pure data movement of every dtype, IEEE specials included: compared bit for bit (except NaN
    payloads), through 2-D transposed/strided boxes and other= fills."""
    dt = pick_dtype(rng, allow_bf16=True)
    M, N = rng.choice([1, 4, 8]), rng.choice([4, 16, 32])
    mv, nv = rng.randint(0, M), rng.randint(0, N)
    trans = rng.random() < 0.5
    src_off = "rn[None, :] * M + rm[:, None]" if trans else "rm[:, None] * N + rn[None, :]"
    lines = ["    rm = tl.arange(0, M)", "    rn = tl.arange(0, N)",
             f"    x = tl.load(X + {src_off}, mask=(rm[:, None] < mv) & (rn[None, :] < nv), other={other_for(rng, dt)})",
             "    tl.store(O + rm[:, None] * N + rn[None, :], x)"]
    src = HEADER + "def kernel(X, O, mv, nv, M: tl.constexpr, N: tl.constexpr):\n" + "\n".join(lines) + "\n"
    return Case(seed, "copy", src, [random_tensor(rng, dt, M * N), torch.zeros(M * N, dtype=TORCH[dt]), mv, nv],
                [1], (1,), {"M": M, "N": N}, exact=True)


FAMILIES = {f.__name__[len("family_"):]: f for f in
            (family_expr, family_index, family_reduce, family_loop, family_dot, family_atomic, family_alias,
             family_copy)}


def generate(seed, family=None):
    rng = random.Random(seed)
    name = family or rng.choice(sorted(FAMILIES))
    return FAMILIES[name](rng, seed)


# ------------------------------------------------------------------------------------------- running

_MODULES = {}
CACHE_DIR = os.path.join(tempfile.gettempdir(), f"spyre-fuzz-{os.getuid()}")


def load_kernel(source):
    """The module's `kernel` (a JITFunction), from a file: Triton reads a kernel's source back."""
    key = hashlib.sha256(source.encode()).hexdigest()[:20]
    if key not in _MODULES:
        os.makedirs(CACHE_DIR, exist_ok=True)
        path = os.path.join(CACHE_DIR, f"k_{key}.py")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"  # the reference worker may write the same file
            with open(tmp, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(f"spyre_fuzz_{key}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODULES[key] = mod.kernel
    return _MODULES[key]


def materialise(args, device):
    """Copies of the case's arguments on device; ("view", k, off, n) is a view into argument k."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a.clone().to(device))
        elif isinstance(a, tuple) and a[0] == "view":
            _, k, off, n = a
            out.append(out[k][off:off + n])
        else:
            out.append(a)
    return out


def run_spyre(case, kernel):
    import triton
    device = triton.runtime.driver.active.get_active_torch_device()
    args = materialise(case.args, device)
    kernel[case.grid](*args, **case.constexprs)
    return [args[k].cpu() for k in case.outputs]


class Reference:
    """Triton's interpreter in a worker process: TRITON_INTERPRET=1 must be set before triton is
    imported (the standard library's jit functions become interpretable only then). Cases go over a
    pipe as pickles; the worker runs one while this process runs the same one on spyre."""

    def __init__(self):
        env = dict(os.environ, TRITON_INTERPRET="1")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--reference-worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def submit(self, case):
        _send(self.proc.stdin, (case.source, case.args, case.outputs, case.grid, case.constexprs))

    def result(self):
        """The outputs, or raises RuntimeError with the interpreter's error."""
        msg = _recv(self.proc.stdout)
        if msg is None:
            raise RuntimeError(f"the reference worker died (exit {self.proc.wait()})")
        ok, value = msg
        if not ok:
            raise RuntimeError(value)
        return value

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _pack(obj):
    """Tensors as (dtype name, shape, raw bytes): torch cannot pickle its unsigned tensors."""
    if isinstance(obj, torch.Tensor):
        t = obj.contiguous()
        return ("tensor", str(t.dtype).split(".")[1], tuple(t.shape), t.reshape(-1).view(torch.uint8).numpy().tobytes())
    if isinstance(obj, (list, tuple)) and not (obj and obj[0] in ("tensor", "view")):
        return type(obj)(_pack(o) for o in obj)
    return obj


def _unpack(obj):
    if isinstance(obj, tuple) and obj and obj[0] == "tensor":
        _, dtype, shape, raw = obj
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(getattr(torch, dtype)).reshape(shape)
    if isinstance(obj, (list, tuple)) and not (obj and obj[0] == "view"):
        return type(obj)(_unpack(o) for o in obj)
    return obj


def _send(stream, obj):
    data = pickle.dumps(_pack(obj))
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _recv(stream):
    head = stream.read(8)
    if len(head) < 8:
        return None
    return _unpack(pickle.loads(stream.read(struct.unpack("<Q", head)[0])))


def reference_worker():
    import warnings
    warnings.simplefilter("ignore")  # numpy's overflow/invalid warnings are the semantics asked for
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the pipe
    while (msg := _recv(sys.stdin.buffer)) is not None:
        source, args, outputs, grid, constexprs = msg
        try:
            args = materialise(args, "cpu")
            load_kernel(source)[grid](*args, **constexprs)
            _send(out, (True, [args[k] for k in outputs]))
        except Exception as e:
            _send(out, (False, f"{type(e).__name__}: {str(e)[:2000]}"))


def compare(got, want, exact, tol=None):
    """None when equal by Triton's rules (integers bit for bit, floats within PyTorch's tolerances,
    NaN equal to NaN), else a description of the first difference."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{tuple(got.shape)} != {want.dtype}{tuple(want.shape)}"
    if not got.is_floating_point():
        bad = (got != want).nonzero()
    elif exact:
        g, w = got.double(), want.double()
        same = (g == w) & (torch.signbit(g) == torch.signbit(w)) | (g.isnan() & w.isnan())
        bad = (~same).nonzero()
    else:
        try:
            rtol, atol = tol or (None, None)
            torch.testing.assert_close(got, want, equal_nan=True, rtol=rtol, atol=atol)
            return None
        except AssertionError:
            g, w = got.double(), want.double()
            rtol, atol = tol or {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
                          torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}[got.dtype]
            close = ((g - w).abs() <= atol + rtol * w.abs()) | (g.isnan() & w.isnan()) | (g == w)
            bad = (~close).nonzero()
    if len(bad) == 0:
        return None
    k = tuple(bad[0].tolist())
    return f"{len(bad)} of {got.numel()} differ; first at {k}: spyre {got[k].item()!r}, interpreter {want[k].item()!r}"


@dataclasses.dataclass
class Result:
    case: Case
    status: str          # "ok", "mismatch", "known", "error"
    detail: str = ""

    def report(self):
        c = self.case
        known = "".join(f"\n  known defect {t}: {KNOWN_DEFECTS[t]}" for t in sorted(c.tags & set(KNOWN_DEFECTS)))
        return (f"[{self.status}] family={c.family} seed={c.seed} grid={c.grid} constexprs={c.constexprs}\n"
                f"  reproduce: python tools/fuzz.py 1 --seed {c.seed}\n  {self.detail}{known}\n{c.source}")


def run_case(case, reference):
    reference.submit(case)
    try:
        got = run_spyre(case, load_kernel(case.source))
    except Exception as e:
        got = e
    try:
        want = reference.result()
    except RuntimeError as e:  # the reference cannot run it: a generator bug, reported as such
        return Result(case, "error", f"interpreter raised {e}")
    if isinstance(got, Exception):
        return Result(case, "error", f"spyre raised {type(got).__name__}: {str(got)[:2000]}")
    for k, (g, w) in zip(case.outputs, zip(got, want)):
        diff = compare(g, w, case.exact, case.tol)
        if diff:
            status = "known" if case.tags & set(KNOWN_DEFECTS) else "mismatch"
            return Result(case, status, f"argument {k}: {diff}")
    return Result(case, "ok")


def fuzz(n, seed=0, family=None, on_result=None):
    """Runs n cases from seeds seed .. seed+n-1; returns the results."""
    results, reference = [], Reference()
    try:
        for s in range(seed, seed + n):
            r = run_case(generate(s, family), reference)
            results.append(r)
            if on_result:
                on_result(r)
    finally:
        reference.close()
    return results


def summary(results):
    """{family: {status: count}}"""
    out = {}
    for r in results:
        fam = out.setdefault(r.case.family, {"ok": 0, "mismatch": 0, "known": 0, "error": 0})
        fam[r.status] += 1
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=int, nargs="?", default=500, help="number of kernels")
    ap.add_argument("--seed", type=int, default=0, help="first seed (case k uses seed + k)")
    ap.add_argument("--family", choices=sorted(FAMILIES))
    ap.add_argument("--verbose", action="store_true", help="print known-defect cases too")
    ap.add_argument("--reference-worker", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.reference_worker:
        return reference_worker()

    def show(r):
        if r.status in ("mismatch", "error") or opts.verbose and r.status == "known":
            print(r.report(), flush=True)

    results = fuzz(opts.n, opts.seed, opts.family, show)
    for fam, counts in sorted(summary(results).items()):
        print(f"{fam:8s} " + " ".join(f"{k}={v}" for k, v in counts.items()))
    bad = sum(r.status in ("mismatch", "error") for r in results)
    print(f"{len(results)} kernels, {bad} failures (seeds {opts.seed}..{opts.seed + opts.n - 1})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
