"""The caching allocator of device memory (runtime/devmem.c): freed blocks of 64 KB and more are kept for
the next allocation of their size class, are out of the allocation table while cached (a kernel touching one
faults), give way to live memory at the capacity, and go back to the host on empty_cache()."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl

from conftest import Address

import spyre_triton._runtime as rt

MB = 1 << 20
G = rt.MAP_GUARD_BYTES  # the page after each block of 64 KB and more that no allocation holds (reserved too)


def run(code, **env):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", **env))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_freed_block_is_reused_for_the_same_size():
    rt.empty_cache(0)
    live = rt.memory_allocated(0)
    a = rt.alloc(0, 3 * MB)
    reserved = rt.memory_reserved(0)
    rt.free(0, a)
    assert rt.memory_allocated(0) == live
    assert rt.memory_cached(0) == 3 * MB + G and rt.memory_reserved(0) == reserved
    b = rt.alloc(0, 3 * MB - 100)  # rounds to the same host size
    assert b == a and rt.memory_cached(0) == 0
    assert rt.memory_allocated(0) == live + 3 * MB - 100
    c = rt.alloc(0, 5 * MB)  # another size: a new block
    rt.free(0, b)
    rt.free(0, c)
    assert rt.memory_cached(0) == 3 * MB + 6 * MB + 2 * G  # 5 MB sits on 2 MB pages: 6 MB
    rt.empty_cache(0)
    assert rt.memory_cached(0) == 0 and rt.memory_reserved(0) == reserved - 3 * MB - G


def test_small_blocks_are_not_cached():
    before = rt.memory_cached(0)
    rt.free(0, rt.alloc(0, 60 << 10))
    assert rt.memory_cached(0) == before


def test_a_cached_block_is_not_device_memory():
    a = rt.alloc(0, MB)
    assert rt.mem_check(0, a, MB)[0]
    rt.free(0, a)
    assert not rt.mem_check(0, a, 1)[0]
    with pytest.raises(ValueError):  # and it is no longer a pointer the device will free
        rt.free(0, a)
    rt.empty_cache(0)


@triton.jit
def copy_kernel(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))




def test_a_kernel_reading_a_freed_tensor_faults_and_the_device_keeps_working():
    x = torch.ones(1 << 18, device="spyre")  # 1 MB: cached when freed
    addr = x.data_ptr()
    out = torch.zeros(128, device="spyre")
    del x
    assert rt.memory_cached(0) >= MB
    with pytest.raises(rt.DeviceError, match="not in spyre:0 memory"):
        copy_kernel[(1,)](Address(addr), out, BLOCK=128)
    y = torch.full((1 << 18,), 2.0, device="spyre")  # the block again, now live
    copy_kernel[(1,)](y, out, BLOCK=128)
    assert torch.equal(out.cpu(), torch.full((128,), 2.0))


def test_the_cache_gives_way_at_the_capacity():
    out = run("""
        import spyre_triton._runtime as rt
        MB = 1 << 20
        a = rt.alloc(0, 6 * MB)    # cached: within the cache's limit, half the card
        rt.free(0, a)
        G = rt.MAP_GUARD_BYTES
        assert rt.memory_cached(0) == 6 * MB + G
        b = rt.alloc(0, 12 * MB)   # 6 cached + 12 live would pass the 16 MB card: the cached block goes
        assert rt.memory_cached(0) == 0 and rt.memory_reserved(0) == 12 * MB + G, rt.memory_reserved(0)
        print("ok")
    """, SPYRE_DEVICE_MEMORY_BYTES="16M")
    assert out == "ok"


def test_the_cache_limit_and_switching_it_off():
    code = """
        import spyre_triton._runtime as rt
        MB = 1 << 20
        for n in (1, 2, 3, 4):
            rt.free(0, rt.alloc(0, n * MB))
        print(rt.memory_cached(0), rt.memory_reserved(0))
    """
    assert run(code, SPYRE_MEMORY_CACHE_BYTES="0") == "0 0"
    # a 5 MB bound: the newest blocks (merged where the host placed them side by side) within it
    cached, reserved = map(int, run(code, SPYRE_MEMORY_CACHE_BYTES="5M").split())
    assert 4 * MB <= cached <= 5 * MB and reserved == cached


def test_blocks_stay_with_their_device():
    out = run("""
        import spyre_triton._runtime as rt
        MB = 1 << 20
        a = rt.alloc(1, MB)
        rt.free(1, a)
        b = rt.alloc(0, MB)
        assert b != a and rt.memory_cached(1) == MB + rt.MAP_GUARD_BYTES and rt.memory_cached(0) == 0
        assert not rt.mem_check(1, a, 1)[0] and rt.alloc(1, MB) == a
        print("ok")
    """, SPYRE_DEVICE_COUNT="2")
    assert out == "ok"


def test_torch_memory_stats():
    torch.spyre.empty_cache()
    torch.spyre.reset_peak_memory_stats()
    base = torch.spyre.memory_reserved()
    x = torch.empty(MB, dtype=torch.uint8, device="spyre")
    peak = torch.spyre.memory_reserved()
    assert peak == base + MB + G and torch.spyre.max_memory_reserved() == peak
    del x
    assert torch.spyre.memory_reserved() == peak  # cached
    torch.spyre.empty_cache()
    assert torch.spyre.memory_reserved() == base and torch.spyre.max_memory_reserved() == peak


@triton.jit
def store_at_kernel(base, other, off, value):
    # a pointer chosen between two arguments has no single base argument: the store (one element, a
    # scatter) is checked against the whole allocation table, through its instruction's hint
    p = tl.where(off >= 0, base, other)
    tl.store(p + off, value)


def test_a_scatter_into_a_freed_tensor_faults_though_its_check_was_cached():
    x = torch.zeros(1024, device="spyre")
    f = torch.zeros(1 << 18, device="spyre")
    off = (f.data_ptr() - x.data_ptr()) // 4
    store_at_kernel[(1,)](x, x, off, 3.0)  # lands in f, and leaves f's allocation in the hint
    assert f[0].item() == 3.0
    del f  # cached by the allocator, out of the table
    with pytest.raises(rt.DeviceError, match="scatter"):
        store_at_kernel[(1,)](x, x, off, 4.0)
    store_at_kernel[(1,)](x, x, 5, 5.0)  # the device keeps working
    assert x[5].item() == 5.0
