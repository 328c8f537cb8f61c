"""Whole models under torch.compile (default Inductor backend, default mode) on spyre.

Each model is random-initialised on the CPU, copied to spyre, compiled, and compared with eager
CPU fp32. `spyre_triton.track()` must show Inductor's Triton kernels - matmul templates
(`triton_tem_*`) included - and no host fallback in the compiled graphs: matmuls, attention and
convolutions run on the simulated accelerator.

The models are written here in plain PyTorch (GPT-2-style, Llama-style, BERT-style, a CNN), so
the default run needs nothing beyond torch (about 1.5 minutes on 2 cores); the same architectures
built by `transformers` from configs run under `-m slow` when transformers is installed.
"""
from __future__ import annotations

import copy
import math
import time
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import spyre_triton
from spyre_triton import inductor

DEV = "spyre"
COMPILE_SECONDS: dict[str, float] = {}  # first call (compile, autotune, run) per test, for reports
MATMUL_CONV = ("mm", "bmm", "addmm", "baddbmm", "convolution", "conv", "matmul", "linear",
               "scaled_dot_product", "_flash_attention", "_efficient_attention")


def to_dev(x):
    if isinstance(x, torch.Tensor):
        return x.to(DEV)
    if isinstance(x, dict):
        return {k: to_dev(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(to_dev(v) for v in x)
    return x


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        return out[0]
    return out[0] if hasattr(out, "__getitem__") else out


def host_matmul_conv(fallbacks) -> list[str]:
    return [op for op in fallbacks if any(k in op.split("::")[-1] for k in MATMUL_CONV)]


def run_model(name, model, *args, rtol=1e-4, atol=1e-4, dtype=None, ref=None, **kwargs):
    """Compile `model` on spyre, run it twice, compare (the first output) with eager CPU; returns
    the whole output of the second call and its tracker.

    The first call compiles (and autotunes the reductions' block sizes); the second is tracked
    as the steady state, which must run entirely on spyre."""
    model = model.eval()
    with torch.no_grad():
        if ref is None:
            ref = first_tensor(model(*args, **kwargs)).float()
        dev_model = copy.deepcopy(model).to(DEV)
        if dtype is not None:
            dev_model = dev_model.to(dtype)
        torch._dynamo.reset()
        compiled = torch.compile(dev_model)
        dargs, dkwargs = to_dev(args), to_dev(kwargs)
        before = inductor.host_fallbacks()
        t0 = time.perf_counter()
        with spyre_triton.track() as first:
            first_tensor(compiled(*dargs, **dkwargs))
        COMPILE_SECONDS[name] = time.perf_counter() - t0
        with spyre_triton.track() as steady:
            full = compiled(*dargs, **dkwargs)
        out = first_tensor(full)
    print(f"\n{name}: first call (compile + run) {COMPILE_SECONDS[name]:.1f} s, "
          f"{len(steady.kernels)} kernels, host fallbacks {dict(steady.fallbacks) or 'none'}")
    assert out.device.type == DEV
    torch.testing.assert_close(out.float().cpu(), ref, rtol=rtol, atol=atol)
    assert inductor.host_fallbacks() == before, "compiled graphs call ops on the host"
    assert not host_matmul_conv(first.fallbacks), first.table()
    assert not steady.fallbacks, steady.table()
    assert any(k.startswith("triton_tem_") for k in steady.kernels), steady.table()
    return full, steady


# --- the models -------------------------------------------------------------------------------
class GPTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    """GPT-2-style decoder: learned positions, pre-LayerNorm, causal attention, GELU(tanh) MLP,
    language-model head tied to the token embedding."""

    def __init__(self, vocab=128, d=64, heads=4, layers=2, max_len=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        init_weights(self)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head (one parameter, also on spyre)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, heads * self.hd, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(heads * self.hd, d, bias=False)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin  # RoPE
        rep = self.heads // self.kv_heads  # grouped-query attention: kv heads shared
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))  # SwiGLU


class Llama(nn.Module):
    """Llama-style decoder: RMSNorm, rotary position embeddings, SwiGLU, grouped-query attention
    (4 query heads sharing 2 key/value heads), untied head."""

    def __init__(self, vocab=128, d=64, heads=4, kv_heads=2, hidden=128, layers=2, theta=10000.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd),
                             persistent=False)
        init_weights(self)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        x = self.embed(ids)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))


