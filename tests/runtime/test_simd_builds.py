"""The three builds of the typed loops (runtime/loops.c: baseline x86-64-v2, AVX2 and AVX-512) give
the same bits.

A design rule (runtime/vmath.h, runtime/loops_avx2.c): no fused multiply-add and no host-dependent
instruction, so that a kernel's output does not depend on the CPU it ran on. Each build is run in
a subprocess - SPYRE_NO_AVX512=1 SPYRE_NO_AVX2=1 gives the baseline, SPYRE_NO_AVX512=1 the AVX2
build, neither the widest the host has - over the same inputs, and the outputs are compared byte for
byte: elementwise float and integer arithmetic with its broadcast variants, comparisons, select,
fma and clamp, the SFU's vectorised math1 functions (the samples of tests/runtime/test_vmath.py: random bit
patterns, the interesting interval, the special values; every f16 and bf16 pattern), reductions over
rows of 1000 and more with tails (both the lane-interleaved row path and the strided one), and
conversions between f32, f64, f16, bf16, the fp8 formats and the integers. Builds the host CPU cannot
run are skipped.

Run as a script (`python test_simd_builds.py IN OUT`), it is the worker: it runs the pickled case
list IN in this process's build and pickles the results to OUT.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import zlib

import numpy as np
import pytest

from asm_helpers import run_elementwise, run_red

import spyre_triton
from spyre_triton import _runtime as rt
from conftest import TESTS_DIR

# build -> environment (on top of the caller's, with both variables removed)
BUILDS = {"widest": {}, "avx2": {"SPYRE_NO_AVX512": "1"},
          "baseline": {"SPYRE_NO_AVX512": "1", "SPYRE_NO_AVX2": "1"}}
N = 20011        # not a multiple of any vector width nor of the 256-element chunks: every loop has a tail
INTS = ["i8", "i16", "i32", "i64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
FP8 = ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b15"]
NPI = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}


def rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


# ---- inputs --------------------------------------------------------------------------------------
F32_SPECIAL = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                        0x7FC12345, 0xFFA00001, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x80800000,
                        0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F000000, 0x477FE000, 0x477FF000,
                        0x477FEFFF, 0x33800000, 0x33000000, 0x33400000, 0x3F808000, 0x3F818000, 0x3F80FFFF,
                        0x38800000, 0x387FFFFF, 0x43E00000, 0x47600000, 0x4F000000, 0xCF000000, 0x5F000000,
                        0xDF000000, 0x4F800000, 0x5F800000], np.uint32).view(np.float32)


def f32_mix(name: str, n: int = N) -> np.ndarray:
    """Special values, random bit patterns (every binade, subnormals, NaNs with payloads), scaled normals
    and small values, shuffled."""
    r = rng(name)
    k = (n - len(F32_SPECIAL)) // 3
    bits = r.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scaled = (r.standard_normal(k) * np.exp2(r.integers(-40, 40, k))).astype(np.float32)
    small = r.uniform(-20, 20, n - len(F32_SPECIAL) - 2 * k).astype(np.float32)
    return r.permutation(np.concatenate([F32_SPECIAL, bits, scaled, small]))


def f64_mix(name: str, n: int = N) -> np.ndarray:
    r = rng(name)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                        1.7976931348623157e308, 1.0, -1.0, 3.4028235677973366e38, 3.4028235677973362e38,
                        1.401298464324817e-45, 7e-46, 9.3e18, -9.3e18, 1.8e19, 2.0 ** 63, 2.0 ** 64])
    k = (n - len(special)) // 3
    bits = r.integers(0, 1 << 63, k, dtype=np.uint64) | (r.integers(0, 2, k, dtype=np.uint64) << np.uint64(63))
    scaled = r.standard_normal(k) * np.exp2(r.integers(-160, 160, k))
    small = r.uniform(-20, 20, n - len(special) - 2 * k)
    return r.permutation(np.concatenate([special, bits.view(np.float64), scaled, small]))


def half_all(name: str) -> np.ndarray:
    """Every 16-bit pattern, shuffled, and a tail of random ones (raw bits)."""
    r = rng(name)
    return np.concatenate([r.permutation(np.arange(65536, dtype=np.uint16)),
                           r.integers(0, 65536, 4011).astype(np.uint16)])


def float_in(t: str, name: str) -> np.ndarray:
    """Storage of dtype t (f16 as numpy's float16, bf16 as raw bits)."""
    if t == "f32":
        return f32_mix(name)
    if t == "f64":
        return f64_mix(name)
    h = half_all(name)
    return h.view(np.float16) if t == "f16" else h


# Special values as storage bits, NaNs of both signs with several payloads (quiet and signalling)
# among them: their pairs and triples meet two or three NaNs in one operation, whose result's payload
# is the one thing a compiler's choice of operand order can change.
SPECIAL_BITS = {
    "f16": [0x0000, 0x8000, 0x7C00, 0xFC00, 0x3C00, 0xBC00, 0x0001, 0x8001, 0x7BFF, 0xFBFF, 0x4100,
            0x7E00, 0xFE00, 0x7E55, 0xFF21, 0x7C01, 0xFD21],
    "bf16": [0x0000, 0x8000, 0x7F80, 0xFF80, 0x3F80, 0xBF80, 0x0001, 0x8001, 0x7F7F, 0xFF7F, 0x4020,
             0x7FC0, 0xFFC0, 0x7FD5, 0xFFE1, 0x7F81, 0xFFA1],
    "f32": [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x3F800000, 0xBF800000, 0x00000001, 0x80000001,
            0x7F7FFFFF, 0xFF7FFFFF, 0x40200000, 0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFE54321, 0x7F800001,
            0xFF812345],
    "f64": [0x0000000000000000, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x3FF0000000000000,
            0xBFF0000000000000, 0x0000000000000001, 0x8000000000000001, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF,
            0x4004000000000000, 0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8123456789ABC, 0xFFFC000000054321,
            0x7FF0000000000001, 0xFFF0000000012345],
}
STORAGE = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64}
UINT = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}


