"""tl.dot variants on spyre: every input dtype Triton accepts (fp16, bf16, fp32, fp64, int8, the fp8 types
and mixed fp8 pairs), input_precision ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6", allow_tf32),
out_dtype, the `acc` argument, K loops accumulating through `acc`, 3-D batched dots, transposed and
strided operands, masked ragged tiles and chained dots, over non-square shapes from 16 to 128.

References are torch matmuls in float64 of the exactly upcast inputs (int8 in int64, exact). Float
results are compared with PyTorch's own default tolerances for the output dtype
(torch.testing.assert_close) and, for f32/f64 outputs, also against the rigorous bound of a
K-term floating-point dot product, (K + 2) u (|A| |B| + |acc|), u the unit roundoff.

TF32: spyre computes every input precision as "ieee" (backend/compiler.py: `allowed_dot_input_precisions`,
"every precision is computed as ieee (fp32 products and sums), at least as accurate as asked"): tf32,
tf32x3, bf16x3 and bf16x6 must give the ieee result bit for bit, which is within the f32 tolerance
(stricter than the 10-bit-mantissa error a real tf32 unit would make).
"""
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE

F16, BF16, F32, F64, I8 = torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8
FP8E4, FP8E5 = torch.float8_e4m3fn, torch.float8_e5m2
TL_OF = {F16: tl.float16, F32: tl.float32, F64: tl.float64, torch.int32: tl.int32}
UNIT = {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24, F64: 2.0 ** -53}
SHAPES = [(16, 16, 16), (32, 64, 16), (64, 16, 128), (128, 32, 64), (16, 128, 32)]  # M, N, K


def name(dt):
    return str(dt).replace("torch.", "")


def dev(t):
    return t.to(DEVICE)


def operand(dt, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dt == I8:
        return torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)
    x = torch.randn(shape, generator=g)
    if dt in (FP8E4, FP8E5):
        x = x * 4  # spread over the fp8 binades; |x| < 448 stays finite in both
    return x.to(dt)


def reference(a, b, acc=None):
    if a.dtype == I8:
        r = a.long() @ b.long()
        return r if acc is None else r + acc.long()
    r = a.double() @ b.double()
    return r if acc is None else r + acc.double()


def check(got, a, b, acc=None, out_dtype=F32):
    """got (on the device) against the float64/int64 reference."""
    got = got.cpu()
    ref = reference(a, b, acc)
    if a.dtype == I8:
        assert got.dtype == torch.int32
        assert torch.equal(got.long(), ref), (got.long() - ref).abs().max()
        return
    assert got.dtype == out_dtype, got.dtype
    torch.testing.assert_close(got, ref.to(out_dtype))  # PyTorch's default tolerances for out_dtype
    if out_dtype in (F32, F64):
        K = a.shape[-1]
        scale = a.double().abs() @ b.double().abs() + (0 if acc is None else acc.double().abs())
        bound = (K + 2) * UNIT[out_dtype] * scale + 1e-300
        err = (got.double() - ref).abs()
        assert bool((err <= bound).all()), f"error {float((err / bound).max()):.3g} x the rounding bound"


# -- 2-D dot: dtypes, shapes, precisions, out_dtype, acc ----------------------------------------------
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, sam, sak, sbk, sbn, M: tl.constexpr, N: tl.constexpr,
               K: tl.constexpr, PREC: tl.constexpr, OUT: tl.constexpr, ACC: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak)
    b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn)
    if ACC:
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        c = tl.dot(a, b, acc, input_precision=PREC, out_dtype=OUT)
    else:
        c = tl.dot(a, b, input_precision=PREC, out_dtype=OUT)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], c)


def run_dot(a, b, acc=None, prec=None, out_dtype=None):
    """a @ b (+ acc) through dot_kernel; a and b may be strided views."""
    M, K = a.shape
    N = b.shape[1]
    if a.dtype == I8:
        out_t = torch.int32
    else:
        out_t = out_dtype or (F64 if a.dtype == F64 else F32)
    da, db = dev(a.contiguous()), dev(b.contiguous())
    if a.stride(0) < a.stride(1):  # keep the layout: a column-major a stays column-major on the device
        da = dev(a.t().contiguous()).t()
    if b.stride(0) < b.stride(1):
        db = dev(b.t().contiguous()).t()
    out = torch.empty(M, N, dtype=out_t, device=DEVICE)
    c = dev(acc) if acc is not None else out
    dot_kernel[(1,)](da, db, c, out, da.stride(0), da.stride(1), db.stride(0), db.stride(1), M=M, N=N, K=K,
                     PREC=prec, OUT=TL_OF[out_t], ACC=acc is not None)
    return out, out_t


