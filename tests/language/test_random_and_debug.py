"""tl.rand/randn/randint/randint4x/rand4x/randn4x/philox against a numpy Philox reference, and the debug
features: tl.device_assert (and `assert` in a kernel, its mask, debug off, sanitize_overflow),
tl.static_assert, tl.device_print of every dtype.

The random streams must be Triton's exactly: the reference below is Philox-4x32-10 written from
triton/language/random.py (keys and round constants, the seed split into two 32-bit key words after a
cast to uint64, the offset split into counters c0 = low 32 bits, c1 = high 32 bits of 64-bit offsets,
c2 = c3 = 0). Integers compare bit for bit, tl.rand too (an int -> f32 conversion and one multiply);
tl.randn goes through log, sqrt, cos and sin, compared within a few f32 ulps of a reference that
rounds each step to f32.

The print checks are deliberately loose on the format (tests/language/test_device_print.py owns it): one line
per element, each ending in its value.
"""
import inspect
import math
import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from spyre_triton import _runtime as rt

from conftest import DEVICE

# -- the reference: Philox as triton/language/random.py defines it ---------------------------------
KEY_A32, KEY_B32 = 0x9E3779B9, 0xBB67AE85
ROUND_A32, ROUND_B32 = 0xD2511F53, 0xCD9E8D57
KEY_A64, KEY_B64 = 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B
ROUND_A64, ROUND_B64 = 0xD2E7470EE14C6C93, 0xCA5A826395121157
M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def _umulhi32(a, b):
    return ((a.astype(np.uint64) * np.uint64(b)) >> np.uint64(32)).astype(np.uint32)


def philox32(seed, c0, c1, c2, c3, n_rounds=10):
    """Philox-4x32 on numpy uint32 counters; seed any Python int (cast to uint64 as Triton does)."""
    seed &= M64
    k0, k1 = np.uint32(seed & M32), np.uint32(seed >> 32)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint32) for c in (c0, c1, c2, c3))
    with np.errstate(over="ignore"):
        for _ in range(n_rounds):
            _c0, _c2 = c0, c2
            c0 = _umulhi32(_c2, ROUND_B32) ^ c1 ^ k0
            c2 = _umulhi32(_c0, ROUND_A32) ^ c3 ^ k1
            c1 = (_c2.astype(np.uint64) * np.uint64(ROUND_B32)).astype(np.uint32)
            c3 = (_c0.astype(np.uint64) * np.uint64(ROUND_A32)).astype(np.uint32)
            k0 = np.uint32((int(k0) + KEY_A32) & M32)
            k1 = np.uint32((int(k1) + KEY_B32) & M32)
    return c0, c1, c2, c3


def philox64(seed, c0, c1, c2, c3, n_rounds=10):
    """Philox-4x64 on Python ints (Triton's path for 64-bit counters: key = (seed, 0))."""
    out = []
    for v in zip(c0, c1, c2, c3):
        a, b, c, d = (x & M64 for x in v)
        k0, k1 = seed & M64, 0
        for _ in range(n_rounds):
            a, b, c, d = (((ROUND_B64 * c) >> 64) ^ b ^ k0, (ROUND_B64 * c) & M64,
                          ((ROUND_A64 * a) >> 64) ^ d ^ k1, (ROUND_A64 * a) & M64)
            k0, k1 = (k0 + KEY_A64) & M64, (k1 + KEY_B64) & M64
        out.append((a, b, c, d))
    return [list(col) for col in zip(*out)]


