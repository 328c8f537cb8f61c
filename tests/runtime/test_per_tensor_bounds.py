"""Per-tensor memory safety: every device access is checked against the allocation of the pointer argument
it derives from (isa.BASE_ARG), so a pointer derived from one argument cannot read or write another live
tensor; accesses whose argument the compiler cannot tell are checked against the allocation table, and
small allocations keep a guard gap between them; an allocation freed while a launch uses it faults the
accesses through it. docs/reliability.md states what is guaranteed."""
import ctypes
import threading
import time

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from conftest import Address, DEVICE

import spyre_triton._runtime as rt


def neighbours(n):
    """Two f32 tensors of n elements, `lo` at the lower address; the allocator decides where they go."""
    a = torch.zeros(n, device=DEVICE)
    b = torch.zeros(n, device=DEVICE)
    return (a, b) if a.data_ptr() < b.data_ptr() else (b, a)


# -- a wild pointer into a neighbour ------------------------------------------------------------
@triton.jit
def _shifted_store(o, delta, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o + delta + offs, tl.full([BLOCK], 7.0, tl.float32))


@triton.jit
def _shifted_load(x, delta, y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + delta + offs))


@triton.jit
def _shifted_scatter(o, idx, delta, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o + delta + tl.load(idx + offs), tl.full([BLOCK], 7.0, tl.float32))  # irregular: a scatter


@triton.jit
def _shifted_gather(x, idx, delta, y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + delta + tl.load(idx + offs)))


