"""Tensor-parallel inference of a small Llama-style decoder on several spyre cards.

    torchrun --nproc-per-node 4 examples/tp_inference.py      # or 2; 1 runs the single-card reference alone

Each rank takes one card (torch.spyre.set_device(LOCAL_RANK)), builds the same model from the same seed,
shards it with DTensor (parallelize_module: attention and MLP projections column-wise in, row-wise out),
compiles it, and checks its logits against a single-card run of the unsharded model. Rank 0 prints the
check and the modelled time per forward: the kernels of one card plus its card-to-card transfers
(spyre_triton.profile()).
"""
from __future__ import annotations

import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    """Grouped-query attention: n_heads query heads share n_kv_heads key/value heads."""

    def __init__(self, dim, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds a share of the heads
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, hidden):
        super().__init__()
        self.attn_norm, self.mlp_norm = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.attn, self.mlp = Attention(dim, n_heads, n_kv_heads), SwiGLU(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    def __init__(self, vocab=256, dim=128, layers=2, n_heads=8, n_kv_heads=4, hidden=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, n_heads, n_kv_heads, hidden) for _ in range(layers))
        self.norm, self.out = nn.RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.out(self.norm(x))


def build(seed: int = 0, **config) -> Decoder:
    torch.manual_seed(seed)
    return Decoder(**config).eval()


def tensor_parallel(model: Decoder, mesh) -> Decoder:
    """Megatron-style sharding: q, k, v, w1, w3 split by output features; wo, w2 by input features, so
    each block needs one all_reduce after attention and one after the MLP."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(), "mlp.w1": ColwiseParallel(), "mlp.w3": ColwiseParallel(),
            "mlp.w2": RowwiseParallel()}
    for layer in model.layers:
        parallelize_module(layer, mesh, plan)
    return model


def tokens(batch=2, seq=16, vocab=256):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))


def modeled_forward_us(fn, x) -> tuple[float, float]:
    """(kernel us, transfer us) of one forward on this rank's card."""
    import spyre_triton
    fn(x)  # compiled and warm
    with spyre_triton.profile() as prof:
        fn(x)
    return prof.modeled_ns / 1e3, prof.comm_ns / 1e3


def main():
    import torch.distributed as dist
    rank = int(os.environ.get("LOCAL_RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    torch.spyre.set_device(rank)
    card = torch.device("spyre", rank)
    x = tokens().to(card)
    with torch.no_grad():
        single = torch.compile(build().to(card))
        ref = single(x).cpu()
        single_us = modeled_forward_us(single, x)
        if world == 1:
            print(f"TP 1: modelled {sum(single_us):.1f} us per forward")
            return
        from torch.distributed.device_mesh import init_device_mesh
        dist.init_process_group("spyreccl")
        mesh = init_device_mesh("spyre", (world,))
        tp = torch.compile(tensor_parallel(build().to(card), mesh))
        logits = tp(x).cpu()
        err = (logits - ref).abs().max().item()
        tp_us = modeled_forward_us(tp, x)
        if rank == 0:
            ok = torch.allclose(logits, ref, rtol=1e-4, atol=1e-4)
            print(f"logits of TP {world} vs a single card: max abs diff {err:.2e} ({'match' if ok else 'MISMATCH'})")
            print(f"modelled time per forward: TP 1 {sum(single_us):.1f} us; TP {world} {sum(tp_us):.1f} us "
                  f"({tp_us[0]:.1f} us of kernels per card + {tp_us[1]:.1f} us of all_reduce on the links)")
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