def test_reference_matches_random123_known_answers():
    """The reference is the standard Philox (Random123's kat_vectors for philox4x32_10/philox4x64_10,
    key = (seed low word, seed high word) for 4x32 and (seed, 0) for 4x64)."""
    one = [np.array([v], np.uint32) for v in (0, 0, 0, 0)]
    assert [int(v[0]) for v in philox32(0, *one)] == [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    ones = [np.array([M32], np.uint32)] * 4
    assert [int(v[0]) for v in philox32(M64, *ones)] == [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
    pi = [np.array([v], np.uint32) for v in (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344)]
    assert [int(v[0]) for v in philox32(0xa4093822 | 0x299f31d0 << 32, *pi)] == [0xd16cfe09, 0x94fdcceb, 0x5001e420,
                                                                                 0x24126ea1]
    assert [v[0] for v in philox64(0, [0], [0], [0], [0])] == [0x16554d9eca36314c, 0xdb20fe9d672d0fdc,
                                                               0xd7e772cee186176b, 0x7e68b68aec7ba23b]


def counters(offsets, dtype):
    """randint4x's counters for integer offsets of a torch dtype: (lo, hi, 0, 0)."""
    o = [int(v) for v in offsets]
    lo = np.array([v & M32 for v in o], dtype=np.uint32)
    wide = torch.iinfo(dtype).bits > 32
    hi = np.array([((v & M64) >> 32) if wide else 0 for v in o], dtype=np.uint32)
    z = np.zeros_like(lo)
    return lo, hi, z, z


def to_uniform(x):
    """uint_to_uniform_float for uint32: to int32, negatives folded to -x - 1, times 4.6566127342e-10."""
    i = x.view(np.int32).astype(np.int64)
    i = np.where(i < 0, -i - 1, i).astype(np.int32)
    return i.astype(np.float32) * np.float32(4.6566127342e-10)


def _f32(v):
    return np.asarray(v, dtype=np.float64).astype(np.float32)


def box_muller(u1, u2):
    """pair_uniform_to_normal, each step rounded to f32 (log, sqrt, cos, sin correctly rounded)."""
    u1 = np.maximum(np.float32(1e-7), u1)
    th = np.float32(6.283185307179586) * u2
    r = _f32(np.sqrt(_f32(np.float32(-2.0) * _f32(np.log(u1.astype(np.float64)))).astype(np.float64)))
    return r * _f32(np.cos(th.astype(np.float64))), r * _f32(np.sin(th.astype(np.float64)))


def dev(t):
    return t.to(DEVICE)


def u32(t):
    return t.cpu().view(torch.int32).numpy().view(np.uint32)


def offsets_tensor(values, dtype):
    st = {32: torch.int32, 64: torch.int64}[torch.iinfo(dtype).bits]
    w = torch.iinfo(dtype).bits
    wrapped = [(v & ((1 << w) - 1)) - (1 << w) if (v & ((1 << w) - 1)) >= 1 << (w - 1) else v & ((1 << w) - 1)
               for v in values]
    return torch.tensor(wrapped, dtype=st).view(dtype)


# -- kernels ----------------------------------------------------------------------------------------
@triton.jit
def randint_kernel(seed, off_ptr, out_ptr, n, N_ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    o = tl.load(off_ptr + offs, mask=m, other=0)
    r0, r1, r2, r3 = tl.randint4x(seed, o, N_ROUNDS)
    tl.store(out_ptr + offs, r0, mask=m)
    tl.store(out_ptr + n + offs, r1, mask=m)
    tl.store(out_ptr + 2 * n + offs, r2, mask=m)
    tl.store(out_ptr + 3 * n + offs, r3, mask=m)
    tl.store(out_ptr + 4 * n + offs, tl.randint(seed, o, N_ROUNDS), mask=m)


@triton.jit
def rand_kernel(seed, off_ptr, out_ptr, n, N_ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    o = tl.load(off_ptr + offs, mask=m, other=0)
    tl.store(out_ptr + offs, tl.rand(seed, o, N_ROUNDS), mask=m)
    u0, u1, u2, u3 = tl.rand4x(seed, o, N_ROUNDS)
    tl.store(out_ptr + n + offs, u0, mask=m)
    tl.store(out_ptr + 2 * n + offs, u1, mask=m)
    tl.store(out_ptr + 3 * n + offs, u2, mask=m)
    tl.store(out_ptr + 4 * n + offs, u3, mask=m)
    tl.store(out_ptr + 5 * n + offs, tl.randn(seed, o, N_ROUNDS), mask=m)
    g0, g1, g2, g3 = tl.randn4x(seed, o, N_ROUNDS)
    tl.store(out_ptr + 6 * n + offs, g0, mask=m)
    tl.store(out_ptr + 7 * n + offs, g1, mask=m)
    tl.store(out_ptr + 8 * n + offs, g2, mask=m)
    tl.store(out_ptr + 9 * n + offs, g3, mask=m)


@triton.jit
def dropout_style_kernel(seed, base, out_ptr, BLOCK: tl.constexpr):
    # the usual pattern: offsets computed from the program id, not loaded
    offs = base + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), tl.randint(seed, offs))


@triton.jit
def inductor_style_kernel(seed_ptr, seed_idx, out_ptr, xnumel, XBLOCK: tl.constexpr):
    # Inductor's generated pattern: the seed loaded from an int64 tensor, offsets cast to uint32
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    seed = tl.load(seed_ptr + seed_idx)
    r = tl.rand(seed, xindex.to(tl.uint32))
    tl.store(out_ptr + xindex, r, xmask)
    tl.store(out_ptr + xnumel + xindex, tl.randn(seed, xindex.to(tl.uint32)), xmask)


@triton.jit
def scalar_randint_kernel(seed, out_ptr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.randint(seed, i * 1000 + 7))  # a scalar offset: scalar Philox


@triton.jit
def philox64_kernel(seed, c_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    c0 = tl.load(c_ptr + r)
    c1 = tl.load(c_ptr + N + r)
    c2 = tl.load(c_ptr + 2 * N + r)
    c3 = tl.load(c_ptr + 3 * N + r)
    a, b, c, d = tl.philox(seed, c0, c1, c2, c3)
    tl.store(out_ptr + r, a)
    tl.store(out_ptr + N + r, b)
    tl.store(out_ptr + 2 * N + r, c)
    tl.store(out_ptr + 3 * N + r, d)


# -- the random streams --------------------------------------------------------------------------------
SEEDS = [0, 1, 42, 2 ** 31 - 1, -1, -123456789, 2 ** 40 + 7, 2 ** 63 + 5]  # i32 (1 specialised), i64, u64
OFFSET_CASES = [
    (torch.int32, 0), (torch.int32, 2 ** 31 - 100),   # across INT32_MAX (wrapping to negative offsets)
    (torch.int32, -300),                             # negative offsets: their bits
    (torch.uint32, 2 ** 32 - 150),                   # across UINT32_MAX (wrapping to 0)
    (torch.int64, 2 ** 32 - 100),                    # crossing into the high counter word
    (torch.int64, -(2 ** 40) - 17),                  # a negative 64-bit offset: high word all ones
    (torch.uint64, 2 ** 63 + 2 ** 33 + 11),
]


def _offsets(dtype, base, n=200):
    return [base + 3 * i for i in range(n)]


RANDINT_CASES = ([(s, dt, base, 10) for s in SEEDS[:4] for dt, base in OFFSET_CASES[:2]]
                 + [(s, dt, base, 10) for s in (-1, -123456789, 2 ** 40 + 7, 2 ** 63 + 5) for dt, base in OFFSET_CASES]
                 + [(42, dt, base, r) for dt, base in (OFFSET_CASES[0], OFFSET_CASES[4]) for r in (0, 1, 3, 7)])


@pytest.mark.parametrize("seed,dtype,base,n_rounds", RANDINT_CASES,
                         ids=[f"seed{s}-{str(d)[6:]}@{b}-r{r}" for s, d, b, r in RANDINT_CASES])
def test_randint4x_and_randint_match_philox(seed, dtype, base, n_rounds):
    offs = _offsets(dtype, base)
    n = len(offs)
    out = torch.empty(5 * n, dtype=torch.uint32, device=DEVICE)
    randint_kernel[(triton.cdiv(n, 128),)](seed, dev(offsets_tensor(offs, dtype)), out, n, N_ROUNDS=n_rounds,
                                           BLOCK=128)
    got = u32(out).reshape(5, n)
    want = philox32(seed, *counters(offs, dtype), n_rounds=n_rounds)
    for k in range(4):
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"randint4x output {k}")
    np.testing.assert_array_equal(got[4], want[0], err_msg="randint")


RAND_CASES = [(0, torch.int32, 0), (42, torch.int32, 1000), (-7, torch.uint32, 2 ** 32 - 150),
              (2 ** 40 + 7, torch.int64, 2 ** 35), (12345, torch.int64, -(2 ** 33))]


@pytest.mark.parametrize("seed,dtype,base", RAND_CASES, ids=[f"seed{s}-{str(d)[6:]}@{b}" for s, d, b in RAND_CASES])
@pytest.mark.parametrize("n_rounds", [10, 6])
def test_rand_rand4x_randn_randn4x(seed, dtype, base, n_rounds):
    offs = _offsets(dtype, base)
    n = len(offs)
    out = torch.empty(10 * n, dtype=torch.float32, device=DEVICE)
    rand_kernel[(triton.cdiv(n, 128),)](seed, dev(offsets_tensor(offs, dtype)), out, n, N_ROUNDS=n_rounds, BLOCK=128)
    got = out.cpu().numpy().reshape(10, n)
    i0, i1, i2, i3 = philox32(seed, *counters(offs, dtype), n_rounds=n_rounds)
    u = [to_uniform(i) for i in (i0, i1, i2, i3)]
    # uniform floats: bit for bit
    np.testing.assert_array_equal(got[0].view(np.uint32), u[0].view(np.uint32), err_msg="rand")
    for k in range(4):
        np.testing.assert_array_equal(got[1 + k].view(np.uint32), u[k].view(np.uint32), err_msg=f"rand4x {k}")
    assert ((got[:5] >= 0) & (got[:5] < 1)).all()
    n1, n2 = box_muller(u[0], u[1])
    n3, n4 = box_muller(u[2], u[3])
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[5], n1, **tol, err_msg="randn")
    for k, want in enumerate((n1, n2, n3, n4)):
        np.testing.assert_allclose(got[6 + k], want, **tol, err_msg=f"randn4x {k}")


@pytest.mark.parametrize("seed,base", [(3, 0), (99, 2 ** 31 - 256), (2 ** 35, 5)])
def test_randint_with_computed_offsets(seed, base):
    """Offsets built from the program id (base + pid * BLOCK + arange), as dropout kernels do."""
    B, P = 64, 5
    out = torch.empty(B * P, dtype=torch.uint32, device=DEVICE)
    dropout_style_kernel[(P,)](seed, base, out, BLOCK=B)
    offs = [(base + i) & M32 for i in range(B * P)]  # int32 arithmetic (base < 2**31)
    want = philox32(seed, np.array(offs, dtype=np.uint32), np.zeros(B * P, np.uint32), np.zeros(B * P, np.uint32),
                    np.zeros(B * P, np.uint32))[0]
    np.testing.assert_array_equal(u32(out), want)


@pytest.mark.parametrize("seed", [7, -3, 2 ** 50 + 1])
def test_rand_with_a_seed_loaded_from_memory(seed):
    seeds = torch.tensor([11, seed, 13], dtype=torch.int64)
    n = 300
    out = torch.empty(2 * n, device=DEVICE)
    inductor_style_kernel[(triton.cdiv(n, 128),)](dev(seeds), 1, out, n, XBLOCK=128)
    z = np.zeros(n, np.uint32)
    i0, i1, _, _ = philox32(seed, np.arange(n, dtype=np.uint32), z, z, z)
    got = out.cpu().numpy()
    np.testing.assert_array_equal(got[:n].view(np.uint32), to_uniform(i0).view(np.uint32))
    np.testing.assert_allclose(got[n:], box_muller(to_uniform(i0), to_uniform(i1))[0], rtol=1e-5, atol=1e-6)


def test_randint_of_a_scalar_offset():
    P, seed = 40, 2024
    out = torch.empty(P, dtype=torch.uint32, device=DEVICE)
    scalar_randint_kernel[(P,)](seed, out)
    z = np.zeros(P, np.uint32)
    want = philox32(seed, np.array([i * 1000 + 7 for i in range(P)], dtype=np.uint32), z, z, z)[0]
    np.testing.assert_array_equal(u32(out), want)


@pytest.mark.parametrize("seed", [0, 77, 2 ** 62 + 3])
def test_philox_with_64_bit_counters(seed):
    """tl.philox on uint64 counters runs Philox-4x64 (key = (seed, 0))."""
    N = 32
    g = np.random.default_rng(seed % 1000)
    cs = [[int(v) for v in g.integers(0, 1 << 63, N, dtype=np.int64)] for _ in range(4)]
    cs[0][0], cs[1][0], cs[2][0], cs[3][0] = M64, M64, 0, 1 << 63
    c = torch.tensor([[v - (1 << 64) if v >= 1 << 63 else v for v in col] for col in cs], dtype=torch.int64)
    out = torch.empty(4 * N, dtype=torch.uint64, device=DEVICE)
    philox64_kernel[(1,)](seed, dev(c.view(torch.uint64)), out, N=N)
    got = [[v & M64 for v in row] for row in out.cpu().view(torch.int64).view(4, N).tolist()]
    assert got == philox64(seed, *cs)


# -- tl.device_assert -------------------------------------------------------------------------------
@triton.jit(debug=True)
def assert_tensor_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x < 100, "x must stay below 100")
    tl.store(out_ptr + offs, x + 1, mask=offs < n)


