"""SPYRE_NUMERICS=dl16: f16 values round through IBM's DLFloat16 where the card converts them.

The runtime's conversion (fp.h `sp_round_dl16`, reached through `_runtime.round_dl16`) against the NumPy
reference `spyre_triton.numerics.round_dl16` and against DLFloat16's definition (isa.DL16: 6 exponent
bits, 9 fraction bits, bias 31, no subnormals, one special value; IBM's conversions round to nearest with
ties away from zero), then each place the simulated card rounds: kernel results and loads, the PE array's
operands and results, host-to-device copies. docs/numerics.md has the rules and their sources.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE

from spyre_triton import _runtime as rt
from spyre_triton import isa, numerics
from spyre_triton.reference_kernels import add_kernel

F16_MAX = 65504.0


def rt_round(x: np.ndarray) -> np.ndarray:
    y = np.ascontiguousarray(x).copy()
    rt.round_dl16(y)
    return y


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit, every NaN counted equal to every NaN."""
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a) & np.isnan(b)
    ua = a.view(np.uint32 if a.dtype == np.float32 else np.uint16)
    ub = b.view(np.uint32 if b.dtype == np.float32 else np.uint16)
    return bool(np.all(nan | (ua == ub)))


# --- the format -----------------------------------------------------------------------------------
def test_format_is_declared_once():
    assert (isa.DL16.ebits, isa.DL16.mbits, isa.DL16.bias, isa.DL16.style) == (6, 9, 31, "dl")
    assert numerics.MODES == ("ieee", "dl16")
    # largest finite: exponent 63 - 31 = 32, fraction 510/512 (511 with exponent 63 is the special value)
    assert numerics.DL16_MAX == 2.0 ** 32 * (1 + 510 / 512) and 8.5e9 < numerics.DL16_MAX < 8.6e9
    # smallest nonzero: exponent field 0 is a normal binade, but its zero fraction is zero
    assert numerics.DL16_MIN == 2.0 ** -31 * (1 + 2.0 ** -9)


def test_runtime_conversion_matches_the_reference_on_every_kind_of_value():
    rng = np.random.default_rng(7)
    bits = np.concatenate([
        rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32),
        # every f32 exponent with edge fractions: the rounding boundaries of each binade
        (np.arange(256, dtype=np.uint32)[:, None] << 23 | np.array(
            [0, 1, 0x1FFF, 0x2000, 0x2001, 0x3FFF, 0x4000, 0x6000, 0x7FDFFF, 0x7FE000, 0x7FFFFF],
            dtype=np.uint32)[None, :]).ravel(),
    ])
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    x = bits.view(np.float32)
    assert same_bits(rt_round(x), numerics.round_dl16(x))


@pytest.mark.parametrize("value, expected", [
    (1e5, 99968.0),                      # above binary16's 65504: DLFloat16 holds it (unit 2**16 / 512 = 128)
    (1e9, 1000341504.0),                  # unit 2**29 / 512 = 2**20
    (8.5e9, 8497659904.0),
    (2.0 ** 32 * (1 + 510 / 512), 2.0 ** 32 * (1 + 510 / 512)),   # the largest finite value
    (1.0 + 2.0 ** -10, 1.0 + 2.0 ** -9),  # a tie rounds away from zero (to even would give 1.0)
    (-(1.0 + 2.0 ** -10), -(1.0 + 2.0 ** -9)),
    (1.0 + 3 * 2.0 ** -10, 1.0 + 2.0 ** -8),
    (1.0 + 2.0 ** -10 - 2.0 ** -20, 1.0),  # just below the tie
    (2.0 ** -30, 2.0 ** -30),             # exponent field 1
    (2.0 ** -31 * (1 + 2.0 ** -9), 2.0 ** -31 * (1 + 2.0 ** -9)),  # the smallest nonzero
    (2.0 ** -31 * (1 + 2.0 ** -10), 2.0 ** -31 * (1 + 2.0 ** -9)),  # rounds up to it
    (2.0 ** -31, 0.0),                    # exponent and fraction zero is zero: no subnormals
    (2.0 ** -33, 0.0),
    (1e-12, 0.0),
    (float(np.finfo(np.float32).smallest_subnormal), 0.0),
])
def test_rounding(value, expected):
    x = np.array([value], dtype=np.float32)
    assert rt_round(x)[0] == np.float32(expected)
    assert numerics.round_dl16(x)[0] == np.float32(expected)


