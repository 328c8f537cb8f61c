"""One-element integer and f32 ops on scalar registers (address arithmetic, loop counters, a row's
`sum / N`) run inline in the dispatch loop. Each case runs the same op twice in one program, once on
register slots (the inline path) and once on one-element LX tiles (the typed loops), and the two
results must agree bit for bit over values that wrap, sign-extend and compare across the sign
boundary, and, for f32, over signed zeros, infinities, subnormals and NaNs with payloads (the result
of NaN operands is the first one, quieted)."""
import numpy as np
import pytest

from asm_helpers import Builder, DevBuf

I32 = [0, 1, -1, 7, -7, 2**31 - 1, -2**31, 123456789, -98765432]
I64 = [0, 1, -1, 2**63 - 1, -2**63, 2**32, -2**32 - 5, 0x1234_5678_9ABC_DEF0]
CASES = [(op, "i32", a, b) for op in ("add", "sub", "mul", "cmpi") for a in I32 for b in I32[::2]]
CASES += [(op, "i64", a, b) for op in ("add", "sub", "mul", "cmpi") for a in I64 for b in I64[::2]]
CASES += [("cvt", "i64", a, 0) for a in I32]
CASES += [(op, t, a, 0) for op in ("copy", "const") for t, a in (("i32", -5), ("i64", -2**40), ("i8", -3))]
# f32 operands as bit patterns: 1.5, -0.0, +0.0, inf, -inf, the smallest subnormal, 3e38, a quiet NaN
# with a payload, a negative one, and a signalling NaN
F32_BITS = [0x3FC00000, 0x80000000, 0x00000000, 0x7F800000, 0xFF800000, 0x00000001, 0x7F61B1E6,
            0x7FC01234, 0xFFC05678, 0x7F800ABC]
CASES += [(op, "f32", a, b) for op in ("add", "sub", "mul", "divf") for a in F32_BITS for b in F32_BITS]
CASES += [("sqrt", "f32", a, 0) for a in F32_BITS + [0xBF800000, 0x40000000]]  # and -1.0, 2.0


def run_both(op, t, a, b, per_program=True):
    """(inline result, typed-loop result) as raw 8-byte patterns of the destination's bytes. per_program:
    the inline op runs in the program (after a `pid`); else it leads the program, so it is part of the
    launch-invariant run that each core executes once per launch (interp.c, run_invariant)."""
    npt = {"i8": np.int8, "i32": np.int32, "i64": np.int64, "f32": np.uint32}[t]
    bld = Builder(n_sregs=16)
    out = DevBuf(16)
    bld.arg("o", "ptr", "i64", bld.s(0))
    if per_program:
        bld.emit("pid", a=bld.s(6), b=0)
    ka, kb = bld.const(int(np.array(a, npt).astype(np.int64))), bld.const(int(np.array(b, npt).astype(np.int64)))
    src_t = "i32" if op == "cvt" else t
    res = []
    for where in ("slot", "tile"):
        if where == "slot":
            xa, xb, xd = bld.s(2), bld.s(3), bld.s(4)
        else:
            xa, xb, xd = bld.x(0), bld.x(64), bld.x(128)
            bld.emit("const", "i64", a=bld.x(128), b=bld.const(0), n=1)
        bld.emit("const", src_t, a=xa, b=ka, n=1)
        bld.emit("const", src_t, a=xb, b=kb, n=1)
        if op == "cvt":
            bld.emit("cvt", "i64", "i32", a=xd, b=xa, n=1, flags={"mode": "sext"})
        elif op == "copy":
            bld.emit("copy", t, a=xd, b=xa, n=1)
        elif op == "const":
            bld.emit("const", t, a=xd, b=ka, n=1)
        elif op == "sqrt":
            bld.emit("math1", t, a=xd, b=xa, n=1, flags={"fn": "sqrt"})
        elif op == "cmpi":
            bld.emit("cmpi", t, a=xd, b=xa, c=xb, n=1, flags={"pred": "slt"})
        else:
            bld.emit(op, t, a=xd, b=xa, c=xb, n=1)
        width = 1 if op == "cmpi" else {"i8": 1, "i32": 4, "i64": 8, "f32": 4}["i64" if op == "cvt" else t]
        res.append((xd, width))
    # store the destinations' bytes: the slot's result at o[0:8], the tile's at o[8:16]
    bld.emit("const", "i64", a=bld.s(5), b=bld.const(8), n=1)
    bld.emit("add", "i64", a=bld.s(1), b=bld.s(0), c=bld.s(5), n=1)
    width = res[0][1]
    dw = bld.desc([width], [1])
    bld.emit("st", "i8", a=bld.s(0), b=dw, c=res[0][0])
    bld.emit("st", "i8", a=bld.s(1), b=dw, c=res[1][0])
    bld.build().launch(0, 1, 1, 1, (out,))
    raw = out.view(np.uint8, 16)
    return bytes(raw[:width]), bytes(raw[8:8 + width])


