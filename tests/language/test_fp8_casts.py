"""fp8 casts on spyre: fp8e4nv (torch.float8_e4m3fn) and fp8e5 (torch.float8_e5m2) to and from f16, bf16, f32
and f64, fp8 <-> fp8, fp8 <-> integers (through f32; Triton refuses the direct cast), the rounding modes
(`tl.cast(x, T, fp_downcast_rounding="rtne"/"rtz")`, default rtne), saturation and NaN/inf, for tiles, scalars
and constants. Also the rtz path for f32/f64 -> f16/bf16, which goes through the same tt.fp_to_fp.

Inputs are all 256 byte values of each fp8 format, the midpoints between neighbouring fp8 values and the
source dtype's neighbours of each midpoint (one source ulp either side), the underflow boundary, and random
values. The reference is a table rounding: every finite value of the destination format sorted, the
nearest (ties to the even code) or the one toward zero; it is checked against torch's conversions where
torch rounds once (f32 sources, in range). Triton's semantics for fp8 downcasts are those of
`cvt.rn.satfinite` (Triton's test_typeconvert_downcast_clamping): finite overflow and +-inf become +-max,
NaN stays NaN. (fp8e4b15, fp8e4b8 and fp8e5b16 are tested elsewhere.)

Lowering: tt.fp_to_fp in spyre_triton/compiler/ops.py; runtime: runtime/fp.h (sp_encode).
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE
BLOCK = 512

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
FP8 = [E4, E5]
WIDE = [F16, BF16, F32, F64]
NAME = {E4: "e4nv", E5: "e5", F16: "f16", BF16: "bf16", F32: "f32", F64: "f64"}
TL = {E4: tl.float8e4nv, E5: tl.float8e5}
_UINT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _nbytes(dtype):
    return torch.empty((), dtype=dtype).element_size()


def codes(t):
    """Raw bits of t as unsigned numpy ints."""
    b = t.contiguous().view(_UINT[t.element_size()]).numpy().astype(np.int64)
    return b if t.element_size() == 8 else b & ((1 << (8 * t.element_size())) - 1)


# -- the reference: rounding by table ---------------------------------------------------------------
_TABLES = {}


def _table(dtype):
    """(values, codes) of the non-negative finite values of a 8- or 16-bit float format, ascending."""
    if dtype not in _TABLES:
        nb = _nbytes(dtype)
        allc = np.arange(1 << (8 * nb), dtype=np.int64)
        vals = torch.from_numpy(allc.astype(np.int16 if nb == 2 else np.uint8)).view(dtype).double().numpy()
        keep = np.isfinite(vals) & (allc < (1 << (8 * nb - 1)))
        order = np.argsort(vals[keep], kind="stable")
        _TABLES[dtype] = (vals[keep][order], allc[keep][order])
    return _TABLES[dtype]


def _nan_code(dtype):
    return {E4: 0x7F, E5: 0x7F, F16: 0x7E00, BF16: 0x7FC0}[dtype]


def _inf_code(dtype):
    return {E5: 0x7C, F16: 0x7C00, BF16: 0x7F80}.get(dtype)


def round_ref(x, dtype, mode, saturate):
    """Codes of float64 array x rounded to dtype (fp8, f16 or bf16) with mode "rtne"/"rtz".

    saturate: finite overflow and +-inf give +-max (fp8 satfinite); otherwise IEEE (rtne overflows to inf,
    rtz to max, inf stays inf)."""
    x = np.asarray(x, dtype=np.float64)
    vals, cds = _table(dtype)
    top = len(vals) - 1
    vmax = vals[top]
    sign = np.signbit(x).astype(np.int64) << (8 * _nbytes(dtype) - 1)
    a = np.abs(x)
    i = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, top)
    lo, hi = vals[i], vals[np.minimum(i + 1, top)]
    if mode == "rtz":
        pick = i
    else:
        up = (a - lo > hi - a) | ((a - lo == hi - a) & (cds[i] % 2 == 1))
        pick = np.where(up & (i < top), i + 1, i)
    out = cds[pick]
    over = a > vmax
    if saturate:
        out = np.where(over, cds[top], out)
    else:
        # the value after max would be max + ulp(max); rtne rounds to it (overflow) from the midpoint up
        ulp = vmax - vals[top - 1]
        inf = _inf_code(dtype)
        out = np.where(over, cds[top], out)
        if mode == "rtne":
            out = np.where(a >= vmax + ulp / 2, inf, out)
        out = np.where(np.isinf(a), inf, out)
    out = out | sign
    return np.where(np.isnan(x), _nan_code(dtype), out)


def decode(c, dtype):
    c = np.asarray(c, dtype=np.int64)
    nb = _nbytes(dtype)
    raw = c.astype(np.uint8) if nb == 1 else c.astype(np.uint16).view(np.int16)
    return torch.from_numpy(raw).view(dtype).double().numpy()


def assert_codes(got, want, dtype, x=None):
    """got/want: codes; NaNs compare as NaNs (their payload is not specified), everything else bit for bit."""
    gv, wv = decode(got, dtype), decode(want, dtype)
    nan_ok = np.isnan(gv) == np.isnan(wv)
    same = (got == want) | (np.isnan(gv) & np.isnan(wv))
    bad = np.nonzero(~(same & nan_ok))[0]
    if len(bad):
        j = bad[:8]
        src = "" if x is None else f" from {np.asarray(x)[j].tolist()}"
        raise AssertionError(f"{len(bad)} of {len(got)} differ{src}: got {gv[j].tolist()} "
                             f"({[hex(v) for v in got[j]]}), want {wv[j].tolist()} ({[hex(v) for v in want[j]]})")


# -- inputs ---------------------------------------------------------------------------------------
def all_fp8(fmt):
    return torch.arange(256, dtype=torch.uint8).view(fmt)


def _neighbours(v, dtype):
    """v rounded to dtype, and the next value of dtype above and below it (float64)."""
    t = torch.tensor(v, dtype=torch.float64).to(dtype) if dtype != F64 else torch.tensor(v, dtype=torch.float64)
    ints = t.view(_UINT[t.element_size()])
    out = [t]
    for step in (1, -1):
        out.append((ints + step).view(dtype))
    return torch.cat([o.double() for o in out])


def boundary_values(fmt, src):
    """fp8 values, midpoints and their +-1 source ulp, the underflow edge, random in-range values; both
    signs; every one exact in src and no larger in magnitude than fmt's max."""
    vals, _ = _table(fmt)
    mids = (vals[:-1] + vals[1:]) / 2
    quarter = vals[:-1] + (vals[1:] - vals[:-1]) / 4
    tiny = vals[1]
    under = [tiny / 2, tiny / 4, tiny / 8, tiny * 0.75]
    g = torch.Generator().manual_seed(0)
    lg = torch.empty(400, dtype=torch.float64).uniform_(np.log2(tiny) - 1, np.log2(vals[-1]), generator=g)
    rand = torch.exp2(lg).numpy()
    base = np.concatenate([vals, mids, quarter, under, rand])
    pos = _neighbours(base.tolist(), src).numpy()
    pos = pos[np.isfinite(pos) & (pos <= vals[-1]) & (pos >= 0)]
    pos = np.unique(pos)
    return np.concatenate([pos, -pos])


