"""`binchain`: two binary float operations in one pass, `dst = (x op1 y) op2 z`, each rounded.

The oracle is the two instructions it replaces, run one after the other: the fused pass must give
their bits, NaN payloads included, for every pair of add/sub/mul, every broadcast pattern, tails that
are not a whole vector, and special values. The compiler fuses an op whose only reader is the next
op's first operand (compiler/fusion.py)."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import Builder, mnemonics, run_elementwise

from conftest import DEVICE
OPS = ["add", "sub", "mul"]
NP_FLOAT = {"f32": np.float32, "f64": np.float64}
NP_BITS = {"f32": np.uint32, "f64": np.uint64}
# tile operand / broadcast: every pattern but all three broadcast (then nothing varies per element)
BCASTS = [(), (1,), (2,), (3,), (1, 2), (1, 3), (2, 3)]


def operand(t, n, seed):
    """n values of dtype t: random ones and the special cases (NaNs with different payloads and signs,
    infinities, signed zeros, subnormals, values whose product or sum overflows)."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(NP_FLOAT[t])
    bits = v.view(NP_BITS[t])
    if t == "f32":
        nans = [0x7FC00001 + seed, 0xFFC00123 + seed, 0x7F800001]  # quiet +, quiet -, signalling
    else:
        nans = [0x7FF8000000000001 + seed, 0xFFF8000000000123 + seed, 0x7FF0000000000001]
    specials = np.array([np.inf, -np.inf, 0.0, -0.0, np.finfo(NP_FLOAT[t]).tiny / 4, np.finfo(NP_FLOAT[t]).max,
                         -np.finfo(NP_FLOAT[t]).max, 1.0], dtype=NP_FLOAT[t])
    for i, s in enumerate(specials):
        v[(7 * i + seed) % n] = s
    for i, p in enumerate(nans):
        bits[(11 * i + 3 * seed + 5) % n] = p
    return v


def bits(a, t):
    return np.asarray(a).view(NP_BITS[t])


def two_instructions(op1, op2, t, x, y, z, bc):
    """The unfused reference: op1's result stored, then read by op2."""
    b1 = tuple(k for k in bc if k in (1, 2))
    n = max(len(x), len(y), len(z))
    tmp = run_elementwise(op1, t, [x, y], bcast=b1, n=n)
    return run_elementwise(op2, t, [tmp, z], bcast=(2,) if 3 in bc else (), n=n)


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("bc", BCASTS, ids=lambda b: "bc" + "".join(map(str, b)) if b else "tiles")
@pytest.mark.parametrize("op1", OPS)
@pytest.mark.parametrize("op2", OPS)
def test_binchain_gives_the_bits_of_the_two_instructions(op1, op2, bc, t):
    n = 203  # not a whole number of vectors in any build
    ins = [operand(t, n, seed) for seed in (1, 2, 3)]
    ins = [a[:1].copy() if k + 1 in bc else a for k, a in enumerate(ins)]
    for k in bc:  # a broadcast operand that is not NaN takes the quick loops
        ins[k - 1][0] = NP_FLOAT[t](-1.5 if k == 2 else 0.75)
    got = run_elementwise("binchain", t, ins, flags={"ops": f"{op1}_{op2}"}, bcast=bc, n=n)
    exp = two_instructions(op1, op2, t, *ins, bc)
    assert np.array_equal(bits(got, t), bits(exp, t)), f"{op1}_{op2} {bc}"


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("bc", [(2,), (3,), (2, 3), (1, 3)], ids=lambda b: "bc" + "".join(map(str, b)))
def test_a_nan_broadcast_operand_takes_the_exact_loop(bc, t):
    n = 70
    ins = [operand(t, n, seed) for seed in (4, 5, 6)]
    ins = [a[:1].copy() if k + 1 in bc else a for k, a in enumerate(ins)]
    for k in bc:
        ins[k - 1].view(NP_BITS[t])[0] = 0xFFC00077 if t == "f32" else 0xFFF8000000000077
    for op1, op2 in [("add", "mul"), ("mul", "add"), ("sub", "sub")]:
        got = run_elementwise("binchain", t, ins, flags={"ops": f"{op1}_{op2}"}, bcast=bc, n=n)
        assert np.array_equal(bits(got, t), bits(two_instructions(op1, op2, t, *ins, bc), t)), f"{op1}_{op2}"


def test_binchain_with_no_elements_and_one():
    x = np.array([2.5], np.float32)
    got = run_elementwise("binchain", "f32", [x, x, x], flags={"ops": "sub_mul"}, n=1)
    assert got.tolist() == [0.0]
    assert run_elementwise("binchain", "f32", [x, x, x], flags={"ops": "add_mul"}, n=0).size == 0


def test_binchain_is_for_floats_of_32_and_64_bits():
    for t in ("i32", "f16", "bf16"):
        b = Builder()
        b.emit("binchain", t, a=b.x(0), b=b.x(64), c=b.x(128), d=b.x(192), n=4, flags={"ops": "sub_mul"})
        with pytest.raises(ValueError, match=f"not supported for dtype {t}"):
            b.build()


