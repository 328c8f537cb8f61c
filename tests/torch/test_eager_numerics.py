"""Half-precision layer norm in eager mode on spyre keeps fp32 statistics and accumulation."""
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_layer_norm_forward_backward_accuracy(dtype):
    torch.manual_seed(0)
    M, N = 300, 1024
    x = (-2.3 + 0.5 * torch.randn(M, N)).to(dtype)
    w, b = torch.rand(N).to(dtype), torch.rand(N).to(dtype)
    dy = (0.1 * torch.randn(M, N)).to(dtype)
    before = dict(torch.spyre.fallback_counts())
    xs, ws, bs = (t.to("spyre").requires_grad_() for t in (x, w, b))
    out, mean, rstd = torch.ops.aten.native_layer_norm(xs, (N,), ws, bs, 1e-5)
    assert out.dtype == dtype and out.device.type == "spyre"
    assert mean.dtype == torch.float32 or dtype == torch.float32  # CUDA's accumulate type
    y = torch.nn.functional.layer_norm(xs, (N,), ws, bs, 1e-5)
    y.backward(dy.to("spyre"))
    after = torch.spyre.fallback_counts()
    assert after.get("aten::native_layer_norm_backward", 0) > before.get("aten::native_layer_norm_backward", 0)
    # exact reference in float64
    xd, wd, bd = (t.double().requires_grad_() for t in (x, w, b))
    yd = torch.nn.functional.layer_norm(xd, (N,), wd, bd, 1e-5)
    yd.backward(dy.double())
    tol = {torch.float16: 2e-2, torch.bfloat16: 2e-1, torch.float32: 1e-4}[dtype]
    torch.testing.assert_close(y.detach().cpu().double(), yd.detach(), rtol=0, atol=tol)
    for got, want in ((xs.grad, xd.grad), (ws.grad, wd.grad), (bs.grad, bd.grad)):
        assert got.dtype == dtype
        err = (got.cpu().double() - want).abs().max().item()
        assert err < tol * max(1.0, want.abs().max().item()), err
