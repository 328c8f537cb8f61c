"""View registers (ISA v4): an ld whose tile is only read, or a st whose tile one elementwise
instruction just computed, goes through a view register, and the interpreter skips the copy through LX
when the box is one contiguous in-bounds run. These tests check that the compiler takes the path where
it should and leaves it where it must (a store or scatter in between, masks, loops), that results are
the same either way (the tails, masks, strides and overlaps that make a view fall back), that faults
still name the right line, and that the loader rejects view operands it cannot trust."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from spyre_triton import _runtime, isa
from spyre_triton.reference_kernels import add_kernel

from asm_helpers import DevBuf, insns, parse_asm, through_views
from conftest import DEVICE, TESTS_DIR


def names_a_view(insn) -> bool:
    """Whether an instruction names a view register at all: an operand through one, or a view
    register operand (an `ld`'s, a `view`'s)."""
    kinds = isa.OPCODE_BY_NAME[insn.op].operands
    return bool(through_views(insn)) or any(k in ("w", "w?") and insn.args.get(f, isa.NONE) != isa.NONE
                                            for f, k, _ in kinds)


def loads_into_views(kernel) -> int:
    return sum(i.args.get("n", isa.NONE) != isa.NONE for i in insns(kernel, "ld"))


@pytest.mark.parametrize("n", [0, 1, 100, 1024, 1000, 4096 + 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8], ids=str)
def test_add_matches_torch_at_tails_and_full_blocks(n, dtype):
    x = (torch.arange(n) % 50).to(dtype)
    y = (torch.arange(n) % 7 - 3).to(dtype)
    out = torch.full((n,), 99, dtype=dtype, device=DEVICE)
    h = add_kernel[(max(triton.cdiv(n, 256), 1),)](x.to(DEVICE), y.to(DEVICE), out, n, BLOCK=256)
    torch.testing.assert_close(out.cpu(), x + y)
    # both loads and the store go through view registers: no copy where a block is whole
    assert loads_into_views(h) == 2 and len(insns(h, "view")) == 1
    assert sum(len(through_views(i)) >= 2 for i in insns(h)) == 1  # the add reads both loads in place


def test_in_place_and_shifted_overlap_give_what_copies_would():
    n = 1024
    base = torch.arange(n + 8, dtype=torch.float32)
    # out is x itself: each element reads then writes its own address
    x = base.clone().to(DEVICE)
    add_kernel[(n // 256,)](x, x, x, n, BLOCK=256)
    ref = base.clone()
    ref[:n] *= 2
    torch.testing.assert_close(x.cpu(), ref)
    # out is x shifted by one element: the block must read all of x before writing any of out
    d = base.clone().to(DEVICE)
    add_kernel[(1,)](d[1:], d[1:], d[:256], 256, BLOCK=256)
    ref = base.clone()
    ref[:256] = base[1:257] * 2
    torch.testing.assert_close(d.cpu(), ref)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.mark.parametrize("shift", [0, 1, -1, 5, 300])
def test_copy_through_a_view_with_overlap(shift):
    n = 256
    base = torch.arange(1024, dtype=torch.int32)
    d = base.clone().to(DEVICE)
    src, dst = 400, 400 + shift
    h = copy_kernel[(1,)](d[src:], d[dst:], n, BLOCK=256)
    ref = base.clone()
    ref[dst:dst + n] = base[src:src + n].clone()
    torch.testing.assert_close(d.cpu(), ref)
    assert sum(bool(through_views(i)) for i in insns(h, "st")) == 1, "the store should read the load's view"


@triton.jit
def rows_kernel(x_ptr, out_ptr, stride_x, stride_o, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride_o + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@pytest.mark.parametrize("cols,block", [(128, 128), (100, 128), (1, 1)])
def test_softmax_rows_from_strided_and_transposed_views(cols, block):
    x = torch.randn(64, 300)
    for src in (x[:, :cols], x.t().contiguous().t()[:, :cols], x[:, :cols].contiguous()):
        out = torch.empty(64, cols, device=DEVICE)
        xd = src.to(DEVICE) if src.is_contiguous() else x.to(DEVICE)[:, :cols]
        rows_kernel[(64,)](xd, out, xd.stride(0), out.stride(0), cols, BLOCK=block)
        torch.testing.assert_close(out.cpu(), torch.softmax(src, dim=1))


@triton.jit
def col_kernel(x_ptr, out_ptr, M, N: tl.constexpr, BLOCK: tl.constexpr):
    # a column: a constant stride of N elements, never one run: no view register (a stride in a
    # register might be one run at run time, and would get one)
    col = tl.program_id(0)
    rows = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + rows * N + col, mask=rows < M)
    tl.store(out_ptr + col * M + rows, v * 2.0, mask=rows < M)


def test_strided_boxes_fall_back_to_the_copy():
    x = torch.randn(50, 7)
    out = torch.empty(7, 50, device=DEVICE)
    h = col_kernel[(7,)](x.to(DEVICE), out, 50, 7, BLOCK=64)
    torch.testing.assert_close(out.cpu(), (x * 2).t())
    assert loads_into_views(h) == 0, "a load that can never be one run needs no view register"


@triton.jit
def store_between_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x + 1.0)   # a store between the load and the next read of x
    tl.store(out_ptr + offs, x * 3.0)


def test_a_store_between_load_and_read_keeps_the_copy():
    x = torch.arange(64, dtype=torch.float32)
    xd, out = x.to(DEVICE), torch.empty(64, device=DEVICE)
    h = store_between_kernel[(1,)](xd, out, BLOCK=64)
    torch.testing.assert_close(out.cpu(), x * 3)
    torch.testing.assert_close(xd.cpu(), x + 1)
    assert loads_into_views(h) == 0


@triton.jit
def load_between_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.load(x_ptr + offs) * 2.0
    z = tl.load(out_ptr + offs)   # a load between the producer of y and its store
    tl.store(out_ptr + offs, y)
    tl.store(x_ptr + offs, z)


def test_a_load_between_producer_and_store_keeps_the_copy():
    x, o = torch.arange(64, dtype=torch.float32), -torch.arange(64, dtype=torch.float32)
    xd, od = x.to(DEVICE), o.to(DEVICE)
    load_between_kernel[(1,)](xd, od, BLOCK=64)
    torch.testing.assert_close(od.cpu(), x * 2)
    torch.testing.assert_close(xd.cpu(), o)
    # one buffer for both: z must be loaded before y lands, and the last store (z, the original) wins;
    # a direct write of y ahead of the load would leave 2x
    xd = x.to(DEVICE)
    load_between_kernel[(1,)](xd, xd, BLOCK=64)
    torch.testing.assert_close(xd.cpu(), x)


@triton.jit
def loop_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@pytest.mark.parametrize("N", [256, 1000, 77])
def test_loads_in_a_loop(N):
    x = torch.randn(8, N)
    out = torch.empty(8, device=DEVICE)
    h = loop_kernel[(8,)](x.to(DEVICE), out, N, BLOCK=128)
    torch.testing.assert_close(out.cpu(), x.sum(1), rtol=1e-5, atol=1e-5)
    # both loads read in place: the first iteration's (lowered on its own) and the loop body's
    assert loads_into_views(h) == 2


def test_out_of_bounds_still_faults_at_the_line_with_the_device_usable():
    x = torch.zeros(100, device=DEVICE)
    out = torch.zeros(1024, device=DEVICE)
    with pytest.raises(_runtime.DeviceError) as e:
        add_kernel[(4,)](x, x, out, 1024, BLOCK=256)  # x has 100 elements: the first block reads past it
    msg = str(e.value)
    assert "out-of-bounds load" in msg and "add_kernel" in msg and "tl.load(x_ptr" in msg
    small = torch.zeros(100, device=DEVICE)
    with pytest.raises(_runtime.DeviceError, match="out-of-bounds store"):
        add_kernel[(1,)](out, out, small, 256, BLOCK=256)  # a store past the end: the view falls back
    add_kernel[(4,)](out, out, out, 1024, BLOCK=256)
    assert float(out.cpu().abs().sum()) == 0.0


def test_copy_elision_can_be_turned_off():
    @triton.jit
    def k2(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * tl.load(y_ptr + offs))

    x = torch.arange(64, dtype=torch.float32, device=DEVICE)
    out = torch.empty(64, device=DEVICE)
    h = k2[(1,)](x, x, out, 64, BLOCK=64, elide_copies=False)
    torch.testing.assert_close(out.cpu(), torch.arange(64, dtype=torch.float32) ** 2)
    assert not any(names_a_view(i) for i in insns(h))


# -- the loader's checks on hand-written programs ----------------------------------------------------------
PROLOGUE = """.kernel k
.sregs 4
.lx 1024
.arg x ptr f32 s0
.arg out ptr f32 s1
.desc [64] [4]
"""


def load(body: str):
    return _runtime.Kernel(parse_asm(PROLOGUE + body).encode())


def test_assembly_round_trips_view_operands():
    text = PROLOGUE + """       ld.f32 x0, s0, d0, _, _, v0
       view.f32 v1, s1, d0, x256
       add.f32 @v1, @v0, @v0, 64
       st.f32 s1, d0, x256, _, v1
       halt
