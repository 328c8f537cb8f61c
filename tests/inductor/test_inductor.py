"""torch.compile (default Inductor backend) on the `spyre` device.

Registration is checked without launching anything; the compiled graphs are checked against
eager CPU, and `spyre_triton.track()` must show Inductor's Triton kernels launched on spyre (and,
for elementwise/reduction graphs, nothing falling back to the host).
"""
import os
import subprocess
import sys
import textwrap

import torch
import torch.nn.functional as F

import spyre_triton


def spy(t):
    return t.to("spyre")


def run_compiled(fn, *args, **compile_kw):
    """Compile `fn` and run it on spyre copies of `args` (compiling and autotuning on the first
    call), then run it again under `track()`; compare with eager CPU and return the tracker."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, **compile_kw)
    compiled(*[spy(a) for a in args])
    with spyre_triton.track() as t:
        out = compiled(*[spy(a) for a in args])
    ref = fn(*args)
    outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
    for o, r in zip(outs, refs):
        assert o.device.type == "spyre"
        torch.testing.assert_close(o.cpu(), r, rtol=1e-4, atol=1e-4)
    return t


def assert_on_spyre(t, min_kernels=1, no_fallbacks=True):
    launched = [k for k in t.kernels if k.startswith("triton_")]
    assert len(launched) >= min_kernels, t.table()
    if no_fallbacks:
        assert not t.fallbacks, t.table()


# --- registration: nothing launched ------------------------------------------------------------
class TestRegistration:
    def test_device_interface(self):
        from torch._dynamo.device_interface import get_interface_for_device
        di = get_interface_for_device("spyre")
        props = di.Worker.get_device_properties()
        assert props.multi_processor_count == 32 and props.warp_size == 32
        assert props.lx_size == 2 * 1024 * 1024
        assert di.get_device_properties(torch.device("spyre", 0)) is props
        assert di.get_compute_capability() == "spyre1"
        assert di.is_available() and di.device_count() == torch.spyre.device_count()
        assert di.current_device() == 0
        assert di.get_raw_stream(0) == 0
        assert di.exchange_device(0) == 0
        assert issubclass(di.Event, torch.Event) and issubclass(di.Stream, torch.Stream)
        start, end = di.Event(enable_timing=True), di.Event(enable_timing=True)
        start.record()
        end.record()
        end.synchronize()
        assert start.device.type == "spyre" and start.elapsed_time(end) >= 0
        di.synchronize()

    def test_inductor_device_properties(self):
        from torch._inductor.runtime.hints import DeviceProperties
        p = DeviceProperties.create(torch.device("spyre", 0))
        assert (p.type, p.cc, p.multi_processor_count, p.warp_size) == ("spyre", "spyre1", 32, 32)

    def test_backend_and_overrides(self):
        from torch._inductor.codegen.common import (get_device_op_overrides, get_scheduling_for_device,
                                                    get_wrapper_codegen_for_device,
                                                    init_backend_registration)
        from torch._inductor.codegen.triton import TritonScheduling
        from torch._inductor.codegen.wrapper import PythonWrapperCodegen
        init_backend_registration()
        assert issubclass(get_scheduling_for_device("spyre"), TritonScheduling)
        assert issubclass(get_wrapper_codegen_for_device("spyre"), PythonWrapperCodegen)
        ops = get_device_op_overrides("spyre")
        assert ops.device_guard(0) == "torch.spyre.device(0)"
        assert "get_raw_stream" in ops.import_get_raw_stream_as("get_raw_stream")

    def test_compat(self):
        from torch._inductor import utils
        from torch.utils._triton import has_triton
        assert has_triton()
        assert utils.is_gpu("spyre") and not utils.is_gpu("cpu")
        assert utils.is_big_gpu(torch.device("spyre", 0))
        assert utils.device_need_guard("spyre")

    def test_benchmarker(self):
        from torch._inductor.runtime.benchmarking import _BENCHMARK_DISPATCH, benchmarker
        assert "spyre" in _BENCHMARK_DISPATCH
        x = spy(torch.ones(8))
        ms = benchmarker.benchmark(lambda t: t + 1, (x,), warmup=1, rep=2)
        assert 0 < ms < 1000

    def test_persistent_reductions_get_the_tuning_candidates(self):
        """A row reduction of 256 elements with six loads and stores (BERT's residual + layer norm):
        Inductor's heuristic keeps XBLOCK 1 alone; on spyre the benchmarker chooses among 1 and 8."""
        from torch._inductor.runtime import triton_heuristics as th
        from torch._inductor.runtime.hints import DeviceProperties, ReductionHint
        spyre = DeviceProperties.create(torch.device("spyre", 0))
        blocks = lambda dev: sorted(c.kwargs["XBLOCK"] for c in th._persistent_reduction_configs(
            {"x": 1024, "r0_": 256}, ReductionHint.INNER, {"num_load": 5, "num_store": 1}, {"device": dev}))
        assert blocks(spyre) == [1, 8]
        assert blocks(spyre._replace(type="cuda")) == [1]  # other devices: Inductor's choice as it is

    def test_template_heuristics(self):
        from torch._inductor.kernel.mm import mm_template
        from torch._inductor.template_heuristics.registry import get_registered_heuristic_class
        assert get_registered_heuristic_class(mm_template.uid, "spyre", "mm") is not None
        assert get_registered_heuristic_class(mm_template.uid, "spyre", "addmm") is not None

    def test_import_torch_stays_lazy(self):
        """`import torch` registers the device and its Inductor hooks without importing Dynamo or
        Inductor; the registrations happen on first import, as in a fresh compile worker."""
        code = textwrap.dedent("""
            import sys, torch
            assert torch.spyre.is_available()
            heavy = [m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor"))]
            assert not heavy, heavy
            from torch._dynamo.device_interface import get_interface_for_device
            assert get_interface_for_device("spyre").get_compute_capability() == "spyre1"
            from torch._inductor.codegen.common import init_backend_registration, get_scheduling_for_device
            init_backend_registration()
            assert get_scheduling_for_device("spyre") is not None
            print("ok")
        """)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]

    def test_late_registration(self):
        """Autoload off, Inductor imported before the device registers: registration still takes
        effect (including in modules that had already imported has_triton by name)."""
        code = textwrap.dedent("""
            import torch
            assert getattr(torch, "spyre", None) is None
            import torch._inductor.compile_fx, torch._inductor.scheduler
            import spyre_triton, spyre_triton.device
            spyre_triton.device.register()
            x = torch.randn(64, 32)
            with spyre_triton.track() as t:
                out = torch.compile(lambda a: a.cos() * 3)(x.to("spyre"))
            torch.testing.assert_close(out.cpu(), x.cos() * 3)
            assert any(k.startswith("triton_") for k in t.kernels), t.table()
            print("ok")
        """)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


