"""Scalar registers: one limit (isa.SREGS_MAX, what the runtime accepts), registers shared by liveness
(spyre_triton/compiler/sregs.py), and a compile error naming the source line when a kernel still needs
more than a core has."""
import pytest
import torch
import triton
import triton.language as tl

from spyre_triton import isa
from spyre_triton.compiler import sregs
from spyre_triton.compiler.errors import CompilationError
from spyre_triton.compiler.values import Scalar
from spyre_triton.reference_kernels import collatz_steps, collatz_steps_ref

from asm_helpers import program
from conftest import DEVICE


@triton.jit
def k_collatz(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.map_elementwise(collatz_steps, tl.load(x_ptr + offs)))


def test_map_elementwise_at_the_per_element_limit_fits_the_registers():
    # 4,096 calls, each with its own loop: every call's registers are dead when the next starts.
    # Without sharing this named 53,254 registers and the runtime refused the binary.
    N = 4096
    x = torch.arange(1, N + 1, dtype=torch.int32)
    o = torch.empty(N, dtype=torch.int32, device=DEVICE)
    h = k_collatz[(1,)](x.to(DEVICE), o, N)
    assert program(h).n_sregs <= isa.SREGS_MAX
    assert o.cpu().tolist() == [collatz_steps_ref(v) for v in range(1, N + 1)]


def _insn(op, loc=-1, **args):
    return isa.Insn(op, "i32", "i1", args, {}, loc)


def test_registers_whose_lives_do_not_overlap_share_a_slot():
    s = [Scalar(k, "i32") for k in range(6)]
    insns = [_insn("add", a=s[1], b=s[0], c=s[0], n=1),   # s1 dies at 1
             _insn("add", a=s[2], b=s[1], c=s[1], n=1),   # s2 may take s1's slot only after 1
             _insn("add", a=s[3], b=s[2], c=s[2], n=1),   # s3 takes s1's slot
             _insn("halt")]
    mapping, top = sregs.allocate(insns, [], [], args={0}, pinned=set(), kernel="k", describe=str)
    assert mapping[0] == 0 and mapping[1] != mapping[2] and mapping[3] == mapping[1]
    assert top == 3


def test_a_register_used_in_a_loop_lives_across_it():
    s = [Scalar(k, "i32") for k in range(4)]
    insns = [_insn("add", a=s[1], b=s[0], c=s[0], n=1),   # 0: s1 set before the loop
             _insn("add", a=s[2], b=s[1], c=s[1], n=1),   # 1: loop head: reads s1 every iteration
             _insn("add", a=s[3], b=s[2], c=s[2], n=1),   # 2: s3 must not take s1's slot
             _insn("jmp", a=1),                          # 3: back to 1
             _insn("halt")]
    mapping, _ = sregs.allocate(insns, [], [(1, 3)], args={0}, pinned=set(), kernel="k", describe=str)
    assert mapping[3] != mapping[1] and mapping[2] != mapping[1]


def test_a_register_read_before_any_write_keeps_its_slot():
    # it reads the zero a program starts with: no other register may have left a value there
    s = [Scalar(k, "i32") for k in range(4)]
    insns = [_insn("add", a=s[1], b=s[0], c=s[0], n=1),
             _insn("add", a=s[2], b=s[1], c=s[1], n=1),
             _insn("add", a=s[3], b=s[3], c=s[2], n=1),   # s3 read first
             _insn("halt")]
    mapping, _ = sregs.allocate(insns, [], [], args={0}, pinned=set(), kernel="k", describe=str)
    assert mapping[3] not in (mapping[1], mapping[2])


def test_more_live_registers_than_a_core_has_name_the_source_line():
    n = isa.SREGS_MAX  # and the argument: one more than a core has, the last write the one too many
    s = [Scalar(k, "i32") for k in range(n + 1)]
    writes = [_insn("add", loc=k, a=s[k + 1], b=s[0], c=s[0], n=1) for k in range(n)]
    reads = [_insn("add", a=s[0], b=s[k + 1], c=s[k + 1], n=1) for k in range(n)]
    describe = lambda i: f"kernel.py:{i}: line {i}"
    with pytest.raises(CompilationError, match=rf"more than the {isa.SREGS_MAX} scalar registers"
                                               rf"[\s\S]*at kernel.py:{n - 1}: line {n - 1}"):
        sregs.allocate(writes + reads, [], [], args={0}, pinned=set(), kernel="k", describe=describe)
