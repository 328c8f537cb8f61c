"""@triton.jit kernels on spyre: the core language set, every dtype, control flow, atomics, errors.

Table-driven; each case compares with PyTorch on the CPU (integers bit for bit).
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

import spyre_triton

from conftest import DEVICE, TESTS_DIR
BLOCK = 128


def on(t):
    return t.to(DEVICE)


# -- elementwise binary ops over every dtype -------------------------------------------------------
@triton.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if OP == "add":
        r = x + y
    elif OP == "sub":
        r = x - y
    elif OP == "mul":
        r = x * y
    elif OP == "div":
        r = x / y
    elif OP == "floordiv":
        r = x // y
    elif OP == "mod":
        r = x % y
    elif OP == "and":
        r = x & y
    elif OP == "or":
        r = x | y
    elif OP == "xor":
        r = x ^ y
    elif OP == "max":
        r = tl.maximum(x, y)
    elif OP == "min":
        r = tl.minimum(x, y)
    elif OP == "lt":
        r = x < y
    elif OP == "eq":
        r = x == y
    else:
        r = tl.where(x > y, x, y)
    tl.store(out_ptr + offs, r, mask=mask)


INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _operands(dtype, n=1000):
    g = torch.Generator().manual_seed(1)
    if dtype.is_floating_point:
        x = torch.randn(n, generator=g).to(dtype)
        y = (torch.rand(n, generator=g) + 0.5).to(dtype)
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(max(info.min, -1000), min(info.max, 1000), (n,), generator=g).to(dtype)
        y = torch.randint(1, min(info.max, 100), (n,), generator=g).to(dtype)
    return x, y


def _reference(op, x, y):
    if op == "div":
        return x / y if x.dtype.is_floating_point else x.double() / y.double()
    return {
        "add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "and": lambda: x & y,
        "or": lambda: x | y, "xor": lambda: x ^ y, "max": lambda: torch.maximum(x, y),
        "min": lambda: torch.minimum(x, y), "lt": lambda: x < y, "eq": lambda: x == y,
        "where": lambda: torch.where(x > y, x, y),
        # Triton's // and % truncate toward zero, like C
        "floordiv": lambda: torch.div(x, y, rounding_mode="trunc"),
        "mod": lambda: torch.fmod(x, y),
    }[op]()


CASES = ([(op, dt) for dt in INT_DTYPES for op in
          ["add", "sub", "mul", "floordiv", "mod", "and", "or", "xor", "max", "min", "lt", "eq", "where"]] +
         [(op, dt) for dt in FLOAT_DTYPES for op in ["add", "sub", "mul", "div", "max", "min", "lt", "eq", "where"]])


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o}-{str(d)[6:]}" for o, d in CASES])
def test_binary(op, dtype):
    x, y = _operands(dtype)
    ref = _reference(op, x, y)
    out_dtype = torch.bool if op in ("lt", "eq") else (torch.float32 if (op == "div" and not dtype.is_floating_point)
                                                        else dtype)
    out = torch.empty(x.numel(), dtype=out_dtype, device=DEVICE)
    binary_kernel[(triton.cdiv(x.numel(), BLOCK),)](on(x), on(y), out, x.numel(), OP=op, BLOCK=BLOCK)
    if dtype.is_floating_point and op in ("add", "sub", "mul", "div"):
        torch.testing.assert_close(out.cpu(), ref.to(out_dtype))
    else:
        torch.testing.assert_close(out.cpu(), ref.to(out_dtype), rtol=0, atol=0)


# -- math, libdevice and casts ----------------------------------------------------------------------
@triton.jit
def unary_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if OP == "exp":
        r = tl.exp(x)
    elif OP == "log":
        r = tl.log(x)
    elif OP == "sqrt":
        r = tl.sqrt(x)
    elif OP == "sqrt_rn":
        r = tl.sqrt_rn(x)
    elif OP == "rsqrt":
        r = tl.rsqrt(x)
    elif OP == "sin":
        r = tl.sin(x)
    elif OP == "cos":
        r = tl.cos(x)
    elif OP == "abs":
        r = tl.abs(x)
    elif OP == "floor":
        r = tl.floor(x)
    elif OP == "ceil":
        r = tl.ceil(x)
    elif OP == "erf":
        r = tl.erf(x)
    elif OP == "sigmoid":
        r = tl.sigmoid(x)
    elif OP == "neg":
        r = -x
    elif OP == "libdevice_tanh":
        r = libdevice.tanh(x)
    elif OP == "libdevice_asin":
        r = libdevice.asin(x)
    elif OP == "libdevice_pow":
        r = libdevice.pow(x, x)
    else:
        r = tl.exp2(x)
    tl.store(out_ptr + offs, r, mask=mask)


UNARY = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "sqrt_rn": torch.sqrt, "rsqrt": torch.rsqrt,
    "sin": torch.sin, "cos": torch.cos, "abs": torch.abs, "floor": torch.floor, "ceil": torch.ceil,
    "erf": torch.erf, "sigmoid": torch.sigmoid, "neg": torch.neg, "libdevice_tanh": torch.tanh,
    "libdevice_asin": torch.asin, "libdevice_pow": lambda x: torch.pow(x, x), "exp2": torch.exp2,
}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unary_math(op, dtype):
    if op == "sqrt_rn" and dtype == torch.float64:
        pytest.skip("tl.sqrt_rn is defined for fp32 only")
    x = torch.rand(777, dtype=dtype) * 0.9 + 0.05
    out = torch.empty_like(x, device=DEVICE)
    unary_kernel[(triton.cdiv(x.numel(), BLOCK),)](on(x), out, x.numel(), OP=op, BLOCK=BLOCK)
    torch.testing.assert_close(out.cpu(), UNARY[op](x))


@triton.jit
def cast_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=mask)


CAST_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
               torch.float64]


@pytest.mark.parametrize("src", CAST_DTYPES, ids=str)
@pytest.mark.parametrize("dst", CAST_DTYPES, ids=str)
def test_cast(src, dst):
    # values every dtype holds: float->int of an out-of-range value is undefined in Triton
    x = (torch.randn(500, generator=torch.Generator().manual_seed(0)) * 40).clamp(-100, 100).to(src)
    out = torch.empty(500, dtype=dst, device=DEVICE)
    cast_kernel[(4,)](on(x), out, 500, BLOCK=BLOCK)
    torch.testing.assert_close(out.cpu(), x.to(dst), rtol=0, atol=0)


# -- reductions -------------------------------------------------------------------------------------
@triton.jit
def reduce_kernel(x_ptr, out_ptr, M, N, stride, OP: tl.constexpr, AXIS: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=0)
    if OP == "sum":
        r = tl.sum(x, axis=AXIS)
    elif OP == "max":
        r = tl.max(tl.where(mask, x, -float("inf")), axis=AXIS)
    elif OP == "min":
        r = tl.min(tl.where(mask, x, float("inf")), axis=AXIS)
    elif OP == "argmax":
        r = tl.argmax(tl.where(mask, x, -float("inf")), axis=AXIS)
    else:
        r = tl.argmin(tl.where(mask, x, float("inf")), axis=AXIS)
    if AXIS == 0:
        tl.store(out_ptr + rn, r, mask=rn < N)
    else:
        tl.store(out_ptr + rm, r, mask=rm < M)


@pytest.mark.parametrize("op", ["sum", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_2d(op, axis):
    torch.manual_seed(0)
    M, N = 27, 50
    x = torch.randint(-20, 20, (M, N)).float()  # ties for argmax/argmin: the lowest index wins
    ref = {"sum": lambda: x.sum(axis), "max": lambda: x.amax(axis), "min": lambda: x.amin(axis),
           "argmax": lambda: x.argmax(axis), "argmin": lambda: x.argmin(axis)}[op]()
    out = torch.empty(ref.numel(), dtype=torch.int32 if op.startswith("arg") else torch.float32, device=DEVICE)
    reduce_kernel[(1,)](on(x), out, M, N, x.stride(0), OP=op, AXIS=axis, BM=32, BN=64)
    torch.testing.assert_close(out.cpu(), ref.to(out.dtype), rtol=0, atol=0 if op != "sum" else 1e-4)


# -- control flow -----------------------------------------------------------------------------------
@triton.jit
def collatz_kernel(x_ptr, steps_ptr, n, BLOCK: tl.constexpr):
    """scf.while carrying a tensor, scf.if on a scalar, scf.for with a tensor accumulator."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1)
    steps = tl.zeros([BLOCK], dtype=tl.int32)
    i = 0
    while tl.max(x, axis=0) > 1:
        even = (x % 2) == 0
        x = tl.where(x > 1, tl.where(even, x // 2, 3 * x + 1), x)
        steps += (x > 1).to(tl.int32)
        i += 1
    if i > 0:
        tl.store(steps_ptr + offs, steps, mask=mask)
    else:
        tl.store(steps_ptr + offs, steps - 1, mask=mask)


def test_while_if_for_carrying_tensors():
    x = torch.arange(1, 301, dtype=torch.int32)
    steps = torch.empty(300, dtype=torch.int32, device=DEVICE)
    collatz_kernel[(3,)](on(x), steps, 300, BLOCK=BLOCK)
    ref = []
    for v in x.tolist():
        s = 0
        while v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += v > 1
        ref.append(s)
    assert steps.cpu().tolist() == ref


@triton.jit
def grid_kernel(out_ptr):
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny = tl.num_programs(0), tl.num_programs(1)
    tl.store(out_ptr + (z * ny + y) * nx + x, x + 10 * y + 100 * z + 1000 * tl.num_programs(2))


def test_3d_grid_larger_than_the_core_count():
    out = torch.zeros(5 * 7 * 3, dtype=torch.int32, device=DEVICE)
    grid_kernel[(5, 7, 3)](out)
    z, y, x = torch.meshgrid(torch.arange(3), torch.arange(7), torch.arange(5), indexing="ij")
    assert torch.equal(out.cpu(), (x + 10 * y + 100 * z + 3000).flatten().int())


@triton.jit
def scalar_kernel(a_ptr, b, c, out_ptr):
    tl.store(out_ptr, tl.load(a_ptr) * b + c)


@pytest.mark.parametrize("b,c", [(3, 4), (2.5, -1.0)])
def test_scalar_loads_and_arguments(b, c):
    a = torch.tensor([7.0], device=DEVICE)
    out = torch.zeros(1, device=DEVICE)
    scalar_kernel[(1,)](a, b, c, out)
    assert out.item() == 7.0 * b + c


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int8])
def test_dot(dtype):
    torch.manual_seed(0)
    if dtype == torch.int8:
        a, b = torch.randint(-100, 100, (32, 64), dtype=dtype), torch.randint(-100, 100, (64, 16), dtype=dtype)
        ref = a.int() @ b.int()
        c = torch.empty(32, 16, dtype=torch.int32, device=DEVICE)
    else:
        a, b = torch.randn(32, 64).to(dtype), torch.randn(64, 16).to(dtype)
        ref = a.float() @ b.float()
        c = torch.empty(32, 16, device=DEVICE)
    dot_kernel[(1,)](on(a), on(b), c, M=32, N=16, K=64)
    torch.testing.assert_close(c.cpu(), ref, rtol=0 if dtype == torch.int8 else 1e-4,
                               atol=0 if dtype == torch.int8 else 1e-3)


