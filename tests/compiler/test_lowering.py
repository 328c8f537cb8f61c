"""What the compiler emits: affine accesses become DMA descriptors, errors name the op and the line."""
import inspect

import pytest
import torch
import triton
import triton.language as tl

from spyre_triton import isa
from spyre_triton.compiler.errors import CompilationError, LXOverflowError

from asm_helpers import in_lx, insns, parse_asm, program
from conftest import DEVICE


def asm_of(kernel, *args, **kw):
    return kernel.warmup(*args, grid=(1,), **kw).asm["spyreasm"]


def opcodes(asm):
    return [i.op for i in insns(asm)]


def writes_tile(prog, insn) -> bool:
    """Whether an instruction's destination is a tile: in LX, or device memory through a view register."""
    return in_lx(prog, insn.args["a"]) or bool(insn.flags.get(isa.VIEW["a"].name))


@triton.jit
def copy_2d(src, dst, stride_s, stride_d, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(src + rm[:, None] * stride_s + rn[None, :], mask=mask)
    tl.store(dst + rm[:, None] * stride_d + rn[None, :], x, mask=mask)


def test_strided_2d_access_is_one_dma_descriptor_each_way():
    x = torch.empty(8, 8, device=DEVICE)
    asm = asm_of(copy_2d, x, x, 8, 8, 8, 8, BM=16, BN=32)
    ops = opcodes(asm)
    assert ops.count("ld") == 1 and ops.count("st") == 1
    assert "gather" not in ops and "scatter" not in ops
    # the row stride is a kernel argument: the descriptor reads it from a scalar register
    assert any(tuple(d.shape) == (16, 32) and isinstance(d.strides[0], tuple) and d.strides[0][0] == "s"
               for d in program(asm).descs)


@triton.jit
def indirect(idx_ptr, src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs)
    tl.store(dst + offs, tl.load(src + idx))


def test_indices_loaded_from_memory_become_a_gather():
    x = torch.empty(8, device=DEVICE)
    i = torch.zeros(8, dtype=torch.int32, device=DEVICE)
    ops = opcodes(asm_of(indirect, i, x, x, BLOCK=64))
    assert ops.count("gather") == 1 and ops.count("ld") == 1 and ops.count("st") == 1


@triton.jit
def huge_tiles(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(x_ptr + BLOCK + offs)
    tl.store(x_ptr + offs, x * y + x)


def test_lx_overflow_is_a_compile_error_with_sizes():
    x = torch.empty(8, device=DEVICE)
    with pytest.raises(LXOverflowError) as e:
        asm_of(huge_tiles, x, BLOCK=1 << 18)
    msg = str(e.value)
    assert "1048576 bytes" in msg and "huge_tiles" in msg and "smaller block sizes" in msg
    from triton.runtime.errors import OutOfResources
    assert isinstance(e.value, OutOfResources) and e.value.limit < e.value.required
    import pickle
    assert str(pickle.loads(pickle.dumps(e.value))) == msg  # compile workers send it back pickled


@triton.autotune(configs=[triton.Config({"BLOCK": 1 << 18}), triton.Config({"BLOCK": 256})], key=[])
@triton.jit
def autotuned_scale(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


def test_autotune_passes_over_a_config_whose_tiles_do_not_fit():
    x = torch.ones(1 << 18, device=DEVICE)
    autotuned_scale[(1,)](x)
    assert autotuned_scale.best_config.kwargs["BLOCK"] == 256


@triton.jit
def uses_inline_asm(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(x_ptr + offs, y)


def test_unsupported_op_names_op_and_source_line():
    x = torch.empty(8, device=DEVICE)
    with pytest.raises(CompilationError) as e:
        asm_of(uses_inline_asm, x, BLOCK=16)
    msg = str(e.value)
    src, first = inspect.getsourcelines(uses_inline_asm.fn)
    line = first + next(i for i, s in enumerate(src) if "inline_asm_elementwise" in s)
    assert "tt.elementwise_inline_asm" in msg
    assert f"test_lowering.py:{line}" in msg


def test_kernel_metadata_reports_lx_use():
    x = torch.empty(8, device=DEVICE)
    k = copy_2d.warmup(x, x, 8, 8, 8, 8, BM=16, BN=32, grid=(1,))
    assert 16 * 32 * 4 <= k.metadata.shared <= 16 * 32 * 4 * 4


@triton.jit
def matmul_wt(x_ptr, w_ptr, o_ptr, M, N, K, ALSO_SUM: tl.constexpr, ACC: tl.constexpr, BM: tl.constexpr,
              BN: tl.constexpr, BK: tl.constexpr):
    # o = x @ w.T with w stored (N, K): B's contiguous dimension is K
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, K, BK):
        a = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0)
        b = tl.load(w_ptr + rn[None, :] * K + (k + rk)[:, None], mask=(rn[None, :] < N) & ((k + rk)[:, None] < K),
                    other=0)
        acc = tl.dot(a, b, acc, out_dtype=ACC)
        if ALSO_SUM:  # a second reader of b: it must stay [K, N]
            acc += tl.sum(b.to(ACC), axis=0)[None, :]
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float32), mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8], ids=str)
@pytest.mark.parametrize("M,N,K", [(32, 32, 32), (37, 19, 45), (5, 70, 16)])
@pytest.mark.parametrize("also_sum", [False, True])
def test_transposed_weight_is_loaded_row_wise(dtype, M, N, K, also_sum):
    x = torch.randint(-3, 4, (M, K)).to(dtype)
    w = torch.randint(-3, 4, (N, K)).to(dtype)
    o = torch.empty(M, N, device=DEVICE)
    h = matmul_wt[(triton.cdiv(M, 16), triton.cdiv(N, 16))](x.to(DEVICE), w.to(DEVICE), o, M, N, K, ALSO_SUM=also_sum,
                                                             ACC=tl.int32 if dtype == torch.int8 else tl.float32,
                                                             BM=16, BN=16, BK=16)
    ref = x.double() @ w.double().T
    if also_sum:
        ref = ref + sum(w.double()[:, k:k + 16].sum(1) for k in range(0, K, 16))[None, :]
    assert torch.equal(o.cpu().double(), ref)
    assert any(i.flags.get("bt") for i in insns(h, "dot")) == (not also_sum) and not insns(h, "gather")