class BertLayer(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.attn_out = (nn.Linear(d, d) for _ in range(4))
        self.ln_attn, self.ln_out = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.inter, self.out = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = (lin(x).view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for lin in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = self.ln_attn(x + self.attn_out(y.transpose(1, 2).reshape(b, t, c)))  # post-LN
        return self.ln_out(x + self.out(F.gelu(self.inter(x))))


class Bert(nn.Module):
    """BERT-style encoder: word + position + token-type embeddings, post-LayerNorm layers with a
    padding mask, GELU(erf) MLP, tanh pooler over the first token."""

    def __init__(self, vocab=128, d=64, heads=4, hidden=128, layers=2, max_len=64):
        super().__init__()
        self.word, self.pos, self.token_type = nn.Embedding(vocab, d), nn.Embedding(max_len, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads, hidden) for _ in range(layers))
        self.pool = nn.Linear(d, d)
        init_weights(self)

    def forward(self, ids, attention_mask, token_type_ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.word(ids) + self.pos(pos) + self.token_type(token_type_ids))
        mask = attention_mask[:, None, None, :].bool()  # (B, 1, 1, T): padding keys masked out
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pool(x[:, 0]))


class CNN(nn.Module):
    """Conv + batch norm + ReLU + max pool, a strided conv, a depthwise conv, global average
    pooling and a linear classifier."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(32, classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def init_weights(model, std=0.05):
    """GPT-2/BERT-style initialisation (normal weights, zero biases): logits of a sensible size."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=std)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
    return model