def to_src(x, src):
    """float64 array -> tensor of src holding exactly those values (they were built exact)."""
    t = torch.from_numpy(np.asarray(x, dtype=np.float64))
    out = t.to(src) if src != F64 else t.clone()
    assert np.array_equal(out.double().numpy(), t.numpy(), equal_nan=True), "test input not exact in source dtype"
    return out


# -- kernels ---------------------------------------------------------------------------------------
@triton.jit
def cast_kernel(x_ptr, y_ptr, n, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if ROUNDING == "default":
        y = x.to(y_ptr.dtype.element_ty)
    else:
        y = tl.cast(x, y_ptr.dtype.element_ty, fp_downcast_rounding=ROUNDING)
    tl.store(y_ptr + offs, y, mask=offs < n)


@triton.jit
def scalar_cast_kernel(x_ptr, y_ptr, ROUNDING: tl.constexpr):
    pid = tl.program_id(0)  # one element per program: the scalar (register) path of the cast
    x = tl.load(x_ptr + pid)
    if ROUNDING == "default":
        y = x.to(y_ptr.dtype.element_ty)
    else:
        y = tl.cast(x, y_ptr.dtype.element_ty, fp_downcast_rounding=ROUNDING)
    tl.store(y_ptr + pid, y)


def run_cast(x, dst, rounding="default", scalar=False):
    xd = x.to(DEVICE)
    y = torch.empty(x.numel(), dtype=dst, device=DEVICE)
    if scalar:
        scalar_cast_kernel[(x.numel(),)](xd, y, ROUNDING=rounding)
    else:
        cast_kernel[(triton.cdiv(x.numel(), BLOCK),)](xd, y, x.numel(), ROUNDING=rounding, BLOCK=BLOCK)
    return y.cpu()


def _id(x):
    return NAME.get(x) if isinstance(x, torch.dtype) else None


# -- the reference itself --------------------------------------------------------------------------
@pytest.mark.parametrize("dst", [E4, E5, F16, BF16], ids=_id)
def test_reference_rounding_matches_torch_where_torch_rounds_once(dst):
    # torch rounds f32 -> fp8/f16/bf16 once, with rtne; it does not saturate fp8 (e4m3fn overflow is NaN,
    # e5m2 overflow is inf), so only in-range values are compared
    fmt = dst if dst in FP8 else E5
    x = boundary_values(fmt, F32)
    if dst in (F16, BF16):
        g = torch.Generator().manual_seed(1)
        x = np.concatenate([x, (torch.randn(4000, generator=g) * 1000).float().double().numpy()])
    want = codes(torch.from_numpy(x).float().to(dst))
    assert_codes(round_ref(x, dst, "rtne", saturate=dst in FP8), want, dst, x)


# -- upcasts: exact --------------------------------------------------------------------------------
@pytest.mark.parametrize("scalar", [False, True], ids=["tile", "scalar"])
@pytest.mark.parametrize("dst", WIDE, ids=_id)
@pytest.mark.parametrize("fmt", FP8, ids=_id)
def test_upcast_all_256_values(fmt, dst, scalar):
    x = all_fp8(fmt)
    got = run_cast(x, dst, scalar=scalar)
    want = x.to(dst)  # exact; NaN stays NaN, e5m2's inf stays inf, -0.0 stays -0.0
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    ok = ~torch.isnan(want)
    assert np.array_equal(codes(got[ok]), codes(want[ok])), (got[ok], want[ok])


# -- downcasts in range: rounding ------------------------------------------------------------------
@pytest.mark.parametrize("rounding", ["default", "rtne", "rtz"])
@pytest.mark.parametrize("src", WIDE, ids=_id)
@pytest.mark.parametrize("fmt", FP8, ids=_id)
def test_downcast_rounding_all_values_and_boundaries(fmt, src, rounding):
    x = boundary_values(fmt, src)
    got = codes(run_cast(to_src(x, src), fmt, rounding))
    want = round_ref(x, fmt, "rtz" if rounding == "rtz" else "rtne", saturate=True)
    assert_codes(got, want, fmt, x)


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("fmt", FP8, ids=_id)
def test_downcast_scalar_path(fmt, rounding):
    x = boundary_values(fmt, F32)[::3]
    got = codes(run_cast(to_src(x, F32), fmt, rounding, scalar=True))
    assert_codes(got, round_ref(x, fmt, rounding, saturate=True), fmt, x)


def test_rtz_and_rtne_differ_where_they_should():
    # 1.0 + 3/4 ulp of e4m3 (ulp 1/8 at 1.0): rtne goes up, rtz stays
    x = torch.tensor([1.09375, -1.09375, 0.1, 300.0], dtype=F32)
    rtne = run_cast(x, E4, "rtne").float().tolist()
    rtz = run_cast(x, E4, "rtz").float().tolist()
    assert rtne == [1.125, -1.125, 0.1015625, 288.0]
    assert rtz == [1.0, -1.0, 0.09375, 288.0]


# -- saturation, inf and NaN -----------------------------------------------------------------------
def special_values(fmt, src, kind):
    vmax = float(torch.finfo(fmt).max)
    smax = float(torch.finfo(src).max)
    if kind == "overflow":  # finite, above fmt's max: just above, the rtne overflow midpoint, far above
        ulp = vmax - _table(fmt)[0][-2]
        v = [vmax + ulp / 4, vmax + ulp / 2, vmax + ulp, vmax * 1.5, vmax * 4, 1e30, smax]
        v = [u for u in _neighbours(v, src).tolist() if vmax < abs(u) < float("inf")]
    elif kind == "inf":
        v = [float("inf")]
    else:
        v = [float("nan")]
    v = np.array(v)
    return np.concatenate([v, -v])


def _special_expect(fmt, rounding, kind, x):
    if kind == "inf" and rounding == "rtz" and fmt == E5:
        # e5m2 has infinities; rounding toward zero keeps inf (Triton on NVIDIA: cvt.rz to f16, which keeps
        # inf, then a truncation of the f16 bits)
        return round_ref(x, fmt, "rtz", saturate=False)
    return round_ref(x, fmt, rounding, saturate=True)


SPECIAL_CASES = []
for _fmt in FP8:
    for _src in WIDE:
        for _r in ["rtne", "rtz"]:
            for _k in ["overflow", "inf", "nan"]:
                SPECIAL_CASES.append(pytest.param(_fmt, _src, _r, _k,
                                                  id=f"{NAME[_fmt]}-{NAME[_src]}-{_r}-{_k}"))


@pytest.mark.parametrize("fmt,src,rounding,kind", SPECIAL_CASES)
def test_downcast_saturation_inf_nan(fmt, src, rounding, kind):
    x = special_values(fmt, src, kind)
    got = codes(run_cast(to_src(x, src), fmt, rounding))
    assert_codes(got, _special_expect(fmt, rounding, kind, x), fmt, x)


# -- fp8 <-> fp8 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", [(E4, E5), (E5, E4)], ids=["e4nv-e5", "e5-e4nv"])
def test_fp8_to_fp8_all_256_values(src, dst):
    # Triton emits tt.fp_to_fp without a rounding mode (same width); the value is rounded to nearest even and
    # saturated like every other downcast to fp8 (e5m2 -> e4m3: 57344 and inf give 448, tiny values give 0)
    x = all_fp8(src)
    got = codes(run_cast(x, dst))
    xv = x.double().numpy()
    assert_codes(got, round_ref(xv, dst, "rtne", saturate=True), dst, xv)


# -- fp8 <-> integers ------------------------------------------------------------------------------
@triton.jit
def direct_int_cast_kernel(x_ptr, y_ptr):
    offs = tl.arange(0, 16)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(y_ptr.dtype.element_ty))