DTYPES = [F16, BF16, F32, F64, I8, FP8E4, FP8E5]
BASIC = [(dt, s) for dt in DTYPES for s in SHAPES]


@pytest.mark.parametrize("dtype,shape", BASIC, ids=[f"{name(d)}-{'x'.join(map(str, s))}" for d, s in BASIC])
def test_dot_dtypes_and_shapes(dtype, shape):
    M, N, K = shape
    a, b = operand(dtype, (M, K), 1), operand(dtype, (K, N), 2)
    out, out_t = run_dot(a, b)
    check(out, a, b, out_dtype=out_t)


SMALL = [(dt, s) for dt in (F16, F32, I8) for s in [(1, 16, 16), (2, 16, 8), (16, 4, 4), (16, 16, 1), (4, 1, 32)]]


@pytest.mark.parametrize("dtype,shape", SMALL, ids=[f"{name(d)}-{'x'.join(map(str, s))}" for d, s in SMALL])
def test_dot_below_16(dtype, shape):
    """Spyre's minimum dot size is 1 x 1 x 1 (backend min_dot_size): single rows, columns and K = 1."""
    M, N, K = shape
    a, b = operand(dtype, (M, K), 25), operand(dtype, (K, N), 26)
    out, out_t = run_dot(a, b)
    check(out, a, b, out_dtype=out_t)


ACC_CASES = [(F16, F32), (F16, F16), (BF16, F32), (F32, F32), (F64, F64), (I8, torch.int32), (FP8E4, F32),
             (FP8E5, F16)]


@pytest.mark.parametrize("dtype,out_dtype", ACC_CASES, ids=[f"{name(d)}-{name(o)}" for d, o in ACC_CASES])
@pytest.mark.parametrize("with_acc", [False, True], ids=["no_acc", "acc"])
def test_out_dtype_and_acc(dtype, out_dtype, with_acc):
    M, N, K = 32, 64, 16
    a, b = operand(dtype, (M, K), 3), operand(dtype, (K, N), 4)
    acc = None
    if with_acc:
        if out_dtype == torch.int32:
            acc = torch.randint(-(1 << 30), 1 << 30, (M, N), generator=torch.Generator().manual_seed(5),
                                dtype=torch.int32)
        else:
            acc = (torch.randn(M, N, generator=torch.Generator().manual_seed(5)) * 10).to(out_dtype)
    out, out_t = run_dot(a, b, acc=acc, out_dtype=None if dtype == I8 else out_dtype)
    check(out, a, b, acc, out_dtype=out_t)


PRECISIONS = ["ieee", "tf32", "tf32x3", "bf16x3", "bf16x6"]


@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[3]], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("prec", PRECISIONS)
def test_fp32_input_precisions(prec, shape):
    M, N, K = shape
    a, b = operand(F32, (M, K), 6), operand(F32, (K, N), 7)
    out, _ = run_dot(a, b, prec=prec)
    check(out, a, b)
    ieee, _ = run_dot(a, b, prec="ieee")
    assert torch.equal(out.cpu(), ieee.cpu()), "documented: every input precision is computed as ieee"


@triton.jit
def allow_tf32_kernel(a_ptr, b_ptr, out_ptr, ALLOW: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    tl.store(out_ptr + r[:, None] * N + r[None, :], tl.dot(a, b, allow_tf32=ALLOW))


@pytest.mark.parametrize("allow", [True, False])
def test_tf32_inputs_keep_their_low_mantissa_bits(allow):
    """Operands whose value lives in the 13 mantissa bits tf32 drops: 1 + 2^-20 (tf32: 1.0). The ieee
    computation spyre documents keeps them; so does the deprecated allow_tf32 flag."""
    N = 16
    a = torch.full((N, N), 1 + 2.0 ** -20)
    b = torch.eye(N) * (1 + 2.0 ** -22) + 2.0 ** -18
    out = torch.empty(N, N, device=DEVICE)
    allow_tf32_kernel[(1,)](dev(a), dev(b), out, ALLOW=allow, N=N)
    check(out, a, b)
    run, _ = run_dot(a, b, prec="tf32")
    assert torch.equal(run.cpu(), out.cpu())


MIXED_FP8 = [pytest.param(FP8E4, FP8E5, id="e4m3-e5m2"), pytest.param(FP8E5, FP8E4, id="e5m2-e4m3"),
             pytest.param(FP8E4, FP8E4, id="e4m3-e4m3"), pytest.param(FP8E5, FP8E5, id="e5m2-e5m2")]


@pytest.mark.parametrize("da,db", MIXED_FP8)
@pytest.mark.parametrize("out_dtype", [F32, F16], ids=name)
def test_mixed_fp8_operands(da, db, out_dtype):
    """Triton permits any pair of fp8 types (semantic.dot); the products are exact in f32."""
    a, b = operand(da, (32, 64), 8), operand(db, (64, 16), 9)
    out = torch.empty(32, 16, dtype=out_dtype, device=DEVICE)
    dot_kernel[(1,)](dev(a), dev(b), out, out, 64, 1, 16, 1, M=32, N=16, K=64, PREC=None, OUT=TL_OF[out_dtype],
                     ACC=False)
    check(out, a, b, out_dtype=out_dtype)


@triton.jit
def fp8_imprecise_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                         IMPRECISE: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, max_num_imprecise_acc=IMPRECISE))