def test_flush_keeps_the_sign():
    y = rt_round(np.array([-1e-12, -0.0, 0.0], dtype=np.float32))
    assert np.all(y == 0) and list(np.signbit(y)) == [True, True, False]


@pytest.mark.parametrize("value", [2.0 ** 32 * (1 + 511 / 512), 1e10, 3e38, np.inf, -np.inf, np.nan, -np.nan])
def test_overflow_infinity_and_nan_become_the_one_special_value(value):
    # the special value reads back as NaN: DLFloat16 cannot tell an overflow from a NaN
    assert np.isnan(rt_round(np.array([value], dtype=np.float32))[0])



# --- DLFloat16's own bits (fp.h sp_f32_to_dl16 / sp_dl16_to_f32) ------------------------------------------
def dl16_by_definition(bits: np.ndarray) -> np.ndarray:
    """The value of each DLFloat16 bit pattern from the format's definition, in float64: sign, exponent e
    (6 bits, bias 31), fraction f (9 bits); (e, f) = (0, 0) is zero, (63, 511) the special value (NaN)."""
    b = bits.astype(np.int64)
    e, f = (b >> isa.DL16.mbits) & 0x3F, b & 0x1FF
    v = np.ldexp(1.0 + f / 512.0, (e - isa.DL16.bias).astype(np.int32))
    v = np.where((e == 0) & (f == 0), 0.0, v)
    v = np.where((e == 63) & (f == 511), np.nan, v)
    return np.where(b & 0x8000, -v, v)


def encode(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape, np.uint16)
    rt.dl16_encode(np.ascontiguousarray(x, np.float32), out)
    return out


def decode(h: np.ndarray) -> np.ndarray:
    out = np.empty(h.shape, np.float32)
    rt.dl16_decode(np.ascontiguousarray(h, np.uint16), out)
    return out


def test_decoding_every_bit_pattern_follows_the_definition():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    got, want = decode(bits).astype(np.float64), dl16_by_definition(bits)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok]) and np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    assert np.count_nonzero(np.isnan(want)) == 2  # the special value, with either sign


def test_encoding_round_trips_every_value_and_rounds_as_the_reference():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    finite = bits[(bits & 0x7FFF) != 0x7FFF]
    assert np.array_equal(encode(decode(finite)), finite)
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        np.array([1e5, -1e5, 70000.0, 8.6e9, 1e10, np.inf, -np.inf, np.nan, 2.0 ** -31,
                                  2.0 ** -31 * (1 + 2.0 ** -10), -1e-12, 0.0, -0.0], np.float32)])
    h = encode(x)
    assert same_bits(decode(h), numerics.round_dl16(x))
    special = (h & 0x7FFF) == 0x7FFF
    assert np.array_equal(special, np.isnan(numerics.round_dl16(x)))
    assert np.array_equal(h >> 15 == 1, np.signbit(x)), "the sign bit is the value's, zeros and NaN included"
    assert decode(encode(np.array([70000.0], np.float32)))[0] == 70016.0  # binary16 would hold inf


def test_codec_rejects_wrong_buffers():
    with pytest.raises(TypeError, match="format 'f'"):
        rt.dl16_encode(np.zeros(4, np.float64), np.zeros(4, np.uint16))
    with pytest.raises(ValueError, match="4 values in, room for 3"):
        rt.dl16_decode(np.zeros(4, np.uint16), np.zeros(3, np.float32))

def test_binary16_values_round_to_nine_fraction_bits():
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16)  # every finite positive binary16 value
    y = rt_round(h)
    assert same_bits(y, numerics.round_dl16(h))
    normal = h >= np.float16(2.0 ** -14)
    m = y[normal].view(np.uint16) & 0x3FF
    assert np.all(m & 1 == 0), "a normal binary16 holding a DLFloat16 value has a zero last fraction bit"
    assert np.count_nonzero(y[normal] != h[normal]) == np.count_nonzero(h[normal].view(np.uint16) & 1)