"""
    prog = parse_asm(text)
    body = [ln.strip() for ln in prog.to_asm().splitlines() if ln.startswith(" ")]
    assert body == [ln.strip() for ln in text.strip().splitlines()[-5:]]
    assert parse_asm(prog.to_asm()).encode() == prog.encode()
    x = DevBuf.of(np.arange(64, dtype=np.float32))
    out = DevBuf(256)
    _runtime.Kernel(prog.encode()).launch(0, 1, 1, 1, (x, out))
    np.testing.assert_array_equal(out.view(np.float32, 64), np.arange(64, dtype=np.float32) * 2)


@pytest.mark.parametrize("body,error", [
    ("add.f32 x512, @v0, @v0, 64\n halt\n", "view register v0 is set by no ld or view"),
    ("ld.f32 x0, s0, d0, _, _, v0\n add.f32 x512, @v0, @v0, 128\n halt\n", "512 bytes through view register v0, which covers 256"),
    ("ld.f32 x0, s0, d0, _, _, v300\n halt\n", "view register v300 is not below 256"),
    ("ld.f32 x0, s0, d0, _, _, v0\n st.f32 s1, d0, @v0, _, v0\n halt\n", "takes no view operand"),
])
def test_the_loader_rejects_untrustworthy_view_operands(body, error):
    with pytest.raises(ValueError, match=error):
        load(body)


def test_a_reader_before_its_load_reads_the_fallback_tile_not_stale_memory():
    # v0 is read before the ld sets it: it holds its fallback tile (LX), never an address from an
    # earlier program or launch
    body = """       const.f32 x0, k0, 64
       add.f32 x512, @v0, @v0, 64
       st.f32 s1, d0, x512, _, _
       ld.f32 x0, s0, d0, _, _, v0
       halt
