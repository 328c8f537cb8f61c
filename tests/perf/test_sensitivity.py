"""Every assumed figure of the card is a HardwareConfig field that moves the model the right way, and
profile(sensitivity=True) reports how the total changes at +-25% of each (spyre_triton.perf)."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

import spyre_triton
from spyre_triton.perf import HardwareConfig, get_hardware
from spyre_triton.perf.capture import SENSITIVITY_FIGURES
from spyre_triton.reference_kernels import copy_kernel, pe_kernel

from conftest import DEVICE


@triton.jit
def exp_kernel(x_ptr, y_ptr, REPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(REPS):
        x = tl.exp(x) * 0.5
    tl.store(y_ptr + offs, x)


@triton.jit
def add_one_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


def one(fn, hw=None, **kw):
    with spyre_triton.profile(hw=hw, **kw) as prof:
        fn()
    assert len(prof.kernels) == 1
    return prof.kernels[0]


def pe_run(dtype, hw=None):
    a = torch.randn(64, 128, device=DEVICE, dtype=dtype)
    b = torch.randn(128, 64, device=DEVICE, dtype=dtype)
    c = torch.empty(32 * 64 * 64, device=DEVICE)
    return one(lambda: pe_kernel[(32,)](a, b, c, ITERS=16, BM=64, BN=64, BK=128), hw)


def test_pe_rates_per_dtype_are_hardware_figures():
    hw = get_hardware()
    base16, base32 = pe_run(torch.float16), pe_run(torch.float32)
    assert base32.unit_busy["pe"] > 3 * base16.unit_busy["pe"]  # fp32 inputs at a quarter of the rate
    fast16 = pe_run(torch.float16, hw.replace(pe_rate_16bit=2 * hw.pe_rate_16bit))
    assert fast16.unit_busy["pe"] < 0.6 * base16.unit_busy["pe"] and fast16.modeled_ns < base16.modeled_ns
    fast32 = pe_run(torch.float32, hw.replace(pe_rate_f32=1.0))
    assert fast32.unit_busy["pe"] < 0.3 * base32.unit_busy["pe"]
    # a figure of one dtype class leaves the others alone
    assert pe_run(torch.float16, hw.replace(pe_rate_f32=1.0)).unit_busy["pe"] == base16.unit_busy["pe"]


@triton.jit
def sfu_fn_kernel(x_ptr, y_ptr, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(32):
        if FN == "sqrt":
            x = tl.sqrt(x) + 0.5
        elif FN == "pow":
            x = libdevice.pow(x, 0.75) + 0.5
        elif FN == "lgamma":
            x = libdevice.lgamma(x) + 2.0
        else:
            x = tl.exp(x) * 0.5
    tl.store(y_ptr + offs, x)


@pytest.mark.parametrize("fn, figure", [("sqrt", "sfu_reciprocal_cost"), ("exp", "transcendental_cost"),
                                        ("pow", "sfu_compound_cost"), ("lgamma", "sfu_special_cost")])
def test_each_sfu_cost_class_is_its_own_figure(fn, figure):
    """isa.SFU_COST puts every SFU function in a class; each class's cycles per lane is one HardwareConfig
    figure, which moves that function's SFU time and no other's."""
    hw = get_hardware()
    x = torch.rand(8 * 1024, device=DEVICE) + 1.0
    y = torch.empty_like(x)
    run = lambda h=None: one(lambda: sfu_fn_kernel[(8,)](x, y, FN=fn, BLOCK=1024), h)
    base = run()
    assert run(hw.replace(**{figure: 2 * getattr(hw, figure)})).unit_busy["sfu"] == pytest.approx(
        2 * base.unit_busy["sfu"], rel=0.05)
    for other in {"sfu_reciprocal_cost", "transcendental_cost", "sfu_compound_cost", "sfu_special_cost"} - {figure}:
        assert run(hw.replace(**{other: 2 * getattr(hw, other)})).unit_busy["sfu"] == base.unit_busy["sfu"], other


def test_clock_sfu_cost_dram_latency_and_bandwidth_move_the_model():
    hw = get_hardware()
    x = torch.rand(32 * 1024, device=DEVICE)
    y = torch.empty_like(x)
    run_exp = lambda h=None: one(lambda: exp_kernel[(32,)](x, y, REPS=128, BLOCK=1024), h)
    base = run_exp()
    assert base.bottleneck == "sfu"
    fast = run_exp(hw.replace(clock_hz=2 * hw.clock_hz))  # SFU cycles take half the time; launch_ns stays
    assert fast.modeled_ns - hw.launch_ns < 0.7 * (base.modeled_ns - hw.launch_ns)
    dearer = run_exp(hw.replace(transcendental_cost=2 * hw.transcendental_cost))
    assert dearer.unit_busy["sfu"] == pytest.approx(2 * base.unit_busy["sfu"])
    big = torch.rand(1 << 22, device=DEVICE)
    out = torch.empty_like(big)
    copy = lambda h=None: one(lambda: copy_kernel[(1024,)](big, out, big.numel(), BLOCK=4096), h)
    c0 = copy()
    assert c0.bottleneck == "memory"
    wide = copy(hw.replace(dram_read_bw=2 * hw.dram_read_bw, dram_write_bw=2 * hw.dram_write_bw,
                           dram_mixed_bw=2 * hw.dram_mixed_bw))
    assert wide.modeled_ns < 0.6 * c0.modeled_ns
    small = torch.rand(64, device=DEVICE)
    tiny = lambda h=None: one(lambda: copy_kernel[(1,)](small, small, 64, BLOCK=64), h)
    assert tiny(hw.replace(dram_latency_ns=10 * hw.dram_latency_ns)).modeled_ns > tiny().modeled_ns + 1000


def test_permute_cost_is_a_hardware_figure():
    assert HardwareConfig().permute_cost == 2.0
    with pytest.raises(ValueError, match="permute_cost"):
        spyre_triton.set_hardware(permute_cost=0)
    spyre_triton.set_hardware()


def test_profile_sensitivity_reports_each_figure():
    x = torch.rand(1 << 20, device=DEVICE)
    y = torch.empty_like(x)
    figs = ["dram_read_bw", "dram_write_bw", "dram_mixed_bw", "clock_hz", "transcendental_cost"]
    with spyre_triton.profile(sensitivity=figs) as prof:
        copy_kernel[(256,)](x, y, x.numel(), BLOCK=4096)
    torch.testing.assert_close(y.cpu(), x.cpu())
    s = prof.sensitivity()
    assert list(s)[0] in ("dram_read_bw", "dram_write_bw", "dram_mixed_bw")  # a copy: bandwidth matters most
    for fig in ("dram_read_bw", "dram_write_bw", "dram_mixed_bw"):
        assert s[fig]["high_change"] <= 0 <= s[fig]["low_change"]
    assert s["dram_mixed_bw"]["low_change"] > 0.05
    assert s["transcendental_cost"]["low_change"] == s["transcendental_cost"]["high_change"] == 0  # no SFU work
    text = prof.table()
    assert "x 0.75 and x 1.25" in text and "dram_mixed_bw" in text


def test_sensitivity_reruns_leave_device_memory_as_one_run_left_it():
    x = torch.zeros(4096, device=DEVICE)
    with spyre_triton.profile(sensitivity=True) as prof:
        add_one_kernel[(4,)](x, 4096, BLOCK=1024)
    assert torch.equal(x.cpu(), torch.ones(4096))  # an in-place kernel ran 1 + 2 x figures times
    rec = prof.kernels[0]
    assert len(rec.sensitivity) == 2 * len(SENSITIVITY_FIGURES)
    assert set(prof.sensitivity()) == set(SENSITIVITY_FIGURES)
    launch = prof.sensitivity()["launch_ns"]
    assert launch["high_ns"] > prof.modeled_ns > launch["low_ns"]


def test_sensitivity_rejects_unknown_figures():
    with pytest.raises(ValueError, match="num_corez"):
        with spyre_triton.profile(sensitivity=["num_corez"]):
            pass
    with pytest.raises(ValueError, match="link_topology"):
        with spyre_triton.profile(sensitivity=["link_topology"]):
            pass
    with pytest.raises(RuntimeError, match="sensitivity=True"):
        with spyre_triton.profile() as prof:
            pass
        prof.sensitivity()
