"""Several cards in one process: the default drawer, per-card memory limits and statistics, per-card
launches (Inductor's device guards) and zero-copy CPU aliases."""
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
import torch


def run(code: str, **env) -> str:
    e = {k: v for k, v in os.environ.items() if k not in ("SPYRE_DEVICE_COUNT", "LOCAL_WORLD_SIZE")}
    e.update(env)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:  # Triton reads kernels' source files
        f.write(textwrap.dedent(code))
    try:
        out = subprocess.run([sys.executable, f.name], env=e, capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(f.name)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


@pytest.mark.parametrize("env, expected", [({}, 8), ({"LOCAL_WORLD_SIZE": "4"}, 8),
                                           ({"LOCAL_WORLD_SIZE": "12"}, 12), ({"SPYRE_DEVICE_COUNT": "3"}, 3)])
def test_default_device_count_is_a_drawer(env, expected):
    assert run("import torch; print(torch.spyre.device_count())", **env) == str(expected)


def test_torchrun_style_set_device_needs_no_environment():
    out = run("""
        import os, torch
        torch.spyre.set_device(int(os.environ["LOCAL_RANK"]))
        x = torch.arange(4.0, device="spyre")
        print(x.device, (x * 2).cpu().tolist())
    """, LOCAL_RANK="3", LOCAL_WORLD_SIZE="4")
    assert out == "spyre:3 [0.0, 2.0, 4.0, 6.0]"


def test_unused_card_costs_no_threads():
    """A card's worker threads start on its first launch: launches on card 0 start none for card 5."""
    out = run("""
        import torch, triton, triton.language as tl
        @triton.jit
        def k(x, n, B: tl.constexpr):
            o = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(x + o, tl.load(x + o, mask=o < n) + 1, mask=o < n)
        def threads():
            return int([l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1])
        x = torch.zeros(4096, device="spyre:0")
        k[(64,)](x, 4096, B=64)
        before = threads()
        k[(64,)](x, 4096, B=64)
        same = threads()
        y = torch.zeros(4096, device="spyre:5")
        with torch.spyre.device(5):
            k[(64,)](y, 4096, B=64)
        print(before == same, threads() > same, torch.spyre.memory_reserved(6))
    """, SPYRE_NUM_THREADS="2")
    assert out == "True True 0"


def test_per_card_limit_and_out_of_memory_error():
    out = run("""
        import torch
        sp = torch.spyre
        assert issubclass(sp.OutOfMemoryError, RuntimeError) and sp.OutOfMemoryError is torch.OutOfMemoryError
        sp.set_per_process_memory_fraction(0.5, 1)
        assert sp.get_per_process_memory_fraction(1) == 0.5 and sp.get_per_process_memory_fraction(0) == 1.0
        free, total = sp.mem_get_info(1)
        assert total == 1 << 19, total  # half of 1 MiB
        a = torch.empty(100_000, dtype=torch.uint8, device="spyre:1")
        try:
            torch.empty(500_000, dtype=torch.uint8, device="spyre:1")
            raise SystemExit("an allocation beyond card 1's limit succeeded")
        except sp.OutOfMemoryError as e:
            assert "spyre:1 out of memory" in str(e) and "limit 524288" in str(e), str(e)
        b = torch.empty(500_000, dtype=torch.uint8, device="spyre:0")  # card 0 keeps its whole capacity
        try:
            sp.set_per_process_memory_fraction(1.5, 0)
            raise SystemExit("fraction 1.5 accepted")
        except ValueError as e:
            assert "[0, 1]" in str(e)
        print("ok")
    """, SPYRE_DEVICE_MEMORY_BYTES="1M")
    assert out == "ok"


def test_memory_stats_are_per_card():
    out = run("""
        import torch
        sp = torch.spyre
        a = torch.empty(1000, device="spyre:2")  # 4000 bytes
        s2, s0 = sp.memory_stats(2), sp.memory_stats(0)
        assert s2["allocated_bytes.all.current"] == 4000 and s2["allocation.all.current"] == 1, s2
        assert s0["allocated_bytes.all.current"] == 0, s0
        del a
        s2 = sp.memory_stats("spyre:2")
        assert s2["allocated_bytes.all.current"] == 0 and s2["allocated_bytes.all.peak"] == 4000
        sp.reset_peak_memory_stats(2)
        assert sp.memory_stats(2)["allocated_bytes.all.peak"] == 0 == sp.max_memory_allocated(2)
        summary = sp.memory_summary(2)
        assert summary.startswith("spyre:2 memory summary") and "Allocated memory" in summary
        print("ok")
    """)
    assert out == "ok"


def test_inductor_code_for_card_1_runs_on_card_1():
    """A compiled graph whose tensors live on spyre:1 launches its kernels on card 1 (the generated code's
    device guard), even while card 0 is current."""
    out = run("""
        import torch, spyre_triton._runtime as rt
        f = torch.compile(lambda x, y: torch.relu(x * y + 1).sum(0))
        x = torch.randn(64, 32)
        y = torch.randn(64, 32)
        before = [rt.launch_count(0), rt.launch_count(1)]
        out = f(x.to("spyre:1"), y.to("spyre:1"))
        after = [rt.launch_count(0), rt.launch_count(1)]
        torch.testing.assert_close(out.cpu(), torch.relu(x * y + 1).sum(0))
        print(out.device, torch.spyre.current_device(), after[0] - before[0], after[1] - before[1] > 0)
    """)
    assert out == "spyre:1 0 0 True"


def test_cpu_alias_shares_memory():
    from spyre_triton.device import _C
    t = torch.arange(6.0).to("spyre")
    a = _C.cpu_alias(t[2:])
    assert a.device.type == "cpu" and a.data_ptr() == t[2:].data_ptr()
    a.mul_(10)
    assert t.cpu().tolist() == [0.0, 1.0, 20.0, 30.0, 40.0, 50.0]
    with pytest.raises(RuntimeError, match="expected a spyre tensor"):
        _C.cpu_alias(torch.ones(2))