@triton.jit(debug=True)
def assert_scalar_kernel(x_ptr, out_ptr, n):
    assert n < 1000, "n is too large"  # a Python assert in a kernel is a device assert
    tl.device_assert(tl.load(x_ptr) != 13, "unlucky first element")
    tl.store(out_ptr, tl.load(x_ptr) * 2)


@triton.jit(debug=True)
def assert_masked_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1000)  # the masked-off lanes fail the condition
    tl.device_assert(x < 100, "masked assert", mask=offs < n)
    tl.store(out_ptr + offs, x, mask=offs < n)


@triton.jit
def assert_off_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x < 100, "never checked without debug")
    tl.store(out_ptr + offs, x + 1, mask=offs < n)


@triton.jit(debug=True)
def overflow_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def _line_of(fn, text):
    """The file line number of the first line of fn's source containing text."""
    lines, start = inspect.getsourcelines(fn.fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _assert_names(e, message, fn, text):
    msg = str(e)
    assert message in msg, msg
    assert "test_random_and_debug.py" in msg, msg
    assert str(_line_of(fn, text)) in msg, msg
    assert text in msg, msg


def test_device_assert_names_message_and_line_and_the_device_keeps_working():
    x = torch.arange(300, dtype=torch.int32)
    x[137] = 150
    out = torch.zeros(300, dtype=torch.int32, device=DEVICE)
    with pytest.raises(rt.DeviceAssertionError) as e:
        assert_tensor_kernel[(3,)](dev(x), out, 300, BLOCK=128)
    _assert_names(e.value, "x must stay below 100", assert_tensor_kernel, "tl.device_assert(x < 100")
    # the same kernel and another one run normally afterwards
    good = torch.arange(300, dtype=torch.int32) % 100
    assert_tensor_kernel[(3,)](dev(good), out, 300, BLOCK=128)
    assert torch.equal(out.cpu(), good + 1)
    r = torch.empty(5 * 16, dtype=torch.uint32, device=DEVICE)
    randint_kernel[(1,)](5, dev(torch.arange(16, dtype=torch.int32)), r, 16, N_ROUNDS=10, BLOCK=128)
    np.testing.assert_array_equal(u32(r)[:16], philox32(5, *counters(range(16), torch.int32))[0])


@pytest.mark.parametrize("case", ["python_assert", "scalar_device_assert"])
def test_scalar_asserts(case):
    x = torch.tensor([13 if case == "scalar_device_assert" else 4], dtype=torch.int32)
    n = 5000 if case == "python_assert" else 5
    out = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    with pytest.raises(rt.DeviceAssertionError) as e:
        assert_scalar_kernel[(1,)](dev(x), out, n)
    if case == "python_assert":
        _assert_names(e.value, "n is too large", assert_scalar_kernel, "assert n < 1000")
    else:
        _assert_names(e.value, "unlucky first element", assert_scalar_kernel, "tl.device_assert(tl.load(x_ptr) != 13")
    assert_scalar_kernel[(1,)](dev(torch.tensor([4], dtype=torch.int32)), out, 5)
    assert out.item() == 8


def test_device_assert_mask_skips_masked_off_lanes():
    x = torch.arange(20, dtype=torch.int32)
    out = torch.zeros(20, dtype=torch.int32, device=DEVICE)
    assert_masked_kernel[(1,)](dev(x), out, 20, BLOCK=32)
    assert torch.equal(out.cpu(), x)
    x[19] = 100  # an active lane failing
    with pytest.raises(rt.DeviceAssertionError, match="masked assert"):
        assert_masked_kernel[(1,)](dev(x), out, 20, BLOCK=32)


def test_device_assert_is_compiled_out_without_debug():
    """Triton evaluates device asserts only with debug on (TRITON_DEBUG=1 or @triton.jit(debug=True))."""
    x = torch.arange(100, dtype=torch.int32) * 3
    out = torch.zeros(100, dtype=torch.int32, device=DEVICE)
    assert_off_kernel[(1,)](dev(x), out, 100, BLOCK=128)
    assert torch.equal(out.cpu(), x + 1)


def test_sanitize_overflow_asserts_on_int32_overflow():
    """debug plus sanitize_overflow=True: Triton checks integer add overflow with a device assert."""
    x = torch.full((16,), 2 ** 31 - 10, dtype=torch.int32)
    y = torch.arange(16, dtype=torch.int32)
    out = torch.zeros(16, dtype=torch.int32, device=DEVICE)
    with pytest.raises(rt.DeviceAssertionError, match="int32 overflow detected for operation add"):
        overflow_kernel[(1,)](dev(x), dev(y), out, BLOCK=16, sanitize_overflow=True)
    overflow_kernel[(1,)](dev(x), dev(y % 10), out, BLOCK=16, sanitize_overflow=True)
    assert torch.equal(out.cpu(), x + y % 10)
    # without sanitize_overflow the same add wraps silently
    overflow_kernel[(1,)](dev(x), dev(y), out, BLOCK=16)
    assert torch.equal(out.cpu(), (x.long() + y.long() + 2 ** 31).remainder(2 ** 32).sub(2 ** 31).int())


# -- tl.static_assert ---------------------------------------------------------------------------------
@triton.jit
def static_assert_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 16, "BLOCK must be at least 16")
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.static_assert(x.dtype == tl.float32, "x must be float32")
    tl.static_assert(x.shape[0] == BLOCK)
    tl.store(out_ptr + offs, x * 2)


