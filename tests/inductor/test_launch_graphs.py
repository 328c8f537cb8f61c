"""Launch graphs (spyre_triton/graphs.py): torch.spyre.graph capture and C replay, and
torch.compile(mode="reduce-overhead") on spyre through Inductor's cudagraph_policy hook."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl

import spyre_triton
from spyre_triton import graphs
from spyre_triton.graphs import GraphCaptureError


@triton.jit
def axpb_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * a + 1.0, mask=m)


def step(x, y, z):
    n = x.numel()
    axpb_kernel[(triton.cdiv(n, 64),)](x, y, 2.0, n, BLOCK=64)
    axpb_kernel[(triton.cdiv(n, 64),)](y, z, 3.0, n, BLOCK=64)


def captured_step(x):
    """A graph of step(x, y, z) on new y and z like x: (graph, y, z)."""
    y, z = torch.empty_like(x), torch.empty_like(x)
    g = torch.spyre.SpyreGraph()
    with torch.spyre.graph(g):
        step(x, y, z)
    return g, y, z


def test_replay_reads_changed_inputs():
    x = torch.randn(300).to("spyre")
    g, y, z = captured_step(x)
    assert g.launches() == 2
    for seed in range(3):
        new = torch.randn(300, generator=torch.Generator().manual_seed(seed))
        x.copy_(new.to("spyre"))
        g.replay()  # in C
        torch.testing.assert_close(z.cpu(), (new * 2 + 1) * 3 + 1)
    x.zero_()
    with spyre_triton.track() as t:  # a tracker sees the replayed launches
        g.replay()
    assert sum(t.kernels.values()) == 2
    torch.testing.assert_close(z.cpu(), torch.full((300,), 4.0))


def test_capture_refuses_host_fallbacks():
    x = torch.randn(8).to("spyre")
    g = torch.spyre.SpyreGraph()
    with pytest.raises(GraphCaptureError, match="on the host"):
        with torch.spyre.graph(g):
            torch.cumsum(x, 0)  # no spyre kernel: a host fallback, which a replay would skip
    with pytest.raises(GraphCaptureError, match="not captured"):
        g.replay()


def test_reduce_overhead_replays_with_new_inputs():
    def f(x, w):
        return torch.relu(x @ w) + x.sum()

    w = torch.randn(32, 32).to("spyre")
    fc = torch.compile(f, mode="reduce-overhead")
    before = dict(graphs.stats)
    for seed in range(3):
        x = torch.randn(4, 32, generator=torch.Generator().manual_seed(seed))
        out = fc(x.to("spyre"), w).cpu()
        torch.testing.assert_close(out, f(x, w.cpu()), rtol=1e-4, atol=1e-4)
    assert (graphs.stats["captures"] - before["captures"], graphs.stats["replays"] - before["replays"]) == (1, 2)


TWO_CARDS = textwrap.dedent("""
    import threading, torch, triton, triton.language as tl
    import spyre_triton

    @triton.jit
    def busy(x_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n)
        for _ in range(ITERS):
            v = v * 0.5 + 1.0
        tl.store(x_ptr + offs, v, mask=offs < n)

    @triton.jit
    def add1(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

    x = torch.zeros(1024, device="spyre:0")
    y = torch.empty_like(x)
    g = torch.spyre.SpyreGraph()
    with torch.spyre.graph(g):
        add1[(16,)](x, y, 1024, BLOCK=64)
    other = torch.zeros(1 << 16, device="spyre:1")
    def keep_busy():
        with torch.spyre.device(1):
            busy[(64,)](other, 1 << 16, ITERS=2000, BLOCK=1024)
    t = threading.Thread(target=keep_busy)
    t.start()
    for i in range(20):
        x.fill_(float(i))
        g.replay()
        assert torch.equal(y.cpu(), torch.full((1024,), i + 1.0)), i
    t.join()
    assert torch.equal(other.cpu(), torch.full((1 << 16,), 2.0))  # v -> v / 2 + 1 reaches 2.0 exactly

    # a graphed callable captured on card 1, replayed on new input tensors (rebound) while card 0 is busy
    from spyre_triton import graphs
    def model(inputs):
        a = inputs[0]
        inputs.clear()
        out = torch.empty_like(a)
        add1[(16,)](a, out, 1024, BLOCK=64)
        return (out,)
    run = graphs.graphed_inductor_callable(model, ())
    busy0 = torch.zeros(1 << 16, device="spyre:0")
    def keep_card0_busy():
        busy[(64,)](busy0, 1 << 16, ITERS=2000, BLOCK=1024)
    t = threading.Thread(target=keep_card0_busy)
    with torch.spyre.device(1):
        t.start()
        for i in range(20):
            a = torch.full((1024,), float(i), device="spyre:1")
            (out,) = run([a])
            assert out.device == a.device and torch.equal(out.cpu(), torch.full((1024,), i + 1.0)), i
    t.join()
    (entry,) = run._spyre_graphs.values()
    assert entry.slots[0], "the input should have been rebound, not copied"
    assert torch.equal(busy0.cpu(), torch.full((1 << 16,), 2.0))
    print("OK")
""")


def test_graph_on_one_card_replays_while_another_is_busy(tmp_path):
    env = dict(os.environ, SPYRE_DEVICE_COUNT="2")
    script = tmp_path / "two_cards.py"  # @triton.jit needs its source in a file
    script.write_text(TWO_CARDS)
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr[-3000:]


def test_compiled_module_generate_warns_once():
    import warnings

    from spyre_triton import llm

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def generate(self, x):
            return self.lin(x)

    llm._warned.discard("generate")
    m = torch.compile(Tiny().to("spyre"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.generate(torch.ones(1, 4, device="spyre"))
        m.generate(torch.ones(1, 4, device="spyre"))
    msgs = [str(x.message) for x in w if issubclass(x.category, llm.SpyreUncompiledWarning)]
    assert len(msgs) == 1 and "model.forward = torch.compile(model.forward)" in msgs[0]


# --- graphed Inductor callables: how a replay sees its dynamic inputs ----------------------------------
# A hand-written callable in Inductor's boxed convention (model(inputs) clears inputs) stands in for a
# compiled graph, so each test controls what the graph reads, writes and returns.

def _scale_and_bump(inputs):
    """out = (x * 2 + 1); y = y * 3 + 1 in place (y is a mutated input, like a KV cache)."""
    x, y = inputs
    inputs.clear()
    out = torch.empty_like(x)
    n = x.numel()
    axpb_kernel[(triton.cdiv(n, 64),)](x, out, 2.0, n, BLOCK=64)
    axpb_kernel[(triton.cdiv(n, 64),)](y, y, 3.0, n, BLOCK=64)
    return (out,)


def _graphed(model, static=(), mutated=()):
    run = graphs.graphed_inductor_callable(model, static, mutated)
    return run, run._spyre_graphs


def _entry(table):
    (entry,) = table.values()
    return entry


def test_graphed_callable_rebinds_new_input_tensors():
    run, table = _graphed(_scale_and_bump, mutated=(1,))
    ys = []
    for seed in range(4):  # a new x and a new y each call: replays rebind to them
        x = torch.randn(200, generator=torch.Generator().manual_seed(seed)).to("spyre")
        y = torch.full((200,), float(seed), device="spyre")
        (out,) = run([x, y])
        torch.testing.assert_close(out.cpu(), x.cpu() * 2 + 1)
        torch.testing.assert_close(y.cpu(), torch.full((200,), seed * 3 + 1.0))  # mutated where it is
        ys.append(y)
    entry = _entry(table)
    assert entry.slots[0] and entry.slots[1], "both inputs should be rebound, not copied"
    assert entry.bound == [x.data_ptr(), y.data_ptr()]
    for seed, y in enumerate(ys):  # a replay wrote only into the tensors of its own call
        torch.testing.assert_close(y.cpu(), torch.full((200,), seed * 3 + 1.0))
    # the captured copies were not written after capture: nothing was copied into them
    torch.testing.assert_close(entry.ins[1].cpu(), torch.full((200,), 1.0))


def test_graphed_callable_same_tensor_changed_in_place():
    run, table = _graphed(_scale_and_bump, mutated=(1,))
    x = torch.zeros(100, device="spyre")
    y = torch.zeros(100, device="spyre")
    expect_y = torch.zeros(100)
    for step in range(3):  # the caller's own tensors every call (a decode step's KV cache)
        x.fill_(float(step))
        (out,) = run([x, y])
        expect_y = expect_y * 3 + 1
        torch.testing.assert_close(out.cpu(), torch.full((100,), step * 2 + 1.0))
        torch.testing.assert_close(y.cpu(), expect_y)
    assert len(table) == 1


def _view_of_input(inputs):
    """Returns a view of its input besides a computed output: the input must be copied, not rebound."""
    x = inputs[0]
    inputs.clear()
    out = torch.empty_like(x)
    n = x.numel()
    axpb_kernel[(triton.cdiv(n, 64),)](x, out, 2.0, n, BLOCK=64)
    return (out, x[1:])


def test_graphed_callable_copies_an_input_an_output_aliases():
    run, table = _graphed(_view_of_input)
    for seed in range(3):
        x = torch.randn(64, generator=torch.Generator().manual_seed(seed)).to("spyre")
        out, tail = run([x])
        torch.testing.assert_close(out.cpu(), x.cpu() * 2 + 1)
        torch.testing.assert_close(tail.cpu(), x.cpu()[1:])  # the returned view shows this call's input
    assert _entry(table).slots == [None]


def test_graphed_callable_new_signature_captures_again():
    run, table = _graphed(_scale_and_bump, mutated=(1,))
    for n in (100, 300, 100):
        x, y = torch.ones(n, device="spyre"), torch.zeros(n, device="spyre")
        (out,) = run([x, y])
        torch.testing.assert_close(out.cpu(), torch.full((n,), 3.0))
        torch.testing.assert_close(y.cpu(), torch.ones(n))
    assert len(table) == 2
    with pytest.raises(TypeError, match="takes 2 inputs, got 1"):
        run([torch.ones(100, device="spyre")])


def test_reduce_overhead_updates_a_cache_in_place():
    """A decode-like step: the compiled graph writes a row of a cache it is given (a mutated input) and reads
    it back. Replays write into the caller's cache itself, whichever cache the call passes."""
    def step(x, cache, pos):
        cache.index_copy_(0, pos, x)
        return cache.sum(0) * 2

    fc = torch.compile(step, mode="reduce-overhead")
    caches = [torch.zeros(6, 16, device="spyre"), torch.zeros(6, 16, device="spyre")]
    refs = [torch.zeros(6, 16), torch.zeros(6, 16)]
    before = dict(graphs.stats)
    for t in range(6):
        c = t % 2  # alternate between two caches, as two generate() calls with their own caches would
        x = torch.randn(1, 16, generator=torch.Generator().manual_seed(t))
        pos = torch.tensor([t // 2])
        out = fc(x.to("spyre"), caches[c], pos.to("spyre")).cpu()
        expect = step(x, refs[c], pos)
        torch.testing.assert_close(out, expect)
        for got, ref in zip(caches, refs):  # only this call's cache changed
            torch.testing.assert_close(got.cpu(), ref)
    assert graphs.stats["replays"] - before["replays"] >= 4


def test_a_profile_models_each_replayed_launch():
    x = torch.randn(300).to("spyre")
    g, y, z = captured_step(x)
    with spyre_triton.profile() as p:  # the plan holds addresses: the observed replay launches them too
        g.replay()
    assert len(p.kernels) == 2 and all(r.modeled_ns > 0 for r in p.kernels)
    torch.testing.assert_close(z.cpu(), (x.cpu() * 2 + 1) * 3 + 1)


def test_graphed_callable_copies_a_misaligned_input():
    # Triton specialises kernels on 16-byte aligned pointers (the captured buffers are): a tensor 4 bytes
    # off is copied into the captured buffer rather than rebound, and a later aligned one is rebound again
    run, table = _graphed(_scale_and_bump, mutated=(1,))
    base = torch.arange(101, dtype=torch.float32).to("spyre")
    y = torch.zeros(100, device="spyre")
    run([base[:100], y])
    entry = _entry(table)
    captured = entry.ins[0].data_ptr()
    for x, bound in ((base[1:], captured), (base[:100], base.data_ptr())):
        (out,) = run([x, y])
        torch.testing.assert_close(out.cpu(), x.cpu() * 2 + 1)
        assert entry.bound[0] == bound
    torch.testing.assert_close(y.cpu(), torch.full((100,), 13.0))  # ((0 * 3 + 1) * 3 + 1) * 3 + 1


def test_replay_keeps_the_captured_memory_when_a_tensor_moves():
    # the plan holds addresses taken at capture (as a CUDA graph does): a captured tensor that later gets
    # new storage does not free the old one under the plan, and the replay keeps using the old memory
    x = torch.ones(300).to("spyre")
    g, y, z = captured_step(x)
    old_z = z.data_ptr()
    z.set_(torch.zeros(300, device="spyre").untyped_storage())  # z's first storage now belongs to the graph only
    assert z.data_ptr() != old_z
    g.replay()  # no fault: the old storage is alive
    assert torch.equal(z.cpu(), torch.zeros(300))  # the replay wrote the old memory, not z's new storage