# -- atomics ----------------------------------------------------------------------------------------
@triton.jit
def atomic_kernel(ptr, val_ptr, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(val_ptr + tl.program_id(0) * BLOCK + offs)
    if OP == "add":
        tl.atomic_add(ptr + offs % 4, v)
    elif OP == "max":
        tl.atomic_max(ptr + offs % 4, v)
    elif OP == "min":
        tl.atomic_min(ptr + offs % 4, v)
    elif OP == "and":
        tl.atomic_and(ptr + offs % 4, v)
    elif OP == "or":
        tl.atomic_or(ptr + offs % 4, v)
    else:
        tl.atomic_xor(ptr + offs % 4, v)


@pytest.mark.parametrize("op", ["add", "max", "min", "and", "or", "xor"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_atomics_across_cores(op, dtype):
    if dtype == torch.float32 and op in ("and", "or", "xor"):
        pytest.skip("bitwise atomics are integer-only in Triton")
    programs = 64
    g = torch.Generator().manual_seed(0)
    vals = torch.randint(0, 1 << 20, (programs * 64,), generator=g).to(dtype)
    init = {"add": 0, "max": -(1 << 30), "min": 1 << 30, "and": -1, "or": 0, "xor": 0}[op]
    target = torch.full((4,), init, dtype=dtype)
    dev = on(target)
    atomic_kernel[(programs,)](dev, on(vals), OP=op, BLOCK=64)
    v = vals.view(-1, 4).T  # element i of each program goes to slot i % 4
    ref = {"add": lambda: target + v.sum(1), "max": lambda: torch.maximum(target, v.amax(1)),
           "min": lambda: torch.minimum(target, v.amin(1)),
           "and": lambda: target & _fold(v, lambda a, b: a & b), "or": lambda: target | _fold(v, lambda a, b: a | b),
           "xor": lambda: target ^ _fold(v, lambda a, b: a ^ b)}[op]()
    # Float sums depend on the order the cores got there: 256 terms per slot summed in any order are within
    # 255 roundings (255 * 2**-24 = 1.5e-5 relative, all terms positive) of the exact sum; a lost update
    # (a term of up to 2**20 in a sum of about 2**27) is far outside that.
    exact = not dtype.is_floating_point
    torch.testing.assert_close(dev.cpu(), ref.to(dtype), rtol=0 if exact else 4e-5, atol=0)


def _fold(v, f):
    out = v[:, 0].clone()
    for j in range(1, v.shape[1]):
        out = f(out, v[:, j])
    return out


# -- errors ----------------------------------------------------------------------------------------
@triton.jit
def oob_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)  # no mask: reads past the end when n < BLOCK


def test_out_of_bounds_access_raises_and_the_device_keeps_working():
    from spyre_triton._runtime import DeviceError
    x = torch.zeros(100, device=DEVICE)
    with pytest.raises(DeviceError) as e:
        oob_kernel[(1,)](x, 100, BLOCK=128)
    msg = str(e.value)
    assert "oob_kernel" in msg and "test_jit.py" in msg and "tl.load(x_ptr + offs)" in msg
    assert hex(x.data_ptr())[2:] in msg.lower()  # names the allocation it came nearest to
    y = torch.zeros(128, device=DEVICE)
    oob_kernel[(1,)](y, 128, BLOCK=128)
    assert torch.equal(y.cpu(), torch.ones(128))


def test_cpu_tensor_argument_is_a_clear_error():
    x = torch.zeros(128)
    with pytest.raises(ValueError, match="x_ptr.*cpu.*spyre"):
        oob_kernel[(1,)](x, 128, BLOCK=128)


def test_backend_selection_and_device_properties():
    props = triton.runtime.driver.active.utils.get_device_properties(0)
    assert props["multiprocessor_count"] == 32
    assert props["max_shared_mem"] > 1_000_000 and props["warpSize"] > 0 and props["max_num_regs"] > 0
    code = textwrap.dedent("""
        import triton, torch
        d = triton.runtime.driver.active
        print(d.get_current_target().backend, d.get_active_torch_device())
    """)
    env = dict(os.environ, TRITON_BACKEND="spyre")
    env.pop("TRITON_DEFAULT_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["spyre", "spyre:0"]


def test_do_bench_and_second_process_compiles_nothing(tmp_path):
    x = torch.rand(4096, device=DEVICE)
    out = torch.empty_like(x)
    ms = triton.testing.do_bench(lambda: unary_kernel[(32,)](x, out, 4096, OP="exp", BLOCK=BLOCK), rep=20)
    assert ms > 0
    code = textwrap.dedent("""
        import sys, torch, triton
        sys.path[:0] = %r
        import test_jit as T
        from spyre_triton.compiler import lower
        calls = []
        real = lower.lower_module
        lower.lower_module = lambda *a, **k: calls.append(1) or real(*a, **k)
        x = torch.rand(4096, device="spyre")
        T.unary_kernel[(32,)](x, torch.empty_like(x), 4096, OP="exp", BLOCK=T.BLOCK)
        print(len(calls))
    """ % [os.path.dirname(__file__), TESTS_DIR])
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.split()[-1] == "1", first.stdout  # compiled once in the first process
    assert second.stdout.split()[-1] == "0", second.stdout  # and taken from Triton's cache in the second


def test_track_reports_kernels():
    x = torch.rand(4096, device=DEVICE)
    with spyre_triton.track() as t:
        unary_kernel[(32,)](x, torch.empty_like(x), 4096, OP="sin", BLOCK=BLOCK)
    assert t.kernels["unary_kernel"] == 1


def test_kernels_on_a_second_device():
    code = textwrap.dedent("""
        import sys, torch, triton
        sys.path[:0] = %r
        import test_jit as T
        assert torch.spyre.device_count() == 2
        x = torch.arange(256, dtype=torch.float32)
        with torch.spyre.device(1):
            a = x.to("spyre:1")
            out = torch.empty_like(a)
            T.unary_kernel[(2,)](a, out, 256, OP="neg", BLOCK=T.BLOCK)
        assert out.device == torch.device("spyre", 1)
        assert torch.equal(out.cpu(), -x)
        try:  # a spyre:1 tensor launched while spyre:0 is current: refused, not silently read
            T.unary_kernel[(2,)](a, out, 256, OP="neg", BLOCK=T.BLOCK)
        except Exception as e:
            print("refused:", type(e).__name__)
    """ % [os.path.dirname(__file__), TESTS_DIR])
    env = dict(os.environ, SPYRE_DEVICE_COUNT="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused:" in out.stdout


@triton.jit(noinline=True)
def _scale_for(limit):
    if limit < 0:  # an early return inside a noinline function (tt.call of a multi-block body)
        return 1.0
    return 2.0


@triton.jit
def early_return_kernel(x_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:  # programs past the end leave at once (a cf.cond_br to the return)
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * _scale_for(limit), mask=offs < n)


@pytest.mark.parametrize("limit", [5.0, -1.0])
def test_early_returns_in_kernels_and_noinline_functions(limit):
    x = torch.randn(300) * 4
    out = torch.full((300,), 99.0, device=DEVICE)
    early_return_kernel[(8,)](on(x), out, 300, limit, BLOCK=64)
    torch.testing.assert_close(out.cpu(), x * (1.0 if limit < 0 else 2.0))
    ttir = early_return_kernel.warmup(on(x), out, 300, limit, BLOCK=64, grid=(1,)).asm["ttir"]
    assert "cf.cond_br" in ttir and "tt.call" in ttir


@triton.jit
def print_pair_kernel(x_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    y = tl.full((N,), 7, tl.int32)  # a splat: kept as one scalar until something needs the elements
    tl.device_print("v", x, y)


def test_device_print_of_a_splat_prints_every_element(capfd):
    print_pair_kernel[(1,)](torch.arange(4, dtype=torch.int32, device=DEVICE), N=4)
    out = capfd.readouterr().out
    assert out.count("7") >= 4 and "v" in out
    assert all(str(i) in out for i in range(4))


@triton.jit
def unsplat_kernel(x_ptr, out_ptr):
    one = tl.load(x_ptr + tl.arange(0, 1))  # a one-element tensor
    s = tl.sum(one, axis=0) * 0 + one.reshape(())  # tt.unsplat: its element as a scalar
    tl.store(out_ptr, s + 1)


def test_unsplat():
    out = torch.zeros(1, device=DEVICE)
    x = torch.tensor([41.0], device=DEVICE)
    unsplat_kernel[(1,)](x, out)
    assert out.item() == 42.0
    assert "tt.unsplat" in unsplat_kernel.warmup(x, out, grid=(1,)).asm["ttir"]


@triton.jit
def tuple_arg_kernel(pair, out_ptr, SCALE: tl.constexpr):
    x_ptr, n = pair
    offs = tl.arange(0, 64)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0) * SCALE, mask=offs < n)


def test_tuple_arguments_are_flattened():
    x = torch.arange(50, dtype=torch.float32)
    out = torch.zeros(50, device=DEVICE)
    tuple_arg_kernel[(1,)]((on(x), 50), out, SCALE=3)
    torch.testing.assert_close(out.cpu(), x * 3)


@triton.jit
def host_descriptor_kernel(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    tile = in_desc.load([m, n])
    out_desc.store([m, n], tile + 1)


def test_host_tensor_descriptors():
    from triton.tools.tensor_descriptor import TensorDescriptor
    x = torch.randn(40, 72)
    src, dst = on(x), torch.zeros(40, 72, device=DEVICE)
    block = [16, 32]
    host_descriptor_kernel[(3, 3)](TensorDescriptor.from_tensor(src, block), TensorDescriptor.from_tensor(dst, block),
                                   BM=16, BN=32)
    torch.testing.assert_close(dst.cpu(), x + 1)


@triton.jit
def libdevice_extra_kernel(x_ptr, y_ptr, flags_ptr, q_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    f = (libdevice.isnan(x).to(tl.int32) + 2 * libdevice.isinf(x).to(tl.int32)
         + 4 * libdevice.finitef(x).to(tl.int32) + 8 * libdevice.signbit(x).to(tl.int32))
    tl.store(flags_ptr + offs, f)
    tl.store(q_ptr + offs, libdevice.fast_dividef(x, y) + libdevice.div_rn(y, y) + libdevice.fma_rn(x, y, y))


def test_libdevice_predicates_and_correctly_rounded_ops():
    x = torch.tensor([0.0, -0.0, 1.5, -2.0, float("inf"), -float("inf"), float("nan"), 3.0])
    y = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    flags = torch.empty(8, dtype=torch.int32, device=DEVICE)
    q = torch.empty(8, device=DEVICE)
    libdevice_extra_kernel[(1,)](on(x), on(y), flags, q, BLOCK=8)
    ref = (x.isnan().int() + 2 * x.isinf().int() + 4 * x.isfinite().int() + 8 * torch.signbit(x).int())
    assert flags.cpu().tolist() == ref.tolist()
    torch.testing.assert_close(q.cpu(), x / y + 1 + (x * y + y), equal_nan=True)


@triton.jit
def fp8_abs_neg_kernel(x_ptr, a_ptr, n_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(a_ptr + offs, tl.abs(x))
    tl.store(n_ptr + offs, -x)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_abs_and_negation(dtype):
    x = (torch.randn(64) * 3).to(dtype)
    a, n = torch.empty(64, dtype=dtype, device=DEVICE), torch.empty(64, dtype=dtype, device=DEVICE)
    fp8_abs_neg_kernel[(1,)](on(x), a, n, BLOCK=64)
    assert torch.equal(a.cpu().view(torch.uint8), x.float().abs().to(dtype).view(torch.uint8))
    assert torch.equal(n.cpu().view(torch.uint8), (-x.float()).to(dtype).view(torch.uint8))