@pytest.mark.parametrize("dtype,block,message", [
    (torch.int32, 16, "x must be float32"),
    (torch.float16, 32, "x must be float32"),
    (torch.float32, 8, "BLOCK must be at least 16"),
])
def test_static_assert_failure_is_a_compile_error(dtype, block, message):
    x = torch.ones(64, dtype=dtype, device=DEVICE)
    out = torch.full((64,), 5, dtype=dtype, device=DEVICE)
    with pytest.raises(triton.CompilationError, match=message):
        static_assert_kernel[(1,)](x, out, BLOCK=block)
    assert torch.equal(out.cpu(), torch.full((64,), 5, dtype=dtype))  # nothing ran
    good = torch.arange(64, dtype=torch.float32, device=DEVICE)
    res = torch.zeros(64, device=DEVICE)
    static_assert_kernel[(1,)](good, res, BLOCK=64)
    assert torch.equal(res.cpu(), torch.arange(64, dtype=torch.float32) * 2)


# -- tl.device_print ------------------------------------------------------------------------------------
@triton.jit
def print_kernel(x_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.program_id(0) * N + tl.arange(0, N))
    tl.device_print("val", x)


def _value(tok):
    if tok in ("True", "true"):
        return 1
    if tok in ("False", "false"):
        return 0
    return int(tok) if re.fullmatch(r"[-+]?\d+", tok) else float(tok)