def randomize_batchnorm(model):
    """Non-trivial running statistics, so eval-mode batch norm is not an identity."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model


def ids(batch=2, seq=16, vocab=128, seed=0):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


# --- inference, fp32 --------------------------------------------------------------------------
def test_gpt2_style_decoder():
    torch.manual_seed(0)
    run_model("gpt2-style", GPT(), ids())


def test_llama_style_decoder():
    torch.manual_seed(0)
    run_model("llama-style", Llama(), ids())


def test_bert_style_encoder():
    torch.manual_seed(0)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 11:] = 0  # the second sequence is padded
    types = torch.zeros(2, 16, dtype=torch.long)
    types[:, 8:] = 1
    model = Bert().eval()
    with torch.no_grad():
        _, pooled = model(ids(), mask, types)
    (_, dev_pooled), _ = run_model("bert-style", model, ids(), mask, types)
    torch.testing.assert_close(dev_pooled.cpu(), pooled, rtol=1e-4, atol=1e-4)


def test_cnn():
    torch.manual_seed(0)
    model = randomize_batchnorm(CNN())
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    _, steady = run_model("cnn", model, x)
    # conv as im2col + matmul: the convolutions are Triton templates too
    assert sum(1 for k in steady.kernels if k.startswith("triton_tem_")) >= 3, steady.table()


# --- half precision ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, tol", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
def test_half_precision_llama(dtype, tol):
    """The model converted to fp16/bf16 on spyre against the fp32 CPU model: the templates
    accumulate in fp32, so the error is that of the half-precision weights and activations."""
    torch.manual_seed(0)
    model = Llama().eval()
    with torch.no_grad():
        ref = model(ids()).float()
        cpu_half_err = (model.to(dtype)(ids()).float() - ref).abs().max().item()
        model.float()
    out, _ = run_model(f"llama-style {dtype}", model, ids(), dtype=dtype, ref=ref, rtol=tol, atol=tol)
    out = first_tensor(out)
    assert out.dtype == dtype
    assert (out.float().cpu() - ref).abs().max().item() <= 2 * cpu_half_err + 1e-3


# --- training ---------------------------------------------------------------------------------
def train(model, batches, device, compiled, steps=3, lr=0.1):
    """A few SGD-with-momentum steps on next-token prediction; returns the losses. Compiled:
    the loss (forward and, through AOTAutograd, backward) and the optimizer step."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def lm_loss(x):
        logits = model(x[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

    fwd = torch.compile(lm_loss) if compiled else lm_loss
    step = torch.compile(opt.step) if compiled else opt.step
    losses = []
    for i in range(steps):
        loss = fwd(batches[i % len(batches)].to(device))
        loss.backward()
        step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_training_loop_gpt2_style():
    """Forward, backward (compiled by AOTAutograd + Inductor) and the optimizer step (compiled)
    on spyre, three steps, against the same steps in eager CPU fp32."""
    torch.manual_seed(0)
    model = GPT(layers=1)
    dev_model = copy.deepcopy(model).to(DEV)
    batches = [ids(2, 17, seed=3)]  # the same batch each step: the loss must fall
    ref = train(model, batches, "cpu", compiled=False)
    torch._dynamo.reset()
    t0 = time.perf_counter()
    with spyre_triton.track() as t:
        got = train(dev_model, batches, DEV, compiled=True)
    COMPILE_SECONDS["gpt2-style training, 3 steps"] = time.perf_counter() - t0
    print(f"\ntraining: 3 steps incl. compile {COMPILE_SECONDS['gpt2-style training, 3 steps']:.1f} s, "
          f"losses {got}")
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=1e-4, atol=1e-4)
    assert got[-1] < got[0]
    for (name, p), q in zip(model.named_parameters(), dev_model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-4, msg=name)
    assert not host_matmul_conv(t.fallbacks), t.table()
    # Eager plumbing outside the compiled graphs may fall back (the autograd engine's
    # ones_like(loss) seed is a fill_; Inductor zeroes atomic-add outputs while autotuning).
    assert set(t.fallbacks) <= {"aten::fill_", "aten::zero_"}, t.table()
    kinds = {k.split("_")[1] for k in t.kernels if k.startswith("triton_")}
    assert {"tem", "per", "poi"} <= kinds, t.table()  # matmuls, reductions, pointwise


def test_training_loop_cnn():
    """Convolution backward (im2col + matmul, col2im) and batch norm in training mode."""
    torch.manual_seed(0)
    model = CNN()
    dev_model = copy.deepcopy(model).to(DEV)
    xs = [torch.randn(4, 3, 12, 12, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    ys = [torch.randint(0, 10, (4,), generator=torch.Generator().manual_seed(s)) for s in range(2)]

    def run(m, device, compiled):
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def loss_fn(x, y):
            return F.cross_entropy(m(x), y)

        fwd = torch.compile(loss_fn) if compiled else loss_fn
        step = torch.compile(opt.step) if compiled else opt.step
        losses = []
        for x, y in zip(xs, ys):
            loss = fwd(x.to(device), y.to(device))
            loss.backward()
            step()
            opt.zero_grad()
            losses.append(loss.item())
        return losses

    ref = run(model.train(), "cpu", False)
    torch._dynamo.reset()
    with spyre_triton.track() as t:
        got = run(dev_model.train(), DEV, True)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), dev_model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-4, msg=name)
    for (name, b), c in zip(model.named_buffers(), dev_model.buffers()):
        torch.testing.assert_close(c.cpu(), b, rtol=1e-4, atol=1e-4, msg=name)
    assert not host_matmul_conv(t.fallbacks), t.table()


# --- dynamic shapes, user kernels, single ops, graph breaks -------------------------------------
def test_dynamic_shapes_pointwise_and_reductions():
    f = lambda x, w: torch.softmax(x * 2, -1).sum(0) + F.layer_norm(w, w.shape[-1:]).sum()  # noqa: E731
    torch._dynamo.reset()
    c = torch.compile(f, dynamic=True)
    for n in (8, 13, 30):
        x, w = torch.randn(n, n + 3), torch.randn(3, n)
        with spyre_triton.track() as t:
            out = c(x.to(DEV), w.to(DEV))
        torch.testing.assert_close(out.cpu(), f(x, w), rtol=1e-4, atol=1e-4)
        assert t.kernels and not t.fallbacks, t.table()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1


def test_dynamic_shapes_model():
    """`dynamic=True` on the GPT-2-style model: one graph for several sequence lengths."""
    torch.manual_seed(0)
    model = GPT().eval()
    dev_model = copy.deepcopy(model).to(DEV)
    torch._dynamo.reset()
    c = torch.compile(dev_model, dynamic=True)
    with torch.no_grad():
        for seq in (8, 13, 21):
            x = ids(2, seq)
            out = c(x.to(DEV))
            torch.testing.assert_close(out.cpu(), model(x), rtol=1e-4, atol=1e-4)


def test_mark_dynamic_model():
    torch.manual_seed(0)
    model = Llama().eval()
    dev_model = copy.deepcopy(model).to(DEV)
    torch._dynamo.reset()
    c = torch.compile(dev_model)
    with torch.no_grad():
        for batch in (2, 3, 5):
            x = ids(batch, 12)
            xd = x.to(DEV)
            torch._dynamo.mark_dynamic(xd, 0)
            out = c(xd)
            torch.testing.assert_close(out.cpu(), model(x), rtol=1e-4, atol=1e-4)


def test_user_triton_kernel_inside_compiled_function():
    import triton
    import triton.language as tl

    @triton.jit
    def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha + tl.load(y_ptr + offs, mask=m),
                 mask=m)

    def f(x, w):
        a = torch.relu(x) @ w
        out = torch.empty_like(a)
        scale_add[(triton.cdiv(a.numel(), 128),)](a, a, out, a.numel(), 2.0, BLOCK=128)
        return out.sum(1)

    x, w = torch.randn(16, 32), torch.randn(32, 24)
    torch._dynamo.reset()
    with spyre_triton.track() as t:
        out = torch.compile(f)(x.to(DEV), w.to(DEV))
    torch.testing.assert_close(out.cpu(), (torch.relu(x) @ w * 3).sum(1), rtol=1e-4, atol=1e-4)
    assert t.kernels["scale_add"] == 1 and not t.fallbacks, t.table()
    assert any(k.startswith("triton_tem_") for k in t.kernels), t.table()


