"""The device API a torch.cuda user expects: torch.spyre's properties, capability and utilization,
torch.accelerator with spyre as the current accelerator, and torch.profiler's PrivateUse1 device
track with the performance model's kernel times."""
import json

import pytest
import torch
import triton
import triton.language as tl

import spyre_triton
from spyre_triton.perf.hardware import HardwareConfig, get_hardware


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _launch(n=1 << 16):
    x = torch.rand(n, device="spyre")
    y = torch.rand(n, device="spyre")
    out = torch.empty_like(x)
    _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return x, y, out


# --- properties, capability, utilization --------------------------------------------------------
def test_device_properties_come_from_the_machine_definition():
    hw = get_hardware()
    p = torch.spyre.get_device_properties(0)
    assert p is torch.spyre.get_device_properties("spyre:0")
    assert p.name.startswith("Spyre")
    assert p.cores == hw.num_cores == 32
    assert p.multi_processor_count == 32
    assert p.corelets_per_core == hw.corelets
    assert p.lx_bytes == hw.lx_bytes == spyre_triton.isa.LX_BYTES_MAX
    assert p.clock_rate == round(hw.clock_hz / 1e3)
    assert p.peak_flops == pytest.approx(hw.peak_flops)
    assert p.memory_bandwidth == hw.dram_read_bw
    assert p.total_memory == spyre_triton._runtime.device_memory_capacity() >= torch.spyre.mem_get_info(0)[1]
    assert (p.major, p.minor) == torch.spyre.get_device_capability(0) == (1, 0)
    assert "cores=32" in repr(p)


def test_device_properties_follow_set_hardware():
    prev = spyre_triton.set_hardware(HardwareConfig(clock_hz=1.0e9))
    try:
        assert torch.spyre.get_device_properties(0).clock_rate == 1_000_000
    finally:
        spyre_triton.set_hardware(prev)
    assert torch.spyre.get_device_properties(0).clock_rate == round(prev.clock_hz / 1e3)


def test_device_properties_reject_a_bad_index():
    with pytest.raises(ValueError, match="invalid spyre device index 99"):
        torch.spyre.get_device_properties(99)
    with pytest.raises(ValueError, match="expected a spyre device"):
        torch.spyre.get_device_properties(torch.device("cpu"))


def test_utilization_is_the_share_of_time_spent_in_launches():
    torch.spyre.utilization(0)  # starts a window
    n = 1 << 20
    x = torch.rand(n, device="spyre")
    out = torch.empty_like(x)
    for _ in range(50):
        _add[(triton.cdiv(n, 1024),)](x, x, out, n, BLOCK=1024)
    busy = torch.spyre.utilization(0)
    assert 0 < busy <= 100
    import time
    time.sleep(0.2)
    assert torch.spyre.utilization(0) == 0  # nothing ran in this window
    assert torch.spyre.utilization(1) >= 0
    with pytest.raises(ValueError, match="invalid spyre device index"):
        torch.spyre.utilization(99)


# --- torch.accelerator ------------------------------------------------------------------------
def test_accelerator_is_spyre():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("spyre")
    assert torch.accelerator.device_count() == torch.spyre.device_count()
    prev = torch.accelerator.current_device_index()
    torch.accelerator.set_device_index(1)
    try:
        assert torch.spyre.current_device() == 1
        assert torch.empty(4, device="spyre").device == torch.device("spyre", 1)
    finally:
        torch.accelerator.set_device_index(prev)
    torch.accelerator.synchronize()
    cap = torch.accelerator.get_device_capability(0)
    assert torch.float32 in cap["supported_dtypes"]


def test_accelerator_memory_functions_route_to_the_runtime():
    torch.accelerator.empty_cache()
    base = torch.accelerator.memory_allocated(0)
    assert base == torch.spyre.memory_allocated(0)
    torch.accelerator.reset_peak_memory_stats(0)
    t = torch.empty(1 << 20, device="spyre:0")  # 4 MiB
    assert torch.accelerator.memory_allocated(0) == base + t.nbytes == torch.spyre.memory_allocated(0)
    assert torch.accelerator.max_memory_allocated(0) >= base + t.nbytes
    assert torch.accelerator.memory_reserved(0) == torch.spyre.memory_reserved(0)
    assert torch.accelerator.max_memory_reserved(0) == torch.spyre.max_memory_reserved(0)
    stats = torch.accelerator.memory_stats(0)
    assert stats["allocated_bytes.all.current"] == torch.spyre.memory_allocated(0)
    assert stats["allocation.all.current"] == torch.spyre.memory_stats(0)["allocation.all.current"]
    assert torch.accelerator.get_memory_info(0) == torch.spyre.mem_get_info(0)
    del t
    assert torch.accelerator.memory_allocated(0) == base
    torch.accelerator.reset_peak_memory_stats(0)
    assert torch.accelerator.max_memory_allocated(0) == base


# --- torch.profiler ---------------------------------------------------------------------------
def _device_kernels(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]


def test_profiler_device_track_has_the_modelled_kernel_times(tmp_path):
    _launch()  # compiled before profiling
    from torch.profiler import ProfilerActivity, profile
    with spyre_triton.profile() as model:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            _launch()
            _launch(1 << 12)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    kernels = _device_kernels(json.loads(path.read_text()))
    modelled = [r for r in model.kernels if r.name == "_add"]
    assert [k["name"] for k in kernels] == ["_add", "_add"]
    assert len(modelled) == 2
    for k, r in zip(kernels, modelled):
        assert k["dur"] == pytest.approx(r.modeled_ns / 1e3, abs=1e-3)  # chrome trace: microseconds
        assert k["args"]["device"] == 0
    assert kernels[0]["ts"] + kernels[0]["dur"] <= kernels[1]["ts"]
    # host events sit beside them in the same trace
    names = {e["name"] for e in json.loads(path.read_text())["traceEvents"]}
    assert "aten::rand" in names
    # and the profiler's events carry the device time
    dev = [e for e in prof.events() if e.name == "_add" and e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert len(dev) == 2


def test_profiler_without_the_device_activity_models_nothing():
    from spyre_triton.perf import capture
    from torch.profiler import ProfilerActivity, profile
    _launch()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert not capture.listeners  # no device track asked for: launches are not modelled
        _launch()
    assert not any(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in prof.events())
    with profile(activities=[ProfilerActivity.PrivateUse1]):
        assert len(capture.listeners) == 1
    assert not capture.listeners


def test_profiler_device_track_of_a_compiled_model():
    from torch.profiler import ProfilerActivity, profile
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("spyre")
    compiled = torch.compile(model)
    x = torch.randn(16, 32, device="spyre")
    compiled(x)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        compiled(x)
    dev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert dev and all(e.name.startswith("triton_") for e in dev)
    table = prof.key_averages().table(sort_by="cpu_time_total")
    assert "triton_" in table