@pytest.mark.parametrize("imprecise", [0, 16, 64])
def test_fp8_max_num_imprecise_acc_is_accepted(imprecise):
    """A Hopper accumulation knob: accepted, and the result is still the f32-accumulated one."""
    a, b = operand(FP8E4, (32, 64), 10), operand(FP8E4, (64, 32), 11)
    out = torch.empty(32, 32, device=DEVICE)
    fp8_imprecise_kernel[(1,)](dev(a), dev(b), out, M=32, N=32, K=64, IMPRECISE=imprecise)
    check(out, a, b)


# -- layouts: strided and transposed operands -----------------------------------------------------------
LAYOUTS = ["a_col_major", "b_col_major", "both_col_major", "a_strided_rows"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [F16, F32, I8], ids=name)
def test_strided_and_transposed_operands(dtype, layout):
    M, N, K = 32, 16, 64
    a = operand(dtype, (M, K), 12)
    b = operand(dtype, (K, N), 13)
    if layout in ("a_col_major", "both_col_major"):
        a = a.t().contiguous().t()
    if layout in ("b_col_major", "both_col_major"):
        b = b.t().contiguous().t()
    if layout == "a_strided_rows":  # every other row of a larger tensor
        big = operand(dtype, (2 * M, K + 8), 14)
        a = big[::2, 3:3 + K]
        da = dev(big)[::2, 3:3 + K]
        out = torch.empty(M, N, dtype=torch.int32 if dtype == I8 else F32, device=DEVICE)
        dot_kernel[(1,)](da, dev(b), out, out, da.stride(0), da.stride(1), N, 1, M=M, N=N, K=K, PREC=None,
                         OUT=tl.float32, ACC=False)
    else:
        out, _ = run_dot(a, b)
    check(out, a, b)


@triton.jit
def trans_dot_kernel(a_ptr, bt_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    at = tl.load(a_ptr + rk[:, None] * M + rm[None, :])   # a stored K x M
    bt = tl.load(bt_ptr + rn[:, None] * K + rk[None, :])  # b stored N x K
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(tl.trans(at), bt.T))


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=name)
def test_dot_of_tl_trans(dtype):
    M, N, K = 16, 64, 32
    at, bt = operand(dtype, (K, M), 15), operand(dtype, (N, K), 16)
    out = torch.empty(M, N, device=DEVICE)
    trans_dot_kernel[(1,)](dev(at), dev(bt), out, M=M, N=N, K=K)
    check(out, at.t(), bt.t())


# -- K loops, ragged tiles, chained dots ----------------------------------------------------------------
@triton.jit
def k_loop_kernel(a_ptr, b_ptr, out_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  OUT: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=OUT)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=OUT)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


K_LOOP = [(F16, F32, (64, 48, 160)), (BF16, F32, (20, 24, 40)), (F32, F32, (70, 33, 100)), (I8, torch.int32, (48, 64, 96)),
          (FP8E5, F32, (32, 32, 96)), (F16, F16, (40, 32, 64))]


@pytest.mark.parametrize("dtype,out_dtype,shape", K_LOOP,
                         ids=[f"{name(d)}-{name(o)}-{'x'.join(map(str, s))}" for d, o, s in K_LOOP])
