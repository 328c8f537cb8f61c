"""Tests for spyre_triton.compiler.ttir, the parser of the TTIR text Triton 3.7 prints.

A corpus of kernels (below) is run through Triton's front end and TTIR passes (no GPU needed);
each printed module is parsed and checked:
  * against Triton's own C++ IR (the oracle): the same ops in the same order, with the same
    operand types, result types and region counts, and the same integer/string attributes;
  * for def-before-use with region scoping, and for owner/index consistency of every value;
  * with kernel-specific assertions: op counts, types, region and block-argument structure,
    attribute decoding and debug locations that point at the kernel's Python source lines.
Hand-written snippets cover syntax the corpus does not print (generic forms of everything,
hex data blobs, forward references, fused locations, ...) and malformed input.

Regenerate the fixtures under tests/compiler/data/ttir/ with `python tests/compiler/test_ttir_parser.py --write-fixtures`.
"""
import functools
import inspect
import math
import os
import re
import sys

import pytest

from spyre_triton.compiler.ttir import (
    DenseAttr, Function, Location, Module, Operation, TTIRParseError, Type, Value, Block, Region,
    format_location, parse_module, parse_type, walk, I1, I32, F32,
)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "data", "ttir")

triton = pytest.importorskip("triton")
tl = triton.language
from triton.language.extra import libdevice  # noqa: E402

# The tutorials' kernels are the package's reference kernels, parsed here as the demo, the benchmarks
# and the tests that run them launch them; the corpus below adds what they do not print.
from spyre_triton.reference_kernels import add_kernel, layer_norm_fwd_kernel, matmul_kernel  # noqa: E402


# ==============================================================================================
# The corpus
# ==============================================================================================

@triton.jit
def k_softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    start = tl.program_id(0)
    step = tl.num_programs(0)
    for row in tl.range(start, n_rows, step, num_stages=2):
        cols = tl.arange(0, BLOCK)
        row_v = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float('inf'))
        z = row_v - tl.max(row_v, axis=0)
        num = tl.exp(z)
        den = tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_stride + cols, num / den, mask=cols < n_cols)


@triton.jit
def k_dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    r = tl.rand(seed, offs)
    keep = r > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=m)