@pytest.mark.parametrize("per_program", [True, False], ids=["per-program", "launch-invariant"])
@pytest.mark.parametrize("op,t,a,b", CASES)
def test_inline_scalar_op_matches_the_typed_loop(op, t, a, b, per_program):
    inline, typed = run_both(op, t, a, b, per_program)
    assert inline == typed
    if t == "f32":
        x, y = np.array([a, b], np.uint32).view(np.float32)
        with np.errstate(all="ignore"):
            want = {"add": x + y, "sub": x - y, "mul": x * y, "divf": x / y, "sqrt": np.sqrt(x)}[op]
        got = np.frombuffer(inline, np.float32)[0]  # (sqrt's cases pass b = 0, so y is 0.0)
        if np.isnan(x) or np.isnan(y):  # the first NaN operand, quieted
            first = a if np.isnan(x) else b
            assert np.frombuffer(inline, np.uint32)[0] == first | 0x00400000
        else:
            assert got == want or (np.isnan(got) and np.isnan(want))
            assert np.signbit(got) == np.signbit(want) or np.isnan(want)
        return
    npt = {"i8": np.int8, "i32": np.int32, "i64": np.int64}[t]
    with np.errstate(over="ignore"):
        x, y = np.array(a, npt), np.array(b, npt)
        expect = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
                  "cmpi": lambda: np.uint8(x < y), "cvt": lambda: np.int64(np.int32(a)),
                  "copy": lambda: x, "const": lambda: x}[op]()
    assert inline == np.array(expect).tobytes()[:len(inline)]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_each_launch_starts_from_its_own_arguments_and_constants(threads, monkeypatch):
    # programs start from registers each core prepares once per launch (arguments, then the prologue's
    # constants): a launch right after another, with other arguments, must not see the first's
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def affine(out, a, b, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, offs * a + b + 7, mask=offs < n)

    dev = triton.runtime.driver.active.get_active_torch_device()
    monkeypatch.setenv("SPYRE_NUM_THREADS", threads)  # read at each launch
    for a, b, n in [(1, 0, 100), (3, -5, 70), (-2, 11, 130), (3, -5, 64)]:
        out = torch.zeros(160, dtype=torch.int32, device=dev)
        affine[(triton.cdiv(n, 16),)](out, a, b, n, BLOCK=16)
        ref = torch.zeros(160, dtype=torch.int32)
        ref[:n] = torch.arange(n, dtype=torch.int32) * a + b + 7
        assert torch.equal(out.cpu(), ref)


# --- one-element stores (`tl.store(Mean + row, mean)`): one span check and one move ------------------
def _one_element_store_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def one_store(out, v, i):
        tl.store(out + i, v)

    return one_store


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64", "int64"])
def test_a_one_element_store_writes_that_element_only(dtype):
    import torch
    import triton
    dev = triton.runtime.driver.active.get_active_torch_device()
    dt = getattr(torch, dtype)
    out = torch.full((9,), 3, dtype=dt, device=dev)
    k = _one_element_store_kernel()
    for i, v in [(0, -2), (8, 5), (4, 1)]:  # the first and the last element of the allocation, then one inside
        k[(1,)](out, torch.tensor(v, dtype=dt).item(), i)
    expect = torch.full((9,), 3, dtype=dt)
    expect[0], expect[8], expect[4] = -2, 5, 1
    assert torch.equal(out.cpu(), expect)


@pytest.mark.parametrize("i", [9, -1, 1 << 40])
def test_a_one_element_store_out_of_bounds_raises_and_the_device_keeps_working(i):
    import torch
    import triton
    from spyre_triton._runtime import DeviceError
    dev = triton.runtime.driver.active.get_active_torch_device()
    out = torch.zeros(9, dtype=torch.float32, device=dev)
    k = _one_element_store_kernel()
    with pytest.raises(DeviceError) as e:
        k[(1,)](out, 1.0, i)
    msg = str(e.value)
    assert "one_store" in msg and "tl.store(out + i, v)" in msg
    assert "%x" % ((out.data_ptr() + 4 * i) & (2**64 - 1)) in msg.lower()  # the address it tried
    k[(1,)](out, 2.0, 8)
    assert out.cpu()[8].item() == 2.0 and out.cpu()[:8].abs().sum().item() == 0
