"""Greedy text generation on the simulated Spyre card with a transformers model built from a config
(random weights, so the tokens are arbitrary; no download).

    python examples/generate.py                       # Llama-style, 512 wide, 4 layers, GQA 8/2
    python examples/generate.py --model gpt2 --tokens 32 --graphs

Prints the generated token ids, the host's tokens per second (the simulator runs every instruction of
the card on this CPU) and the modelled time per token on a Spyre card (spyre_triton.profile, see
docs/perf-model.md). The recipe is docs/llm.md's: `model.forward = torch.compile(model.forward)` and a
static KV cache; --graphs adds mode="reduce-overhead", which replays each decode step's launches from C.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

import torch  # noqa: E402

import spyre_triton  # noqa: E402
from bench_decode import MODELS, PROMPT, build, generate  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="llama")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--graphs", action="store_true", help='torch.compile(mode="reduce-overhead"): launch graphs')
    ap.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    a = ap.parse_args()

    model, ids = build(a.model, getattr(torch, a.dtype))
    model, ids = model.to("spyre"), ids.to("spyre")
    model.forward = torch.compile(model.forward, mode="reduce-overhead" if a.graphs else None)

    t0 = time.perf_counter()
    out = generate(model, ids, a.tokens)             # the first call compiles
    print(f"compiled and generated in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    out = generate(model, ids, a.tokens)
    wall = time.perf_counter() - t0
    print("prompt:   ", ids[0].tolist())
    print("generated:", out[0, PROMPT:].tolist())
    print(f"host: {a.tokens / wall:.1f} tokens/s ({wall / a.tokens * 1e3:.1f} ms per token, prefill included)")

    with spyre_triton.profile() as p1:
        generate(model, ids, 1)
    with spyre_triton.profile() as p2:
        generate(model, ids, 2)
    step_us = (p2.modeled_ns - p1.modeled_ns) / 1e3
    print(f"card (modelled): prefill of {PROMPT} tokens {p1.modeled_ns / 1e3:.0f} us, "
          f"{step_us:.0f} us per generated token ({1e6 / step_us:.0f} tokens/s)")


if __name__ == "__main__":
    main()