PRINT_CASES = [
    ("int8", torch.tensor([-128, -1, 0, 127], dtype=torch.int8)),
    ("int16", torch.tensor([-32768, 5, -7, 32767], dtype=torch.int16)),
    ("uint32", torch.tensor([0, 2 ** 31, 2 ** 32 - 1, 7], dtype=torch.int64).to(torch.uint32)),
    ("int64", torch.tensor([-(2 ** 63), 2 ** 40, -5, 2 ** 63 - 1], dtype=torch.int64)),
    ("uint64", torch.tensor([-1, 2 ** 62, 0, -(2 ** 63)], dtype=torch.int64).view(torch.uint64)),
    ("float16", torch.tensor([1.5, -2.25, 0.125, 1024.0], dtype=torch.float16)),
    ("bfloat16", torch.tensor([1.5, -2.25, 0.125, 65536.0], dtype=torch.bfloat16)),
    ("float64", torch.tensor([1.5, -2.25, 0.125, 1e10], dtype=torch.float64)),
    ("bool", torch.tensor([True, False, True, True])),
]


def _exact(t):
    if t.dtype == torch.uint64:
        return [v & M64 for v in t.view(torch.int64).tolist()]
    if t.dtype == torch.uint32:
        return [v & M32 for v in t.view(torch.int32).tolist()]
    if t.dtype == torch.bool:
        return [int(v) for v in t.tolist()]
    return t.double().tolist() if t.dtype.is_floating_point else t.tolist()


@pytest.mark.parametrize("name,x", PRINT_CASES, ids=[c[0] for c in PRINT_CASES])
def test_device_print_values_of_every_dtype_reach_stdout(name, x, capfd):
    capfd.readouterr()
    P = 2
    print_kernel[(P,)](dev(torch.cat([x, x])), N=4)
    lines = [line for line in capfd.readouterr().out.splitlines() if "val" in line]
    assert len(lines) == 4 * P, lines  # one line per element per program
    got = sorted(_value(line.split()[-1]) for line in lines)
    want = sorted(_exact(x) * P)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w if isinstance(w, int) else math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-6), (name, got, want)