# --- compiled graphs, run on spyre ------------------------------------------------------------
X = torch.randn(64, 32)
Y = torch.randn(64, 32)


def test_elementwise():
    t = run_compiled(lambda x, y: x.sin() + y * 2, X, Y)
    assert_on_spyre(t)
    assert sum(t.kernels.values()) == 1, t.table()  # one fused kernel, launched once


def test_elementwise_indexing_and_dtypes():
    idx = torch.randint(0, 64, (16,))
    t = run_compiled(lambda x, i: (x[i] * 2, torch.where(x > 0, x, -x).half(), x.argmax(-1)), X, idx)
    assert_on_spyre(t)


def test_softmax():
    t = run_compiled(lambda x: torch.softmax(x, dim=-1), X)
    assert_on_spyre(t)


def test_layernorm():
    w, b = torch.randn(32), torch.randn(32)
    t = run_compiled(lambda x, w, b: F.layer_norm(x, (32,), w, b), X, w, b)
    assert_on_spyre(t)


def test_sum_over_dims():
    t = run_compiled(lambda x: (x.sum(0), x.sum(1), x.sum()), X)
    assert_on_spyre(t)


def test_mlp():
    """Linear+ReLU+Linear in the default mode: on spyre mm/addmm become Inductor's Triton matmul
    template (with bias and ReLU fused as its epilogue), not extern aten calls on the host."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    ref = mlp(X)
    m = mlp.to("spyre")
    torch._dynamo.reset()
    with torch.no_grad(), spyre_triton.track() as t:
        out = torch.compile(m)(spy(X))
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    assert_on_spyre(t)
    assert sum(n for k, n in t.kernels.items() if k.startswith("triton_tem_")) == 2, t.table()


def test_mlp_max_autotune_templates():
    """Under max-autotune mm/addmm may become Triton templates on spyre (the autotuner picks
    between them and the extern aten call, timing both with the spyre benchmarker)."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    ref = mlp(X)
    m = mlp.to("spyre")
    torch._dynamo.reset()
    from torch._inductor import config
    with config.patch(max_autotune_gemm_backends="TRITON"), torch.no_grad():
        compiled = torch.compile(m, mode="max-autotune-no-cudagraphs")
        compiled(spy(X))  # compile and autotune
        with spyre_triton.track() as t:
            out = compiled(spy(X))
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    assert any(k.startswith("triton_tem_") for k in t.kernels), t.table()
    assert not t.fallbacks, t.table()


