"""The main demo: Triton kernels, and a compiled model, running on the simulated Spyre device.

    python -m spyre_triton.demo

Prints each result against PyTorch on the CPU, a piece of the Spyre assembly, and what ran where.
"""
from __future__ import annotations

import time

import torch
import triton

import spyre_triton
from spyre_triton.reference_kernels import add_kernel, matmul_kernel, softmax_kernel


def check(name, got, want, seconds):
    err = (got.cpu().float() - want.float()).abs().max().item()
    ok = torch.allclose(got.cpu().float(), want.float(), rtol=1e-3, atol=1e-3)
    print(f"  {name:<34} max |error| {err:.2e}  {'OK ' if ok else 'BAD'}  {seconds * 1e3:8.2f} ms")
    return ok


def main():
    device = triton.runtime.driver.active.get_active_torch_device()
    print(f"Triton backend: {triton.runtime.driver.active.get_current_target().backend}, torch device: {device}")
    props = triton.runtime.driver.active.utils.get_device_properties(device.index)
    print(f"Simulated card: {props['multiprocessor_count']} cores, {props['max_shared_mem']} bytes of LX for tiles")
    torch.manual_seed(0)
    ok = True
    with spyre_triton.track() as tracked:
        print("\n@triton.jit kernels on spyre, against PyTorch on the CPU:")
        x, y = torch.rand(1 << 20), torch.rand(1 << 20)
        xd, yd = x.to(device), y.to(device)
        out = torch.empty_like(xd)
        t = time.perf_counter()
        add_kernel[(triton.cdiv(x.numel(), 4096),)](xd, yd, out, x.numel(), BLOCK=4096)
        ok &= check("vector add, 2^20 fp32", out, x + y, time.perf_counter() - t)

        a = torch.randn(1000, 781)
        ad = a.to(device)
        sm = torch.empty_like(ad)
        t = time.perf_counter()
        softmax_kernel[(a.shape[0],)](sm, ad, ad.stride(0), sm.stride(0), a.shape[1], BLOCK=1024)
        ok &= check("fused softmax, 1000x781", sm, torch.softmax(a, dim=1), time.perf_counter() - t)

        m, k, n = 300, 200, 250
        p, q = torch.randn(m, k), torch.randn(k, n)
        c = torch.empty(m, n, device=device)
        t = time.perf_counter()
        pd, qd = p.to(device), q.to(device)
        matmul_kernel[(triton.cdiv(m, 64) * triton.cdiv(n, 64),)](pd, qd, c, m, n, k, *pd.stride(), *qd.stride(),
                                                                   *c.stride(), BM=64, BN=64, BK=32, GROUP_M=8,
                                                                   WRAP=True)
        ok &= check("matmul (tl.dot), 300x200 @ 200x250", c, p @ q, time.perf_counter() - t)

        compiled_ok = _compiled_model(device)
        ok &= compiled_ok
    asm = add_kernel.warmup(xd, yd, out, x.numel(), BLOCK=4096, grid=(1,)).asm["spyreasm"]
    body = [ln for ln in asm.splitlines() if not ln.startswith(".")]
    print("\nSpyre assembly of the vector-add kernel (first lines):")
    print("\n".join("  " + ln for ln in body[:12]))
    print("\nWhat ran where:")
    print("\n".join("  " + ln for ln in tracked.table().splitlines()))
    print("\nall results match" if ok else "\nSOME RESULTS DO NOT MATCH")
    return 0 if ok else 1


class TinyGPT(torch.nn.Module):
    """A GPT-2-style decoder (learned positions, pre-LayerNorm, causal attention, GELU MLP, tied
    language-model head), small enough to compile in seconds."""

    def __init__(self, vocab=256, d=64, heads=4, layers=2, max_len=64):
        super().__init__()
        nn = torch.nn
        self.heads = heads
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln_1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d),
            ln_2=nn.LayerNorm(d), fc=nn.Linear(d, 4 * d), fc_out=nn.Linear(4 * d, d))) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.05)

    def forward(self, ids):
        F = torch.nn.functional
        b, t = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))
        for blk in self.blocks:
            q, k, v = blk.qkv(blk.ln_1(x)).split(x.shape[-1], dim=2)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + blk.proj(y.transpose(1, 2).reshape(b, t, -1))
            x = x + blk.fc_out(F.gelu(blk.fc(blk.ln_2(x)), approximate="tanh"))
        return F.linear(self.ln_f(x), self.wte.weight)


def _compiled_model(device):
    """torch.compile of a small GPT-2-style model on spyre, and its account of where compute ran."""
    try:
        from spyre_triton import inductor  # noqa: F401
    except ImportError:
        print("\n(torch.compile on spyre: the Inductor integration is not in this build yet)")
        return True
    print("\ntorch.compile(model.to('spyre')), default inductor backend and mode, a GPT-2-style decoder:")
    torch.manual_seed(0)
    model = TinyGPT().eval()
    ids = torch.randint(0, 256, (2, 32))
    with torch.no_grad():
        want = model(ids)
        compiled = torch.compile(model.to(device))
        t = time.perf_counter()
        compiled(ids.to(device))
        print(f"  compiled in {time.perf_counter() - t:.1f} s (first call: Inductor, the spyre compiler, autotuning)")
        with spyre_triton.track() as account:
            t = time.perf_counter()
            got = compiled(ids.to(device))
            seconds = time.perf_counter() - t
    ok = check("GPT-2-style logits, 2x32 tokens", got, want, seconds)
    print("\n  Where the compiled model's compute ran (triton_tem_* are matmul templates):")
    print("\n".join("    " + ln for ln in account.table().splitlines()))
    if account.fallbacks:
        print("  (some ops ran on the host CPU)")
    with torch.no_grad(), spyre_triton.profile() as prof:
        compiled(ids.to(device))
    print("\n  How long it would take on a Spyre card (the performance model, docs/perf-model.md):")
    print("\n".join("    " + ln for ln in prof.table(top=12).splitlines()))
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
