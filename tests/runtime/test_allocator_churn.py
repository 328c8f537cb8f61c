"""The device allocator under churn: size classes, split and merged cached blocks, a cache bounded by
the peak live bytes, and empty_cache() handing the memory back to the system."""
import gc
import os
import random

import pytest
import torch

DEV = "spyre"
MB = 1 << 20


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ASan replaces malloc: freed memory waits in its quarantine, so RSS measures ASan, not this allocator.
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="under AddressSanitizer RSS includes ASan's quarantine of freed blocks")
def test_varied_sizes_keep_rss_within_4x_the_live_bytes_and_empty_cache_returns_it():
    torch.spyre.empty_cache()
    gc.collect()
    base = rss()
    rng = random.Random(0)
    live, max_live, peak = [None] * 64, 0, 0
    for k in range(4000):
        n = int(2 ** rng.uniform(0, 22))  # 1 B .. 4 MiB, log-uniform
        x = torch.empty(n, dtype=torch.uint8, device=DEV)
        x.fill_(k % 251)  # every page touched: resident
        live[rng.randrange(64)] = x
        if k % 50 == 0:
            max_live = max(max_live, sum(t.numel() for t in live if t is not None))
            peak = max(peak, rss() - base)
    assert peak <= 4 * max_live, f"RSS grew {peak / MB:.1f} MB for at most {max_live / MB:.1f} MB live"
    live = x = None
    gc.collect()
    torch.spyre.empty_cache()
    assert torch.spyre.memory_reserved() == torch.spyre.memory_allocated()
    back = rss() - base
    assert back <= 8 * MB, f"RSS {back / MB:.1f} MB above the baseline after empty_cache()"


def test_a_freed_block_is_split_for_smaller_requests_and_merged_again():
    torch.spyre.empty_cache()
    x = torch.empty(8 * MB, dtype=torch.uint8, device=DEV)
    reserved = torch.spyre.memory_reserved()
    del x
    # four pieces of it, each with its guard page (exact quarters would leave no room for the pages)
    parts = [torch.empty(3 * MB // 2, dtype=torch.uint8, device=DEV) for _ in range(4)]
    assert torch.spyre.memory_reserved() == reserved
    del parts
    y = torch.empty(8 * MB, dtype=torch.uint8, device=DEV)  # the pieces merged back into one block
    assert torch.spyre.memory_reserved() == reserved
    y.fill_(3)
    assert int(y.sum()) == 3 * 8 * MB
    del y
    torch.spyre.empty_cache()


def test_recurring_buffers_come_from_the_cache():
    """A graph's buffers, allocated and freed in the same sizes every step, come back from the cache:
    the same blocks and no new reservation once the cache has settled. It settles after two rounds
    at most: in the first, cached blocks may merge with their neighbours and be split again (under
    ASan, whose mappings lie differently, the second round gives back 2 MB the first reserved)."""
    torch.spyre.empty_cache()
    sizes = [4 * MB, MB, 256 << 10, 3 * MB, 96 << 10, 5 * MB + 17]
    before = None
    for step in range(6):
        bufs = [torch.empty(s, dtype=torch.uint8, device=DEV) for s in sizes]
        ptrs = [b.data_ptr() for b in bufs]
        if step == 2:
            reserved = torch.spyre.memory_reserved()
        if step > 2:
            assert torch.spyre.memory_reserved() == reserved, step
            assert ptrs == before, step
        before = ptrs
        del bufs
