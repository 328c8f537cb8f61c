"""python -m spyre_triton.numerics --arch gpt2|llama: the numerics report on a small transformers model.

The model is built from a config with random weights (seeded), so nothing is downloaded; it runs on the
CPU in float32 and compiled on spyre in float16 with IEEE and with DLFloat16 numerics
(spyre_triton.numerics.compare). Needs `pip install transformers`.
"""
from __future__ import annotations

import argparse
import json
import sys


def build(arch: str, layers: int, hidden: int, heads: int, vocab: int, seed: int):
    import torch
    try:
        import transformers as hf
    except ImportError as e:
        raise SystemExit(f"spyre_triton.numerics --arch {arch}: needs transformers (pip install transformers)") from e
    hf.logging.set_verbosity_error()
    torch.manual_seed(seed)
    if arch == "gpt2":
        cfg = hf.GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, vocab_size=vocab, n_positions=256,
                            bos_token_id=0, eos_token_id=0)
        return hf.GPT2LMHeadModel(cfg).eval()
    if arch == "llama":
        cfg = hf.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
                             num_hidden_layers=layers, num_attention_heads=heads,
                             num_key_value_heads=max(1, heads // 2), max_position_embeddings=256)
        return hf.LlamaForCausalLM(cfg).eval()
    raise SystemExit(f"spyre_triton.numerics: unknown --arch {arch!r} (gpt2, llama)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m spyre_triton.numerics", description=__doc__.split("\n")[0])
    p.add_argument("--arch", choices=("gpt2", "llama"), required=True)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    a = p.parse_args(argv)
    import torch

    from .report import compare
    model = build(a.arch, a.layers, a.hidden, a.heads, a.vocab, a.seed)
    g = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    report = compare(model, (ids,), kwargs={"use_cache": False})
    print(f"{a.arch}: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, vocab {a.vocab}, "
          f"batch {a.batch} x {a.seq} tokens, random weights (seed {a.seed})")
    print(report.table())
    for m, s in report.summary().items():
        top1 = f"{s['top1']:.1%}" if s["top1"] is not None else "-"
        print(f"{m}: logits max rel error {s['output_max_rel']:.3g}, top-1 agreement {top1}, "
              f"worst layer {s['worst_layer']} ({s['worst_layer_max_rel']:.3g}), non-finite {s['nonfinite']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report.to_dict(), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