def test_the_binary_is_the_encoding_of_the_printed_assembly():
    """make_spyrebin encodes the program make_spyreasm printed without reading the text back: that program
    must encode to the same bytes as its assembly text parsed again, for every kind of kernel here."""
    import glob
    import os
    from spyre_triton.compiler import lower, ttir
    paths = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "data", "ttir", "*.ttir")))
    assert paths
    for path in paths:
        prog = lower.lower_module(ttir.parse_module(open(path).read()), 1 << 20, True, True)
        assert prog.encode() == parse_asm(prog.to_asm()).encode(), path
    x = torch.empty(8, 8, device=DEVICE)
    ck = copy_2d.warmup(x, x, 8, 8, 8, 8, BM=16, BN=32, grid=(1,))
    assert ck.asm["spyrebin"] == parse_asm(ck.asm["spyreasm"]).encode()



@triton.jit
def normalize_rows(x_ptr, y_ptr, N, mean, rstd, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    y = tl.sqrt(tl.abs((x - mean) * rstd))
    tl.store(y_ptr + row * N + cols, y, mask=mask)


@pytest.mark.parametrize("N", [1024, 1000])  # 1000: the masked load is copied to LX, not read in place
def test_elementwise_results_take_the_place_of_dying_sources(N):
    """A result the same size as a source that dies at its instruction is placed over that source and
    computed in place (compiler/lx_alloc.py): the chain (x - mean) * rstd, abs, sqrt runs in one tile
    of LX, and gives torch's results."""
    x = torch.randn(3, N)
    xd, yd = x.to(DEVICE), torch.empty(3, N, device=DEVICE)
    asm = normalize_rows[(3,)](xd, yd, N, 0.25, 1.5, BLOCK=1024).asm["spyreasm"]
    prog = program(asm)
    # the tile instructions (results in LX or device memory), not the scalar address arithmetic
    chain = [i for i in prog.insns if i.op in ("sub", "mul", "binchain", "math1") and writes_tile(prog, i)]
    ops = [i.op for i in chain]
    assert ops[:1] == ["binchain"] and chain[0].flags.get("ops") == "sub_mul" or ops[:2] == ["sub", "mul"], asm
    dsts = {i.args["a"] for i in chain if in_lx(prog, i.args["a"])}
    assert len(dsts) == 1, f"the chain writes {sorted(dsts)}:\n{asm}"
    torch.testing.assert_close(yd.cpu(), ((x - 0.25) * 1.5).abs().sqrt())


@triton.jit
def accumulate_rows(x_ptr, sum_ptr, max_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    top = tl.full([BLOCK], float("-inf"), tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
        acc += x
        top = tl.maximum(top, x)
    tl.store(sum_ptr + row * BLOCK + tl.arange(0, BLOCK), acc)
    tl.store(max_ptr + row * BLOCK + tl.arange(0, BLOCK), top)


@pytest.mark.parametrize("N", [0, 64, 100, 128, 320])  # no iteration, one partial, one whole, several
def test_the_first_iteration_reads_constant_accumulators_without_filling_them(N):
    """A loop whose carried tiles start as constants runs its first iteration on its own (ops.py,
    _peel_first_iteration): that iteration reads the constants as broadcast operands, and the tiles are
    filled only on the path where the loop runs no iteration. The bits are the filled loop's: -0.0
    inputs give 0.0 + -0.0 = +0.0 in the first add, as they would after a fill."""
    BLOCK = 64
    x = torch.randn(2, N)
    if N:
        x[:, ::3] = -0.0
    s, m = (torch.empty(2, BLOCK, device=DEVICE) for _ in range(2))
    k = accumulate_rows[(2,)](x.to(DEVICE), s, m, N, BLOCK=BLOCK)
    want_s, want_m = torch.zeros(2, BLOCK), torch.full((2, BLOCK), float("-inf"))
    for off in range(0, N, BLOCK):
        blk = torch.zeros(2, BLOCK)
        blk[:, :min(BLOCK, N - off)] = x[:, off:off + BLOCK]
        want_s, want_m = want_s + blk, torch.maximum(want_m, blk)
    assert torch.equal(s.cpu().view(torch.int32), want_s.view(torch.int32))
    assert torch.equal(m.cpu().view(torch.int32), want_m.view(torch.int32))
    prog = program(k)
    code = prog.insns
    jmp = max(n for n, i in enumerate(code) if i.op == "jmp")
    fills = [n for n, i in enumerate(code) if i.op == "copy" and in_lx(prog, i.args["a"])]
    assert len(fills) == 2 and min(fills) > jmp, k.asm["spyreasm"]   # both after the loop: no iteration
    first = next(i for i in code if i.op == "add" and in_lx(prog, i.args["a"]))
    # acc = 0 + x, the zero a broadcast scalar
    assert first.args["b"] < prog.sreg_bytes and first.flags.get("bc1") == 1, first