# --- the mode -------------------------------------------------------------------------------------
def test_mode_context_restores_and_rejects_unknown_names():
    assert numerics.get_mode() == "ieee"
    with numerics.mode("dl16"):
        assert numerics.get_mode() == "dl16" and rt.get_numerics() == 1
    assert numerics.get_mode() == "ieee"
    with pytest.raises(ValueError, match="dl17.*ieee, dl16"):
        numerics.set_mode("dl17")


def test_environment_variable():
    code = "import spyre_triton.numerics as n; print(n.get_mode())"
    env = dict(os.environ, SPYRE_NUMERICS="dl16")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "dl16"
    env["SPYRE_NUMERICS"] = "fp17"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "SPYRE_NUMERICS" in out.stderr and "fp17" in out.stderr


# --- where the card rounds ------------------------------------------------------------------------
@triton.jit
def _to_f16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.float16), mask=m)


@triton.jit
def _f16_exp(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    tl.store(o_ptr + offs, tl.exp(x).to(tl.float16), mask=m)


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b).to(tl.float16))


def f16_of(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy()


def test_kernel_stores_of_f16_round_through_dl16():
    x = torch.randn(4096, dtype=torch.float32) * 3
    x[:4] = torch.tensor([1.0 + 2.0 ** -10, 2.0 ** -20, 1e5, 3e-9])
    xd = x.to(DEVICE)
    outs = {}
    for m in ("ieee", "dl16"):
        y = torch.empty(4096, dtype=torch.float16, device=DEVICE)
        with numerics.mode(m):
            _to_f16[(4,)](xd, y, 4096, BLOCK=1024)
        outs[m] = f16_of(y)
    with np.errstate(over="ignore"):  # 1e5 is inf in binary16
        assert same_bits(outs["ieee"], x.numpy().astype(np.float16)), "IEEE mode is binary16's round to nearest even"
        expect = numerics.round_dl16(x.numpy()).astype(np.float16)
    assert same_bits(outs["dl16"], expect)
    assert outs["ieee"][0] == 1.0 + 2.0 ** -10 and outs["dl16"][0] == 1.0 + 2.0 ** -9
    assert np.count_nonzero(outs["ieee"] != outs["dl16"]) > 1000  # about half of them hold a 10th fraction bit
    # read back as binary16 (f16_of copies to a host float16 tensor): 1e5 is inf there; the next section
    # shows the card holding it
    assert np.isinf(outs["dl16"][2])


# --- DLFloat16's range in device memory -------------------------------------------------------------------
RANGE = torch.tensor([1e5, -70000.0, 8e9, 3e-9, 2.0 ** -28, 1.0, 0.1, 65504.0])  # beyond binary16, and not


def test_f16_device_memory_holds_dl16_bits_and_range():
    with numerics.mode("dl16"):
        d = RANGE.to(DEVICE, torch.float16)
        bits = d.view(torch.int16).cpu().numpy().view(np.uint16)
        values = d.float().cpu()            # converted on the card: f16 -> f32 keeps DLFloat16's range
        host16 = d.cpu()                    # to a host float16 tensor: binary16's range
        item = d[0].item()
    want = numerics.round_dl16(RANGE)
    assert np.array_equal(bits, encode(RANGE.numpy())), "the bits are DLFloat16's"
    assert torch.equal(values, want) and values[0] == 99968.0 and values[2] > 7.9e9 and values[4] == 2.0 ** -28
    assert item == 99968.0
    with np.errstate(over="ignore"):
        assert torch.equal(host16, want.half()) and torch.isinf(host16[0]) and host16[4] == 0


def test_kernel_stores_and_loads_keep_dl16_range():
    x = RANGE.to(DEVICE)
    with numerics.mode("dl16"):
        y = torch.empty(8, dtype=torch.float16, device=DEVICE)
        _to_f16[(1,)](x, y, 8, BLOCK=8)                  # f32 -> f16 stores: DLFloat16 bits
        twice = torch.empty_like(y)
        add_kernel[(1,)](y, y, twice, 8, BLOCK=8)         # f16 loads and stores
        got, got2 = y.float().cpu(), twice.float().cpu()
    want = numerics.round_dl16(RANGE)
    assert torch.equal(got, want)
    torch.testing.assert_close(got2, numerics.round_dl16(want * 2), rtol=0, atol=0, equal_nan=True)
    assert got2[0] == 199936.0 and got2[2].isnan()  # 1.6e10 is past DLFloat16's largest: the special value



@triton.jit
def _f16_conversions(x_ptr, i_ptr, c_ptr, z_ptr, n_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(z_ptr + offs, x.to(tl.float16, fp_downcast_rounding="rtz"))       # f32 -> f16, truncated
    tl.store(n_ptr + offs, tl.load(i_ptr + offs).to(tl.float16))               # i32 -> f16
    tl.store(c_ptr + offs, x.to(tl.float16) * tl.full((BLOCK,), 0.1, tl.float16))  # an f16 constant


def test_truncation_integer_conversion_and_constants_are_dl16():
    x = torch.tensor([1.0 + 2.0 ** -10 + 2.0 ** -12, -(1.0 + 2.0 ** -9 + 2.0 ** -11), 1e10, 1e5])
    i = torch.tensor([100001, -3, 70000, 1], dtype=torch.int32)
    outs = [torch.empty(4, dtype=torch.float16, device=DEVICE) for _ in range(3)]
    with numerics.mode("dl16"):
        _f16_conversions[(1,)](x.to(DEVICE), i.to(DEVICE), *outs, BLOCK=4)
        c, z, n = (o.float().cpu() for o in outs)
    # rtz keeps the 9 fraction bits it has and stops at the largest finite value
    assert z.tolist() == [1.0, -(1.0 + 2.0 ** -9), numerics.DL16_MAX, 99968.0]
    assert n.tolist() == [99968.0, -3.0, 70016.0, 1.0]  # rounded to nearest: 100001 / 128 = 781.3
    # the program's constant is binary16's 0.1; on the card it is DLFloat16's
    tenth = numerics.round_dl16(torch.tensor([0.1]).half().float())
    torch.testing.assert_close(c, numerics.round_dl16(numerics.round_dl16(x) * tenth), rtol=0, atol=0, equal_nan=True)

def test_compiled_graph_keeps_dl16_range_between_kernels():
    """An activation past 65504 in a compiled f16 graph: inf in IEEE mode, held by the card in DLFloat16."""
    torch._dynamo.reset()
    scale_up = torch.compile(lambda a: a * 4.0)            # 1e5 * 4, an f16 output in device memory
    scale_down = torch.compile(lambda y: y.float() / 8.0)
    outs = {}
    for m in ("ieee", "dl16"):
        with numerics.mode(m):
            outs[m] = scale_down(scale_up(RANGE[:2].to(DEVICE, torch.float16))).cpu()
    assert torch.isinf(outs["ieee"]).all()
    assert outs["dl16"].tolist() == [49984.0, -35008.0]  # round(round(1e5) * 4) / 8


def test_mode_switch_converts_f16_data_on_the_card():
    with numerics.mode("dl16"):
        d = RANGE.to(DEVICE, torch.float16)
        view = d[5:]                                   # shares the storage: converted once
    with np.errstate(over="ignore"):
        want16 = numerics.round_dl16(RANGE).half()
    assert torch.equal(d.cpu(), want16), "back in IEEE mode the card holds binary16 (1e5 is inf)"
    assert torch.equal(view.cpu(), want16[5:])
    e = RANGE[5:].to(DEVICE, torch.float16)            # made in IEEE mode
    with numerics.mode("dl16"):
        assert torch.equal(e.float().cpu(), numerics.round_dl16(RANGE[5:].half().float()))


def test_copies_between_f16_tensors_and_cards_keep_the_bits():
    with numerics.mode("dl16"):
        d = RANGE.to(DEVICE, torch.float16)
        same = d.clone()
        other = d.to("spyre:1") if torch.spyre.device_count() > 1 else d.clone()
        f32 = torch.empty(8, device=DEVICE)
        f32.copy_(d)
        strided = d[::2].contiguous()
        assert torch.equal(same.view(torch.int16).cpu(), d.view(torch.int16).cpu())
        assert torch.equal(other.float().cpu(), numerics.round_dl16(RANGE))
        assert torch.equal(f32.cpu(), numerics.round_dl16(RANGE))
        assert torch.equal(strided.float().cpu(), numerics.round_dl16(RANGE)[::2])


def test_fill_and_the_eager_fallback():
    with numerics.mode("dl16"):
        f = torch.full((3,), 1e6, dtype=torch.float16, device=DEVICE)
        assert f.float().cpu().tolist() == [1000448.0] * 3 and f[0].item() == 1000448.0
        f.zero_()
        assert f.float().cpu().tolist() == [0.0] * 3
        # the fallback computes in binary16 on the host: what it does not write keeps DLFloat16's range
        d = RANGE.to(DEVICE, torch.float16)
        d.index_fill_(0, torch.tensor([1], device=DEVICE), 5.0)
        got = d.float().cpu()
        assert got[0] == 99968.0 and got[1] == 5.0 and got[4] == 2.0 ** -28
        # an out= argument is written whole, stale bits of a fresh output included
        x = torch.tensor([1.0, 0.1, 3.0, -2.5]).repeat(2)
        out = torch.empty(8, dtype=torch.float16, device=DEVICE)
        torch.mul(x.to(DEVICE, torch.float16), 2, out=out)
        assert torch.equal(out.float().cpu(), numerics.round_dl16(x) * 2)


def test_vector_and_sfu_results_and_f16_loads_round():
    rng = np.random.default_rng(3)
    a = torch.from_numpy(rng.standard_normal(2048).astype(np.float16))
    b = torch.from_numpy(rng.standard_normal(2048).astype(np.float16))
    ad, bd = a.to(DEVICE), b.to(DEVICE)   # IEEE mode: copies keep every bit
    for m in ("ieee", "dl16"):
        o = torch.empty(2048, dtype=torch.float16, device=DEVICE)
        e = torch.empty(2048, dtype=torch.float16, device=DEVICE)
        with numerics.mode(m):
            add_kernel[(2,)](ad, bd, o, 2048, BLOCK=1024)
            _f16_exp[(2,)](ad, e, 2048, BLOCK=1024)
        if m == "ieee":
            assert same_bits(f16_of(o), (a.float() + b.float()).half().numpy())
            continue
        ra, rb = numerics.round_dl16(a.float()), numerics.round_dl16(b.float())  # the loads round
        assert same_bits(f16_of(o), numerics.round_dl16(ra + rb).half().numpy())
        got = f16_of(e).astype(np.float32)
        assert same_bits(got, numerics.round_dl16(got)), "every SFU result is a DLFloat16 value"
        ref = np.exp(ra.numpy().astype(np.float64))
        assert np.max(np.abs(got - ref) / ref) <= 2.0 ** -10 * 1.01  # within DLFloat16's half unit


def test_pe_array_operands_and_result_round_fp32_accumulation():
    torch.manual_seed(0)
    M = N = K = 32
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    ad, bd = a.to(DEVICE), b.to(DEVICE)
    outs = {}
    for m in ("ieee", "dl16"):
        c = torch.empty(M, N, dtype=torch.float16, device=DEVICE)
        with numerics.mode(m):
            _mm[(1,)](ad, bd, c, M, N, K)
        outs[m] = c.cpu().float()
    ra, rb = numerics.round_dl16(a.float()), numerics.round_dl16(b.float())
    ref = (ra.double() @ rb.double()).float()   # exact products, accumulated wide
    got = outs["dl16"]
    assert torch.equal(numerics.round_dl16(got), got)
    # f32 accumulation of K = 32 products, then one rounding to DLFloat16
    assert torch.allclose(got, numerics.round_dl16(ref), rtol=2.0 ** -9, atol=1e-3)
    ieee_ref = (a.double() @ b.double()).float()
    assert (got - ieee_ref).abs().mean() > 1.5 * (outs["ieee"] - ieee_ref).abs().mean()


def test_host_to_device_copies_round_f16():
    rng = np.random.default_rng(5)
    h = torch.from_numpy(rng.standard_normal(1000).astype(np.float16))
    with numerics.mode("ieee"):
        assert torch.equal(h.to(DEVICE).cpu().view(torch.int16), h.view(torch.int16))
    with numerics.mode("dl16"):
        d = h.to(DEVICE)
        f = torch.from_numpy(rng.standard_normal(1000).astype(np.float32)).to(DEVICE, torch.float16)
    expect = numerics.round_dl16(h.float()).half()
    assert torch.equal(d.cpu().view(torch.int16), expect.view(torch.int16))
    assert torch.equal(numerics.round_dl16(f.cpu().float()), f.cpu().float())


def test_compiled_fp16_model_differs_from_ieee_by_dl16s_precision():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                                torch.nn.Linear(128, 32)).eval()
    x = torch.randn(16, 64)
    with torch.no_grad():
        ref = model(x).double()
    dev = __import__("copy").deepcopy(model).to(DEVICE, torch.float16)
    fwd = torch.compile(dev)
    err = {}
    for m in ("ieee", "dl16"):
        with numerics.mode(m), torch.no_grad():
            y = fwd(x.to(DEVICE, torch.float16)).cpu().double()
        err[m] = float((y - ref).abs().mean() / ref.abs().mean())
    # binary16 keeps 10 fraction bits, DLFloat16 9: its rounding errors are about twice as large
    assert 1.3 * err["ieee"] < err["dl16"] < 2.0 ** -7, err


# --- fp8 dot: the FP16 (DLFloat16) accumulator --------------------------------------------------------
FP8_KBLOCK = 16  # K values per accumulator rounding (runtime/dot.c FP8_DL16_KBLOCK, docs/numerics.md)


@triton.jit
def _mm_fp8_long_k(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k in range(0, K, BK):  # the accumulator passes from one dot to the next, as in a K-looped matmul
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def _fp8_operand(shape, gen):
    """E4M3 values of magnitude 1/4 to 4 with random signs. They are multiples of 2^-5, so every product
    is a multiple of 2^-10 of at most 16 and any sum of up to 2^10 of them is exact in fp32: the fp32
    sums (IEEE mode's accumulator, dl16 mode's in-block sums) have the same bits in any order, and the
    references below can be exact."""
    mag = torch.rand(shape, generator=gen) * 3.75 + 0.25
    sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
    return (mag * sign).to(torch.float8_e4m3fn)


def _fp8_dl16_reference(a: torch.Tensor, b: torch.Tensor):
    """The rule of docs/numerics.md: per block of FP8_KBLOCK k, the block's fp32 sum is added to the
    accumulator in fp32 and the accumulator rounds to DLFloat16. Returns the result and, per output, the
    sum over the roundings of ulp^2 / 12 (the variance a rounding to nearest adds when the discarded
    bits are uniform)."""
    a64, b64 = a.double(), b.double()
    s = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32)
    var = torch.zeros_like(s, dtype=torch.float64)
    for k0 in range(0, a.shape[1], FP8_KBLOCK):
        blk = (a64[:, k0:k0 + FP8_KBLOCK] @ b64[k0:k0 + FP8_KBLOCK]).float()  # exact: see _fp8_operand
        s = numerics.round_dl16(s + blk)
        exp = torch.frexp(s.double())[1].double()
        var += torch.where(s == 0, 0.0, 2.0 ** (exp - 10)) ** 2 / 12  # DLFloat16's ulp at |s|: 2^(e-1-9)
    return s, var


def test_fp8_dot_accumulates_in_dl16_per_k_block():
    M = N = 32
    K, BK = 1024, 64
    gen = torch.Generator().manual_seed(11)
    a, b = _fp8_operand((M, K), gen), _fp8_operand((K, N), gen)
    ad, bd = a.to(DEVICE), b.to(DEVICE)
    outs = {}
    for m in ("ieee", "dl16"):
        c = torch.empty(M, N, dtype=torch.float32, device=DEVICE)
        with numerics.mode(m):
            _mm_fp8_long_k[(1,)](ad, bd, c, M, N, K, BK)
        outs[m] = c.cpu()
    exact = (a.double() @ b.double()).float()
    # IEEE mode is unchanged: fp32 accumulation, exact for these operands
    assert torch.equal(outs["ieee"], exact)
    ref, var = _fp8_dl16_reference(a, b)
    got = outs["dl16"]
    assert torch.equal(got, ref), "dl16 mode rounds the accumulator to DLFloat16 once per 16 k"
    assert torch.equal(numerics.round_dl16(got), got)
    # the difference from fp32 accumulation is the 64 roundings' random walk: its RMS over the 1024
    # outputs is the predicted one (sqrt of the mean variance), within sampling noise
    err = (got.double() - exact.double())
    rms, predicted = float(err.pow(2).mean().sqrt()), float(var.mean().sqrt())
    assert 0.8 < rms / predicted < 1.25, (rms, predicted)
    # and far larger than one rounding of the exact result would give
    one_rounding = float((numerics.round_dl16(exact).double() - exact.double()).pow(2).mean().sqrt())
    assert rms > 3 * one_rounding, (rms, one_rounding)


def test_fp8_dot_short_k_rounds_once_and_f16_outputs_stay_dl16():
    """K within one block: one rounding of the fp32 sum, identical to rounding the exact product."""
    gen = torch.Generator().manual_seed(12)
    a, b = _fp8_operand((16, FP8_KBLOCK), gen), _fp8_operand((FP8_KBLOCK, 16), gen)
    c = torch.empty(16, 16, dtype=torch.float16, device=DEVICE)
    with numerics.mode("dl16"):
        _mm[(1,)](a.to(DEVICE), b.to(DEVICE), c, 16, 16, FP8_KBLOCK)
    expect = numerics.round_dl16((a.double() @ b.double()).float()).half()
    assert torch.equal(c.cpu(), expect)


@triton.jit
def _mm_fp8_bt(a_ptr, bt_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    wt = tl.load(bt_ptr + rk[:, None] + rn[None, :] * K)  # w.T of a weight w [N, K]: x @ w.T
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, wt))