@triton.jit
def k_layernorm_bwd(DX, DY, DW, X, W, Mean, Rstd, Lock, stride, N, GROUP: tl.constexpr,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP
    Lock += lock_id
    Count = Lock + GROUP
    DW = DW + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.)
    wdy = tl.where(mask, w * dy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    tl.store(DX + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def k_attention(Q, K, V, Out, sm_scale, stride_m, N_CTX, BM: tl.constexpr, BN: tl.constexpr,
                D: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * stride_m + offs_d[None, :])
    m_i = tl.zeros([BM], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BM], dtype=tl.float32) + 1.0
    acc = tl.zeros([BM, D], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = (start_m + 1) * BM if CAUSAL else N_CTX
    for start_n in range(0, hi, BN):
        start_n = tl.multiple_of(start_n, BN)
        k = tl.load(K + (start_n + offs_n)[None, :] * stride_m + offs_d[:, None])
        qk = tl.dot(q, k)
        if CAUSAL:
            keep = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(keep, 0, -1.0e6)
        else:
            qk = qk * qk_scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        qk -= m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + (start_n + offs_n)[:, None] * stride_m + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + offs_m[:, None] * stride_m + offs_d[None, :], acc.to(Out.dtype.element_ty))


@triton.jit
def _argmax_combine(v1, i1, v2, i2):
    gt = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(gt, v1, v2), tl.where(gt, i1, i2)


@triton.jit
def _add_combine(a, b):
    return a + b


@triton.jit
def k_reduce_scan(x_ptr, out_ptr, idx_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    v, i = tl.reduce((x, offs), 0, _argmax_combine)
    s = tl.associative_scan(x, 0, _add_combine, reverse=True)
    c = tl.cumsum(x, 0)
    am = tl.argmax(x, 0)
    amin = tl.argmin(x, 0)
    xs = tl.xor_sum(offs, 0)
    tl.store(out_ptr + offs, s + c + v)
    tl.store(idx_ptr, i + am + amin + xs)


@triton.jit
def k_casts(f32_ptr, f16_ptr, i32_ptr, i8_ptr, u8_ptr, i64_ptr, f64_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(f32_ptr + offs)
    h = x.to(tl.float16)
    b = x.to(tl.bfloat16)
    e4 = x.to(tl.float8e4nv)
    e5 = x.to(tl.float8e5, fp_downcast_rounding="rtz")
    e4b15 = h.to(tl.float8e4b15)
    back = e4.to(tl.float32) + e5.to(tl.float32) + b.to(tl.float32) + e4b15.to(tl.float32)
    i = x.to(tl.int32)
    u = x.to(tl.uint8)
    bits = x.to(tl.int32, bitcast=True)
    fl = bits.to(tl.float32, bitcast=True)
    d = x.to(tl.float64)
    wide = i.to(tl.int64)
    i8 = wide.to(tl.int8)
    ff = i8.to(tl.float32) + u.to(tl.float32)
    tl.store(f16_ptr + offs, h)
    tl.store(i32_ptr + offs, i)
    tl.store(i8_ptr + offs, i8)
    tl.store(u8_ptr + offs, u)
    tl.store(i64_ptr + offs, wide)
    tl.store(f64_ptr + offs, d)
    tl.store(f32_ptr + offs, back + fl + ff)


@triton.jit
def k_math(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.exp(x) + tl.log(x) + tl.sin(x) + tl.cos(x) + tl.sqrt(x) + tl.rsqrt(x) + tl.abs(x)
    y += tl.floor(x) + tl.ceil(x) + tl.erf(x) + tl.log2(x) + tl.exp2(x) + tl.sigmoid(x)
    y += tl.fma(x, x, y) + tl.math.div_rn(x, y) + tl.sqrt_rn(x) + tl.fdiv(x, y)
    y += libdevice.tanh(x) + libdevice.pow(x, y) + libdevice.isnan(x).to(tl.float32)
    y = tl.clamp(y, -1.0, 1.0)
    y = tl.minimum(y, x, propagate_nan=tl.PropagateNan.ALL)
    xi = x.to(tl.int32)
    hi = tl.umulhi(xi.to(tl.uint32), xi.to(tl.uint32))
    r = (xi << 2) >> 1 ^ (xi & 7) | (xi % 3) + hi.to(tl.int32)
    tl.store(out_ptr + offs, y + r.to(tl.float32))


@triton.jit(noinline=True)
def _scaled_pair(x, y, n: tl.constexpr):
    for i in tl.static_range(n):
        x = x * y + i
    return x, x * 2.0


@triton.jit
def k_control(x_ptr, out_ptr, n, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if flag > 0:
        x = x * 2.0
    i = 0
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    while i < n:
        acc += x
        i += 1
    a, b = _scaled_pair(tl.sum(acc, 0), tl.max(x, 0), 3)
    tl.device_print("acc: ", a, acc)
    tl.device_print("hex", offs, hex=True)
    tl.device_assert(acc == acc, "nan found")
    tl.store(out_ptr + offs, acc + a + b)


@triton.jit
def k_shape_ops(x_ptr, out_ptr, idx_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    j = tl.join(x, x)
    a, b = tl.split(j)
    c = tl.cat(a, b, can_reorder=True)
    r = tl.reshape(x, (BLOCK // 4, 4))
    t = tl.trans(r)
    p = tl.permute(tl.reshape(x, (2, BLOCK // 8, 4)), (2, 0, 1))
    h = tl.histogram(offs % 8, 8)
    g = tl.gather(x, (BLOCK - 1 - offs), 0)
    srt = tl.sort(x)
    fl = tl.flip(x, 0)
    il = tl.interleave(x, x)
    tl.store(out_ptr + offs, c.reshape(2 * BLOCK, can_reorder=True).reshape(2, BLOCK).sum(0) + g + srt + fl)
    tl.store(out_ptr + tl.arange(0, BLOCK // 4), tl.sum(t, 0))
    tl.store(out_ptr + tl.arange(0, BLOCK // 8), tl.sum(tl.sum(p, 0), 0))
    tl.store(idx_ptr + tl.arange(0, 8), h)
    tl.store(out_ptr + tl.arange(0, 2 * BLOCK), il)


@triton.jit
def k_atomics(p_f32, p_i32, p_i64, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(p_f32 + offs)
    iv = tl.load(p_i32 + offs)
    tl.atomic_add(p_f32 + offs, v, mask=offs < 8)
    tl.atomic_add(p_f32, 1.0, sem="relaxed", scope="cta")
    tl.atomic_max(p_i32 + offs, iv)
    tl.atomic_min(p_i32 + offs, iv, sem="acquire")
    tl.atomic_and(p_i32 + offs, iv)
    tl.atomic_or(p_i32 + offs, iv, scope="sys")
    tl.atomic_xor(p_i32 + offs, iv, sem="release")
    old = tl.atomic_xchg(p_i64 + offs, iv.to(tl.int64))
    c = tl.atomic_cas(p_i32 + offs, iv, iv + 1)
    m = tl.atomic_max(p_f32 + offs, v)
    tl.store(p_i64 + offs, old + c + m.to(tl.int64))


@triton.jit
def k_descriptors(a_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm = tl.program_id(0) * BM
    pn = tl.program_id(1) * BN
    v = desc.load([pm, pn])
    desc.store([pm, pn], tl.abs(v))
    desc.atomic_add([pm, pn], v)


@triton.jit
def k_desc_args(d_in, d_out, M):
    v = d_in.load([0, 0])
    d_out.store([0, 0], v * 2)


@triton.jit
def k_block_ptr(a_ptr, b_ptr, M, N, sm, sn, BM: tl.constexpr, BN: tl.constexpr):
    bp = tl.make_block_ptr(base=a_ptr, shape=(M, N), strides=(sm, sn), offsets=(0, 0),
                           block_shape=(BM, BN), order=(1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for i in range(0, 4):
        acc += tl.load(bp, boundary_check=(0, 1), padding_option="zero")
        bp = tl.advance(bp, (BM, 0))
    ob = tl.make_block_ptr(base=b_ptr, shape=(M, N), strides=(sm, sn), offsets=(0, 0),
                           block_shape=(BM, BN), order=(1, 0))
    tl.store(ob, acc, boundary_check=(1, ))


@triton.jit
def k_dot3d(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    ob = tl.arange(0, B)[:, None, None]
    om = tl.arange(0, M)[None, :, None]
    on = tl.arange(0, N)[None, None, :]
    ok = tl.arange(0, K)
    a = tl.load(a_ptr + ob * M * K + om * K + ok[None, None, :])
    b = tl.load(b_ptr + ob * K * N + ok[None, :, None] * N + on)
    c = tl.dot(a, b, input_precision="tf32", max_num_imprecise_acc=0)
    d = tl.dot(a.to(tl.float16), b.to(tl.float16), out_dtype=tl.float16)
    tl.store(c_ptr + ob * M * N + om * N + on, c + d.to(tl.float32))


@triton.jit
def k_misc(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(1)
    npg = tl.num_programs(2)
    tl.assume(n > 0)
    offs = tl.max_contiguous(tl.multiple_of(pid * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0, cache_modifier=".cg",
                eviction_policy="evict_last", volatile=True)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    z = tl.full([BLOCK], 3, tl.int16).to(tl.float32) + tl.full([BLOCK], float('nan'), tl.float32)
    w = tl.where(x > 0, y, z) + npg
    big = offs.to(tl.int64) * 4294967296
    u = big // 3 + (big >> 3).to(tl.uint64).to(tl.int64)
    tl.store(out_ptr + offs, w + u.to(tl.float32), mask=offs < n, cache_modifier=".wb")


@triton.jit
def _selu_scalar(x, alpha):
    if x > 0:
        return x
    else:
        return alpha * (tl.exp(x) - 1)


@triton.jit
def k_tiles3d(x_ptr, out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, 4)[:, None, None]
    j = tl.arange(0, 8)[None, :, None]
    k = tl.arange(0, BLOCK)[None, None, :]
    x = tl.load(x_ptr + i * 8 * BLOCK + j * BLOCK + k)
    s = tl.sum(x, axis=2)
    m = tl.max(x, axis=1)
    sel = tl.map_elementwise(_selu_scalar, s, tl.full([4, 8], 0.5, tl.float32))
    tl.store(out_ptr + tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :], sel)
    tl.store(out_ptr + tl.arange(0, 4)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :], m)
    for a in tl.static_range(2):
        for b in range(0, 3):
            tl.store(out_ptr + a + b, tl.sum(tl.sum(s, 0), 0))


@triton.jit
def k_scaled_dot_loops(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr):
    om = tl.arange(0, M)
    on = tl.arange(0, N)
    ok = tl.arange(0, K)
    a = tl.load(a_ptr + om[:, None] * K + ok[None, :])
    b = tl.load(b_ptr + ok[:, None] * N + on[None, :])
    sa = tl.load(as_ptr + om[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    sb = tl.load(bs_ptr + on[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    c = tl.dot_scaled(a, sa, "e4m3", b, sb, "e5m2")
    i = 0
    while tl.condition(i < M, disable_licm=True):
        i += 1
    for j in tl.range(0, 4, flatten=True, disallow_acc_multi_buffer=True):
        c += j
    tl.store(c_ptr + om[:, None] * N + on[None, :], c + i)


F32P, F16P = "*fp32", "*fp16"
# name: (kernel, pointer/scalar argument types (default i32), constexprs, compute capability,
#        compile options)
CASES = {
    "vadd": (add_kernel, dict(x_ptr=F32P, y_ptr=F32P, out_ptr=F32P), dict(BLOCK=1024), 80, {}),
    "softmax": (k_softmax, dict(out_ptr=F32P, in_ptr=F32P), dict(BLOCK=256), 80, {}),
    "matmul": (matmul_kernel, dict(a_ptr=F16P, b_ptr=F16P, c_ptr=F16P),
               dict(BM=64, BN=64, BK=32, GROUP_M=8, WRAP=True, ACTIVATION=""),
               80, {}),
    "dropout": (k_dropout, dict(x_ptr=F32P, out_ptr=F32P, p="fp32"), dict(BLOCK=1024), 80, {}),
    "layernorm_fwd": (layer_norm_fwd_kernel, dict(X=F16P, Y=F16P, W=F16P, B=F16P, Mean=F32P, Rstd=F32P,
                                            eps="fp32"), dict(BLOCK=512), 80, {}),
    "layernorm_bwd": (k_layernorm_bwd, dict(DX=F16P, DY=F16P, DW=F16P, X=F16P, W=F16P, Mean=F32P,
                                            Rstd=F32P, Lock="*i32"), dict(GROUP=32, BLOCK=512), 80, {}),
    "attention": (k_attention, dict(Q=F16P, K=F16P, V=F16P, Out=F16P, sm_scale="fp32"),
                  dict(BM=64, BN=32, D=64, CAUSAL=True), 80, {}),
    "reduce_scan": (k_reduce_scan, dict(x_ptr=F32P, out_ptr=F32P, idx_ptr="*i32"), dict(BLOCK=128), 80, {}),
    "casts": (k_casts, dict(f32_ptr=F32P, f16_ptr=F16P, i32_ptr="*i32", i8_ptr="*i8", u8_ptr="*u8",
                            i64_ptr="*i64", f64_ptr="*fp64"), dict(BLOCK=128), 90, {}),
    "math": (k_math, dict(x_ptr=F32P, out_ptr=F32P), dict(BLOCK=128), 80, {}),
    "control": (k_control, dict(x_ptr=F32P, out_ptr=F32P), dict(BLOCK=128), 80, dict(debug=True)),
    "shape_ops": (k_shape_ops, dict(x_ptr=F32P, out_ptr=F32P, idx_ptr="*i32"), dict(BLOCK=64), 80, {}),
    "atomics": (k_atomics, dict(p_f32=F32P, p_i32="*i32", p_i64="*i64"), dict(BLOCK=64), 80, {}),
    "descriptors": (k_descriptors, dict(a_ptr=F16P), dict(BM=64, BN=64), 90, {}),
    "desc_args": (k_desc_args, dict(d_in="tensordesc<fp16[64, 64]>", d_out="tensordesc<fp16[64, 64]>"),
                  {}, 90, {}),
    "block_ptr": (k_block_ptr, dict(a_ptr=F16P, b_ptr=F16P), dict(BM=32, BN=64), 90, {}),
    "dot3d": (k_dot3d, dict(a_ptr=F32P, b_ptr=F32P, c_ptr=F32P), dict(B=2, M=16, N=16, K=16), 80, {}),
    "misc": (k_misc, dict(x_ptr=F32P, out_ptr=F32P), dict(BLOCK=128), 80, {}),
    "tiles3d": (k_tiles3d, dict(x_ptr=F32P, out_ptr=F32P), dict(BLOCK=16), 80, {}),
    "scaled_dot_loops": (k_scaled_dot_loops, dict(a_ptr="*fp8e4nv", b_ptr="*fp8e5", as_ptr="*u8",
                                                  bs_ptr="*u8", c_ptr=F32P), dict(M=32, N=32, K=64), 90, {}),
}
# Specialization attributes of kernel arguments (what the launcher derives from alignment).
ARG_ATTRS = {"vadd": {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}}

# "ttir": after make_ttir (what the spyre backend parses); "ast": the front end's module before
# any pass (calls not inlined, block pointers not rewritten, multi-block functions);
# "ttir_nodebug": the ttir module printed without locations.
STAGES = ("ttir", "ast", "ttir_nodebug")


def _op_summary(op):
    """What the oracle compares: name, operand types, region count, result types."""
    return (op.get_name(), tuple(str(op.get_operand(i).get_type()) for i in range(op.get_num_operands())),
            op.get_num_regions(), tuple(str(op.get_result(i).get_type()) for i in range(op.get_num_results())))


@functools.lru_cache(maxsize=None)
def compile_case(name, stage="ttir"):
    """(printed module, Triton's own post-order op summaries, int/str attributes by op index)."""
    import warnings
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler.compiler import ASTSource

    kernel, types, consts, cap, options = CASES[name]
    names = kernel.arg_names
    signature = {n: "constexpr" if n in consts else types.get(n, "i32") for n in names}
    constexprs = {(names.index(n),): v for n, v in consts.items()}
    backend = CUDABackend(GPUTarget("cuda", cap, 32))
    opts = backend.parse_options(dict(options))
    ctx = ir.context()
    ir.load_dialects(ctx)
    backend.load_dialects(ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # tl.make_block_ptr is deprecated
        mod = ASTSource(kernel, signature, constexprs, ARG_ATTRS.get(name)).make_ir(
            GPUTarget("cuda", cap, 32), opts, backend.get_codegen_implementation(opts),
            backend.get_module_map(), ctx)
    if stage.startswith("ttir"):
        mod = backend.make_ttir(mod, {}, opts, cap)
    ops = []
    mod.walk(ops.append)
    text = mod.str_nodebug() if stage.endswith("nodebug") else str(mod)
    return text, [_op_summary(op) for op in ops], [_triton_attrs(op) for op in ops]


def _triton_attrs(op):
    """Triton's view of a few integer and string attributes, for comparison."""
    out = {}
    for key in ("axis", "start", "end", "pack", "packed_element", "padding"):
        value = op.get_int_attr(key)
        if value is not None:
            out[key] = value
    for key in ("symbol", "libname", "prefix", "message", "asm_string", "constraints"):
        value = op.get_str_attr(key)
        if value is not None:
            out[key] = value
    return out


@functools.lru_cache(maxsize=None)
def parsed(name, stage="ttir") -> Module:
    return parse_module(compile_case(name, stage)[0])


# ==============================================================================================
# Generic checks over the whole corpus
# ==============================================================================================

def postorder(node):
    """Ops in MLIR's walk order (nested ops before their parent), functions included."""
    if isinstance(node, Module):
        for fn in node.functions.values():
            yield from postorder(fn.body)
            yield fn
        return
    for block in node.blocks:
        for op in block.ops:
            for region in op.regions:
                yield from postorder(region)
            yield op


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_triton_ir(name, stage):
    """Same ops, operand types, result types and region counts as Triton's C++ IR."""
    text, theirs, their_attrs = compile_case(name, stage)
    module = parse_module(text)
    mine = []
    for node in postorder(module):
        if isinstance(node, Function):
            mine.append(("tt.func", (), 1, ()))
        else:
            mine.append((node.name, tuple(str(v.type) for v in node.operands), len(node.regions),
                         tuple(str(v.type) for v in node.results)))
    mine.append(("builtin.module", (), 1, ()))
    assert mine == theirs
    for node, attrs in zip(postorder(module), their_attrs):
        for key, value in attrs.items():
            if isinstance(node, Function) or (node.name, key) in DEFAULTED_ATTRS:
                continue
            assert node.attrs[key] == value, (node, key)


# Attributes the printer leaves out because they have their default value.
DEFAULTED_ATTRS = {("tt.make_tensor_descriptor", "padding")}


def _check_scoping(region, visible):
    """Every operand is defined before its use, in the same or an enclosing region."""
    visible = set(visible)
    for block in region.blocks:
        assert block.parent is region
        for i, arg in enumerate(block.args):
            assert arg.owner is block and arg.index == i
            visible.add(arg)
        for op in block.ops:
            assert op.parent is block
            for v in op.operands:
                assert v in visible, f"{op.name} uses %{v.name} before its definition"
            for r in op.regions:
                assert r.parent is op
                _check_scoping(r, visible)
            for i, res in enumerate(op.results):
                assert res.owner is op and res.index == i
                visible.add(res)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", list(CASES))
def test_def_before_use(name, stage):
    module = parsed(name, stage)
    for fn in module.functions.values():
        _check_scoping(fn.body, ())
        assert fn.body.blocks[0].args == fn.args
        assert len(fn.arg_attrs) == len(fn.args)
        for op in walk(fn):
            for v in op.operands + op.results:
                assert isinstance(v.type, Type) and v.type.kind != "other", (op, v)


# ==============================================================================================
# Kernel-specific checks
# ==============================================================================================

def kernel_line(kernel, snippet, nth=0):
    """The absolute source line of the nth line of `kernel` containing `snippet`."""
    lines, start = inspect.getsourcelines(kernel.fn)
    hits = [start + i for i, line in enumerate(lines) if snippet in line]
    return hits[nth]


def ops_named(node, name):
    return [op for op in walk(node) if op.name == name]


def count(node, name):
    return len(ops_named(node, name))


def assert_here(loc: Location, kernel, snippet, nth=0):
    assert loc is not None
    assert os.path.samefile(loc.outermost.file, inspect.getsourcefile(kernel.fn))
    assert loc.outermost.line == kernel_line(kernel, snippet, nth)


def test_vadd():
    m = parsed("vadd")
    k = m.kernel
    assert k.name == "add_kernel" and k.visibility == "public" and list(m.functions) == ["add_kernel"]
    assert [a.name for a in k.args] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert [str(a.type) for a in k.args] == ["!tt.ptr<f32>"] * 3 + ["i32"]
    assert k.result_types == [] and k.attrs == {"noinline": False}
    assert k.arg_attrs == [{"tt.divisibility": 16}, {"tt.divisibility": 16}, {}, {}]
    assert count(k, "tt.load") == 2 and count(k, "tt.store") == 1 and count(k, "tt.addptr") == 3
    pid = ops_named(k, "tt.get_program_id")[0]
    assert pid.attr("axis") == 0 and pid.result.type == I32 and pid.result.name == "offs"
    rng = ops_named(k, "tt.make_range")[0]
    assert (rng.attr("start"), rng.attr("end")) == (0, 1024)
    assert rng.result.type == Type("tensor", shape=(1024,), elem=I32)
    cmp = ops_named(k, "arith.cmpi")[0]
    assert cmp.attr("predicate") == "slt"
    assert cmp.result.type == parse_type("tensor<1024xi1>") and cmp.result.type.scalar == I1
    for load in ops_named(k, "tt.load"):
        ptr = load.operands[0]
        assert len(load.operands) == 2 and load.operands[1] is cmp.result   # ptr, mask
        assert ptr.type.scalar.is_ptr and load.result.type == ptr.type.with_elem(ptr.type.scalar.elem)
        assert load.result.type == parse_type("tensor<1024xf32>")
        assert ptr.owner.name == "tt.addptr"
    store = ops_named(k, "tt.store")[0]
    assert store.results == [] and store.operands[2] is cmp.result
    assert store.operands[1].owner.name == "arith.addf"
    # locations: the name comes from the NameLoc, the line from the kernel source
    assert_here(pid.loc, add_kernel, "offs = tl.program_id(0)")
    assert pid.loc.name == "offs" and pid.loc.col > 0
    # both loads sit in the store's line, told apart by their columns
    x_load, y_load = ops_named(k, "tt.load")
    for op in (x_load, y_load, store):
        assert_here(op.loc, add_kernel, "tl.store(")
    assert store.loc.col < x_load.loc.col < y_load.loc.col
    assert format_location(store.loc) == f"{store.loc.file}:{kernel_line(add_kernel, 'tl.store(')}"
    assert os.path.samefile(k.loc.file, inspect.getsourcefile(add_kernel.fn))
    assert k.loc.line == kernel_line(add_kernel, "def add_kernel")
    assert ops_named(k, "tt.return")[0].parent is k.body.blocks[0]


def test_softmax_loop_and_neg_inf():
    k = parsed("softmax").kernel
    (loop,) = ops_named(k, "scf.for")
    lb, ub, step = loop.operands
    assert lb.owner.name == "tt.get_program_id" and ub is k.args[4] and step.owner.name == "tt.get_num_programs"
    assert loop.results == [] and loop.attr("tt.num_stages") == 2
    (body,) = loop.regions[0].blocks
    assert [a.type for a in body.args] == [I32] and body.args[0].name == "row"
    assert body.ops[-1].name == "scf.yield" and body.ops[-1].operands == []   # implicit, restored
    neg_inf = [op for op in ops_named(k, "arith.constant") if isinstance(op.attr("value"), DenseAttr)
               and op.attr("value").splat == -math.inf]
    assert len(neg_inf) == 1 and neg_inf[0].attr("value").type == parse_type("tensor<256xf32>")
    reduces = ops_named(k, "tt.reduce")
    assert [r.attr("axis") for r in reduces] == [0, 0]
    assert [r.result.type for r in reduces] == [F32, F32]
    combine = [r.regions[0].blocks[0].ops[0].name for r in reduces]
    assert combine == ["arith.maxnumf", "arith.addf"]
    for r in reduces:
        blk = r.regions[0].blocks[0]
        assert [a.type for a in blk.args] == [F32, F32] and blk.ops[-1].name == "tt.reduce.return"
        assert blk.ops[-1].operands == [blk.ops[0].result]
    assert_here(reduces[0].loc, k_softmax, "z = row_v - tl.max")
    assert_here(reduces[1].loc, k_softmax, "den = tl.sum")
    # the reduction's location is inside triton's standard library, called from the kernel
    assert reduces[0].loc.caller is not None and "triton" in reduces[0].loc.file
    assert format_location(reduces[0].loc, outermost=True) == f"{__file__}:{kernel_line(k_softmax, 'z = row_v')}"


def test_matmul_dot_in_loop():
    k = parsed("matmul").kernel
    (loop,) = ops_named(k, "scf.for")
    assert len(loop.operands) == 3 + 3 and len(loop.results) == 3   # acc, a_ptrs, b_ptrs
    body = loop.regions[0].blocks[0]
    assert len(body.args) == 4 and body.args[0].type == I32
    assert [str(a.type) for a in body.args[1:]] == [str(v.type) for v in loop.results]
    assert [v.type for v in loop.operands[3:]] == [r.type for r in loop.results]
    (dot,) = ops_named(k, "tt.dot")
    assert dot.attr("inputPrecision") == "tf32" and dot.parent is body
    assert [str(v.type) for v in dot.operands] == ["tensor<64x32xf16>", "tensor<32x64xf16>", "tensor<64x64xf32>"]
    assert dot.result.type == parse_type("tensor<64x64xf32>")
    assert dot.operands[2] in body.args
    yield_ = body.ops[-1]
    assert yield_.name == "scf.yield" and dot.result in yield_.operands
    trunc = ops_named(k, "arith.truncf")[0]
    assert trunc.operands[0] in loop.results and trunc.result.type.scalar.name == "f16"
    assert_here(dot.loc, matmul_kernel, "acc = tl.dot(")


def test_dropout_constants():
    k = parsed("dropout").kernel
    consts = {op.result.name: op.attr("value") for op in ops_named(k, "arith.constant")}
    ints = [v for v in consts.values() if isinstance(v, int) and not isinstance(v, bool)]
    assert any(v < 0 for v in ints), "philox uses negative i32 constants"
    assert count(k, "tt.mulhiui") > 0 and count(k, "arith.xori") > 0
    assert ops_named(k, "arith.select")[-1].result.type == parse_type("tensor<1024xf32>")
    assert ops_named(k, "arith.cmpf")[0].attr("predicate") == "ogt"


def test_layernorm_fwd_three_loops():
    k = parsed("layernorm_fwd").kernel
    loops = ops_named(k, "scf.for")
    assert [len(lp.results) for lp in loops] == [1, 1, 0]
    assert_here(loops[0].loc, layer_norm_fwd_kernel, "for off in range(0, N, BLOCK):", 0)
    assert_here(loops[2].loc, layer_norm_fwd_kernel, "for off in range(0, N, BLOCK):", 2)
    assert {op.result.type.scalar.name for op in ops_named(k, "arith.extf")} == {"f32"}
    sqrt = ops_named(k, "math.sqrt")[0]
    assert sqrt.result.type == F32


def test_layernorm_bwd_spin_lock():
    k = parsed("layernorm_bwd").kernel
    (cas,) = ops_named(k, "tt.atomic_cas")
    assert (cas.attr("sem"), cas.attr("scope")) == ("acq_rel", "gpu") and cas.result.type == I32
    assert str(cas.operands[0].type) == "!tt.ptr<i32>"
    (loop,) = ops_named(k, "scf.while")
    before, after = loop.regions
    assert cas.parent.parent is before and loop.operands == [] and loop.results == []
    cond = before.blocks[0].ops[-1]
    assert cond.name == "scf.condition" and cond.operands[0].type == I1
    assert after.blocks[0].ops[-1].name == "scf.yield"
    (if_,) = ops_named(k, "scf.if")
    then, else_ = if_.regions
    assert if_.operands[0].type == I1 and len(if_.results) == 1
    assert if_.result.type == parse_type("tensor<512xf32>")
    xchg = [op for op in ops_named(k, "tt.atomic_rmw") if op.attr("atomic_rmw_op") == "exch"]
    assert len(xchg) == 2 and xchg[0].parent.parent is then
    assert all(len(op.operands) == 3 for op in xchg)  # ptr, val, mask
    assert else_.blocks[0].ops[-1].operands[0].owner.name == "arith.addf"
    (barrier,) = ops_named(k, "ttg.barrier")
    assert barrier.attr("addrSpace") == "all"
    assert_here(loop.loc, k_layernorm_bwd, "while tl.atomic_cas")
    assert_here(if_.loc, k_layernorm_bwd, "if count == 0:")


def test_attention():
    k = parsed("attention").kernel
    (loop,) = ops_named(k, "scf.for")
    dots = ops_named(loop, "tt.dot")
    assert [str(d.result.type) for d in dots] == ["tensor<64x32xf32>", "tensor<64x64xf32>"]
    assert str(dots[1].operands[0].type) == "tensor<64x32xf16>"
    body = loop.regions[0].blocks[0]
    assert len(body.args) == 1 + len(loop.results) == 4
    exp2 = ops_named(loop, "math.exp2")
    assert len(exp2) == 2
    (inf_const,) = [op for op in ops_named(k, "arith.constant")
                    if isinstance(op.attr("value"), DenseAttr) and op.attr("value").splat == -math.inf]
    assert inf_const.result.type == parse_type("tensor<64xf32>")
    # tl.multiple_of on the loop variable: a hint attribute on the op that makes the value
    divisibility = [op for op in walk(parsed("attention", "ast")) if "tt.divisibility" in op.attrs]
    assert divisibility and divisibility[0].attr("tt.divisibility").values == [32]


def test_reduce_and_scan_regions():
    k = parsed("reduce_scan").kernel
    reduces = ops_named(k, "tt.reduce")
    multi = [r for r in reduces if len(r.operands) == 2]
    assert len(multi) == 3     # custom argmax, tl.argmax, tl.argmin
    for r in multi:
        assert [v.type for v in r.results] == [F32, I32]
        blk = r.regions[0].blocks[0]
        assert [a.type for a in blk.args] == [F32, I32, F32, I32]
        ret = blk.ops[-1]
        assert ret.name == "tt.reduce.return" and [v.type for v in ret.operands] == [F32, I32]
        assert all(v.owner.name == "arith.select" for v in ret.operands)
    assert [r.results[0].name for r in multi] == ["0#0", "am#0", "amin#0"]
    scans = ops_named(k, "tt.scan")
    assert [s.attr("reverse") for s in scans] == [True, False]
    assert all(s.result.type == parse_type("tensor<128xf32>") for s in scans)
    assert scans[0].regions[0].blocks[0].ops[-1].name == "tt.scan.return"
    xor = [r for r in reduces if r.regions[0].blocks[0].ops[0].name == "arith.xori"]
    assert len(xor) == 1 and xor[0].result.type == I32
    store_idx = ops_named(k, "tt.store")[-1]
    assert str(store_idx.operands[0].type) == "!tt.ptr<i32>" and store_idx.operands[1].type == I32
    assert_here(multi[0].loc, k_reduce_scan, "tl.reduce((x, offs)")
    assert_here(scans[1].loc, k_reduce_scan, "c = tl.cumsum")


def test_casts():
    k = parsed("casts").kernel
    fp_to_fp = ops_named(k, "tt.fp_to_fp")
    assert [op.attr("rounding") for op in fp_to_fp] == ["rtne", "rtz", None, None]
    e4 = fp_to_fp[0].result.type.scalar
    assert (e4.kind, e4.name, e4.width) == ("float", "f8E4M3FN", 8)
    assert fp_to_fp[1].result.type.scalar.name == "f8E5M2"
    assert fp_to_fp[2].result.type == parse_type("tensor<128xf32>")
    bf16 = [op for op in ops_named(k, "arith.truncf") if op.result.type.scalar.name == "bf16"]
    assert len(bf16) == 1 and bf16[0].result.type.scalar.width == 16
    names = {op.name for op in walk(k)}
    assert {"arith.fptosi", "arith.fptoui", "arith.sitofp", "arith.uitofp", "arith.extf", "arith.extsi",
            "arith.trunci", "tt.bitcast", "tt.elementwise_inline_asm"} <= names
    bitcasts = ops_named(k, "tt.bitcast")
    assert [str(op.result.type) for op in bitcasts] == ["tensor<128xi32>", "tensor<128xf32>"]
    asm = ops_named(k, "tt.elementwise_inline_asm")[0]
    assert "\n" in asm.attr("asm_string") and asm.attr("packed_element") == 4 and asm.attr("pure") is True
    u8_arg = k.args[4]
    assert str(u8_arg.type) == "!tt.ptr<i8>"


def test_math_and_libdevice():
    k = parsed("math").kernel
    names = {op.name for op in walk(k)}
    for n in ("math.exp", "math.log", "math.sin", "math.cos", "math.sqrt", "math.rsqrt", "math.absf",
              "math.floor", "math.ceil", "math.erf", "math.log2", "math.exp2", "math.fma",
              "tt.precise_divf", "tt.precise_sqrt", "tt.clampf", "tt.mulhiui", "arith.minimumf",
              "arith.shli", "arith.shrsi", "arith.remsi", "arith.andi", "arith.ori", "arith.xori"):
        assert n in names, n
    externs = ops_named(k, "tt.extern_elementwise")
    assert [op.attr("symbol") for op in externs] == ["__nv_tanhf", "__nv_powf", "__nv_isnanf"]
    assert [len(op.operands) for op in externs] == [1, 2, 1]
    assert externs[2].result.type == parse_type("tensor<128xi32>") and externs[0].attr("pure") is True
    clamp = ops_named(k, "tt.clampf")[0]
    assert clamp.attr("propagateNan") == "none" and len(clamp.operands) == 3
    assert ops_named(k, "math.fma")[0].result.type == parse_type("tensor<128xf32>")


def test_control_flow_call_print_assert():
    m = parsed("control")
    k = m.kernel
    helper_name = next(n for n in m.functions if "_scaled_pair" in n)
    helper = m.functions[helper_name]
    assert helper.visibility == "private" and helper.attrs == {"noinline": True}
    assert helper.result_types == [F32, F32] and [a.type for a in helper.args] == [F32, F32]
    (call,) = ops_named(k, "tt.call")
    assert call.attr("callee") == helper_name and [v.type for v in call.results] == [F32, F32]
    assert [r.name for r in call.results] == ["4#0", "4#1"]
    ret = helper.body.blocks[0].ops[-1]
    assert ret.name == "tt.return" and [v.type for v in ret.operands] == [F32, F32]
    (if_,) = ops_named(k, "scf.if")
    assert if_.result.type == parse_type("tensor<128xf32>")
    assert [len(r.blocks) for r in if_.regions] == [1, 1]
    (loop,) = ops_named(k, "scf.while")
    assert [v.type for v in loop.operands] == [I32, parse_type("tensor<128xf32>")]
    before, after = loop.regions
    assert [a.name for a in before.blocks[0].args] == ["i", "acc_3"]
    assert [a.type for a in after.blocks[0].args] == [v.type for v in loop.results]
    cond = before.blocks[0].ops[-1]
    assert cond.operands[1:] == before.blocks[0].args
    prints = ops_named(k, "tt.print")
    assert [p.attr("prefix") for p in prints] == [" acc: ", " hex: "]
    assert [p.attr("hex") for p in prints] == [False, True]
    assert prints[0].attr("isSigned") == (0, 0) and prints[1].attr("isSigned") == (1,)
    assert prints[0].operands == [call.results[0], loop.results[1]]
    asserts = ops_named(k, "tt.assert")
    assert "nan found" in [a.attr("message") for a in asserts]
    assert_here(call.loc, k_control, "a, b = _scaled_pair")
    assert_here(prints[0].loc, k_control, 'tl.device_print("acc: "')
    # the helper's own ops point into the helper's source
    mul = ops_named(helper, "arith.mulf")[0]
    assert mul.loc.line == kernel_line(_scaled_pair, "x = x * y + i")


def test_shape_ops():
    k = parsed("shape_ops").kernel
    (join,) = ops_named(k, "tt.join")
    assert join.result.type == parse_type("tensor<64x2xf32>")
    (split,) = ops_named(k, "tt.split")
    assert [r.name for r in split.results] == ["outLHS", "outRHS"]
    assert [str(r.type) for r in split.results] == ["tensor<64xf32>"] * 2
    (cat,) = ops_named(k, "tt.cat")
    assert cat.operands == split.results and cat.result.type.shape == (128,)
    reorder = [op for op in ops_named(k, "tt.reshape") if op.attr("allow_reorder")]
    assert len(reorder) == 1 and reorder[0].result.type.shape == (2, 64)
    trans = ops_named(k, "tt.trans")
    assert [t.attr("order") for t in trans] == [(1, 0), (2, 0, 1)]
    assert trans[1].result.type.shape == (4, 2, 8)
    (hist,) = ops_named(k, "tt.histogram")
    assert hist.result.type == parse_type("tensor<8xi32>")
    (gather,) = ops_named(k, "tt.gather")
    assert gather.attr("axis") == 0 and len(gather.operands) == 2
    assert gather.result.type == parse_type("tensor<64xf32>")
    six_d = [r for r in ops_named(k, "tt.reduce") if r.operands[0].type.rank == 6]
    assert six_d and all(r.result.type.rank == 5 for r in six_d)


def test_atomics():
    k = parsed("atomics").kernel
    rmw = ops_named(k, "tt.atomic_rmw")
    kinds = [op.attr("atomic_rmw_op") for op in rmw]
    assert set(kinds) >= {"fadd", "max", "min", "and", "or", "xor", "exch"}
    scalar_add = [op for op in rmw if not op.operands[0].type.is_tensor][0]
    assert (scalar_add.attr("sem"), scalar_add.attr("scope")) == ("relaxed", "cta")
    assert scalar_add.result.type == F32
    assert {op.attr("sem") for op in rmw} >= {"acq_rel", "acquire", "release", "relaxed"}
    assert {op.attr("scope") for op in rmw} >= {"gpu", "cta", "sys"}
    for op in rmw:
        assert len(op.operands) == 3 and op.operands[2].type.scalar == I1
        assert op.result.type == op.operands[1].type
    (cas,) = ops_named(k, "tt.atomic_cas")
    assert cas.result.type == parse_type("tensor<64xi32>") and len(cas.operands) == 3


def test_tensor_descriptors():
    k = parsed("descriptors").kernel
    (make,) = ops_named(k, "tt.make_tensor_descriptor")
    desc_t = make.result.type
    assert desc_t.kind == "tensordesc" and desc_t.shape == (64, 64) and desc_t.elem.name == "f16"
    assert str(desc_t) == "!tt.tensordesc<tensor<64x64xf16>>"
    assert make.operands[0] is k.args[0] and len(make.operands) == 5
    (load,) = ops_named(k, "tt.descriptor_load")
    assert load.operands[0] is make.result and load.result.type == parse_type("tensor<64x64xf16>")
    (store,) = ops_named(k, "tt.descriptor_store")
    assert store.operands[0] is make.result and store.operands[1].type.is_tensor   # desc, src, indices
    assert [v.type for v in store.operands[2:]] == [I32, I32]
    (red,) = ops_named(k, "tt.descriptor_reduce")
    assert red.attr("kind") == "add" and red.operands[1] is load.result
    args = parsed("desc_args").kernel.args
    assert args[0].type.kind == "tensordesc" and args[0].name == "d_in"
    assert [a.type for a in args[1:5]] == [I32, I32, parse_type("i64"), parse_type("i64")]


def test_block_pointers_before_rewrite():
    m = parsed("block_ptr", "ast")
    k = m.kernel
    makes = ops_named(k, "tt.make_tensor_ptr")
    assert len(makes) == 2
    t = makes[0].result.type
    assert t.is_ptr and t.elem == parse_type("tensor<32x64xf16>") and str(t) == "!tt.ptr<tensor<32x64xf16>>"
    assert makes[0].attr("order") == (1, 0) and len(makes[0].operands) == 7
    (adv,) = ops_named(k, "tt.advance")
    assert adv.result.type == t and len(adv.operands) == 3
    (load,) = ops_named(k, "tt.load")
    assert load.result.type == parse_type("tensor<32x64xf16>")
    assert load.attr("boundaryCheck") == (0, 1) and load.attr("padding") == 1
    store = ops_named(k, "tt.store")[0]
    assert store.attr("boundaryCheck") == (1,)
    # the un-inlined tl.zeros helper has a dead second block
    zeros = [f for n, f in m.functions.items() if "zeros" in n][0]
    assert zeros.visibility == "private" and len(zeros.body.blocks) == 2
    assert zeros.body.blocks[1].ops[0].name == "ub.poison"
    # after make_ttir the block pointer is rewritten into tensors of pointers
    assert count(parsed("block_ptr").kernel, "tt.make_tensor_ptr") == 0


def test_dot3d():
    k = parsed("dot3d").kernel
    dots = ops_named(k, "tt.dot")
    assert sorted(str(d.result.type) for d in dots) == ["tensor<2x16x16xf16>", "tensor<2x16x16xf32>"]
    assert all(d.operands[0].type.rank == 3 for d in dots)
    assert dots[0].result.type.numel == 512


def test_misc_attributes():
    k = parsed("misc").kernel
    pids = ops_named(k, "tt.get_program_id") + ops_named(k, "tt.get_num_programs")
    assert [p.attr("axis") for p in pids] == [1, 2]
    (load,) = ops_named(k, "tt.load")
    assert (load.attr("cache"), load.attr("evict"), load.attr("isVolatile")) == ("cg", "evict_last", True)
    assert len(load.operands) == 3     # ptr, mask, other
    assert ops_named(k, "tt.store")[0].attr("cache") == "wb"
    (assume,) = ops_named(k, "llvm.intr.assume")
    assert assume.operands[0].type == I1
    nan = [op for op in ops_named(k, "arith.constant") if isinstance(op.attr("value"), DenseAttr)
           and isinstance(op.attr("value").splat, float) and math.isnan(op.attr("value").splat)]
    assert len(nan) == 1
    big = [op.attr("value").splat for op in ops_named(k, "arith.constant") if isinstance(op.attr("value"), DenseAttr)]
    assert 4294967296 in big
    hinted = [op for op in walk(k) if "tt.contiguity" in op.attrs]
    assert hinted[0].attr("tt.contiguity").values == [128] and hinted[0].attr("tt.divisibility").splat == 128
    asm = ops_named(k, "tt.elementwise_inline_asm")[0]
    assert asm.attr("asm_string") == "mov.b32 $0, $1;" and asm.attr("constraints") == "=r,r"


def test_map_elementwise_with_branches():
    k = parsed("tiles3d").kernel
    (mp,) = ops_named(k, "tt.map_elementwise")
    assert mp.attr("pack") == 1 and mp.result.type == parse_type("tensor<4x8xf32>")
    blocks = mp.regions[0].blocks
    assert len(blocks) == 3 and [b.label for b in blocks] == ["bb0", "bb1", "bb2"]
    cond_br = blocks[0].ops[-1]
    assert cond_br.name == "cf.cond_br" and cond_br.successors == [blocks[2], blocks[1]]
    assert cond_br.operands[1] is blocks[0].args[0]        # branch operand of ^bb2
    br = blocks[1].ops[-1]
    assert br.name == "cf.br" and br.successors == [blocks[2]] and br.operands[0].owner is blocks[1].ops[-2]
    assert [a.type for a in blocks[2].args] == [F32]
    assert blocks[2].ops[0].name == "tt.map_elementwise.return"
    reduces = ops_named(k, "tt.reduce")
    assert [str(r.result.type) for r in reduces[:2]] == ["tensor<4x8xf32>", "tensor<4x16xf32>"]
    assert [r.attr("axis") for r in reduces[:2]] == [2, 1]
    loops = ops_named(k, "scf.for")
    assert len(loops) == 2    # static_range unrolled the outer loop


def test_scaled_dot_and_loop_attributes():
    k = parsed("scaled_dot_loops").kernel
    (ds,) = ops_named(k, "tt.dot_scaled")
    assert (ds.attr("a_elem_type"), ds.attr("b_elem_type"), ds.attr("fastMath")) == ("e4m3", "e5m2", False)
    # operands in ODS order: a, b, c, a_scale, b_scale
    assert [str(v.type.scalar) for v in ds.operands] == ["f8E4M3FN", "f8E5M2", "f32", "i8", "i8"]
    assert ds.result.type == parse_type("tensor<32x32xf32>")
    (loop,) = ops_named(k, "scf.while")
    assert loop.result.type == I32 and "llvm.loop_annotation" in loop.attrs
    (for_,) = ops_named(k, "scf.for")
    assert for_.attr("tt.flatten") is True and for_.attr("tt.disallow_acc_multi_buffer") is True


# ==============================================================================================
# Hand-written syntax
# ==============================================================================================

@pytest.mark.parametrize("text", [
    "i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "index",
    "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ",
    "!tt.ptr<f32>", "!tt.ptr<f32, 3>", "!tt.ptr<!tt.ptr<i8>>", "tensor<128x64xf16>", "tensor<f32>",
    "tensor<1024x!tt.ptr<f32>>", "!tt.tensordesc<tensor<64x64xf16>>", "!tt.ptr<tensor<32x64xbf16>>",
    "tensor<?x4xi32>", "tuple<i32, f32>", "none", "vector<4xf32>", "(i32, f32) -> i1",
])
def test_type_round_trip(text):
    t = parse_type(text)
    assert str(t) == text and parse_type(str(t)) == t


def test_type_fields():
    assert parse_type("f8E4M3B11FNUZ") == Type("float", 8, "f8E4M3B11FNUZ")
    assert parse_type("bf16").width == 16 and parse_type("i1").width == 1 and parse_type("index").width == 64
    t = parse_type("tensor<128x64x!tt.ptr<f16, 3>>")
    assert t.shape == (128, 64) and t.numel == 8192 and t.scalar.is_ptr and t.scalar.addrspace == 3
    assert t.scalar.elem.name == "f16" and t.rank == 2
    d = parse_type("!tt.tensordesc<tensor<16x32xf8E5M2>>")
    assert (d.kind, d.shape, d.elem.name) == ("tensordesc", (16, 32), "f8E5M2")
    assert parse_type("tuple<i32, f32>").kind == "other" and parse_type("none").kind == "none"
    assert parse_type("ui8") == Type("int", 8, "ui8")
    assert F32.scalar is F32 and F32.numel == 1 and not F32.is_tensor
    assert Type("int", 32) == I32 and str(Type("int", 8)) == "i8" and Type("index").width == 64


HAND = '''#loc = loc("k.py":3:0)
#loc1 = loc("k.py":4:10)
#alias = loc("pid"(#loc1))
module attributes {"ttg.num-warps" = 4 : i32, "x.flag"} {
  tt.func public @k(%p: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("p"(#loc)), %n: i32 loc(unknown)) -> (f32) attributes {noinline = false} {
    %c = "arith.constant"() <{value = 7 : i32}> : () -> i32 loc(#alias)
    %s = "arith.addi"(%n, %c) <{overflowFlags = #arith.overflow<nsw>}> : (i32, i32) -> i32 loc(fused["k.py":5:1, "k.py":6:2])
    %t = arith.muli %s, %c overflow<nsw, nuw> : i32 loc("k.py":7:3 to 7:9)
    %f = arith.addf %x, %x fastmath<fast> : f32 loc(callsite(unknown at #loc1))
    %x = arith.constant 0x7FC00000 : f32
    %b = arith.constant dense<"0x0000803F000000C0"> : tensor<2xf32>
    %h = arith.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi16>
    %e = arith.constant dense<0xFC00> : tensor<4xf16>
    %g = arith.constant dense<0xFF80> : tensor<4xbf16>
    %q = arith.constant dense<0x7E> : tensor<4xf8E4M3FN>
    %q2 = arith.constant dense<0x7C> : tensor<4xf8E5M2>
    %q3 = arith.constant dense<0x80> : tensor<4xf8E4M3FNUZ>
    %tr = arith.constant dense<true> : tensor<4xi1>
    %v = arith.constant true
    %fl = arith.constant -1.500000e+00 : bf16
    %ix = arith.constant 3 : index
    tt.return %f : f32
  } loc(#loc)
  tt.func private @decl(i32, !tt.ptr<f16>) -> f32 loc(#loc)
} loc(#loc)
'''


def test_hand_written_module():
    m = parse_module(HAND)
    assert m.attrs == {"ttg.num-warps": 4, "x.flag": True}
    k = m.kernel
    assert k.arg_attrs == [{"tt.divisibility": 16}, {}] and k.result_types == [F32]
    ops = {op.results[0].name: op for op in walk(k) if op.results}
    c = ops["c"]
    assert c.attr("value") == 7 and c.result.type == I32
    assert c.loc.name == "pid" and (c.loc.file, c.loc.line, c.loc.col) == ("k.py", 4, 10)
    assert ops["s"].attr("overflowFlags") == "nsw" and ops["s"].loc.line == 5     # fused: first
    assert ops["t"].attr("overflowFlags") == "nsw, nuw" and ops["t"].loc.col == 3  # a range
    f = ops["f"]
    assert f.attr("fastmath") == "fast" and f.operands == [ops["x"].result] * 2    # forward use
    assert f.loc.line == 4 and f.loc.caller is None          # callsite(unknown at X) is X
    assert math.isnan(ops["x"].attr("value")) and ops["x"].result.type == F32
    assert ops["b"].attr("value").values == [1.0, -2.0] and not ops["b"].attr("value").is_splat
    assert ops["h"].attr("value").values == [1, -2, 3, 4]
    assert ops["e"].attr("value").splat == -math.inf and ops["g"].attr("value").splat == -math.inf
    assert ops["e"].attr("value").to_list() == [-math.inf] * 4
    assert ops["q"].attr("value").splat == 448.0
    assert ops["q2"].attr("value").splat == math.inf
    assert math.isnan(ops["q3"].attr("value").splat)
    assert ops["tr"].attr("value").splat is True
    assert ops["v"].attr("value") is True and ops["v"].result.type == I1
    assert ops["fl"].attr("value") == -1.5 and ops["fl"].result.type.name == "bf16"
    assert ops["ix"].result.type.kind == "index"
    decl = m.functions["decl"]
    assert decl.body.blocks == [] and [str(a.type) for a in decl.args] == ["i32", "!tt.ptr<f16>"]
    assert decl.result_types == [F32] and decl.visibility == "private"
    assert format_location(None) == "<unknown>"


def test_generic_form_with_regions_and_successors():
    text = '''module {
  "tt.func"() <{function_type = (i32) -> i32, sym_name = "g", sym_visibility = "public"}> ({
  }) : () -> ()
  tt.func public @f(%a: i32, %c: i1) -> i32 {
    %r:2 = "scf.while"(%a, %a) ({
    ^bb0(%x: i32, %y: i32):
      "scf.condition"(%c, %x, %y) : (i1, i32, i32) -> ()
    }, {
    ^bb0(%x: i32, %y: i32):
      "scf.yield"(%y, %x) : (i32, i32) -> ()
    }) : (i32, i32) -> (i32, i32)
    "cf.cond_br"(%c, %r#0, %r#1)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 1>}> : (i1, i32, i32) -> ()
  ^bb1(%p: i32):  // pred: ^bb0
    cf.br ^bb3(%p : i32)
  ^bb2(%q: i32):  // pred: ^bb0
    cf.br ^bb3(%late : i32)
  ^bb3(%z: i32):  // 2 preds: ^bb1, ^bb2
    tt.return %z : i32
  ^bb4:
    %late = arith.addi %a, %a : i32
    cf.br ^bb2(%late : i32)
  }
}
'''
    m = parse_module(text)
    assert m.ops[0].name == "tt.func" and m.ops[0].attr("sym_name") == "g"
    assert m.ops[0].attr("function_type").kind == "other"
    f = m.functions["f"]
    blocks = f.body.blocks
    assert [b.label for b in blocks] == ["", "bb1", "bb2", "bb3", "bb4"]
    loop = blocks[0].ops[0]
    assert [r.name for r in loop.results] == ["r#0", "r#1"] and len(loop.regions) == 2
    assert loop.regions[1].blocks[0].ops[0].operands == loop.regions[1].blocks[0].args[::-1]
    br = blocks[0].ops[1]
    assert br.successors == [blocks[1], blocks[2]] and br.operands[1:] == loop.results
    assert br.attr("operandSegmentSizes") == (1, 1, 1)
    late = blocks[4].ops[0].result
    assert blocks[2].ops[0].operands == [late]   # a forward reference across blocks, resolved


def test_elided_terminators_and_index_loops():
    text = """module {
  tt.func @f(%c: i1, %p: !tt.ptr<f32>) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c4 step %c1 {
    }
    scf.if %c {
    } else {
    }
    scf.if %c {
      %v = "arith.cmpi"(%c0, %c4) <{predicate = 2 : i64}> : (index, index) -> i1
      tt.store %p, %v : !tt.ptr<f32>
    }
    tt.return
  }
}
"""
    f = parse_module(text).kernel
    loop, if1, if2 = [op for op in f.body.blocks[0].ops if op.name.startswith("scf.")]
    (body,) = loop.regions[0].blocks
    assert [a.type.kind for a in body.args] == ["index"] and [o.name for o in body.ops] == ["scf.yield"]
    assert [[o.name for o in r.blocks[0].ops] for r in if1.regions] == [["scf.yield"], ["scf.yield"]]
    assert if2.regions[1].blocks == [] and if2.regions[0].blocks[0].ops[-1].name == "scf.yield"
    cmp = if2.regions[0].blocks[0].ops[0]
    assert cmp.attr("predicate") == "slt" and cmp.result.type == I1


def test_mutated_text_raises_only_parse_errors():
    """Damaged input must give TTIRParseError, never another exception or a hang."""
    import random
    rng = random.Random(0)
    texts = [compile_case("control")[0], compile_case("tiles3d")[0], compile_case("block_ptr", "ast")[0]]
    pieces = ["(", ")", "{", "}", "<", ">", ",", ":", "%", '"', "^", "#", "!", "\n", "x", "0x", "->", "="]
    for _ in range(300):
        text = rng.choice(texts)
        p = rng.randrange(len(text))
        mutated = rng.choice([text[:p], text[:p] + text[p + rng.randint(1, 5):],
                              text[:p] + rng.choice(pieces) + text[p:]])
        try:
            parse_module(mutated)
        except TTIRParseError:
            pass


@pytest.mark.parametrize("text, where, message", [
    ("module {\n  tt.func @f() {\n    tt.return %nope : i32\n  }\n}\n", (3, 15), "undefined value %nope"),
    ("module {\n  tt.func @f() {\n    %a = arith.constant 1 : i32\n    %a = arith.constant 2 : i32\n"
     "  }\n}\n", (4, None), "redefinition of value %a"),
    ("module {\n  tt.func @f(%a: tensor<4xf32) {\n  }\n}\n", (2, None), "expected '>'"),
    ("module {\n  tt.func @f(%a: i32) {\n    %b = arith.addi %a, %a : i32 loc(#nowhere)\n  }\n}\n",
     (3, None), "undefined location alias #nowhere"),
    ("module {\n  tt.func @f(%a: i32) {\n    %b = arith.addi %a, %a\n  }\n}\n", (3, None),
     "cannot tell the result types"),
    ("module {\n  tt.func @f(%a: i32) {\n    tt.return\n", (4, None), "expected '}'"),
    ("module {\n  tt.func @f() {\n    cf.br ^bb9\n  }\n}\n", (3, None), "undefined block ^bb9"),
    ("module {\n  tt.func @f() {\n    %x = arith.constant dense<1 : tensor<4xi32>\n  }\n}\n", (3, None),
     "expected"),
    ("module {\n  tt.func @f(%a: i32) {\n    %x, %y = \"arith.addi\"(%a, %a) : (i32, i32) -> i32\n  }\n}\n",
     (3, None), "2 result names but 1 result types"),
    ("module {\n} trailing", (2, 3), "expected end of text"),
    ("module {\n  tt.func @f(i32) {\n    tt.return\n  }\n}\n", (2, None), "arguments need names"),
])
def test_errors_have_positions(text, where, message):
    with pytest.raises(TTIRParseError) as info:
        parse_module(text)
    err = info.value
    assert message in str(err)
    line, col = where
    assert err.line == line and (col is None or err.col == col)
    assert f"line {err.line}, column {err.col}" in str(err) and "^" in str(err)


# ==============================================================================================
# Saved fixtures (parse without running Triton's front end)
# ==============================================================================================

FIXTURE_CASES = [("vadd", "ttir"), ("layernorm_bwd", "ttir"), ("reduce_scan", "ttir"), ("tiles3d", "ttir"),
                 ("control", "ttir"), ("block_ptr", "ast")]


def _dump(module):
    """Everything the parser produced, in walk order: names, operand and result values with their
    types, attributes, locations, successors and block arguments."""
    ids = {}

    def v(x):
        return (ids.setdefault(id(x), len(ids)), x.name, str(x.type))

    def loc(x):
        return None if x is None else (x.file, x.line, x.col, x.name, loc(x.caller))
    out = []
    for node in postorder(module):
        if isinstance(node, Function):
            out.append(("func", node.name, [v(a) for a in node.args], repr(node.arg_attrs), loc(node.loc)))
            continue
        out.append((node.name, [v(x) for x in node.operands], [v(x) for x in node.results],
                    repr(sorted(node.attrs.items(), key=lambda kv: kv[0])), loc(node.loc),
                    [[v(a) for a in b.args] for r in node.regions for b in r.blocks],
                    [len(b.ops) for r in node.regions for b in r.blocks],
                    [ids.setdefault(id(b), len(ids)) for b in node.successors]))
    return out


_NEVER = re.compile(r"(?!)")  # matches nothing: the shortcuts stand aside


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", list(CASES))
def test_fast_paths_read_as_the_general_parser(name, stage, monkeypatch):
    """The type cache, the `loc(#alias)` and `"name"(#alias)` shortcuts and the simple-body reading give
    what the general parser gives, attribute for attribute and location for location."""
    import spyre_triton.compiler.ttir as T
    text = compile_case(name, stage)[0]
    parse_module(text)                     # fills the type cache: the next parse takes the fast paths
    fast = _dump(parse_module(text))
    with monkeypatch.context() as m:
        for pattern in ("_TYPE_TEXT", "_LOC_ALIAS_USE", "_FILE_LOC", "_NAMED_ALIAS_LOC", "_SIMPLE_BODY",
                        "_CONSTANT_BODY"):
            m.setattr(T, pattern, _NEVER)
        general = _dump(parse_module(text))
    assert fast == general
    assert len(fast) > 3


def test_simple_body_is_taken(monkeypatch):
    """The common one-line forms go through simple_body (else the fast path silently never runs)."""
    import spyre_triton.compiler.ttir as T
    text = compile_case("vadd", "ttir")[0]
    parse_module(text)
    taken = []
    real = T._Parser.simple_body

    def spy(self):
        c = real(self)
        taken.append(c is not None)
        return c
    monkeypatch.setattr(T._Parser, "simple_body", spy)
    parse_module(text)
    assert sum(taken) >= len(taken) // 2, taken


def _fixture_path(name, stage):
    return os.path.join(FIXTURES, f"{name}.{stage}")


@pytest.mark.parametrize("name, stage", FIXTURE_CASES)
def test_fixture_files(name, stage):
    path = _fixture_path(name, stage)
    if not os.path.exists(path):
        pytest.skip(f"fixture {os.path.relpath(path, HERE)} is absent: python tests/compiler/test_ttir_parser.py --write-fixtures makes it")
    with open(path) as f:
        module = parse_module(f.read())
    for fn in module.functions.values():
        _check_scoping(fn.body, ())
    assert module.kernel.name == CASES[name][0].fn.__name__
    assert sum(1 for _ in walk(module)) > 10


def _write_fixtures():
    os.makedirs(FIXTURES, exist_ok=True)
    for name, stage in FIXTURE_CASES:
        with open(_fixture_path(name, stage), "w") as f:
            f.write(compile_case(name, stage)[0])


if __name__ == "__main__":
    if "--write-fixtures" in sys.argv:
        _write_fixtures()
