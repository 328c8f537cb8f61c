"""The metrics card (spyre_triton.profile): per-core utilisation, bytes per core, DMA/compute overlap and
the LX occupancy peak with its source line; in prof.table(), the Chrome trace's counter tracks and the
roofline. Each is checked against what it must be, and against a change of the hardware configuration
that must move it one way."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import spyre_triton
from spyre_triton.perf import get_hardware
from spyre_triton.reference_kernels import copy_kernel, tile_matmul_kernel

from conftest import DEVICE


def one(fn, hw=None, **kw):
    with spyre_triton.profile(hw=hw, **kw) as prof:
        fn()
    assert len(prof.kernels) == 1
    return prof, prof.kernels[0]


@triton.jit
def two_tiles_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)
    b = tl.load(x_ptr + BLOCK + offs)
    tl.store(y_ptr + offs, a * b)  # LX_PEAK_LINE: a, b and their product meet here


@pytest.fixture(scope="module")
def big():
    return torch.randn(1 << 20, device=DEVICE), torch.empty(1 << 20, device=DEVICE)


@pytest.fixture(scope="module")
def mats():
    a = torch.randn(256, 256, device=DEVICE)
    return a, torch.randn(256, 256, device=DEVICE), torch.empty(256, 256, device=DEVICE)


def copy(big, programs=256, hw=None):
    x, y = big
    return one(lambda: copy_kernel[(programs,)](x, y, x.numel(), BLOCK=x.numel() // programs), hw)


def matmul(mats, hw=None, **kw):
    a, b, c = mats
    return one(lambda: tile_matmul_kernel[(16,)](a, b, c, 256, 256, 256, BM=64, BN=64, BK=64), hw, **kw)


def test_bytes_per_core_add_up_to_the_launch_and_fall_with_more_cores(big):
    _, r = copy(big)
    assert len(r.core_bytes) == get_hardware().num_cores
    assert sum(r.core_bytes) == pytest.approx(r.dma_bytes, rel=1e-6)
    assert sum(r.core_read_bytes) == pytest.approx(r.dma_read_bytes, rel=1e-6)
    _, r8 = copy(big, hw=get_hardware().replace(num_cores=8))
    # the same traffic over a quarter of the cores: each moves four times as much
    assert max(r8.core_bytes) == pytest.approx(4 * max(r.core_bytes), rel=1e-6)


def test_utilisation_counts_idle_cores_and_rises_with_memory_bandwidth(big):
    _, r = copy(big, programs=8)
    used = [u for u in r.core_utilisation if u > 0]
    assert len(used) == 8 and all(0 < u <= 1 for u in used)
    assert r.core_utilisation.count(0.0) == get_hardware().num_cores - 8
    # a copy is memory-bound: the cores wait on device memory, so faster memory keeps them busier
    hw = get_hardware()
    _, slow = copy(big)
    _, fast = copy(big, hw=hw.replace(dram_read_bw=4 * hw.dram_read_bw, dram_write_bw=4 * hw.dram_write_bw,
                                      dram_mixed_bw=4 * hw.dram_mixed_bw))
    assert max(slow.core_utilisation) < 1.0
    assert sum(fast.core_utilisation) > sum(slow.core_utilisation)


def test_overlap_is_a_share_and_falls_without_double_buffering(mats):
    _, r = matmul(mats)
    assert 0 < r.overlap <= 1
    for c in range(len(r.cycles_per_core)):
        assert r.core_overlap_cycles[c] <= min(r.core_dma_cycles[c], r.core_compute_cycles[c]) + 1e-6
    # without a second LX copy a DMA into a tile waits until the PE array has read the old contents
    _, single = matmul(mats, hw=get_hardware().replace(double_buffer=False))
    assert single.overlap < r.overlap


def test_lx_peak_names_the_line_where_tiles_meet():
    x = torch.randn(2048, device=DEVICE)
    y = torch.empty(1024, device=DEVICE)
    _, r = one(lambda: two_tiles_kernel[(1,)](x, y, BLOCK=1024))
    peak, pc = r.lx_peak
    assert pc is not None and peak >= 2 * 1024 * 4  # two fp32 tiles of 1024 live at once
    assert peak <= r.lx_bytes  # the occupancy never exceeds the footprint the allocator reserved
    line = next(i for i, s in enumerate(open(__file__).read().splitlines(), 1) if "# LX_PEAK_LINE" in s)
    assert r.lx_peak_source() == f"test_metrics_card.py:{line}"
    assert r.lx_at(0) < peak


def test_table_and_trace_show_the_card(mats):
    prof, r = matmul(mats, detail=True, trace_programs=2)
    text = prof.table()
    assert "per-core metrics" in text and "tile_matmul_kernel" in text.split("per-core metrics")[1]
    card = prof.by_kernel()["tile_matmul_kernel"]
    assert card["cores_used"] == 16 and card["util_max"] <= 1 and card["overlap"] == pytest.approx(r.overlap)
    counters = {}
    for e in prof.chrome_trace()["traceEvents"]:
        if e["ph"] == "C":
            counters.setdefault(e["name"], []).append(e)
    assert {"core utilisation %", "DMA MB per core", "DMA/compute overlap %"} <= set(counters)
    first = counters["DMA MB per core"][0]["args"]
    assert sum(first.values()) == pytest.approx(r.dma_bytes / 1e6, rel=1e-4)
    lx = [e for name, evs in counters.items() if name.startswith("LX bytes core") for e in evs]
    assert lx and max(e["args"]["bytes"] for e in lx) <= r.lx_bytes


def test_roofline_draws_the_cores_spread(mats, tmp_path):
    pytest.importorskip("matplotlib", reason="roofline() draws with matplotlib, an optional dependency")
    prof, _ = matmul(mats)
    prof.roofline(str(tmp_path / "r.png"))
    assert (tmp_path / "r.png").stat().st_size > 0


def test_ring_carries_the_dma_bytes_and_a_narrower_ring_is_busier(big):
    _, r = copy(big)
    hw = get_hardware()
    # every DRAM <-> LX byte crosses the on-chip ring: the launch's DMA bytes, which the cores moved
    assert r.ring_bytes == r.dma_bytes == r.dma_read_bytes + r.dma_write_bytes > 0
    assert sum(r.core_bytes) == pytest.approx(r.ring_bytes, rel=1e-6)
    busier = max(r.dma_read_bytes, r.dma_write_bytes)
    assert r.ring_utilisation == pytest.approx(busier / (2 * hw.ring_bytes_per_cycle) / r.span_cycles)
    assert 0 < r.ring_utilisation < 1  # device memory (100 B/cycle) is slower than the ring (2 x 128)
    # a quarter of the ring's width: the same bytes in the same time (device memory still sets the pace)
    _, narrow = copy(big, hw=hw.replace(ring_bytes_per_cycle=hw.ring_bytes_per_cycle / 4))
    assert narrow.ring_bytes == r.ring_bytes and narrow.modeled_ns == pytest.approx(r.modeled_ns)
    assert narrow.ring_utilisation == pytest.approx(4 * r.ring_utilisation)
    # narrower still, the ring is the floor: it is saturated and the launch takes longer
    _, tight = copy(big, hw=hw.replace(ring_bytes_per_cycle=4.0))
    assert tight.ring_utilisation == pytest.approx(1.0)
    assert tight.modeled_ns > 1.5 * r.modeled_ns and tight.bottleneck == "memory"


def test_table_and_trace_show_the_ring(big):
    prof, r = copy(big)
    text = prof.table()
    assert "ring MB" in text.split("per-core metrics")[1]
    assert f"on-chip ring (DRAM <-> LX): {r.ring_bytes / 1e6:.3f} MB" in text
    card = prof.by_kernel()["copy_kernel"]
    assert card["ring_bytes"] == r.ring_bytes and card["ring_utilisation"] == pytest.approx(r.ring_utilisation)
    counters = {}
    for e in prof.chrome_trace()["traceEvents"]:
        if e["ph"] == "C":
            counters.setdefault(e["name"], []).append(e["args"])
    assert counters["ring MB (on-chip)"][0]["ring"] == pytest.approx(r.ring_bytes / 1e6, rel=1e-6)
    assert counters["ring utilisation %"][0]["ring"] == pytest.approx(100 * r.ring_utilisation, abs=0.01)
    assert counters["ring utilisation %"][-1]["ring"] == 0  # back to 0 when the launch ends