def special_grid(t: str, k: int) -> list:
    """k arrays that together hold every k-tuple of the special values of dtype t"""
    v = np.array(SPECIAL_BITS[t], dtype=UINT[t]).view(STORAGE[t])
    return [g.reshape(-1) for g in np.meshgrid(*[v] * k, indexing="ij")]


def float_values(t: str, x: np.ndarray) -> np.ndarray:
    """Finite values of moderate size (for reductions) in dtype t's storage."""
    if t == "f64":
        return x.astype(np.float64)
    if t == "f32":
        return x.astype(np.float32)
    if t == "f16":
        return x.astype(np.float16)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def int_mix(t: str, name: str, n: int = N) -> np.ndarray:
    r = rng(name)
    info = np.iinfo(NPI[t])
    edges = np.array([0, 1, -1, 2, -2, info.min, info.max, info.min + 1, info.max - 1, 7, 8, 31, 32, 63, 64],
                     np.int64).astype(NPI[t])
    rand = r.integers(info.min, info.max, n - len(edges) - n // 4, dtype=np.int64, endpoint=True).astype(NPI[t])
    small = r.integers(-40, 40, n // 4).astype(NPI[t])
    return r.permutation(np.concatenate([edges, rand, small]))


# ---- cases: (name, kind, keyword arguments of run_elementwise / run_red) ---------------------------
FLT_BIN = ["add", "sub", "mul", "divf", "maxnumf", "minnumf", "maximumf", "minimumf"]
FCMP = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une",
        "uno", "true"]
INT_BIN = ["add", "sub", "mul", "and", "or", "xor", "shl", "shrs", "shru", "maxs", "mins", "maxu", "minu",
           "divs", "divu", "rems", "remu", "mulhis", "mulhiu"]
ICMP = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
MATH1_F32_MORE = ["floor", "ceil", "trunc", "rint", "nearbyint", "abs", "neg", "rcp", "signbit", "isnan",
                  "isinf", "isfinite"]
MATH1_HALF = ["exp", "exp2", "expm1", "log", "log2", "log1p", "tanh", "erf", "sqrt", "rsqrt", "sin", "cos",
              "floor", "rcp"]
RED_SHAPES = [(1, 1000, 1), (1, 1037, 1), (4, 4099, 1), (3, 77, 1), (1, 63, 1), (2, 600, 130), (5, 33, 7)]
FLT_RED = ["add", "mul", "maxnum", "minnum", "maximum", "minimum"]
INT_RED = ["add", "mul", "maxs", "mins", "maxu", "minu", "and", "or", "xor"]


def ew(name, op, t, inputs, **kw):
    return (name, "ew", dict(op=op, t=t, inputs=inputs, **kw))


def binary_variants(name, op, t, a, b, **kw):
    """vector/vector, scalar/vector and vector/scalar"""
    return [ew(f"{name} v0", op, t, [a, b], **kw), ew(f"{name} v1", op, t, [a[7:8], b], bcast=(1,), n=len(b), **kw),
            ew(f"{name} v2", op, t, [a, b[3:4]], bcast=(2,), n=len(a), **kw)]


def cases_float_binary(t):
    a, b = float_in(t, f"a{t}"), float_in(t, f"b{t}")
    out = []
    for op in FLT_BIN:
        out += binary_variants(f"{op}.{t}", op, t, a, b)
    ga, gb = special_grid(t, 2)
    for op in FLT_BIN:
        out += binary_variants(f"{op}.{t} specials", op, t, ga, gb)
    for p in FCMP:
        out.append(ew(f"cmpf {p}.{t}", "cmpf", t, [a, b], out_t="i1", flags={"pred": p}))
        out.append(ew(f"cmpf {p}.{t} specials", "cmpf", t, [ga, gb], out_t="i1", flags={"pred": p}))
    return out


def cases_ternary(t):
    a, b, c = float_in(t, f"a{t}"), float_in(t, f"b{t}"), float_in(t, f"c{t}")
    if t != "f64":   # products that are not all overflow or underflow
        ma, mb, mc = (float_values(t, rng(f"m{t}{i}").standard_normal(N) * 8) for i in range(3))
    else:
        ma, mb, mc = a, b, c
    lo, hi = float_values(t, np.array([-1.5])), float_values(t, np.array([2.25]))
    cond = rng(f"cond{t}").integers(0, 2, len(a)).astype(np.uint8)
    out = []
    for v in range(7):   # the broadcast variants: bit k of v broadcasts source k + 1
        bc = tuple(k + 1 for k in range(3) if v >> k & 1)
        srcs = [x[5:6] if k + 1 in bc else x for k, x in enumerate((ma, mb, mc))]
        out.append(ew(f"fma.{t} bc{bc}", "fma", t, srcs, bcast=bc, n=N))
        out.append(ew(f"fma-special.{t} bc{bc}", "fma", t, [x[5:6] if k + 1 in bc else x
                                                            for k, x in enumerate((a, b, c))], bcast=bc, n=len(a)))
    out.append(ew(f"fma-grid.{t}", "fma", t, special_grid(t, 3)))
    for prop in (0, 1):
        out.append(ew(f"clamp.{t} nan={prop}", "clamp", t, [a, lo, hi], bcast=(2, 3),
                      flags={"propagate_nan": prop}))
    sel_t = {"f16": "i16", "bf16": "i16", "f32": "f32", "f64": "f64"}[t]
    sa = a.view(np.int16) if sel_t == "i16" else a
    sb = b.view(np.int16) if sel_t == "i16" else b
    for v in range(7):
        bc = tuple(k + 1 for k in range(3) if v >> k & 1)
        srcs = [x[2:3] if k + 1 in bc else x for k, x in enumerate((cond, sa, sb))]
        out.append(ew(f"select.{sel_t} ({t} bits) bc{bc}", "select", sel_t, srcs, bcast=bc, n=len(a)))
    return out


def cases_math1_f32():
    import test_vmath as V   # its samples and special values (imports torch and scipy: the parent only)
    out = []
    for fn in V.FUNCS:
        x = np.concatenate([np.array([a for a, _ in V.SPECIAL[fn]], np.float32), V.samples(fn), F32_SPECIAL])
        for i in range(0, len(x), V.CHUNK):
            out.append(ew(f"math1 {fn}.f32 [{i}:]", "math1", "f32", [x[i:i + V.CHUNK]], flags={"fn": fn}))
    x = f32_mix("math1")
    for fn in MATH1_F32_MORE:
        out.append(ew(f"math1 {fn}.f32", "math1", "f32", [x], flags={"fn": fn}))
    return out


def cases_math1_half(t):
    x = float_in(t, f"m1{t}")
    return [ew(f"math1 {fn}.{t}", "math1", t, [x], flags={"fn": fn}) for fn in MATH1_HALF]


def cases_red_float(t):
    out = []
    for shape in RED_SHAPES:
        o, l, i = shape
        r = rng(f"red{t}{shape}")
        base = r.standard_normal(o * l * i)
        for op in FLT_RED:
            v = base * 0.05 + 1.0 if op == "mul" else base * np.exp2(r.integers(-8, 8, base.size))
            src = float_values(t, v)
            if op not in ("add", "mul"):   # a NaN in the first row (each build must ignore / propagate it alike)
                src[min(3, src.size - 1)] = float_values(t, np.array([np.nan]))[0]
                src[-1] = float_values(t, np.array([-0.0]))[0]
            out.append((f"red {op}.{t} {shape}", "red", dict(op=op, t=t, src=src, outer=o, length=l, inner=i)))
            # NaNs of several payloads and both signs meeting in the partial results
            nans = np.array(SPECIAL_BITS[t], dtype=UINT[t]).view(STORAGE[t])[-6:]
            src = src.copy()
            pos = r.choice(src.size, min(src.size, 40), replace=False)
            src[pos] = nans[np.arange(pos.size) % nans.size]
            out.append((f"red {op}.{t} {shape} nans", "red", dict(op=op, t=t, src=src, outer=o, length=l, inner=i)))
    return out


def cases_red_int():
    out = []
    for t in INTS:
        for shape in [(3, 1037, 1), (1, 4099, 1), (2, 100, 130)]:
            o, l, i = shape
            src = int_mix(t, f"red{t}{shape}", o * l * i)
            for op in INT_RED:
                s = src if op != "mul" else np.where(src % 3 == 0, -1, 1).astype(NPI[t])
                out.append((f"red {op}.{t} {shape}", "red", dict(op=op, t=t, src=s, outer=o, length=l, inner=i)))
    return out


def cases_int(t):
    a, b = int_mix(t, f"a{t}"), int_mix(t, f"b{t}")
    bits = np.iinfo(NPI[t]).bits
    sh = np.where(rng(f"sh{t}").integers(0, 4, N) == 0, b, rng(f"s{t}").integers(0, bits + 3, N)).astype(NPI[t])
    out = []
    for op in INT_BIN:
        out += binary_variants(f"{op}.{t}", op, t, a, sh if op.startswith("sh") else b)
    for p in ICMP:
        out.append(ew(f"cmpi {p}.{t}", "cmpi", t, [a, b], out_t="i1", flags={"pred": p}))
    for op in ("absi", "ctpop", "ctlz", "cttz"):
        out.append(ew(f"{op}.{t}", op, t, [a]))
    return out


def cases_cvt():
    out = []

    def cvt(src_t, x, dst_t, mode):
        out.append(ew(f"cvt {src_t}->{dst_t} {mode}", "cvt", dst_t, [x], t2=src_t, flags={"mode": mode}))
    f32, f64 = f32_mix("cvt32"), f64_mix("cvt64")
    half = {"f16": float_in("f16", "cvt16"), "bf16": float_in("bf16", "cvtb16")}
    fp8 = np.concatenate([np.arange(256, dtype=np.uint8), rng("fp8").integers(0, 256, 301).astype(np.uint8)])
    for d in ["f16", "bf16"] + FP8:
        for mode in ("rtne", "rtz"):
            cvt("f32", f32, d, mode)
            cvt("f64", f64, d, mode)
    cvt("f32", f32, "f16", "fpext")        # the direct (F16C) path takes fpext as well as rtne
    cvt("f32", f32, "f64", "fpext")
    for mode in ("rtne", "rtz"):
        cvt("f64", f64, "f32", mode)
    for s, x in half.items():
        for d in ["f16", "bf16", "f32", "f64"] + FP8[:2]:
            if d != s:
                cvt(s, x, d, "fpext" if d in ("f32", "f64") else "rtne")
    for s in FP8:
        for d in ("f16", "bf16", "f32", "f64"):
            cvt(s, fp8, d, "fpext")
    for s, x in [("f32", f32), ("f64", f64), ("f16", half["f16"]), ("bf16", half["bf16"])]:
        for d in INTS + ["i1"]:
            cvt(s, x, d, "fptosi")
            cvt(s, x, d, "fptoui")
        cvt(s, x, "i1", "bool")
    for s in INTS:
        x = int_mix(s, f"cvt{s}")
        for d in ("f16", "bf16", "f32", "f64"):
            cvt(s, x, d, "sitofp")
            cvt(s, x, d, "uitofp")
        for d in INTS + ["i1"]:
            cvt(s, x, d, "sext")
            cvt(s, x, d, "zext")
        cvt(s, x, "i1", "bool")
    return out


GROUPS = {
    **{f"float binary {t}": (lambda t=t: cases_float_binary(t)) for t in FLOATS},
    **{f"fma clamp select {t}": (lambda t=t: cases_ternary(t)) for t in FLOATS},
    "math1 f32": cases_math1_f32,
    **{f"math1 {t}": (lambda t=t: cases_math1_half(t)) for t in ("f16", "bf16")},
    **{f"reduce {t}": (lambda t=t: cases_red_float(t)) for t in FLOATS},
    "reduce ints": cases_red_int,
    **{f"int {t}": (lambda t=t: cases_int(t)) for t in INTS},
    "conversions": cases_cvt,
}


# ---- the worker ----------------------------------------------------------------------------------
def run_cases(cases) -> dict:
    out = {}
    for name, kind, kw in cases:
        r = run_elementwise(**kw) if kind == "ew" else run_red(**kw)
        out[name] = np.ascontiguousarray(r).view(np.uint8).tobytes()
    return out


# ---- the tests -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{build: (the build it ran, {group: {case: result bytes}})}, the builds run side by side."""
    d = tmp_path_factory.mktemp("simd")
    cases = {g: make() for g, make in GROUPS.items()}
    names = [c[0] for cs in cases.values() for c in cs]
    assert len(names) == len(set(names)), "case names repeat"
    with open(d / "in.pkl", "wb") as f:
        pickle.dump([c for cs in cases.values() for c in cs], f)
    base_env = {k: v for k, v in os.environ.items() if k not in ("SPYRE_NO_AVX2", "SPYRE_NO_AVX512")}
    # the workers import the spyre_triton this process runs (a script's sys.path starts at its
    # folder), and the test helpers
    root = os.path.dirname(os.path.dirname(os.path.abspath(spyre_triton.__file__)))
    base_env["PYTHONPATH"] = os.pathsep.join([root, TESTS_DIR] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    procs = {b: subprocess.Popen([sys.executable, __file__, str(d / "in.pkl"), str(d / f"{b}.pkl")],
                                 env={**base_env, **e}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for b, e in BUILDS.items()}
    res = {}
    for b, p in procs.items():
        so, se = p.communicate(timeout=600)
        assert p.returncode == 0, f"{b}: {se.decode()[-3000:]}"
        with open(d / f"{b}.pkl", "rb") as f:
            simd, out = pickle.load(f)
        res[b] = (simd, {g: {c[0]: out[c[0]] for c in cs} for g, cs in cases.items()})
    return res


def test_each_build_is_the_one_asked_for(runs):
    assert runs["baseline"][0] == "baseline"
    assert runs["avx2"][0] in ("avx2", "baseline")
    assert runs["widest"][0] in ("avx512", "avx2", "baseline")
    assert runs["widest"][0] == rt.simd() or {"SPYRE_NO_AVX2", "SPYRE_NO_AVX512"} & set(os.environ)


def test_the_avx512_build_is_compared(runs):
    """Says so when the host cannot run the AVX-512 build (the comparisons then cover AVX2 and the baseline)."""
    if runs["widest"][0] != "avx512":
        pytest.skip("the host CPU has no AVX-512 (F, BW, CD, DQ, VL): the AVX-512 build is not compared")


def diff_message(name, t_bytes, r_bytes):
    a, b = np.frombuffer(t_bytes, np.uint8), np.frombuffer(r_bytes, np.uint8)
    if a.size != b.size:
        return f"{name}: {a.size} bytes vs {b.size}"
    i = np.nonzero(a != b)[0]
    return f"{name}: {i.size} bytes differ, first at byte {i[0]}: {a[i[0]:i[0] + 8].tolist()} vs {b[i[0]:i[0] + 8].tolist()}"


@pytest.mark.parametrize("group", list(GROUPS))
def test_same_bits(group, runs):
    ran = {}
    for b in BUILDS:   # the distinct builds the host runs, widest first
        ran.setdefault(runs[b][0], runs[b][1][group])
    if len(ran) < 2:
        pytest.skip("the host CPU has no AVX2 + FMA + F16C: only the baseline build runs")
    (ref_name, ref), *others = ran.items()
    bad = [f"{name} vs {ref_name}: " + diff_message(case, got[case], ref[case])
           for name, got in others for case in ref if got[case] != ref[case]]
    assert not bad, f"{len(bad)} cases differ:\n" + "\n".join(bad[:20])


QUIET = {"f16": 0x0200, "bf16": 0x0040, "f32": 0x00400000, "f64": 0x0008000000000000}
DEFAULT_NAN = {"f16": 0xFE00, "bf16": 0xFFC0, "f32": 0xFFC00000, "f64": 0xFFF8000000000000}


def is_nan_bits(t: str, u: np.ndarray) -> np.ndarray:
    e, m = {"f16": (0x7C00, 0x3FF), "bf16": (0x7F80, 0x7F), "f32": (0x7F800000, 0x7FFFFF),
            "f64": (0x7FF0000000000000, 0xFFFFFFFFFFFFF)}[t]
    return ((u & UINT[t](e)) == UINT[t](e)) & ((u & UINT[t](m)) != 0)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the expected NaN bits are x86's (its default NaN is negative, and its NaN operand rules); other CPUs give other NaN bits, which the builds then agree on")
@pytest.mark.parametrize("t", FLOATS)
def test_nan_operands_give_the_first_nan(t):
    """The rule the builds agree on (docs/isa.md): add, sub, mul, divf, fma, maximumf and minimumf with
    NaN operands give the first NaN operand, quieted; a NaN float sum / product / maximum / minimum
    reduction is the default NaN."""
    g = special_grid(t, 3)
    bits = [x.view(UINT[t]) for x in g]
    nan = [is_nan_bits(t, u) for u in bits]
    q = UINT[t](QUIET[t])
    for op, k in [("add", 2), ("sub", 2), ("mul", 2), ("divf", 2), ("maximumf", 2), ("minimumf", 2), ("fma", 3)]:
        got = run_elementwise(op, t, g[:k]).view(UINT[t])
        want = np.where(nan[0], bits[0] | q, np.where(nan[1], bits[1] | q, bits[2] | q))
        some = nan[0] | nan[1] | (nan[2] if k == 3 else False)
        bad = np.nonzero(some & (got != want))[0]
        assert bad.size == 0, f"{op}.{t}: {[hex(int(b[bad[0]])) for b in bits[:k]]} gave {hex(int(got[bad[0]]))}"
    row = float_values(t, np.arange(1.0, 101.0))
    row[[5, 40, 77]] = np.array(SPECIAL_BITS[t][-3:], dtype=UINT[t]).view(STORAGE[t])
    for op in ("add", "mul", "maximum", "minimum"):
        for shape in [(1, 100, 1), (1, 50, 2), (2, 50, 1)]:
            got = run_red(op, t, row, *shape).view(UINT[t])
            want = np.where(is_nan_bits(t, got), UINT[t](DEFAULT_NAN[t]), got)
            assert is_nan_bits(t, got).any() and (got == want).all(), f"red {op}.{t} {shape}: {[hex(int(v)) for v in got]}"


@pytest.mark.parametrize("t", FLOATS)
def test_broadcast_operands_give_the_bits_of_whole_ones(t):
    """add, mul and fma with broadcast operands take a shorter loop when the broadcast value is not NaN
    (runtime/loops.c, LOOP_BIN_Q and LOOP_TERN_Q): for every special value as the broadcast operand,
    in every position, the result has the bits of the same operation on whole operands that repeat it."""
    specials = np.array(SPECIAL_BITS[t], dtype=UINT[t]).view(STORAGE[t])
    for op, k in [("add", 2), ("mul", 2), ("fma", 3)]:
        for v in range(1, 1 << k):
            bc = tuple(i + 1 for i in range(k) if v >> i & 1)
            if len(bc) == k:
                continue
            arrays = special_grid(t, k - len(bc))
            for value in specials:
                it = iter(arrays)
                whole = [np.full(len(arrays[0]), value) if i + 1 in bc else next(it) for i in range(k)]
                got = run_elementwise(op, t, [w[:1] if i + 1 in bc else w for i, w in enumerate(whole)], bcast=bc,
                                      n=len(arrays[0])).view(UINT[t])
                want = run_elementwise(op, t, whole).view(UINT[t])
                bad = np.nonzero(got != want)[0]
                assert bad.size == 0, (f"{op}.{t} broadcasting {bc} = {hex(int(np.array(value).view(UINT[t])))}: "
                                       f"operands {[hex(int(w.view(UINT[t])[bad[0]])) for w in whole]} gave "
                                       f"{hex(int(got[bad[0]]))}, whole operands {hex(int(want[bad[0]]))}")



@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the expected NaN bits are x86's (its default NaN is negative, and its NaN operand rules); other CPUs give other NaN bits, which the builds then agree on")
@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("op", ["fma", "binchain sub_mul", "binchain add_add"])
def test_tile_operands_redo_the_exact_loop_after_a_nan_result(op, t):
    """fma and binchain on three tiles run the plain operation and check its results for NaN, then run
    the NaN-ordering loop only if one is NaN (runtime/loops.c, LOOP_TERN_Q). A NaN operand or an
    invalid operation at the first or the last element must give the exact loop's bits everywhere."""
    name, _, ops = op.partition(" ")
    flags = {"ops": ops} if ops else None
    n = 203
    rng = np.random.default_rng(7)
    clean = [rng.standard_normal(n).astype(STORAGE[t]) for _ in range(3)]
    base = run_elementwise(name, t, clean, flags=flags).view(UINT[t])
    assert not is_nan_bits(t, base).any()
    q = UINT[t](QUIET[t])
    signalling = {"f32": 0x7F800123, "f64": 0x7FF0000000000123}[t]
    quiet = {"f32": 0xFFC00456, "f64": 0xFFF8000000000456}[t]
    for pos in (0, n - 1):
        for case in ("first", "third", "both", "invalid"):
            ins = [a.copy() for a in clean]
            u = [a.view(UINT[t]) for a in ins]
            if case in ("first", "both"):
                u[0][pos] = signalling
            if case in ("third", "both"):
                u[2][pos] = quiet
            if case == "invalid":  # inf * 0 (fma, and the mul of sub_mul: (inf - 1) * 0); inf - inf for add_add
                ins[0][pos], ins[1][pos] = np.inf, 0.0 if ops != "add_add" else -np.inf
                if ops == "sub_mul":
                    ins[1][pos], ins[2][pos] = 1.0, 0.0
            got = run_elementwise(name, t, ins, flags=flags).view(UINT[t])
            others = np.arange(n) != pos
            assert (got[others] == base[others]).all(), f"{op}.{t} {case} at {pos}"
            want = {"first": signalling | q, "both": signalling | q, "third": quiet,
                    "invalid": UINT[t](DEFAULT_NAN[t])}[case]
            assert got[pos] == want, f"{op}.{t} {case} at {pos}: {hex(int(got[pos]))}, want {hex(int(want))}"

if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        todo = pickle.load(f)
    results = run_cases(todo)
    with open(sys.argv[2], "wb") as f:
        pickle.dump((rt.simd(), results), f)