MATMULS = dict(
    mm=(torch.mm, (torch.randn(33, 20), torch.randn(20, 17))),
    bmm=(torch.bmm, (torch.randn(3, 9, 20), torch.randn(3, 20, 7))),
    addmm=(torch.addmm, (torch.randn(17), torch.randn(33, 20), torch.randn(20, 17))),
    baddbmm=(torch.baddbmm, (torch.randn(3, 9, 7), torch.randn(3, 9, 20), torch.randn(3, 20, 7))),
    matmul_4d=(torch.matmul, (torch.randn(2, 3, 5, 8), torch.randn(8, 6))),
    linear=(F.linear, (torch.randn(4, 5, 16), torch.randn(12, 16), torch.randn(12))),
    sdpa=(F.scaled_dot_product_attention, (torch.randn(2, 4, 10, 16), torch.randn(2, 4, 10, 16),
                                           torch.randn(2, 4, 10, 16))),
    conv1d=(F.conv1d, (torch.randn(2, 4, 17), torch.randn(6, 4, 5), torch.randn(6))),
    conv2d=(F.conv2d, (torch.randn(2, 4, 9, 9), torch.randn(6, 4, 3, 3))),
    conv_transpose2d=(F.conv_transpose2d, (torch.randn(2, 4, 5, 5), torch.randn(4, 3, 3, 3))),
)


@pytest.mark.parametrize("name", list(MATMULS))
def test_single_op_matmul_family(name):
    """`torch.compile` of one op: every matmul-like op is a Triton template on spyre."""
    op, args = MATMULS[name]
    torch._dynamo.reset()
    compiled = torch.compile(op)
    compiled(*to_dev(args))
    with spyre_triton.track() as t:
        out = compiled(*to_dev(args))
    torch.testing.assert_close(out.cpu(), op(*args), rtol=1e-4, atol=1e-4)
    assert any(k.startswith("triton_tem_") for k in t.kernels) and not t.fallbacks, t.table()


def test_single_op_pointwise():
    x = torch.randn(100)
    torch._dynamo.reset()
    with spyre_triton.track() as t:
        out = torch.compile(F.gelu)(x.to(DEV))
    torch.testing.assert_close(out.cpu(), F.gelu(x))
    assert list(t.kernels) and all(k.startswith("triton_poi_") for k in t.kernels) and not t.fallbacks


def test_dropout_in_kernel():
    """Dropout's random numbers are drawn in the kernel (Philox); only the seeds come from the host."""
    x = torch.ones(1000, 64)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(lambda x: F.dropout(x * 2, 0.3, training=True))(x.to(DEV)).cpu()
    assert not [w for w in caught if issubclass(w.category, inductor.SpyreHostFallbackWarning)]
    dropped = (out == 0).float().mean().item()
    assert 0.27 < dropped < 0.33
    torch.testing.assert_close(out[out != 0], torch.full_like(out[out != 0], 2 / 0.7))


def test_graph_break():
    def f(x):
        y = torch.tanh(x @ x.t())
        torch._dynamo.graph_break()
        return torch.softmax(y, -1) @ x

    x = torch.randn(16, 32)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with spyre_triton.track() as t:
        out = torch.compile(f)(x.to(DEV))
    torch.testing.assert_close(out.cpu(), f(x), rtol=1e-4, atol=1e-4)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert sum(1 for k in t.kernels if k.startswith("triton_tem_")) == 2 and not t.fallbacks, t.table()


