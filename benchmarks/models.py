"""The compiled-model benchmarks of benchmarks/run.py: GPT-2- and BERT-style models built by
`transformers` from configs, random-initialised, with a realistic small batch.

    build(name, quick) -> (model, kwargs)      model on the CPU, in eval mode; kwargs its inputs
"""
from __future__ import annotations

import torch

# name -> (full, quick) hyper-parameters
CONFIGS = {
    "gpt2": ({"n_embd": 256, "n_layer": 4, "n_head": 4, "vocab_size": 8192, "batch": 4, "seq": 128},
             {"n_embd": 128, "n_layer": 2, "n_head": 4, "vocab_size": 4096, "batch": 2, "seq": 64}),
    "bert": ({"hidden": 256, "layers": 4, "heads": 4, "ffn": 1024, "vocab_size": 8192, "batch": 8, "seq": 128},
             {"hidden": 128, "layers": 2, "heads": 4, "ffn": 512, "vocab_size": 4096, "batch": 2, "seq": 64}),
}


def available() -> bool:
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        return False


def describe(name: str, quick: bool) -> str:
    c = CONFIGS[name][1 if quick else 0]
    if name == "gpt2":
        return (f"GPT2LMHeadModel d={c['n_embd']} L={c['n_layer']} H={c['n_head']} V={c['vocab_size']}, "
                f"batch {c['batch']}x{c['seq']} tokens")
    return (f"BertModel d={c['hidden']} L={c['layers']} H={c['heads']} ffn={c['ffn']} V={c['vocab_size']}, "
            f"batch {c['batch']}x{c['seq']} tokens, padded attention mask")


def build(name: str, quick: bool):
    import transformers
    transformers.logging.set_verbosity_error()
    c = CONFIGS[name][1 if quick else 0]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, c["vocab_size"], (c["batch"], c["seq"]), generator=g)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_embd=c["n_embd"], n_layer=c["n_layer"], n_head=c["n_head"],
                                      vocab_size=c["vocab_size"], n_positions=max(256, c["seq"]),
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg).eval(), {"input_ids": ids}
    cfg = transformers.BertConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden"],
                                  num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                                  intermediate_size=c["ffn"], max_position_embeddings=max(512, c["seq"]))
    mask = torch.ones(c["batch"], c["seq"], dtype=torch.long)
    for b in range(1, c["batch"], 2):            # every other sequence padded to 3/4 of its length
        mask[b, 3 * c["seq"] // 4:] = 0
    return transformers.BertModel(cfg).eval(), {"input_ids": ids, "attention_mask": mask}


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]
