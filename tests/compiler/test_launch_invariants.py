"""Launch invariants: register-only arithmetic on the arguments runs once per core and launch.

The compiler moves scalar instructions that read only arguments and constants to the start of the
program (compiler/hoist.py); the runtime runs the leading register-only instructions once when a
core prepares a launch's registers, and every program starts after them (runtime/interp.c). A loop
with a constant lower bound lowers its peeled first iteration with that constant as the index, so the
index arithmetic on it folds away. These tests check that the results stay those of running every
instruction in every program, and that the code has the shape these optimisations promise.
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import ArgSpec, Builder, DevBuf, Program, insns, mnemonics

from conftest import DEVICE


# --- the runtime: the leading run gives what running it in every program gives ---------------------
def _typed_ops(bld):
    """Register-only instructions through the typed loops (not the inline fast path): an int->float
    conversion, an integer division by zero (defined: 0), a select, an fma; results in slots 8-11."""
    s = bld.s
    bld.emit("cvt", "f32", "i32", a=s(8), b=s(1), n=1, flags={"mode": "sitofp"})
    bld.emit("divs", "i32", a=s(9), b=s(1), c=s(2), n=1)
    bld.emit("cmpi", "i32", a=s(12), b=s(2), c=s(1), n=1, flags={"pred": "slt"})
    bld.emit("select", "i32", a=s(10), b=s(12), c=s(1), d=s(3), n=1)
    bld.emit("fma", "f32", a=s(11), b=s(8), c=s(8), d=s(4), n=1)


def _run(leading: bool, n: int, d: int, grid: int, threads: int):
    bld = Builder(n_sregs=16)
    s = bld.s
    bld.arg("o", "ptr", "i32", s(0))
    bld.arg("n", "int", "i32", s(1))
    bld.arg("d", "int", "i32", s(2))
    bld.emit("const", "i32", a=s(3), b=bld.const(-77), n=1)
    bld.emit("const", "f32", a=s(4), b=bld.const(int(np.float32(0.5).view(np.uint32))), n=1)
    if leading:
        _typed_ops(bld)
    bld.emit("pid", a=s(5), b=0)
    if not leading:
        _typed_ops(bld)
    # out[pid] = (cvt, divs, select, fma): four 4-byte words per program
    bld.emit("const", "i64", a=s(6), b=bld.const(16), n=1)
    bld.emit("cvt", "i64", "i32", a=s(7), b=s(5), n=1, flags={"mode": "sext"})
    bld.emit("mul", "i64", a=s(7), b=s(7), c=s(6), n=1)
    bld.emit("add", "i64", a=s(13), b=s(0), c=s(7), n=1)
    for k, slot in enumerate((8, 9, 10, 11)):
        bld.emit("const", "i64", a=s(14), b=bld.const(4 * k), n=1)
        bld.emit("add", "i64", a=s(15), b=s(13), c=s(14), n=1)
        bld.emit("st", "i32", a=s(15), b=bld.desc([1], [4]), c=s(slot))
    out = DevBuf(16 * grid)
    out.view(np.uint8)[:] = 0xAB
    bld.build().launch(0, grid, 1, 1, (out, n, d), num_threads=threads)
    r = out.view(np.uint32, 4 * grid).reshape(grid, 4).copy()
    out.free()
    return r


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n,d", [(7, 0), (-9, 2), (2**31 - 1, -1), (0, 5)])
def test_leading_register_only_instructions_give_the_per_program_results(n, d, threads):
    per_program = _run(False, n, d, 24, threads)
    leading = _run(True, n, d, 24, threads)
    assert np.array_equal(leading, per_program)
    assert (leading == leading[0]).all()  # the same in every program
    f = np.float32(n)
    expect = [f.view(np.uint32), np.uint32(np.int32(0 if d == 0 else -n if d == -1 else int(n / d))),
              np.uint32(np.int32(n if d < n else -77)), np.float32(f * f + np.float32(0.5)).view(np.uint32)]
    assert [int(v) for v in leading[0]] == [int(v) for v in expect]


def test_each_launch_computes_its_own_invariants():
    # the leading run depends on the arguments: a second launch of the same kernel must not reuse the
    # first launch's values on a core that ran both
    for n, d in [(7, 2), (100, 3), (7, 2), (-5, 0)]:
        r = _run(True, n, d, 4, 2)
        assert int(np.int32(r[0, 1])) == (0 if d == 0 else int(n / d))


# --- the compiler: what moves, and the peeled iteration's folded index ----------------------------
@triton.jit
def row_sum_loop(X, Out, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(X + cols, mask=cols < N, other=0.0)
    tl.store(Out + row, tl.sum(acc, axis=0) / N)


@triton.jit
def row_sum_from(X, Out, stride, start, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(start, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(X + cols, mask=cols < N, other=0.0)
    tl.store(Out + row, tl.sum(acc, axis=0))


@pytest.mark.parametrize("N", [0, 1, 64, 100, 128, 200, 320])
def test_a_loop_with_a_constant_start_sums_every_row(N):
    x = torch.randn(5, max(N, 1))
    out = torch.empty(5, device=DEVICE)
    row_sum_loop[(5,)](x.to(DEVICE), out, x.stride(0), N, BLOCK=64)
    expect = x[:, :N].sum(1) / N if N else torch.full((5,), float("nan"))
    torch.testing.assert_close(out.cpu(), expect, equal_nan=True)


@pytest.mark.parametrize("start,N", [(0, 200), (3, 200), (64, 64), (70, 64), (0, 0), (10, 137)])
def test_a_loop_with_a_variable_start_sums_from_it(start, N):
    x = torch.randn(4, max(N, 1))
    out = torch.empty(4, device=DEVICE)
    row_sum_from[(4,)](x.to(DEVICE), out, x.stride(0), start, N, BLOCK=64)
    torch.testing.assert_close(out.cpu(), x[:, start:N].sum(1) if start < N else torch.zeros(4))


def test_the_peeled_iteration_loads_from_the_row_base_and_the_argument_arithmetic_leads():
    x = torch.randn(2, 128, device=DEVICE)
    h = row_sum_loop[(2,)](x, torch.empty(2, device=DEVICE), 128, 128, BLOCK=64)
    ops = mnemonics(h)
    # N sign-extended (the masks' limit) and converted to f32 (the division) come before the pid
    pid = ops.index("pid.i32")
    assert "cvt.i64.i32" in ops[:pid] and "cvt.f32.i32" in ops[:pid], ops
    # the peeled first iteration: offset 0 folds, so its load follows the branch into it directly
    first_ld = ops.index("ld.f32")
    assert ops[first_ld - 1] == "brz.i1", ops
    # the loop after it still computes its offsets
    second_ld = ops.index("ld.f32", first_ld + 1)
    assert "mul.i64" in ops[first_ld:second_ld], ops


def test_a_register_written_twice_stays_where_it_is():
    # a loop counter is written before the loop and in it: it must not move to the start
    x = torch.randn(2, 200, device=DEVICE)
    h = row_sum_from[(2,)](x, torch.empty(2, device=DEVICE), 200, 0, 200, BLOCK=64)
    code = insns(h)
    pid = next(n for n, i in enumerate(code) if i.op == "pid")
    written = {}  # destination -> how many instructions write it
    for i in code:
        if i.op in ("add", "copy", "sub", "mul", "cvt", "cmpi"):
            written[i.args["a"]] = written.get(i.args["a"], 0) + 1
    for i in code[:pid]:
        if i.op != "const":
            assert written[i.args["a"]] == 1, i


@triton.jit
def scale_rows(X, Y, stride, N, BLOCK: tl.constexpr):
    # no accumulator: the loop is peeled only for its constant start
    row = tl.program_id(0)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + cols, mask=cols < N)
        tl.store(Y + row * stride + cols, x * 2.0 + 1.0, mask=cols < N)


@pytest.mark.parametrize("N", [0, 1, 64, 100, 128, 200])
def test_a_loop_without_accumulators_peeled_for_its_constant_start(N):
    x = torch.randn(3, 256)
    y = torch.full((3, 256), -7.0, device=DEVICE)
    h = scale_rows[(3,)](x.to(DEVICE), y, 256, N, BLOCK=64)
    expect = torch.full((3, 256), -7.0)
    expect[:, :N] = x[:, :N] * 2.0 + 1.0
    torch.testing.assert_close(y.cpu(), expect)
    if N == 1:
        return  # Triton specialises N == 1: a constant trip count, no loop left to peel
    ops = mnemonics(h)
    assert ops.count("jmp") == 1, ops
    # the peeled iteration computes fewer addresses than the loop after it (its offset is 0)
    brz = [i for i, o in enumerate(ops) if o == "brz.i1"]
    lds = [i for i, o in enumerate(ops) if o == "ld.f32"]
    assert len(brz) == 2 and len(lds) == 2 and lds[0] - brz[0] < lds[1] - brz[1], ops


# --- the hoisting pass on its own, over hand-made instruction lists ---------------------------------
def _hoist(prologue, insns, n_args=2):
    from spyre_triton.compiler.hoist import hoist_launch_invariants
    from spyre_triton.compiler.mir import MachineFunction
    mf = MachineFunction([], arg_slots=range(n_args))  # the arguments in registers 0 .. n_args - 1
    mf.prologue, mf.insns = prologue, insns
    mf = hoist_launch_invariants(mf)
    return [(i.op, i.args["a"].slot if hasattr(i.args.get("a"), "slot") else i.args.get("a")) for i in mf.insns]


def _s(slot, t="i32"):
    from spyre_triton.compiler.values import Scalar
    return Scalar(slot, t)


def _insn(op, t="i32", t2="i1", **args):
    from spyre_triton import isa
    return isa.Insn(op, t, t2, dict(args), {}, -1)


def test_the_pass_moves_argument_arithmetic_and_what_builds_on_it():
    consts = [_insn("const", "i64", a=_s(9, "i64"), b=0, n=1)]
    insns = [_insn("pid", a=_s(2), b=0),
             _insn("cvt", "i64", "i32", a=_s(3, "i64"), b=_s(1), n=1),           # N sign-extended: moves
             _insn("mul", "i64", a=_s(4, "i64"), b=_s(3, "i64"), c=_s(9, "i64"), n=1),  # on it and a constant: moves
             _insn("add", a=_s(5), b=_s(2), c=_s(1), n=1)]                        # reads the pid: stays
    assert _hoist(consts, insns) == [("cvt", 3), ("mul", 4), ("pid", 2), ("add", 5)]


def test_the_pass_leaves_registers_written_twice_and_argument_registers():
    insns = [_insn("pid", a=_s(2), b=0),
             _insn("copy", a=_s(3), b=_s(1), n=1),                 # a loop counter: written here ...
             _insn("add", a=_s(3), b=_s(3), c=_s(0), n=1),         # ... and here
             _insn("add", a=_s(0), b=_s(1), c=_s(1), n=1),         # writes an argument's register
             _insn("add", a=_s(4), b=_s(0), c=_s(1), n=1)]         # reads that argument: it is not invariant
    assert _hoist([], insns) == [("pid", 2), ("copy", 3), ("add", 3), ("add", 0), ("add", 4)]


def test_the_pass_leaves_readers_of_a_constant_register_written_again():
    consts = [_insn("const", a=_s(5), b=0, n=1)]
    insns = [_insn("pid", a=_s(2), b=0),
             _insn("add", a=_s(6), b=_s(5), c=_s(1), n=1),
             _insn("copy", a=_s(5), b=_s(2), n=1)]  # the constant's register rewritten
    assert _hoist(consts, insns) == [("pid", 2), ("add", 6), ("copy", 5)]