# --- bad input ---------------------------------------------------------------------------------
def test_op_without_spyre_kernel_falls_back_with_one_warning():
    """mode has no Inductor lowering on spyre: the graph calls it on the host, correctly, and says so once."""
    f = lambda x: torch.mode((x * 2).round(), dim=1).values + 1  # noqa: E731
    x = torch.randn(8, 16)
    inductor.diagnostics._warned.discard("aten.mode")
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(f)
        with spyre_triton.track() as t:
            out = compiled(x.to(DEV))
        compiled(x.to(DEV) + 1)
        torch._dynamo.reset()
        torch.compile(f)(x.to(DEV))  # compiled (or loaded from Inductor's cache) again
    torch.testing.assert_close(out.cpu(), f(x))
    msgs = [str(w.message) for w in caught if issubclass(w.category, inductor.SpyreHostFallbackWarning)]
    assert len(msgs) == 1 and "aten.mode" in msgs[0], msgs
    assert "aten.mode" in inductor.host_fallbacks()
    assert t.fallbacks == {"aten::mode": 1}, t.table()
    assert any(k.startswith("triton_") for k in t.kernels), t.table()  # the rest is on spyre


def test_error_in_generated_kernel_points_at_kernel_and_model_code():
    from spyre_triton._runtime import DeviceError

    def model(x, idx):
        y = x * 2
        return y[idx] + 1  # an index out of range: Inductor's device-side bounds assert fires

    torch._dynamo.reset()
    with pytest.raises(DeviceError) as info:
        torch.compile(model)(torch.randn(64, 8).to(DEV), torch.tensor([3, 70, 5]).to(DEV))
    e = info.value
    msg = str(e)
    notes = "\n".join(getattr(e, "__notes__", []))
    assert e.kernel.startswith("triton_") and e.kernel in msg
    with open(e.file) as f:  # Inductor's generated kernel file
        src = f.read()
    assert f"def {e.kernel}(" in src and "@triton.jit" in src
    kernel_line = src.splitlines()[e.line - 1]
    assert "device_assert" in kernel_line and kernel_line.strip() in msg
    assert "index out of bounds" in msg
    assert "test_models.py" in notes and "return y[idx] + 1" in notes and "y = x * 2" in notes, notes
    # the device keeps working
    x = torch.randn(64, 8)
    torch.testing.assert_close(torch.compile(model)(x.to(DEV), torch.tensor([3, 7]).to(DEV)).cpu(),
                               model(x, torch.tensor([3, 7])))


# --- the same architectures from `transformers` configs (slow; needs transformers) -------------
@pytest.fixture(scope="module")
def hf():
    transformers = pytest.importorskip("transformers", reason="these models are built from transformers configs")
    transformers.logging.set_verbosity_error()
    return transformers


def tie_after_move(model):
    """Module.to("spyre") creates new Parameters (a spyre tensor is not shallow-copy compatible
    with a CPU one), which unties shared weights; transformers re-ties them on request."""
    model.tie_weights()
    return model


@pytest.mark.slow
def test_hf_gpt2(hf):
    torch.manual_seed(0)
    cfg = hf.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    run_model("hf gpt2", hf.GPT2LMHeadModel(cfg), ids())


@pytest.mark.slow
def test_hf_llama(hf):
    torch.manual_seed(0)
    cfg = hf.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    run_model("hf llama", hf.LlamaForCausalLM(cfg), ids())


@pytest.mark.slow
def test_hf_bert(hf):
    torch.manual_seed(0)
    cfg = hf.BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 12:] = 0
    run_model("hf bert", hf.BertModel(cfg), ids(), attention_mask=mask)


@pytest.mark.slow
def test_hf_gpt2_training(hf):
    torch.manual_seed(0)
    cfg = hf.GPT2Config(n_embd=64, n_layer=1, n_head=4, vocab_size=128, n_positions=64, resid_pdrop=0,
                        embd_pdrop=0, attn_pdrop=0, bos_token_id=0, eos_token_id=0)
    model = hf.GPT2LMHeadModel(cfg).train()
    dev_model = tie_after_move(copy.deepcopy(model).to(DEV))
    x = ids(2, 16)

    def run(m, device, compiled):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        fwd = torch.compile(m) if compiled else m
        losses = []
        for _ in range(3):
            xd = x.to(device)
            loss = fwd(xd, labels=xd).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return losses

    ref = run(model, "cpu", False)
    torch._dynamo.reset()
    with spyre_triton.track() as t:
        got = run(dev_model, DEV, True)
    # AdamW normalises each update, so tiny gradient differences move parameters by ~lr:
    # compare the losses (which follow the whole model) rather than every parameter.
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=1e-4, atol=1e-4)
    assert not host_matmul_conv(t.fallbacks), t.table()