@triton.jit
def _shifted_atomic(o, delta, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(o + delta + offs, tl.full([BLOCK], 7.0, tl.float32))


def _wild(kind, own, victim, delta, block):
    idx = torch.arange(block, dtype=torch.int32, device=DEVICE)
    sink = torch.zeros(block, device=DEVICE)
    if kind == "store":
        _shifted_store[(1,)](own, delta, BLOCK=block)
    elif kind == "load":
        _shifted_load[(1,)](own, delta, sink, BLOCK=block)
    elif kind == "scatter":
        _shifted_scatter[(1,)](own, idx, delta, BLOCK=block)
    elif kind == "gather":
        _shifted_gather[(1,)](own, idx, delta, sink, BLOCK=block)
    else:
        _shifted_atomic[(1,)](own, delta, BLOCK=block)
    return sink


@pytest.mark.parametrize("kind", ["store", "load", "scatter", "gather", "atomic"])
def test_a_wild_pointer_into_a_neighbour_faults_naming_its_argument(kind):
    own, victim = neighbours(256)
    victim.fill_(3.0)
    delta = (victim.data_ptr() - own.data_ptr()) // 4  # lands wholly inside the other live tensor
    with pytest.raises(rt.DeviceError) as ei:
        _wild(kind, own, victim, delta, 64)
    e = ei.value
    assert e.arg == "o" if kind in ("store", "scatter", "atomic") else e.arg == "x"
    assert e.allocation == (own.data_ptr(), own.numel() * 4)
    assert e.address == victim.data_ptr()
    assert f"after the end of argument '{e.arg}'" in str(e) and "test_per_tensor_bounds.py" in str(e)
    assert torch.equal(victim.cpu(), torch.full((256,), 3.0)) and torch.equal(own.cpu(), torch.zeros(256))
    # in bounds, the same kernels run
    _wild(kind, own, victim, 64, 64)


def test_the_allocation_of_a_view_argument_is_its_storage():
    """An argument may point into the middle of its tensor's storage: everything of that storage is its."""
    base = torch.zeros(512, device=DEVICE)
    _shifted_store[(1,)](base[256:], -256, BLOCK=64)  # before the view's first element, inside its storage
    assert base[:64].eq(7.0).all() and base[64:].eq(0.0).all()


# -- an oversize grid ---------------------------------------------------------------------------
@triton.jit
def _fill_blocks(o, REVERSED: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if REVERSED:  # the last block runs first: the programs far past the end start before any other
        pid = tl.num_programs(0) - 1 - pid
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(o + offs, tl.full([BLOCK], 1.0, tl.float32))  # unmasked


@pytest.mark.parametrize("reversed_", [False, True], ids=["first-block-first", "last-block-first"])
def test_an_oversize_grid_writes_nothing_outside_its_tensor(reversed_):
    block = 128
    o, victim = neighbours(8 * block)
    victim.fill_(3.0)
    # programs enough to cover the neighbour too: every one past o's end must fault before writing
    grid = (victim.data_ptr() + victim.numel() * 4 - o.data_ptr()) // (block * 4)
    assert grid > 8 + 6
    with pytest.raises(rt.DeviceError) as ei:
        _fill_blocks[(grid,)](o, REVERSED=reversed_, BLOCK=block)
    e = ei.value
    first_bad = e.pid[0] if not reversed_ else grid - 1 - e.pid[0]
    assert e.arg == "o" and first_bad >= 8 and e.allocation == (o.data_ptr(), o.numel() * 4)
    assert torch.equal(victim.cpu(), torch.full((8 * block,), 3.0))
    # programs that were in bounds may have run (their writes are legal); nothing else changed in o
    assert set(o.cpu().unique().tolist()) <= {0.0, 1.0}
    _fill_blocks[(8,)](o, REVERSED=reversed_, BLOCK=block)  # the device keeps working
    assert o.cpu().eq(1.0).all()


# -- accesses the compiler cannot tie to one argument -------------------------------------------
@triton.jit
def _either(x, y, which, n, BLOCK: tl.constexpr):
    p = tl.where(which == 0, x, y)  # a pointer selected between two arguments: no single base
    offs = tl.arange(0, BLOCK)
    tl.store(p + n + offs, tl.full([BLOCK], 7.0, tl.float32))


def test_an_access_of_unknown_base_is_checked_against_the_allocation_table():
    x, y = neighbours(64)
    _either[(1,)](x, y, 0, 0, BLOCK=64)
    _either[(1,)](x, y, 1, 0, BLOCK=64)
    assert x.cpu().eq(7.0).all() and y.cpu().eq(7.0).all()
    x.zero_()
    y.fill_(3.0)
    with pytest.raises(rt.DeviceError) as ei:  # just past x's end: into the guard gap, not into y
        _either[(1,)](x, y, 0, 64, BLOCK=64)
    assert ei.value.arg is None and "after the end of the nearest allocation" in str(ei.value)
    assert y.cpu().eq(3.0).all()


def test_small_allocations_keep_a_guard_gap():
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 16 << 10, 200)
    blocks = sorted((rt.alloc(0, int(n)), int(n)) for n in sizes)
    try:
        gaps = [b - (a + n) for (a, n), (b, _) in zip(blocks, blocks[1:])]
        assert min(gaps) >= rt.GUARD_BYTES, min(gaps)
    finally:
        for a, _ in blocks:
            rt.free(0, a)


def _cut_from_one_mapping(sizes):
    """Blocks of `sizes` bytes cut back to back from one cached mapping, sorted by address: a freed 64 MB block
    stays cached, and each allocation below takes the front of what is left of it."""
    rt.free(0, rt.alloc(0, 64 << 20))
    return sorted((rt.alloc(0, n), n) for n in sizes)


def test_mapped_allocations_keep_a_guard_gap():
    # exact size classes (1, 4 MB) have no slack of their own: the gap is a page past the class
    torch.spyre.empty_cache()
    blocks = _cut_from_one_mapping([1 << 20, 1 << 16, 4 << 20, 1 << 20, 3 << 20, (1 << 20) + 4, 1 << 20])
    try:
        assert all(a for a, _ in blocks)
        gaps = [b - (a + n) for (a, n), (b, _) in zip(blocks, blocks[1:])]
        assert min(gaps) >= rt.MAP_GUARD_BYTES >= rt.GUARD_BYTES, gaps
        assert max(gaps) < 1 << 20, gaps  # cut from one mapping, not spread over the address space
    finally:
        for a, _ in blocks:
            rt.free(0, a)
        torch.spyre.empty_cache()


def test_an_access_of_unknown_base_off_a_mapped_tensor_faults():
    n = 1 << 18  # 1 MB of f32: a mapped block, with no slack in its size class
    torch.spyre.empty_cache()
    rt.free(0, rt.alloc(0, 16 << 20))  # cached: the two tensors below are cut from it back to back
    x, y = neighbours(n)
    assert y.data_ptr() - (x.data_ptr() + 4 * n) == rt.MAP_GUARD_BYTES
    y.fill_(3.0)
    with pytest.raises(rt.DeviceError) as ei:
        _either[(1,)](x, y, 0, n, BLOCK=64)
    assert ei.value.arg is None and "after the end of the nearest allocation" in str(ei.value)
    assert y.cpu().eq(3.0).all()
    del x, y
    torch.spyre.empty_cache()


# -- stale pointers -----------------------------------------------------------------------------


@triton.jit
def _wait_then_store(o, started, go, BLOCK: tl.constexpr):
    tl.store(started, 1)
    while tl.load(go, volatile=True) == 0:
        pass
    offs = tl.arange(0, BLOCK)
    tl.store(o + offs, tl.full([BLOCK], 7.0, tl.float32))


def test_a_block_freed_and_reused_during_a_launch_faults_the_stale_argument():
    nbytes = 1 << 20  # a cached size: freed, the block goes to the next allocation of its size
    torch.spyre.empty_cache()  # no cached neighbour for the freed block to merge with
    o = rt.alloc(0, nbytes)
    flags = torch.zeros(2, dtype=torch.int32, device=DEVICE)
    started = ctypes.c_int32.from_address(flags.data_ptr())
    go = ctypes.c_int32.from_address(flags.data_ptr() + 4)
    reused = []

    def free_and_reuse():
        while started.value == 0:
            time.sleep(0.001)
        rt.free(0, o)
        n = rt.alloc(0, nbytes)  # the same block, now someone else's tensor
        ctypes.memset(n, 0, nbytes)
        reused.append(n)
        go.value = 1

    t = threading.Thread(target=free_and_reuse)
    t.start()
    try:
        with pytest.raises(rt.DeviceError, match="was freed while the launch ran") as ei:
            _wait_then_store[(1,)](Address(o), flags, flags[1:], BLOCK=64)
    finally:
        t.join()
    assert ei.value.arg == "o" and ei.value.freed and reused == [o]  # the new tenant got the same block
    assert not np.frombuffer((ctypes.c_char * nbytes).from_address(reused[0]), np.uint8).any()
    rt.free(0, reused[0])


def test_a_stale_pointer_to_a_freed_block_is_refused_at_launch():
    addr = rt.alloc(0, 1 << 20)
    rt.free(0, addr)  # cached for reuse, out of the allocation table
    with pytest.raises(rt.DeviceError, match="argument 'o' is not in spyre:0 memory"):
        _shifted_store[(1,)](Address(addr), 0, BLOCK=64)


def test_a_stale_pointer_after_reuse_is_bounded_by_the_new_allocation():
    """Not detected: a raw address into a block that a new allocation took between launches is that
    allocation's address (a torch tensor cannot be stale: it holds its storage). What holds is that the
    stale pointer reaches no further than the block's new owner."""
    nbytes = 1 << 20
    old = rt.alloc(0, nbytes)
    rt.free(0, old)
    new = torch.full((nbytes // 4 - 64,), 3.0, device=DEVICE)  # the same size class: the same block
    assert new.data_ptr() == old
    _shifted_store[(1,)](Address(old), 0, BLOCK=64)  # inside the new tensor: allowed, as for any pointer to it
    assert new[:64].eq(7.0).all()
    with pytest.raises(rt.DeviceError, match="after the end of argument 'o'"):
        _shifted_store[(1,)](Address(old), nbytes // 4 - 64, BLOCK=64)  # the old size, past the new one