def test_an_ops_flag_beyond_the_nine_pairs_is_rejected_at_load():
    b = Builder()
    b.emit("binchain", "f32", a=b.x(0), b=b.x(64), c=b.x(128), d=b.x(192), n=4, flags={"ops": 12})
    with pytest.raises(ValueError, match=r"instruction 0 \(binchain.f32\): ops flag 12 names no pair of operations \(0-8\)"):
        b.build()


# --- the compiler's fusion ------------------------------------------------------------------------
@triton.jit
def _op(a, b, OP: tl.constexpr):
    if OP == 0:
        r = a + b
    elif OP == 1:
        r = a - b
    else:
        r = a * b
    return r


@triton.jit
def chain_kernel(x_ptr, y_ptr, z_ptr, out_ptr, tmp_ptr, ys, zs, n, OP1: tl.constexpr, OP2: tl.constexpr,
                 Y_SCALAR: tl.constexpr, Z_SCALAR: tl.constexpr, KEEP: tl.constexpr, SWAP: tl.constexpr,
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if Y_SCALAR:
        y = ys
    else:
        y = tl.load(y_ptr + offs, mask=m)
    if Z_SCALAR:
        z = zs
    else:
        z = tl.load(z_ptr + offs, mask=m)
    t = _op(x, y, OP1)
    if KEEP:
        tl.store(tmp_ptr + offs, t, mask=m)
    if SWAP:
        r = _op(z, t, OP2)
    else:
        r = _op(t, z, OP2)
    tl.store(out_ptr + offs, r, mask=m)


def run_chain(dtype, op1, op2, y_scalar, z_scalar, keep=False, swap=False, n=1000, block=256):
    g = torch.Generator().manual_seed(0)
    x, y, z = (torch.randn(n, generator=g, dtype=torch.float32).to(dtype) for _ in range(3))
    x[7], y[9], z[11] = float("nan"), float("inf"), -0.0
    out, tmp = torch.empty(n, dtype=dtype, device=DEVICE), torch.empty(n, dtype=dtype, device=DEVICE)
    h = chain_kernel[(triton.cdiv(n, block),)](x.to(DEVICE), y.to(DEVICE), z.to(DEVICE), out, tmp, 0.375, -1.25, n,
                                               OP1=OPS.index(op1), OP2=OPS.index(op2), Y_SCALAR=y_scalar,
                                               Z_SCALAR=z_scalar, KEEP=keep, SWAP=swap, BLOCK=block)
    return h, out.cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op1,op2", [("sub", "mul"), ("add", "add"), ("mul", "sub"), ("mul", "mul"), ("mul", "add")])
@pytest.mark.parametrize("y_scalar,z_scalar", [(False, False), (True, True), (False, True)])
def test_the_compiler_fuses_a_chain_with_the_unfused_bits(dtype, op1, op2, y_scalar, z_scalar):
    h, fused = run_chain(dtype, op1, op2, y_scalar, z_scalar)
    h_keep, unfused = run_chain(dtype, op1, op2, y_scalar, z_scalar, keep=True)
    t = str(dtype).replace("torch.float", "f")
    if (op1, op2) == ("mul", "add"):
        assert f"fma.{t}" in mnemonics(h)  # multiply-add fusion comes first
    else:
        assert f"binchain.{t}" in mnemonics(h) and f"{op1}.{t}" not in mnemonics(h)
    assert f"binchain.{t}" not in mnemonics(h_keep)  # the intermediate has a second reader
    if (op1, op2) != ("mul", "add"):
        assert torch.equal(fused.view(torch.int32 if t == "f32" else torch.int64),
                           unfused.view(torch.int32 if t == "f32" else torch.int64))


def test_the_intermediate_as_second_operand_is_not_fused():
    h, out = run_chain(torch.float32, "sub", "mul", True, True, swap=True)
    assert "binchain.f32" not in mnemonics(h)
    _, keep = run_chain(torch.float32, "sub", "mul", True, True, swap=True, keep=True)
    assert torch.equal(out.view(torch.int32), keep.view(torch.int32))


def test_half_precision_chains_are_not_fused():
    h, out = run_chain(torch.float16, "sub", "mul", False, True)
    assert "binchain.f16" not in mnemonics(h) and "sub.f16" in mnemonics(h)


def test_layer_norm_normalises_in_one_pass():
    """Tutorial 05's `(x - mean) * rstd` is one binchain; the result matches torch."""
    from spyre_triton.reference_kernels import layer_norm_fwd_kernel
    M, N = 6, 700
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(M, N, generator=g), torch.randn(N, generator=g), torch.randn(N, generator=g)
    y, mean, rstd = (torch.empty(s, device=DEVICE) for s in ((M, N), (M,), (M,)))
    h = layer_norm_fwd_kernel[(M,)](x.to(DEVICE), y, w.to(DEVICE), b.to(DEVICE), mean, rstd, N, N, 1e-5, BLOCK=256)
    assert "binchain.f32" in mnemonics(h)
    torch.testing.assert_close(y.cpu(), torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5))