"""
    prog = parse_asm(PROLOGUE + ".const 0x3f800000\n" + body)
    x = DevBuf.of(np.full(64, 5, dtype=np.float32))
    out = DevBuf(256)
    k = _runtime.Kernel(prog.encode())
    for _ in range(2):
        k.launch(0, 3, 1, 1, (x, out))
        np.testing.assert_array_equal(out.view(np.float32, 64), np.full(64, 2, dtype=np.float32))


@triton.jit
def late_address_kernel(X, Y, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    y = tl.load(X + row * stride + cols, mask=cols < N) * 2.0 + 1.0
    Yrow = Y + row * stride  # the store's address is computed after its value (tutorial 05 does this)
    tl.store(Yrow + cols, y, mask=cols < N)


@pytest.mark.parametrize("N", [128, 100])
def test_store_address_arithmetic_moves_ahead_of_the_producer(N):
    x = torch.randn(16, 128)
    out = torch.zeros(16, 128, device=DEVICE)
    h = late_address_kernel[(16,)](x.to(DEVICE), out, 128, N, BLOCK=128)
    ref = torch.zeros(16, 128)
    ref[:, :N] = x[:, :N] * 2 + 1
    torch.testing.assert_close(out.cpu(), ref)
    assert len(insns(h, "view")) == 1
    assert sum(i.t == "f32" and "a" in through_views(i) for i in insns(h, "fma")) == 1



@pytest.mark.parametrize("view", [True, False], ids=["view", "copy"])
def test_a_freed_buffer_faults_though_its_check_was_cached(view):
    # the DMA engine keeps a per-instruction hint of the allocation its last check hit: a free must
    # invalidate it. The kernel reads x + off, another allocation (an argument check cannot see it)
    prologue = """.kernel k
