"""Batch norm in inference, compiled on spyre, gives what spyre's eager ops give: empty saved statistics
(the CPU kernels' convention; torch's decomposition would give CUDA's [C] running mean and 1/std). Found
by PyTorch's OpInfos (native_batch_norm, _native_batch_norm_legit compiled against eager)."""
import pytest
import torch

A = torch.ops.aten
OPS = {
    "native_batch_norm": lambda x, w, b, rm, rv, t: A.native_batch_norm(x, w, b, rm, rv, t, 0.1, 1e-5),
    "_native_batch_norm_legit": lambda x, w, b, rm, rv, t: A._native_batch_norm_legit(x, w, b, rm, rv, t, 0.1, 1e-5),
    "_native_batch_norm_legit_no_training":
        lambda x, w, b, rm, rv, t: A._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5),
}


def _inputs(device):
    gen = torch.Generator().manual_seed(0)
    x, w, b, rm = (torch.randn(*s, generator=gen) for s in ((3, 2, 4), (2,), (2,), (2,)))
    rv = torch.rand(2, generator=gen) + 0.5
    return [t.to(device) for t in (x, w, b, rm, rv)]


@pytest.mark.parametrize("name, training", [(n, t) for n in OPS for t in (False, True)
                                            if not (t and n.endswith("no_training"))])  # such ops have no training mode
def test_compiled_batch_norm_matches_eager(name, training):
    fn = OPS[name]
    eager_in, compiled_in = _inputs("spyre"), _inputs("spyre")
    want = fn(*eager_in, training)
    torch._dynamo.reset()
    got = torch.compile(fn)(*compiled_in, training)
    assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in want]
    for g, e in zip(got, want):
        torch.testing.assert_close(g.cpu(), e.cpu())
    # the running statistics are updated in training, the same way
    torch.testing.assert_close(compiled_in[3].cpu(), eager_in[3].cpu())
    torch.testing.assert_close(compiled_in[4].cpu(), eager_in[4].cpu())
    if not training:
        assert tuple(want[1].shape) == (0,)  # the convention this pins down


def test_batch_norm_module_eval_and_train():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    dev = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("spyre")
    x = torch.randn(2, 3, 8, 8)
    torch._dynamo.reset()
    compiled = torch.compile(dev)
    for train in (True, False):
        ref.train(train)
        dev.train(train)
        torch.testing.assert_close(compiled(x.to("spyre")).cpu(), ref(x), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dev[1].running_mean.cpu(), ref[1].running_mean)