@pytest.mark.parametrize("src,dst", [(E4, torch.int32), (E5, torch.int8), (torch.int32, E4), (torch.int16, E5)],
                         ids=["e4nv-i32", "e5-i8", "i32-e4nv", "i16-e5"])
def test_direct_fp8_int_cast_is_refused_by_triton(src, dst):
    with pytest.raises(triton.CompilationError, match="cannot cast"):
        direct_int_cast_kernel[(1,)](torch.zeros(16, dtype=src, device=DEVICE),
                                     torch.zeros(16, dtype=dst, device=DEVICE))


@triton.jit
def fp8_int_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x.to(tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


@pytest.mark.parametrize("idt", INTS, ids=str)
@pytest.mark.parametrize("fmt", FP8, ids=_id)
def test_fp8_to_int_through_f32(fmt, idt):
    x = all_fp8(fmt)
    v = x.float()
    info = torch.iinfo(idt)
    keep = torch.isfinite(v) & (v >= info.min) & (v < info.max + 1)  # out of range: undefined in Triton
    x = x[keep]
    y = torch.empty(x.numel(), dtype=idt, device=DEVICE)
    fp8_int_kernel[(triton.cdiv(x.numel(), BLOCK),)](x.to(DEVICE), y, x.numel(), BLOCK=BLOCK)
    assert torch.equal(y.cpu(), x.float().to(idt))  # truncation toward zero


@pytest.mark.parametrize("idt", INTS, ids=str)
@pytest.mark.parametrize("fmt", FP8, ids=_id)
def test_int_to_fp8_through_f32(fmt, idt):
    info = torch.iinfo(idt)
    lo, hi = max(info.min, -60000), min(info.max, 60000)  # e5m2 overflow is covered above
    x = torch.unique(torch.cat([torch.arange(max(lo, -300), min(hi, 300) + 1),
                                torch.linspace(lo, hi, 501).round().long(), torch.tensor([lo, hi])])).to(idt)
    y = torch.empty(x.numel(), dtype=fmt, device=DEVICE)
    fp8_int_kernel[(triton.cdiv(x.numel(), BLOCK),)](x.to(DEVICE), y, x.numel(), BLOCK=BLOCK)
    xv = x.double().numpy()  # exact in f32, so one rounding to fp8 (e4m3 saturates at 448)
    assert_codes(codes(y.cpu()), round_ref(xv, fmt, "rtne", saturate=True), fmt, xv)


# -- constants -------------------------------------------------------------------------------------
@triton.jit
def const_cast_kernel(y_ptr, C: tl.constexpr, ROUNDING: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.full((N,), C, tl.float32)
    if ROUNDING == "default":
        y = x.to(y_ptr.dtype.element_ty)
    else:
        y = tl.cast(x, y_ptr.dtype.element_ty, fp_downcast_rounding=ROUNDING)
    tl.store(y_ptr + offs, y)


CONST_CASES = []
for _fmt in FP8:
    for _c in [0.1, -1.09375, 300.0, 1000.0, -1e9, 2.0 ** -12, float("inf"), float("nan")]:
        for _r in ["default", "rtz"]:
            CONST_CASES.append(pytest.param(_fmt, _c, _r, id=f"{NAME[_fmt]}-{_c}-{_r}"))


@pytest.mark.parametrize("fmt,c,rounding", CONST_CASES)
def test_cast_of_a_constant(fmt, c, rounding):
    # a splat constant may be folded at compile time: it must round and saturate like the runtime cast
    y = torch.empty(4, dtype=fmt, device=DEVICE)
    const_cast_kernel[(1,)](y, C=c, ROUNDING=rounding, N=4)
    x = np.full(4, np.float32(c), dtype=np.float64)
    mode = "rtz" if rounding == "rtz" else "rtne"
    kind = "inf" if np.isinf(c) else "x"
    assert_codes(codes(y.cpu()), _special_expect(fmt, mode, kind, x), fmt, x)


# -- f32/f64 -> f16/bf16 with rtz and rtne ---------------------------------------------------------
def half_values(dst, src):
    vals, _ = _table(dst)
    g = torch.Generator().manual_seed(2)
    idx = torch.randint(0, len(vals) - 1, (600,), generator=g).numpy()
    idx = np.concatenate([idx, [0, 1, 2, len(vals) - 2]])  # subnormals and the top
    lo, hi = vals[idx], vals[idx + 1]
    base = np.concatenate([lo, (lo + hi) / 2, lo + (hi - lo) / 4])
    pos = _neighbours(base.tolist(), src).numpy()
    vmax = vals[-1]
    ulp = vmax - vals[-2]
    over = [vmax + ulp / 4, vmax + ulp / 2, vmax + ulp * 0.75, vmax * 2]
    if src == F32 and dst == F16:
        over += [1e30]
    pos = np.concatenate([pos[pos > 0], _neighbours(over, src).numpy(), [np.inf, np.nan]])
    pos = pos[(pos <= float(torch.finfo(src).max)) | ~np.isfinite(pos)]
    return np.concatenate([pos, -pos])


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("src,dst", [(F32, F16), (F32, BF16), (F64, F16), (F64, BF16)],
                         ids=["f32-f16", "f32-bf16", "f64-f16", "f64-bf16"])
def test_rtz_and_rtne_to_f16_bf16(src, dst, rounding):
    x = half_values(dst, src)
    got = codes(run_cast(to_src(x, src), dst, rounding))
    assert_codes(got, round_ref(x, dst, rounding, saturate=False), dst, x)


@pytest.mark.parametrize("src", [F16, BF16], ids=_id)
def test_rounding_mode_on_a_widening_cast_is_refused(src):
    with pytest.raises(triton.CompilationError, match="fp_downcast_rounding should be set only"):
        cast_kernel[(1,)](torch.zeros(4, dtype=src, device=DEVICE), torch.zeros(4, dtype=F32, device=DEVICE), 4,
                          ROUNDING="rtz", BLOCK=4)
