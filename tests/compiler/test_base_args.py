"""Which pointer argument each device access derives from (compiler/provenance.py, isa.BASE_ARG): the
runtime checks the access against that argument's allocation, so the compiler must name it wherever the
pointer flows, and name none where the pointer may come from elsewhere."""
import torch
import triton
import triton.language as tl

from asm_helpers import insns
from conftest import DEVICE

MEMORY_OPS = ("ld", "st", "view", "gather", "scatter", "atom", "acas")


def base_args(kernel, *args, **kw):
    """The `arg` flag of each memory instruction in program order, as argument names (None: unknown)."""
    compiled = kernel.warmup(*args, grid=(1,), **kw)
    names = kernel.arg_names
    return [(i.op, names[i.flags["arg"] - 1] if i.flags.get("arg") else None)
            for i in insns(compiled, *MEMORY_OPS)]


def f32(n=64):
    return torch.zeros(n, device=DEVICE)


@triton.jit
def _copy_loop(x, y, n, BLOCK: tl.constexpr):
    xp = x + tl.arange(0, BLOCK)
    yp = y + tl.arange(0, BLOCK)
    for _ in range(n):  # loop-carried pointers, advanced by a step
        tl.store(yp, tl.load(xp))
        xp += BLOCK
        yp += BLOCK


def test_loop_carried_pointers_keep_their_argument():
    found = base_args(_copy_loop, f32(), f32(), 4, BLOCK=64)
    assert {a for op, a in found if op == "ld"} == {"x"}
    assert {a for op, a in found if op in ("st", "view")} == {"y"}


@triton.jit
def _gather_scatter_atomic(x, idx, o, c, BLOCK: tl.constexpr):
    i = tl.load(idx + tl.arange(0, BLOCK))
    tl.store(o + i, tl.load(x + i))  # irregular: a gather and a scatter
    tl.atomic_add(c + tl.arange(0, BLOCK), 1.0)
    tl.atomic_cas(c, 0.0, 1.0)


def test_irregular_and_atomic_accesses_name_their_argument():
    found = base_args(_gather_scatter_atomic, f32(), torch.zeros(64, dtype=torch.int32, device=DEVICE), f32(), f32(),
                      BLOCK=64)
    assert ("gather", "x") in found and ("scatter", "o") in found
    assert ("atom", "c") in found and ("acas", "c") in found
    assert all(a is not None for _, a in found)


@triton.jit
def _branchy(x, y, which, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if which == 0:  # both branches derive from x: still x
        p = x + offs
    else:
        p = x + BLOCK + offs
    q = tl.where(which == 0, x, y) + offs  # x or y: no single argument
    tl.store(y + offs, tl.load(p) + tl.load(q))


def test_branches_of_one_argument_keep_it_and_a_choice_between_two_has_none():
    found = base_args(_branchy, f32(256), f32(256), 0, BLOCK=64)
    loads = [a for op, a in found if op in ("ld", "gather")]
    assert loads.count("x") == 1 and loads.count(None) == 1, found
    assert {a for op, a in found if op in ("st", "view")} == {"y"}


@triton.jit
def _through_memory(table, o, BLOCK: tl.constexpr):
    p = tl.load(table).to(tl.pointer_type(tl.float32))  # a pointer read from memory: no argument
    offs = tl.arange(0, BLOCK)
    tl.store(o + offs, tl.load(p + offs))


def test_a_pointer_from_memory_has_no_argument():
    found = base_args(_through_memory, torch.zeros(1, dtype=torch.int64, device=DEVICE), f32(), BLOCK=64)
    assert (found[0][1], found[1][1]) == ("table", None), found
    assert {a for op, a in found if op in ("st", "view")} == {"o"}


@triton.jit(noinline=True)
def _load_row(p, BLOCK: tl.constexpr):
    return tl.load(p + tl.arange(0, BLOCK))


@triton.jit
def _calls(x, y, BLOCK: tl.constexpr):
    tl.store(y + tl.arange(0, BLOCK), _load_row(x, BLOCK))


def test_a_callee_argument_takes_the_argument_of_its_call_sites():
    found = base_args(_calls, f32(), f32(), BLOCK=64)
    assert ("ld", "x") in found and {a for op, a in found if op in ("st", "view")} == {"y"}