def test_k_loop_accumulating_through_acc(dtype, out_dtype, shape):
    """acc = tl.dot(a, b, acc) over K in steps, several programs, ragged edges masked to zero."""
    M, N, K = shape
    a, b = operand(dtype, (M, K), 17), operand(dtype, (K, N), 18)
    out = torch.empty(M, N, dtype=out_dtype, device=DEVICE)
    BM, BN, BK = 32, 16, 32
    k_loop_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](dev(a), dev(b), out, M, N, K, BM=BM, BN=BN, BK=BK,
                                                            OUT=TL_OF[out_dtype])
    if out_dtype == F16:  # the accumulator is rounded to f16 after every step: a looser, summed bound
        got, ref = out.cpu().double(), reference(a, b)
        steps = triton.cdiv(K, BK)
        bound = steps * 2.0 ** -11 * (a.double().abs() @ b.double().abs()) + (K + 2) * 2.0 ** -24 * (
            a.double().abs() @ b.double().abs()) + 1e-6
        assert bool(((got - ref).abs() <= bound).all())
    else:
        check(out, a, b, out_dtype=out_dtype)


@triton.jit
def chained_dot_kernel(q_ptr, k_ptr, v_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, D: tl.constexpr):
    rm, rn, rd = tl.arange(0, M), tl.arange(0, N), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    kt = tl.load(k_ptr + rn[None, :] * D + rd[:, None])  # k^T: D x N
    v = tl.load(v_ptr + rn[:, None] * D + rd[None, :])
    s = tl.dot(q, kt)
    p = (s * 0.125).to(tl.float16)
    tl.store(out_ptr + rm[:, None] * D + rd[None, :], tl.dot(p, v))


def test_chained_dots_through_a_downcast():
    """Attention's pattern: s = q k^T, p = half(s / 8), o = p v."""
    M, N, D = 32, 64, 16
    q, k, v = operand(F16, (M, D), 19), operand(F16, (N, D), 20), operand(F16, (N, D), 21)
    out = torch.empty(M, D, device=DEVICE)
    chained_dot_kernel[(1,)](dev(q), dev(k), dev(v), out, M=M, N=N, D=D)
    s, _ = run_dot(q, k.t())  # the same first dot on spyre (checked on its own), then the same rounding
    check(s, q, k.t())
    p = (s.cpu() * 0.125).to(F16)
    check(out, p, v)


# -- 3-D batched dot ------------------------------------------------------------------------------------
@triton.jit
def batched_dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr, ACC: tl.constexpr, OUT: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rk_col = tl.arange(0, K)[None, None, :]
    rk_row = tl.arange(0, K)[None, :, None]
    a = tl.load(a_ptr + rb * (M * K) + rm * K + rk_col)
    b = tl.load(b_ptr + rb * (K * N) + rk_row * N + rn)
    if ACC:
        c = tl.dot(a, b, tl.load(c_ptr + rb * (M * N) + rm * N + rn), out_dtype=OUT)
    else:
        c = tl.dot(a, b, out_dtype=OUT)
    tl.store(out_ptr + rb * (M * N) + rm * N + rn, c)


BATCHED = [(F16, F32, 2, (16, 32, 64)), (BF16, F32, 4, (32, 16, 16)), (F32, F32, 2, (64, 16, 32)),
           (I8, torch.int32, 4, (16, 64, 32)), (FP8E4, F32, 2, (32, 32, 32)), (F16, F16, 2, (16, 16, 128)),
           (F64, F64, 2, (16, 32, 16))]


@pytest.mark.parametrize("with_acc", [False, True], ids=["no_acc", "acc"])
@pytest.mark.parametrize("dtype,out_dtype,B,shape", BATCHED,
                         ids=[f"{name(d)}-{name(o)}-B{b}-{'x'.join(map(str, s))}" for d, o, b, s in BATCHED])
def test_batched_3d_dot(dtype, out_dtype, B, shape, with_acc):
    M, N, K = shape
    a, b = operand(dtype, (B, M, K), 22), operand(dtype, (B, K, N), 23)
    acc = None
    if with_acc:
        g = torch.Generator().manual_seed(24)
        acc = (torch.randint(-1000, 1000, (B, M, N), generator=g, dtype=torch.int32) if out_dtype == torch.int32
               else torch.randn(B, M, N, generator=g).to(out_dtype))
    out = torch.empty(B, M, N, dtype=out_dtype, device=DEVICE)
    batched_dot_kernel[(1,)](dev(a), dev(b), dev(acc) if acc is not None else out, out, B=B, M=M, N=N, K=K,
                             ACC=with_acc, OUT=TL_OF[out_dtype])
    check(out, a, b, acc, out_dtype=out_dtype)
