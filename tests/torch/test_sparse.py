"""Sparse tensors on spyre: PyTorch's own sparse tensors (COO, CSR, CSC, BSR, BSC) whose index and value
tensors live in device memory. The constructors are ATen's; every other op runs the CPU's sparse kernel on
aliases of the members (spyre_triton/csrc/device.cpp: Aliaser::sparse_to_cpu, register_sparse_ops). The
oracle is the same op on CPU tensors."""
import pytest
import torch

LAYOUTS = {
    "coo": lambda t: t.to_sparse(),
    "csr": lambda t: t.to_sparse_csr(),
    "csc": lambda t: t.to_sparse_csc(),
    "bsr": lambda t: t.to_sparse_bsr((2, 2)),
    "bsc": lambda t: t.to_sparse_bsc((2, 2)),
}


def _dense(rows=4, cols=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g)
    return x * (torch.rand(rows, cols, generator=g) < 0.4)     # about 60% zeros


def _members(s):
    if s.layout == torch.sparse_coo:
        return [s._indices(), s._values()]
    if s.layout in (torch.sparse_csr, torch.sparse_bsr):
        return [s.crow_indices(), s.col_indices(), s.values()]
    return [s.ccol_indices(), s.row_indices(), s.values()]


def _assert_on(s, device):
    assert s.device == torch.device(device)
    for m in _members(s):
        assert m.device == torch.device(device), f"a member of a {s.layout} tensor is on {m.device}"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dense_to_sparse_on_the_device(layout):
    x = _dense()
    s = LAYOUTS[layout](x.to("spyre"))
    ref = LAYOUTS[layout](x)
    assert s.layout == ref.layout
    _assert_on(s, "spyre:0")
    for m, r in zip(_members(s), _members(ref)):
        torch.testing.assert_close(m.cpu(), r, rtol=0, atol=0)
    torch.testing.assert_close(s.to_dense().cpu(), x, rtol=0, atol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sparse_moves_between_host_and_device(layout):
    ref = LAYOUTS[layout](_dense())
    s = ref.to("spyre")
    _assert_on(s, "spyre:0")
    back = s.cpu()
    _assert_on(back, "cpu")
    torch.testing.assert_close(back.to_dense(), ref.to_dense(), rtol=0, atol=0)


def test_coo_constructor_and_coalesce_on_a_second_card():
    i = torch.tensor([[0, 1, 1, 0], [2, 0, 0, 2]])
    v = torch.tensor([1.0, 2.0, 3.0, 4.0])
    s = torch.sparse_coo_tensor(i.to("spyre:1"), v.to("spyre:1"), (2, 3))
    _assert_on(s, "spyre:1")
    assert not s.is_coalesced()
    c = s.coalesce()
    _assert_on(c, "spyre:1")
    assert c.is_coalesced() and c._nnz() == 2
    ref = torch.sparse_coo_tensor(i, v, (2, 3)).coalesce()
    torch.testing.assert_close(c._indices().cpu(), ref._indices(), rtol=0, atol=0)
    torch.testing.assert_close(c._values().cpu(), ref._values(), rtol=0, atol=0)


def test_the_coalesced_flag_survives_the_move():
    ref = _dense().to_sparse()
    assert ref.is_coalesced()
    assert ref.to("spyre").is_coalesced()
    unc = torch.sparse_coo_tensor(torch.tensor([[0, 0]]), torch.tensor([1.0, 2.0]), (3,))
    assert not unc.to("spyre").is_coalesced()


@pytest.mark.parametrize("name, op", [
    ("coo @ dense", lambda a, b: torch.sparse.mm(a.to_sparse(), b)),
    ("csr @ dense", lambda a, b: a.to_sparse_csr() @ b),
    ("csr mm sum", lambda a, b: torch.sparse.mm(a.to_sparse_csr(), b, "sum")),
    ("csr mm max", lambda a, b: torch.sparse.mm(a.to_sparse_csr(), b, "amax")),
    ("addmm coo", lambda a, b: torch.addmm(b[:4, :3], a.to_sparse(), b[:, :3])),
])
def test_sparse_dense_products_match_the_cpu(name, op):
    a, b = _dense(), torch.randn(6, 5)
    out = op(a.to("spyre"), b.to("spyre"))
    assert out.device.type == "spyre"
    torch.testing.assert_close(out.cpu(), op(a, b))


def test_sampled_addmm_keeps_the_csr_pattern():
    mask = torch.eye(4).to_sparse_csr()
    m1, m2 = torch.randn(4, 3), torch.randn(3, 4)
    out = torch.sparse.sampled_addmm(mask.to("spyre"), m1.to("spyre"), m2.to("spyre"), alpha=0.5)
    ref = torch.sparse.sampled_addmm(mask, m1, m2, alpha=0.5)
    assert out.layout == torch.sparse_csr
    _assert_on(out, "spyre:0")
    torch.testing.assert_close(out.to_dense().cpu(), ref.to_dense())


@pytest.mark.parametrize("name, op", [
    ("add", lambda s: s + s),
    ("neg", lambda s: -s),
    ("mul scalar", lambda s: s * 3),
    ("sum", lambda s: torch.sparse.sum(s)),
    ("sum dim", lambda s: torch.sparse.sum(s, 1)),
    ("softmax", lambda s: torch.sparse.softmax(s, 1)),
    ("transpose", lambda s: s.t().coalesce()),
    ("sin", lambda s: s.sin()),
])
def test_coo_ops_match_the_cpu(name, op):
    x = _dense()
    out, ref = op(x.to("spyre").to_sparse()), op(x.to_sparse())
    assert out.device.type == "spyre" and out.layout == ref.layout
    dense = (lambda t: t.to_dense()) if ref.layout != torch.strided else (lambda t: t)
    torch.testing.assert_close(dense(out).cpu(), dense(ref))


def test_in_place_add_grows_the_members_on_the_device():
    a, b = _dense(seed=1), _dense(seed=2)
    s = a.to("spyre").to_sparse()
    nnz = s._nnz()
    s.add_(b.to("spyre").to_sparse())
    assert s._nnz() > nnz                       # the CPU kernel resized the members in place
    _assert_on(s, "spyre:0")
    torch.testing.assert_close(s.to_dense().cpu(), a + b)


def test_in_place_mul_returns_the_same_tensor():
    x = _dense()
    s = x.to("spyre").to_sparse()
    assert s.mul_(2) is s
    _assert_on(s, "spyre:0")
    torch.testing.assert_close(s.to_dense().cpu(), x * 2)


def test_values_alias_the_sparse_tensor():
    s = _dense().to("spyre").to_sparse()
    s._values().zero_()
    assert s.to_dense().abs().sum().item() == 0


def test_sparse_copies_between_devices():
    ref = _dense().to_sparse()
    on_card = torch.zeros(4, 6, device="spyre").to_sparse().copy_(ref)
    _assert_on(on_card, "spyre:0")
    torch.testing.assert_close(on_card.to_dense().cpu(), ref.to_dense())
    on_host = torch.zeros(4, 6).to_sparse().copy_(on_card)
    _assert_on(on_host, "cpu")
    torch.testing.assert_close(on_host.to_dense(), ref.to_dense())


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_empty_and_zeros_like_stay_sparse_on_the_device(layout):
    s = LAYOUTS[layout](_dense().to("spyre"))
    for t in (torch.empty_like(s), torch.zeros_like(s)):
        assert t.layout == s.layout
        _assert_on(t, "spyre:0")
    assert torch.zeros_like(s).to_dense().abs().sum().item() == 0
    e = torch.empty((2, 3), layout=torch.sparse_coo, device="spyre")
    assert e.layout == torch.sparse_coo and e.device.type == "spyre" and e._nnz() == 0


def test_gradients_through_sparse_ops():
    x, w = _dense(), torch.randn(6, 3)
    xs, ws = x.to("spyre").requires_grad_(), w.to("spyre").requires_grad_()
    torch.sparse.mm(xs.to_sparse(), ws).pow(2).sum().backward()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    torch.sparse.mm(xc.to_sparse(), wc).pow(2).sum().backward()
    torch.testing.assert_close(ws.grad.cpu(), wc.grad)
    assert xs.grad.device.type == "spyre"
    torch.testing.assert_close(xs.grad.to_dense().cpu(), xc.grad.to_dense())


def test_csr_gradient_for_the_dense_operand():
    a, b = _dense().to_sparse_csr(), torch.randn(6, 2)
    bs = b.to("spyre").requires_grad_()
    (a.to("spyre") @ bs).sum().backward()
    bc = b.clone().requires_grad_()
    (a @ bc).sum().backward()
    torch.testing.assert_close(bs.grad.cpu(), bc.grad)


def test_mixing_a_cpu_sparse_tensor_is_refused():
    s = _dense().to_sparse()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        s.to("spyre") + s


def test_sparse_ops_are_counted_as_host_fallbacks():
    s = _dense().to("spyre").to_sparse()
    torch.spyre.reset_fallback_counts()
    torch.sparse.sum(s)
    assert torch.spyre.fallback_counts().get("aten::sum", 0) == 1


def test_save_and_load_with_invariant_checks():
    # torch.load validates each sparse COO tensor it loads while invariant checks are on; for a coalesced
    # tensor that check runs through the device's kernels
    import io
    s = _dense().to("spyre").to_sparse()
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    with torch.sparse.check_sparse_tensor_invariants():
        r = torch.load(buf)
    assert r.is_coalesced()
    _assert_on(r, "spyre:0")
    torch.testing.assert_close(r.to_dense().cpu(), s.to_dense().cpu(), rtol=0, atol=0)