def test_permuted_broadcast_read_is_tiled():
    """A decode step's GQA key read: the cache transposed and each KV head repeated, at a length (25)
    that is no power of two. Spyre's scheduling tiles the pointwise kernel by the dimensions its
    indexing implies (rows and positions), so that the compiler makes the read one strided DMA
    (tests/compiler/test_index_splits.py); flat, every element divided its index and was gathered."""
    from torch._inductor.utils import run_and_get_code

    def f(k):
        return k.transpose(2, 3).unsqueeze(2).expand(1, 2, 4, 64, 25).reshape(1, 8, 64, 25) * 0.35

    k = torch.randn(1, 2, 25, 64)
    torch._dynamo.reset()
    out, (code, *_) = run_and_get_code(torch.compile(f), spy(k))
    torch.testing.assert_close(out.cpu(), f(k))
    assert "YBLOCK" in code and "xindex // 25" not in code, code


def test_tiling_matches_each_index_once_per_graph(monkeypatch):
    """The n-d tiling above pattern-matches each read's index with sympy, and the scheduler asks for a
    tiling for every pair of nodes it considers fusing. Bicubic interpolation's graph compiled for 320 s
    when every ask matched afresh; spyre's scheduling remembers each match within a graph. The result is
    still right, and the matcher runs once per distinct index."""
    from torch._inductor.codegen.block_analysis import BlockPatternMatcher

    original = BlockPatternMatcher.__dict__["match_mod_div_block_expr"]
    calls = []

    def counting(cls, index, index_var, numel, num_dims):
        calls.append((index, index_var, numel, num_dims))
        return original.__func__(cls, index, index_var, numel, num_dims)

    monkeypatch.setattr(BlockPatternMatcher, "match_mod_div_block_expr", classmethod(counting))

    def f(a):
        return F.interpolate(a, (3, 3), mode="bicubic", align_corners=True)

    x = torch.randn(2, 3, 4, 4)
    torch._dynamo.reset()
    # (an alias of torch.compiler.config's: monkeypatch's undo would leave it broken for later tests)
    with torch._inductor.config.patch(force_disable_caches=True):
        out = torch.compile(f, dynamic=False)(spy(x))
    torch.testing.assert_close(out.cpu(), f(x))
    assert calls, "spyre's pointwise tiling no longer asks Inductor's block matcher"
    assert len(calls) == len(set(calls)), f"{len(calls)} matches for {len(set(calls))} indices"