def test_fp8_dot_dl16_with_a_transposed_weight_and_wide_n():
    """The same rule when B arrives transposed, and over more than one chunk of 512 columns."""
    M, N, K = 16, 1024, 64
    gen = torch.Generator().manual_seed(13)
    a, w = _fp8_operand((M, K), gen), _fp8_operand((N, K), gen)
    c = torch.empty(M, N, dtype=torch.float32, device=DEVICE)
    with numerics.mode("dl16"):
        _mm_fp8_bt[(1,)](a.to(DEVICE), w.to(DEVICE), c, M, N, K)
    ref, _ = _fp8_dl16_reference(a, w.t())
    assert torch.equal(c.cpu(), ref)
    assert not torch.equal(ref, (a.double() @ w.t().double()).float()), "the roundings show in this data"


def test_overlapping_and_empty_f16_copies():
    with numerics.mode("dl16"):
        d = RANGE.to(DEVICE, torch.float16)
        d[1:].copy_(d[:-1].clone())
        want = numerics.round_dl16(torch.cat([RANGE[:1], RANGE[:-1]]))
        assert torch.equal(d.float().cpu(), want)
        # a copy within one storage is seen as overlapping, as on the CPU (the bits go through one alias)
        with pytest.raises(RuntimeError, match="single memory location"):
            d[1:].copy_(d[:-1])
        with pytest.raises(RuntimeError, match="must match the size"):
            torch.empty(0, dtype=torch.float16, device=DEVICE).copy_(d)  # 8 elements do not fit in 0


def test_saving_dl16_bits_warns_and_spyre_reads_them_back():
    import io
    import warnings
    with numerics.mode("dl16"):
        d = RANGE.to(DEVICE, torch.float16)
        buf = io.BytesIO()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.save(d, buf)
        assert any("raw bytes of float16 data" in str(w.message) for w in seen), [str(w.message) for w in seen]
        buf.seek(0)
        back = torch.load(buf)                      # onto spyre, in dl16 mode: the same values
        assert torch.equal(back.float().cpu(), numerics.round_dl16(RANGE))
