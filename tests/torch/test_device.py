"""The `spyre` PyTorch device: memory, views, CPU fallback, autograd, RNG, several devices.

Everything is checked against the same computation on the CPU.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import spyre_triton._runtime as rt

SPYRE = torch.device("spyre")


def spy(t):
    return t.to("spyre")


def same(a, b):
    assert a.device.type == "spyre"
    torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-5)


def storage_ptr(t):
    return t.untyped_storage().data_ptr()


# --- device memory (C level, through spyre_triton._runtime) ------------------------------------
class TestDevmem:
    def test_alloc_bounds(self):
        n = 1000
        a = rt.alloc(0, n)
        try:
            assert a % 128 == 0
            assert rt.mem_check(0, a, n) == (True, a, n)
            assert rt.mem_check(0, a + n - 1, 1)[0]           # last byte in bounds
            assert not rt.mem_check(0, a + n, 1)[0]           # one past the end: out
            assert not rt.mem_check(0, a + n - 4, 8)[0]       # straddles the end
            assert not rt.mem_check(0, a - 1, 1)[0]
            ok, base, size = rt.mem_check(0, a + n + 3, 4)
            assert (ok, base, size) == (False, a, n)          # nearest allocation reported
            ok, base, size = rt.mem_check(0, a - 64, 4)
            assert (ok, base, size) == (False, a, n)
            assert rt.mem_check(0, a + n, 0)[0]               # empty range at the end is fine
            assert rt.device_of(a + 5) == 0
        finally:
            rt.free(0, a)
        assert not rt.mem_check(0, a, 1)[0]                   # freed: the cache must not say ok
        with pytest.raises(ValueError):
            rt.free(0, a)

    def test_nearest_between_two(self):
        a = rt.alloc(0, 256)
        b = rt.alloc(0, 256)
        try:
            lo, hi = sorted([a, b])
            # just past the lower one: the lower one is nearest
            assert rt.mem_check(0, lo + 256 + 1, 1) == (False, lo, 256)
            # just before the higher one: the higher one is nearest
            assert rt.mem_check(0, hi - 1, 1) == (False, hi, 256)
        finally:
            rt.free(0, a)
            rt.free(0, b)

    def test_zero_size_and_stats(self):
        base = rt.memory_allocated(0)
        ptrs = [rt.alloc(0, 0) for _ in range(10)]
        assert all(p != 0 for p in ptrs) and len(set(ptrs)) == 10
        assert rt.memory_allocated(0) == base
        rt.reset_peak_memory_stats(0)
        a = rt.alloc(0, 1 << 20)
        assert rt.memory_allocated(0) == base + (1 << 20)
        assert rt.memory_reserved(0) >= rt.memory_allocated(0)
        rt.free(0, a)
        assert rt.memory_allocated(0) == base
        assert rt.max_memory_allocated(0) >= base + (1 << 20)
        rt.reset_peak_memory_stats(0)
        assert rt.max_memory_allocated(0) == base
        for p in ptrs:
            rt.free(0, p)

    def test_bad_device(self):
        with pytest.raises(ValueError):
            rt.alloc(rt.device_count(), 8)
        assert rt.mem_check(99, 0, 1) == (False, 0, 0)

    def test_capacity_limit_and_threads(self):
        code = textwrap.dedent("""
            import threading, spyre_triton._runtime as rt
            assert rt.device_memory_capacity() == 1 << 20
            a = rt.alloc(0, 1 << 19)
            try:
                rt.alloc(0, (1 << 19) + 1)
                raise SystemExit("allocation beyond capacity succeeded")
            except MemoryError:
                pass
            rt.free(0, a)
            errors = []
            def work():
                for _ in range(2000):
                    p = rt.alloc(0, 100)
                    if not rt.mem_check(0, p + 99, 1)[0]: errors.append(p)
                    rt.free(0, p)
            ts = [threading.Thread(target=work) for _ in range(4)]
            [t.start() for t in ts]; [t.join() for t in ts]
            assert not errors and rt.memory_allocated(0) == 0
            print("ok")
        """)
        env = dict(os.environ, SPYRE_DEVICE_MEMORY_BYTES="1M", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ok"


# --- the device ---------------------------------------------------------------------------------
def test_autoload_in_fresh_process():
    code = "import torch; t = torch.ones(2, device='spyre'); print(t.device, t.is_spyre, torch.spyre.is_available())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "spyre:0 True True"


def test_register_idempotent():
    from spyre_triton import device
    device.register()
    device.register()
    assert torch.spyre is device
    assert torch._C._get_privateuse1_backend_name() == "spyre"


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip(dtype):
    x = (torch.randn(5, 7) * 10).to(dtype)
    y = x.to("spyre")
    assert y.device == torch.device("spyre", 0) and y.dtype == dtype
    assert storage_ptr(y) != storage_ptr(x)
    assert torch.equal(y.cpu(), x)
    # non-contiguous sources and destinations
    assert torch.equal(x.t().to("spyre").cpu(), x.t())
    assert torch.equal(x[::2, 1::3].to("spyre").cpu(), x[::2, 1::3])
    assert torch.equal(y.t().cpu(), x.t())
    assert torch.equal(y[1:, ::2].cpu(), x[1:, ::2])
    # device -> device (clone) and dtype conversions across the boundary
    assert torch.equal(y.clone().cpu(), x)
    if not dtype.is_complex:
        assert torch.equal(y.to(torch.float64).cpu(), x.to(torch.float64))
        assert torch.equal(x.to("spyre", torch.float32).cpu(), x.to(torch.float32))


def test_copy_into_strided_destination():
    d = torch.zeros(4, 6, device="spyre")
    src = torch.arange(12.).reshape(4, 3)
    d[:, ::2] = src
    ref = torch.zeros(4, 6)
    ref[:, ::2] = src
    assert torch.equal(d.cpu(), ref)
    d2 = torch.zeros(3, 4, device="spyre")
    d2.t().copy_(spy(torch.arange(12.).reshape(4, 3)))
    assert torch.equal(d2.cpu(), torch.arange(12.).reshape(4, 3).t())


def test_empty_and_factories():
    e = torch.empty(3, 4, device="spyre")
    assert e.shape == (3, 4) and e.is_contiguous() and e.is_spyre
    s = torch.empty_strided((3, 4), (1, 3), device="spyre", dtype=torch.float16)
    assert s.stride() == (1, 3) and s.dtype == torch.float16
    z = torch.empty(0, device="spyre")
    assert z.numel() == 0 and z.cpu().shape == (0,)
    assert torch.equal(torch.zeros(2, 3, device="spyre").cpu(), torch.zeros(2, 3))
    assert torch.equal(torch.ones(2, 3, device="spyre", dtype=torch.int32).cpu(), torch.ones(2, 3, dtype=torch.int32))
    assert torch.equal(torch.full((2,), 7.0, device="spyre").cpu(), torch.full((2,), 7.0))
    assert torch.equal(torch.arange(10, device="spyre").cpu(), torch.arange(10))
    assert torch.equal(torch.eye(3, device="spyre").cpu(), torch.eye(3))
    cl = torch.empty(2, 3, 4, 5, device="spyre", memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)


def test_views_share_storage():
    x = torch.arange(24.).reshape(4, 6)
    y = spy(x)
    views = {
        "view": (y.view(6, 4), x.view(6, 4)),
        "transpose": (y.transpose(0, 1), x.transpose(0, 1)),
        "slice": (y[1:3, ::2], x[1:3, ::2]),
        "as_strided": (y.as_strided((2, 2), (1, 6), 3), x.as_strided((2, 2), (1, 6), 3)),
        "unsqueeze": (y.unsqueeze(1), x.unsqueeze(1)),
        "expand": (y[:1].expand(5, 6), x[:1].expand(5, 6)),
        "reshape": (y.reshape(2, 12), x.reshape(2, 12)),
        "select": (y[2], x[2]),
        "unbind": (y.unbind(0)[1], x.unbind(0)[1]),
        "split": (y.split(2, dim=1)[2], x.split(2, dim=1)[2]),
        "narrow": (y.narrow(1, 2, 3), x.narrow(1, 2, 3)),
        "flatten": (y.flatten(), x.flatten()),
        "diagonal": (y.diagonal(), x.diagonal()),
        "unfold": (y.unfold(1, 2, 2), x.unfold(1, 2, 2)),
        "view_dtype": (y.view(torch.int32), x.view(torch.int32)),
    }
    for name, (v, ref) in views.items():
        assert v.is_spyre, name
        assert v.untyped_storage().data_ptr() == y.untyped_storage().data_ptr(), name
        assert v.stride() == ref.stride() and v.storage_offset() == ref.storage_offset(), name
        assert torch.equal(v.cpu(), ref), name
    # writes through views are visible in the base
    y.t()[0, 1] = -1.0
    y[3, 1:4] = torch.tensor([7.0, 8.0, 9.0])
    y.view(24)[5] += 100
    y.diagonal().zero_()
    x.t()[0, 1] = -1.0
    x[3, 1:4] = torch.tensor([7.0, 8.0, 9.0])
    x.view(24)[5] += 100
    x.diagonal().zero_()
    assert torch.equal(y.cpu(), x)


def test_resize_and_set():
    y = torch.arange(6.).to("spyre")
    y.resize_(2, 3)
    assert y.shape == (2, 3) and torch.equal(y.cpu(), torch.arange(6.).reshape(2, 3))
    y.resize_(10, 10)
    assert y.shape == (10, 10) and torch.equal(y.flatten()[:6].cpu(), torch.arange(6.))
    y.resize_(0)
    assert y.numel() == 0
    a = torch.arange(8.).to("spyre")
    b = torch.empty(0, device="spyre")
    b.set_(a.untyped_storage(), 2, (2, 3), (3, 1))
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert torch.equal(b.cpu(), torch.arange(8.).as_strided((2, 3), (3, 1), 2))
    c = torch.empty(0, device="spyre").set_(a)
    assert torch.equal(c.cpu(), torch.arange(8.))


def test_item_and_scalars():
    y = spy(torch.tensor([1.5, 2.5]))
    assert y[1].item() == 2.5
    assert spy(torch.tensor(3)).item() == 3
    assert spy(torch.tensor(True)).item() is True
    assert float(y.sum()) == 4.0
    assert bool((y > 2).any())


def test_spyre_method_and_module():
    x = torch.ones(3)
    y = x.spyre()
    assert y.is_spyre and not x.is_spyre
    m = torch.nn.Linear(3, 2).spyre()
    assert m.weight.is_spyre and m.weight.device == torch.device("spyre", 0)
    assert torch.spyre.is_available()
    assert torch.spyre.device_count() >= 1
    assert torch.spyre.current_device() == 0


def test_torch_spyre_api():
    sp = torch.spyre
    sp.synchronize()
    sp.synchronize("spyre:0")
    sp.empty_cache()
    with sp.device(0):
        assert sp.current_device() == 0
    assert torch.device("spyre").type == "spyre"
    free, total = sp.mem_get_info()
    assert 0 < free <= total
    s = sp.current_stream()
    assert s.device == torch.device("spyre", 0)
    e1, e2 = torch.Event(device="spyre", enable_timing=True), torch.Event(device="spyre", enable_timing=True)
    e1.record()
    e2.record()
    e2.synchronize()
    assert e1.query() and e1.elapsed_time(e2) >= 0
    assert torch.float16 in sp.get_amp_supported_dtype()


def test_memory_stats():
    sp = torch.spyre
    sp.synchronize()
    base = sp.memory_allocated()
    sp.reset_peak_memory_stats()
    assert sp.max_memory_allocated() == base
    t = torch.empty(1000, 1000, device="spyre")  # 4 MB
    assert sp.memory_allocated() == base + 4_000_000
    assert sp.memory_allocated("spyre:0") == sp.memory_allocated(0) == sp.memory_allocated(torch.device("spyre"))
    assert sp.memory_reserved() >= sp.memory_allocated()
    u = torch.empty(500, 1000, device="spyre")
    assert sp.memory_allocated() == base + 6_000_000
    del t, u
    assert sp.memory_allocated() == base
    assert sp.max_memory_allocated() == base + 6_000_000
    sp.reset_peak_memory_stats()
    assert sp.max_memory_allocated() == base
    # every live tensor's storage is a checked allocation
    v = torch.zeros(100, device="spyre")
    ok, b, n = rt.mem_check(0, v.data_ptr(), 400)
    assert ok and b == v.data_ptr() and n == 400
    assert not rt.mem_check(0, v.data_ptr(), 401)[0]


# --- the CPU fallback ---------------------------------------------------------------------------
def test_eager_ops_match_cpu():
    torch.manual_seed(0)
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    ya, yb = spy(a), spy(b)
    same(ya + 1, a + 1)
    same(ya * ya - ya / 3, a * a - a / 3)
    same(ya @ yb, a @ b)
    same(torch.softmax(ya, dim=1), torch.softmax(a, dim=1))
    same(F.gelu(ya), F.gelu(a))
    same(ya.sum(0), a.sum(0))
    same(ya.max(dim=1).values, a.max(dim=1).values)
    assert torch.equal(ya.argmax(dim=1).cpu(), a.argmax(dim=1))
    idx = torch.tensor([3, 0, 7])
    same(torch.index_select(ya, 0, spy(idx)), torch.index_select(a, 0, idx))
    same(ya[spy(idx)], a[idx])
    same(torch.where(ya > 0, ya, torch.zeros_like(ya)), torch.where(a > 0, a, torch.zeros_like(a)))
    same(torch.cat([ya, ya], 1), torch.cat([a, a], 1))
    same(torch.nonzero(ya > 1), torch.nonzero(a > 1))
    same(ya.cumsum(1), a.cumsum(1))
    same(ya.sort(dim=1).values, a.sort(dim=1).values)
    # mixed with a CPU scalar tensor
    same(ya * torch.tensor(2.0), a * 2.0)
    x = torch.randn(2, 3, 10, 10)
    w = torch.randn(4, 3, 3, 3)
    same(F.conv2d(spy(x), spy(w), padding=1), F.conv2d(x, w, padding=1))
    same(F.conv2d(spy(x), spy(w), spy(torch.ones(4)), stride=2), F.conv2d(x, w, torch.ones(4), stride=2))
    same(F.max_pool2d(spy(x), 2), F.max_pool2d(x, 2))
    same(F.layer_norm(ya, (16,)), F.layer_norm(a, (16,)))


def test_inplace_and_out():
    a = torch.randn(4, 5)
    y = spy(a)
    ptr = storage_ptr(y)
    r = y.add_(1)
    assert r is y and storage_ptr(y) == ptr
    a.add_(1)
    same(y, a)
    y.mul_(spy(a))
    a.mul_(a)
    same(y, a)
    y[:, 1].fill_(3)
    a[:, 1].fill_(3)
    same(y, a)
    y.t().clamp_(max=2.0)   # in place through a non-contiguous view
    a.t().clamp_(max=2.0)
    same(y, a)
    # out= with the right size: written in place
    out = torch.empty(4, 5, device="spyre")
    optr = storage_ptr(out)
    r = torch.add(y, 1, out=out)
    assert r is out and storage_ptr(out) == optr
    same(out, a + 1)
    # out= that must grow
    out2 = torch.empty(0, device="spyre")
    r = torch.mm(y, y.t(), out=out2)
    assert r is out2 and out2.shape == (4, 4)
    same(out2, a @ a.t())
    assert rt.mem_check(0, out2.data_ptr(), 64)[0]   # the grown output lives in device memory
    # out= into a view of a larger tensor
    big = torch.zeros(4, 10, device="spyre")
    torch.mul(y, 2, out=big[:, :5])
    ref = torch.zeros(4, 10)
    ref[:, :5] = a * 2
    same(big, ref)
    # results aliasing the same storage are detected as overlapping, like on the CPU
    with pytest.raises(RuntimeError):
        z = torch.arange(10.).to("spyre")
        torch.add(z[:-1], 1, out=z[1:])


def test_aot_autograd_training_step():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    x = torch.randn(4, 8)
    m(x).square().mean().backward()
    ref = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m.spyre()

    def step(x):
        loss = m(x).square().mean()
        loss.backward()
        return loss

    torch._dynamo.reset()
    torch.compile(step, backend="aot_eager")(spy(x))
    for p, g in zip(m.parameters(), ref):
        assert p.grad.is_spyre
        torch.testing.assert_close(p.grad.cpu(), g, rtol=1e-5, atol=1e-6)


def test_fallback_counts():
    sp = torch.spyre
    a, b = spy(torch.randn(3, 3)), spy(torch.randn(3, 3))
    sp.reset_fallback_counts()
    assert sp.fallback_counts() == {}
    torch.mm(a, b)
    torch.mm(a, b)
    torch.softmax(a, 1)
    c = sp.fallback_counts()
    assert c["aten::mm"] == 2
    assert any(k.startswith("aten::_softmax") for k in c)
    assert sp.fallback_counts(overloads=True)["aten::mm.out"] == 2  # mm = empty + mm.out
    sp.reset_fallback_counts()
    a.view(9)  # views and copies are native kernels, not fallbacks
    a.cpu()
    assert sp.fallback_counts() == {}


def test_autograd_mlp_matches_cpu():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    x, target = torch.randn(16, 10), torch.randint(0, 3, (16,))
    ref = F.cross_entropy(model(x), target)
    ref.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.spyre()
    loss = F.cross_entropy(model(spy(x)), spy(target))
    loss.backward()
    torch.testing.assert_close(loss.cpu(), ref)
    for p, g in zip(model.parameters(), grads):
        assert p.grad.is_spyre
        torch.testing.assert_close(p.grad.cpu(), g, rtol=1e-5, atol=1e-6)
    # one optimizer step on the device
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.step()
    assert all(p.is_spyre for p in model.parameters())


def test_autograd_conv():
    torch.manual_seed(2)
    x, w, b = torch.randn(2, 3, 8, 8), torch.randn(5, 3, 3, 3), torch.randn(5)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    F.conv2d(*leaves, padding=1).square().sum().backward()
    dleaves = [spy(t).requires_grad_() for t in (x, w, b)]
    F.conv2d(*dleaves, padding=1).square().sum().backward()
    for c, d in zip(leaves, dleaves):
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-4, atol=1e-4)
    assert torch.spyre.fallback_counts().get("aten::convolution_backward_overrideable", 0) >= 1


def test_manual_seed():
    torch.manual_seed(123)
    a = torch.rand(5, device="spyre")
    b = torch.randn(3, 3, device="spyre")
    torch.manual_seed(123)
    a2 = torch.rand(5, device="spyre")
    b2 = torch.randn(3, 3, device="spyre")
    assert a.is_spyre and torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())
    torch.spyre.manual_seed(7)
    c = torch.rand(5, device="spyre")
    state = torch.spyre.get_rng_state()
    d = torch.rand(5, device="spyre")
    torch.spyre.set_rng_state(state)
    assert torch.equal(torch.rand(5, device="spyre").cpu(), d.cpu())
    torch.spyre.manual_seed(7)
    assert torch.equal(torch.rand(5, device="spyre").cpu(), c.cpu())
    g = torch.Generator(device="spyre")
    g.manual_seed(5)
    e = torch.rand(4, device="spyre", generator=g)
    g.manual_seed(5)
    assert torch.equal(torch.rand(4, device="spyre", generator=g).cpu(), e.cpu())
    # dropout is reproducible too
    torch.manual_seed(3)
    m1 = F.dropout(torch.ones(100, device="spyre"), 0.5)
    torch.manual_seed(3)
    m2 = F.dropout(torch.ones(100, device="spyre"), 0.5)
    assert torch.equal(m1.cpu(), m2.cpu())


def test_two_devices():
    code = textwrap.dedent("""
        import torch
        sp = torch.spyre
        assert sp.device_count() == 2
        a = torch.ones(1000, device="spyre:1")
        assert a.device == torch.device("spyre", 1)
        assert sp.memory_allocated(1) == 4000 and sp.memory_allocated(0) == 0
        b = torch.ones(250, device="spyre:0")
        assert sp.memory_allocated(0) == 1000 and sp.memory_allocated(1) == 4000
        c = a * 2   # result on the inputs' device
        assert c.device.index == 1 and sp.memory_allocated(1) == 8000
        assert torch.equal(c.cpu(), torch.full((1000,), 2.0))
        d = c.to("spyre:0")
        assert d.device.index == 0 and torch.equal(d.cpu(), c.cpu())
        with sp.device(1):
            assert sp.current_device() == 1
            e = torch.zeros(10, device="spyre")
            assert e.device.index == 1
        assert sp.current_device() == 0
        sp.set_device(1)
        assert torch.ones(2).spyre().device.index == 1
        sp.set_device(0)
        del a, c, e
        assert sp.memory_allocated(1) == 0 and sp.max_memory_allocated(1) == 8048  # a, c, e, ones(2)
        try:
            torch.empty(1, device="spyre:2")
            raise SystemExit("spyre:2 should not exist")
        except RuntimeError:
            pass
        print("ok")
    """)
    env = dict(os.environ, SPYRE_DEVICE_COUNT="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_out_of_memory():
    code = textwrap.dedent("""
        import torch
        a = torch.empty(1000, device="spyre")
        try:
            torch.empty(1 << 20, device="spyre")
            raise SystemExit("allocation beyond capacity succeeded")
        except torch.OutOfMemoryError as e:
            assert "out of memory" in str(e)
        print("ok")
    """)
    env = dict(os.environ, SPYRE_DEVICE_MEMORY_BYTES="65536")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_autocast():
    a = torch.randn(4, 4)
    y = spy(a)
    with torch.autocast("spyre", dtype=torch.float16):
        m = y @ y
        s = torch.softmax(m, 1)
    assert m.dtype == torch.float16 and m.is_spyre
    assert s.dtype == torch.float32
    torch.testing.assert_close(m.cpu(), (a.half() @ a.half()))
    assert (y @ y).dtype == torch.float32


def test_out_resize_shares_like_cpu_and_no_leaks():
    base = torch.spyre.memory_allocated()
    o = torch.zeros(2, device="spyre")
    v = o[:1]
    oc = torch.zeros(2)
    vc = oc[:1]
    with pytest.warns(UserWarning):
        torch.mm(torch.ones(3, 3, device="spyre"), torch.ones(3, 3, device="spyre"), out=o)
        torch.mm(torch.ones(3, 3), torch.ones(3, 3), out=oc)
    assert torch.equal(o.cpu(), oc) and torch.equal(v.cpu(), vc)
    assert o.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
    t = torch.ones(4, device="spyre")
    t.set_()
    assert t.shape == (0,) and t.is_spyre
    for _ in range(20):
        x = torch.randn(64, 64, device="spyre")
        (x @ x).softmax(1).sum().item()
    del o, v, t, x
    assert torch.spyre.memory_allocated() == base


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.bool])
def test_fill_and_zero_run_on_the_device(dtype):
    sp = torch.spyre
    x = torch.ones(5, 6, dtype=dtype)
    d = spy(x)
    sp.reset_fallback_counts()
    d[:, 1::2].fill_(3)  # a strided view: only its elements change
    x[:, 1::2].fill_(3)
    d[1].zero_()
    x[1].zero_()
    d[2, 2:4].fill_(torch.tensor(2))  # fill_.Tensor with a CPU 0-d value
    x[2, 2:4].fill_(2)
    torch.empty(0, dtype=dtype, device=d.device).fill_(1)
    assert torch.equal(d.cpu(), x)
    assert sp.fallback_counts() == {}
    with pytest.raises(RuntimeError, match="0-dimension"):
        d.fill_(torch.ones(2))
