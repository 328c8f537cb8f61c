"""Modelled latency of Granite-3.3-8B on Spyre cards: TTFT and time per output token against the bandwidth bound.

    python examples/llm_latency.py                                   # granite-3.3-8b, TP 1/2/4, batch 1/4
    python examples/llm_latency.py --tp 1 --batch 1 --kernels        # and each step's profile by kernel

The model is transformers' Granite with the real widths (hidden 4096, 32 heads of 128, 8 KV heads,
intermediate 12800, vocab 49155, tied embeddings), random fp16 weights, compiled (`torch.compile(model.forward)`)
on spyre with a static KV cache. It runs a prefill of --prompt tokens and one decode step under
`spyre_triton.profile()`. Decode attention runs per KV head (`grouped_attention`; `--attention sdpa` for
transformers' own, which copies the KV cache per query head under torch.compile).

Scaling. 40 layers of fp16 weights are 16 GB, too much for the host, so each configuration runs twice: with
--layers layers and with one. The difference over (layers - 1) is the modelled time of one layer (its kernels,
those fused across the layer boundary included); the rest (embedding, final norm, lm_head) is counted once:
    full = t(1 layer) + (40 - 1) x (t(layers) - t(1 layer)) / (layers - 1).
Tensor parallelism is modelled on one card: each rank's shard (heads / TP, KV heads / TP, intermediate / TP, the
vocabulary / TP as a vocab-parallel lm_head and embedding, Megatron-style) runs on the card, and the collectives
a rank would run are added from spyre_triton.perf.comm's link model: an all-reduce of the hidden states for the
embedding and after attention and MLP of every layer, and an all-gather of the last position's logits.

The bound is what the card's memory needs at its 204.8 GB/s peak (the LPDDR5 interface figure): the bytes of
every weight the step reads on one card (the lm_head once; the embedding lookup reads rows only) plus the KV
cache's bytes (read at decode, written at prefill), and for prefill at least the PE array's time at peak for
its FLOPs. The performance model's own DRAM figure is 150 GB/s (docs/perf-model.md), so a kernel streaming
at the modelled rate is at 204.8 / 150 = 1.37x of this bound.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import spyre_triton  # noqa: E402
from spyre_triton.perf import comm  # noqa: E402

CARD_BW = 204.8e9  # B/s: the card's LPDDR5 peak (IBM), the bound's rate


@dataclasses.dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int


CONFIGS = {
    # ibm-granite/granite-3.3-8b-instruct's config.json
    "granite-3.3-8b": Shape(hidden=4096, layers=40, heads=32, kv_heads=8, head_dim=128, ffn=12800, vocab=49155),
    # the same structure, small enough for a test
    "tiny": Shape(hidden=256, layers=40, heads=8, kv_heads=4, head_dim=32, ffn=512, vocab=1024),
}


def shard(shape: Shape, tp: int) -> Shape:
    """One rank's shard under TP: heads, KV heads, intermediate and vocabulary split (rounded up)."""
    for what, n in (("heads", shape.heads), ("kv_heads", shape.kv_heads), ("ffn", shape.ffn)):
        if n % tp:
            raise ValueError(f"--tp {tp}: {what} = {n} is not divisible by it")
    return dataclasses.replace(shape, heads=shape.heads // tp, kv_heads=shape.kv_heads // tp, ffn=shape.ffn // tp,
                               vocab=-(-shape.vocab // tp))


def grouped_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' sdpa attention, except that a decode step (one query position) attends per KV head with
    its query heads as the rows of two batched matmuls: [b, kv_heads, groups, d] against the cache's
    [b, kv_heads, L, d], read in place. Compiled, transformers repeats each KV head for its query heads
    (`repeat_kv`; its `pack_gqa` is skipped under torch.compile) and the sdpa decomposition scales and
    upcasts K: Inductor then copies the whole cache for every layer and step, transposed, in fp32, with a
    128-byte stick of DMA per element (docs/llm.md)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    groups = getattr(module, "num_key_value_groups", 1)
    if query.shape[2] != 1 or (attention_mask is not None and attention_mask.shape[1] != 1):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    b, heads, _, d = query.shape
    scale = scaling if scaling is not None else d ** -0.5
    q = query.reshape(b, heads // groups, groups, d) * scale
    scores = torch.matmul(q, key.transpose(-1, -2)).float()        # [b, kv_heads, groups, L]
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    elif attention_mask is not None:
        scores = scores + attention_mask
    out = torch.matmul(torch.softmax(scores, -1).to(value.dtype), value)
    return out.reshape(b, heads, 1, d).transpose(1, 2).contiguous(), None


def build(s: Shape, layers: int, attention: str = "grouped"):
    """Granite with shard shape s and `layers` layers: fp16, random weights, eval, on spyre."""
    import transformers
    transformers.logging.set_verbosity_error()
    if attention == "grouped":
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        transformers.AttentionInterface.register("grouped", grouped_attention)
        AttentionMaskInterface.register("grouped", sdpa_mask)  # the masks sdpa takes (else: none at all)
    cfg = transformers.GraniteConfig(
        attn_implementation=attention, vocab_size=s.vocab, hidden_size=s.hidden, num_hidden_layers=layers, num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads, intermediate_size=s.ffn, max_position_embeddings=4096,
        rms_norm_eps=1e-5, tie_word_embeddings=True, embedding_multiplier=12.0, residual_multiplier=0.22,
        attention_multiplier=0.0078125, logits_scaling=16.0, bos_token_id=0, eos_token_id=None, pad_token_id=0)
    cfg.head_dim = s.head_dim  # read by the attention and rotary modules; the shard keeps 128 per head
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)  # built in fp16: an fp32 copy of the weights would not fit
    try:
        model = transformers.GraniteForCausalLM(cfg).eval()
    finally:
        torch.set_default_dtype(prev)
    return model.to("spyre")


def measure(model, batch: int, prompt: int) -> tuple[float, float, int]:
    """(prefill ns, decode-step ns, launches per decode step) modelled, after a compiling run of each."""
    import transformers
    torch._dynamo.reset()
    fwd = torch.compile(model.forward, dynamic=False)
    cache = transformers.StaticCache(config=model.config, max_cache_len=prompt + 8)
    cfg = model.config
    # allocated before the first call, so that prefill's graph is the same on every call (a lazily
    # allocated cache changes what the first one traces)
    cache.early_initialization(batch, cfg.num_key_value_heads, cfg.head_dim, torch.float16, torch.device("spyre"))
    ids = torch.randint(1, model.config.vocab_size, (batch, prompt + 1),
                        generator=torch.Generator().manual_seed(1)).to("spyre")

    def step(lo, hi):
        pos = torch.arange(lo, hi, device="spyre")
        with torch.no_grad():
            return fwd(input_ids=ids[:, lo:hi], past_key_values=cache, cache_position=pos, use_cache=True,
                       logits_to_keep=1).logits

    step(0, prompt)                 # compiles; the cache writes where its own length says, so it is
    step(prompt, prompt + 1)        # reset before the measured prefill
    cache.reset()
    with spyre_triton.profile() as pre:
        step(0, prompt)
    with spyre_triton.profile() as dec:
        step(prompt, prompt + 1)
    measure.last_decode, measure.last_prefill = dec, pre
    return pre.modeled_ns, dec.modeled_ns, len(dec.kernels)


def collectives_ns(s: Shape, tp: int, batch: int, tokens: int) -> float:
    """A rank's modelled collectives for one forward of `tokens` positions per sequence (fp16)."""
    if tp == 1:
        return 0.0
    hidden_bytes = batch * tokens * s.hidden * 2
    all_reduces = 1 + 2 * s.layers  # the vocab-parallel embedding; attention's and the MLP's output per layer
    logits = batch * s.vocab * tp * 2  # the last position's logits, gathered
    return (all_reduces * comm.modeled_ns("all_reduce", hidden_bytes, tp)
            + comm.modeled_ns("all_gather_single", logits, tp))


def weight_bytes(s: Shape) -> int:
    """fp16 bytes of the weights one forward reads on a card: every layer's projections and norms, the final
    norm and the (tied) lm_head once; the embedding lookup reads only its rows."""
    attn = s.hidden * s.head_dim * (2 * s.heads + 2 * s.kv_heads)
    mlp = 3 * s.hidden * s.ffn
    return 2 * (s.layers * (attn + mlp + 2 * s.hidden) + s.hidden + s.vocab * s.hidden)


def kv_bytes(s: Shape, batch: int, positions: int) -> int:
    return 2 * batch * positions * s.layers * 2 * s.kv_heads * s.head_dim


def bounds_ns(s: Shape, batch: int, prompt: int) -> tuple[float, float]:
    """(prefill, decode step) lower bounds in ns on one card: memory at CARD_BW; prefill also the PE peak."""
    hw = spyre_triton.get_hardware()
    w = weight_bytes(s)
    flops = 2 * batch * prompt * (w // 2 - s.vocab * s.hidden)  # every layer weight, once per position
    flops += 2 * batch * s.vocab * s.hidden  # the lm_head, at the last position
    prefill = max((w + kv_bytes(s, batch, prompt)) / CARD_BW, flops / hw.peak_flops) * 1e9
    decode = (w + kv_bytes(s, batch, prompt + 1)) / CARD_BW * 1e9
    return prefill, decode


def run_config(full: Shape, tp: int, batches, layers: int, prompt: int, kernels: bool, log,
               attention: str = "grouped") -> list[dict]:
    s = shard(full, tp)
    rows = []
    model = build(s, layers, attention)
    for batch in batches:
        t0 = time.perf_counter()
        many = measure(model, batch, prompt)
        prof_many, prefill_many = measure.last_decode, measure.last_prefill
        all_layers = model.model.layers
        model.model.layers = all_layers[:1]
        model.config.num_hidden_layers = 1
        try:
            one = measure(model, batch, prompt)
        finally:
            model.model.layers = all_layers
            model.config.num_hidden_layers = layers
        per_layer = [(m - o) / (layers - 1) for m, o in zip(many[:2], one[:2])]
        ttft_k, tpot_k = (o + (full.layers - 1) * p for o, p in zip(one[:2], per_layer))
        ttft_c, tpot_c = collectives_ns(full, tp, batch, prompt), collectives_ns(full, tp, batch, 1)
        b_pre, b_dec = bounds_ns(dataclasses.replace(s, layers=full.layers), batch, prompt)
        ttft, tpot = ttft_k + ttft_c, tpot_k + tpot_c
        rows.append(dict(tp=tp, batch=batch, ttft_ms=ttft / 1e6, tpot_ms=tpot / 1e6, ttft_bound_ms=b_pre / 1e6,
                         tpot_bound_ms=b_dec / 1e6, ratio=tpot / b_dec, ttft_ratio=ttft / b_pre,
                         comm_share_ttft=ttft_c / ttft, comm_share_tpot=tpot_c / tpot,
                         layer_tpot_us=per_layer[1] / 1e3, base_tpot_us=(one[1] - per_layer[1]) / 1e3,
                         launches=many[2]))
        log(f"  TP {tp} batch {batch}: ran {layers} and 1 layers in {time.perf_counter() - t0:.0f} s host time")
        if kernels:
            log(f"\ndecode step, TP {tp}, batch {batch}, {layers} layers, by kernel:\n{prof_many.table(top=25)}\n")
            log(f"prefill, TP {tp}, batch {batch}, {layers} layers, by kernel:\n{prefill_many.table(top=25)}\n")
    del model
    gc.collect()
    return rows


def table(name: str, rows: list[dict]) -> str:
    head = (f"{'config':<15} {'TP':>2} {'batch':>5} {'TTFT ms':>9} {'bound':>8} {'x':>5} {'TPOT ms':>9} {'bound':>8} "
            f"{'x':>5} {'comm % TTFT/TPOT':>17}")
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(f"{name:<15} {r['tp']:>2} {r['batch']:>5} {r['ttft_ms']:>9.2f} {r['ttft_bound_ms']:>8.2f} "
                   f"{r['ttft_ratio']:>5.2f} {r['tpot_ms']:>9.2f} {r['tpot_bound_ms']:>8.2f} {r['ratio']:>5.2f} "
                   f"{100 * r['comm_share_ttft']:>8.1f}/{100 * r['comm_share_tpot']:<8.1f}")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="granite-3.3-8b")
    ap.add_argument("--tp", default="1,2,4", help="tensor-parallel degrees, comma-separated")
    ap.add_argument("--batch", default="1,4", help="batch sizes, comma-separated")
    ap.add_argument("--layers", type=int, default=2, help="layers actually run (>= 2; see Scaling)")
    ap.add_argument("--prompt", type=int, default=64, help="prefill tokens per sequence")
    ap.add_argument("--kernels", action="store_true", help="print each decode step's profile by kernel")
    ap.add_argument("--attention", choices=["grouped", "sdpa"], default="grouped",
                    help="decode attention: per KV head (grouped_attention) or transformers' sdpa as compiled")
    ap.add_argument("--threads", type=int, default=0, help="host threads for the simulator (0: its default)")
    a = ap.parse_args(argv)
    if a.layers < 2:
        ap.error(f"--layers {a.layers}: at least 2 (one layer's time is the difference of two runs)")
    if a.threads:
        os.environ["SPYRE_NUM_THREADS"] = str(a.threads)
    full = CONFIGS[a.config]
    if a.layers > full.layers:
        ap.error(f"--layers {a.layers}: {a.config} has {full.layers}")
    tps = [int(x) for x in a.tp.split(",")]
    batches = [int(x) for x in a.batch.split(",")]
    log = lambda msg: print(msg, flush=True)
    rows = []
    for tp in tps:
        rows += run_config(full, tp, batches, a.layers, a.prompt, a.kernels, log, a.attention)
    log(f"\n{a.config}: {full.layers} layers, hidden {full.hidden}, {full.heads} heads / {full.kv_heads} KV heads of "
        f"{full.head_dim}, intermediate {full.ffn}, vocab {full.vocab}; fp16; prefill {a.prompt} tokens; "
        f"{a.attention} attention")
    log(f"modelled on one card per rank; layer time from runs of {a.layers} and 1 layers, scaled to {full.layers}; "
        f"TP > 1: one rank's shard, collectives from the link model")
    log(f"bound: bytes / {CARD_BW / 1e9:.1f} GB/s (prefill: or the PE peak if longer); x: modelled / bound\n")
    log(table(a.config, rows))
    return rows


if __name__ == "__main__":
    main()