.sregs 4
.lx 1024
.arg x ptr f32 s0
.arg out ptr f32 s1
.arg off int i64 s2
.desc [64] [4]
"""
    body = f"""       add.i64 s3, s0, s2, 1
       ld.f32 x0, s3, d0, _, _, {"v0" if view else "_"}
       st.f32 s1, d0, {"@v0" if view else "x0"}, _, _
       halt
"""
    k = _runtime.Kernel(parse_asm(prologue + body).encode())
    x, other, out = DevBuf(256), DevBuf.of(np.arange(64, dtype=np.float32)), DevBuf(256)
    off = other.addr - x.addr
    for _ in range(3):  # many programs: every core's hint holds `other`
        k.launch(0, 256, 1, 1, (x, out, off))
    np.testing.assert_array_equal(out.view(np.float32, 64), np.arange(64, dtype=np.float32))
    other.free()
    with pytest.raises(_runtime.DeviceError, match="out-of-bounds load"):
        k.launch(0, 256, 1, 1, (x, out, off))
    k.launch(0, 4, 1, 1, (x, out, 0))  # the device and the kernel still work
    np.testing.assert_array_equal(out.view(np.float32, 64), x.view(np.float32, 64))


def test_an_allocation_check_hint_holds_for_its_own_device_only():
    # the same kernel reads the same address on spyre:1 (warming every core's hint) and then from
    # spyre:0, where that address is no allocation of the device: a fault, not a hit
    code = textwrap.dedent("""
        import sys, numpy as np, pytest
        sys.path[:0] = %r
        from spyre_triton import _runtime
        from asm_helpers import DevBuf, parse_asm
        prologue = ".kernel k\\n.sregs 4\\n.lx 1024\\n.arg x ptr f32 s0\\n.arg out ptr f32 s1\\n.arg off int i64 s2\\n.desc [64] [4]\\n"
        body = "add.i64 s3, s0, s2, 1\\n ld.f32 x0, s3, d0, _, _, v0\\n st.f32 s1, d0, @v0, _, _\\n halt\\n"
        k = _runtime.Kernel(parse_asm(prologue + body).encode())
        one, out1 = DevBuf.of(np.arange(64, dtype=np.float32), device=1), DevBuf(256, device=1)
        k.launch(1, 256, 1, 1, (one, out1, 0))
        zero, out0 = DevBuf(256, device=0), DevBuf(256, device=0)
        try:
            k.launch(0, 256, 1, 1, (zero, out0, one.addr - zero.addr))
        except _runtime.DeviceError as e:
            print("fault:", "out-of-bounds load" in str(e))
    """ % [os.path.dirname(__file__), TESTS_DIR])
    env = dict(os.environ, SPYRE_DEVICE_COUNT="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "fault: True" in out.stdout, out.stdout
