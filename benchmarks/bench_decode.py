"""The decode section of benchmarks/run.py (issue 23): greedy generation with transformers models built
from configs (random weights), CPU time per generated token at one host thread.

    python benchmarks/bench_decode.py [--models gpt2,llama,granite] [--backends spyre,inductor,eager]
                                      [--tokens 16] [--json] [--busy]

Each model runs in a subprocess of its own, which builds one copy of the model per backend:
`model.forward = torch.compile(model.forward)` (mode="reduce-overhead" for the `graphs` backend, which
replays launch graphs on spyre), `generate()` with a static KV cache, timed with time.process_time
(the CPU time of every thread of the process, the simulator's cores included). Per token is
(t(prompt + N tokens) - t(prompt + 1 token)) / (N - 1): the prefill cancels. The backends are timed in
turn, ROUNDS times, so that all meet the same moments of a shared host's load (across processes the
load moved one backend's figure by up to 30%); the median round counts.
Spyre runs also report host launches per token (spyre_triton.track) and the modelled device time per
token (spyre_triton.profile, one decode step).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

MARK = "@@DECODE-JSON@@"
PROMPT = 8

# name -> hyper-parameters (small: the simulator runs every instruction of the card on the host)
MODELS = {
    "gpt2": {"style": "gpt2", "hidden": 256, "layers": 4, "heads": 4, "kv_heads": 4, "ffn": 1024, "vocab": 8192},
    "llama": {"style": "llama", "hidden": 512, "layers": 4, "heads": 8, "kv_heads": 2, "ffn": 1376, "vocab": 8192},
    "granite": {"style": "granite", "hidden": 512, "layers": 4, "heads": 8, "kv_heads": 2, "ffn": 1376,
                "vocab": 8192},
}
BACKENDS = ("spyre", "graphs", "inductor", "eager")
ROUNDS = 5  # timing rounds per backend, alternating (the median counts)


def build(name: str, dtype=None, **overrides):
    """(model, prompt ids) on the CPU, eval mode, random weights seeded; overrides replace MODELS[name]'s
    hyper-parameters (a smaller model for a test)."""
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    bad = set(overrides) - set(MODELS[name])
    if bad:
        raise ValueError(f"build({name!r}): unknown hyper-parameters {sorted(bad)}; known: {sorted(MODELS[name])}")
    c = {**MODELS[name], **overrides}
    torch.manual_seed(0)
    common = dict(vocab_size=c["vocab"], bos_token_id=0, eos_token_id=None, pad_token_id=0)
    if c["style"] == "gpt2":
        cfg = transformers.GPT2Config(n_embd=c["hidden"], n_layer=c["layers"], n_head=c["heads"],
                                      n_inner=c["ffn"], n_positions=256, **common)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        kw = dict(hidden_size=c["hidden"], num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                  num_key_value_heads=c["kv_heads"], intermediate_size=c["ffn"], max_position_embeddings=256,
                  **common)
        if c["style"] == "llama":
            model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw))
        else:
            model = transformers.GraniteForCausalLM(transformers.GraniteConfig(
                embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0078125,
                logits_scaling=8.0, **kw))
    model = model.eval()
    if dtype is not None:
        model = model.to(dtype)
    ids = torch.randint(1, c["vocab"], (1, PROMPT), generator=torch.Generator().manual_seed(1))
    return model, ids


def generate(model, ids, new_tokens: int):
    import torch
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              cache_implementation="static", pad_token_id=0)


def fp16_logits(name: str, tokens: int, **overrides) -> dict:
    """Greedy fp16 decoding on spyre (compiled forward, static cache) against CPU eager in fp32 and in fp16, on
    the tokens spyre generated (teacher-forced: one CPU forward over the whole sequence gives every step's
    logits). Per reference: the largest absolute logit error over all steps, the same over the reference's
    logit RMS, and the steps whose greedy token (argmax) agrees."""
    import torch
    model, ids = build(name, torch.float32, **overrides)
    with torch.no_grad():
        refs = {"fp32": model, "fp16": build(name, torch.float16, **overrides)[0]}
        dev = build(name, torch.float16, **overrides)[0].to("spyre")
        dev.tie_weights()  # .to("spyre") makes new Parameters, which unties shared ones
        dev.forward = torch.compile(dev.forward)
        out = dev.generate(ids.to("spyre"), max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                           cache_implementation="static", pad_token_id=0, output_logits=True,
                           return_dict_in_generate=True)
        got = torch.stack([l.float().cpu() for l in out.logits], 1)       # [1, tokens, vocab]
        seq = out.sequences.cpu()
        res = {"tokens": tokens}
        logits = {key: m(seq[:, :-1]).logits[:, PROMPT - 1:].float() for key, m in refs.items()}
        for key, ref in logits.items():
            res[key] = _logit_error(got, ref)
        res["cpu_fp16"] = _logit_error(logits["fp16"], logits["fp32"])
    return res


def _logit_error(got, ref) -> dict:
    err = (got - ref).abs().max().item()
    rms = ref.pow(2).mean().sqrt().item()
    agree = (got.argmax(-1) == ref.argmax(-1)).sum().item()
    return {"max_abs": err, "rms": rms, "max_abs_over_rms": err / rms, "argmax_agree": agree}


def _per_token(model, ids, tokens: int) -> tuple[float, float]:
    """(CPU s, wall s) per generated token: generate(N) - generate(1), over N - 1 (the prefill cancels)."""
    t0, w0 = time.process_time(), time.perf_counter()
    generate(model, ids, 1)
    t1, w1 = time.process_time(), time.perf_counter()
    generate(model, ids, tokens)
    t2, w2 = time.process_time(), time.perf_counter()
    return ((t2 - t1) - (t1 - t0)) / (tokens - 1), ((w2 - w1) - (w1 - w0)) / (tokens - 1)


def worker(name: str, backends, tokens: int, rounds: int = ROUNDS) -> dict:
    """Every backend's model in this one process, compiled once each; then `rounds` rounds that time each
    backend in turn, so that all meet the same moments of a shared host's load. The median round counts."""
    import torch
    import torch._dynamo
    torch.set_num_threads(1)
    os.environ["SPYRE_NUM_THREADS"] = "1"
    # the backends' forwards share one code object: room for each backend's prefill and decode graphs
    torch._dynamo.config.cache_size_limit = 64
    torch._dynamo.config.accumulated_cache_size_limit = 512
    model, ids = build(name)
    ref = generate(model, ids, tokens)[0, PROMPT:].tolist()
    runs = {}
    for backend in backends:
        device = "spyre" if backend in ("spyre", "graphs") else "cpu"
        model, ids = build(name)
        model, ids = model.to(device), ids.to(device)
        if backend != "eager":
            mode = "reduce-overhead" if backend == "graphs" else None
            model.forward = torch.compile(model.forward, mode=mode)
        t0 = time.process_time()
        out = generate(model, ids, tokens)      # compiles (prefill and decode graphs)
        generate(model, ids, 1)                 # and those of the one-token run
        res = {"compile_s": time.process_time() - t0}
        if backend != "eager":
            res["tokens_match"] = out[0, PROMPT:].cpu().tolist() == ref
        runs[backend] = (model, ids, res, [], [])
    for _ in range(rounds):
        for model, ids, _, per, wall in runs.values():
            cpu, w = _per_token(model, ids, tokens)
            per.append(cpu)
            wall.append(w)
    for backend, (model, ids, res, per, wall) in runs.items():
        res["cpu_s_per_token"] = sorted(per)[len(per) // 2]
        res["wall_s_per_token"] = sorted(wall)[len(wall) // 2]
        res["cpu_s_per_token_all"] = per
        if backend in ("spyre", "graphs"):
            res.update(_spyre_counts(model, ids, tokens))
    return {backend: run[2] for backend, run in runs.items()}


def _spyre_counts(model, ids, tokens: int) -> dict:
    """Host launches and fallbacks per token (spyre_triton.track) and the modelled device time of one
    decode step (spyre_triton.profile)."""
    import spyre_triton
    with spyre_triton.track() as t1:
        generate(model, ids, 1)
    with spyre_triton.track() as t2:
        generate(model, ids, tokens)
    per_token = lambda a, b: (b - a) / (tokens - 1)
    res = {"launches_per_token": per_token(sum(t1.kernels.values()), sum(t2.kernels.values())),
           "host_fallbacks_per_token": per_token(sum(t1.fallbacks.values()), sum(t2.fallbacks.values())),
           "fallbacks": dict(t2.fallbacks)}
    with spyre_triton.profile() as p1:
        generate(model, ids, 1)
    with spyre_triton.profile() as p2:
        generate(model, ids, 2)
    res["modelled_us_per_token"] = (p2.modeled_ns - p1.modeled_ns) / 1e3
    return res


def run(names, backends, tokens: int, busy: bool = False) -> dict:
    """Each (model, backend) in a subprocess; with `busy`, one other process spins on the host throughout
    (issue 23: wall time must follow CPU time on a busy 2-core host)."""
    out = {}
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        _run_all(names, backends, tokens, out)
    finally:
        if spinner is not None:
            spinner.kill()
    return out


def _run_all(names, backends, tokens: int, out: dict) -> None:
    for name in names:
        p = subprocess.run([sys.executable, __file__, "--worker", name, ",".join(backends), str(tokens)],
                           capture_output=True, text=True, timeout=3600)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith(MARK)]
        if p.returncode or not lines:
            error = {"error": (p.stderr or p.stdout).strip().splitlines()[-1:]}
            got = {backend: error for backend in backends}
        else:
            got = json.loads(lines[-1][len(MARK):])
        for backend in backends:
            out[f"{name}/{backend}"] = got[backend]
            print(name, backend, got[backend], file=sys.stderr, flush=True)


def table(res: dict) -> str:
    """CPU ms per token per model and backend, the ratio to Inductor CPU, modelled us and launches."""
    names = sorted({k.split("/")[0] for k in res}, key=list(MODELS).index)
    rows = [f"{'model':<8} {'backend':<9} {'CPU ms/token':>12} {'x Inductor':>10} {'tokens ok':>9} "
            f"{'launches':>8} {'fallbacks':>9} {'modelled us':>11} {'wall/CPU':>8}"]
    for n in names:
        ind = res.get(f"{n}/inductor", {}).get("cpu_s_per_token")
        for b in BACKENDS:
            r = res.get(f"{n}/{b}")
            if r is None:
                continue
            if "error" in r:
                rows.append(f"{n:<8} {b:<9} error: {r['error']}")
                continue
            c = r["cpu_s_per_token"]
            ratio = f"{c / ind:.2f}" if ind else "-"
            f = lambda k, fmt: format(r[k], fmt) if k in r else "-"
            rows.append(f"{n:<8} {b:<9} {c * 1e3:>12.2f} {ratio:>10} {str(r.get('tokens_match', '-')):>9} "
                        f"{f('launches_per_token', '.0f'):>8} {f('host_fallbacks_per_token', '.0f'):>9} "
                        f"{f('modelled_us_per_token', '.0f'):>11} "
                        f"{r['wall_s_per_token'] / c if 'wall_s_per_token' in r else float('nan'):>8.2f}")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=3)
    ap.add_argument("--models", default="gpt2,llama,granite")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--busy", action="store_true", help="one other process spins on the host throughout")
    ap.add_argument("--fp16-logits", action="store_true",
                    help="instead: fp16 decode logits on spyre against CPU eager fp32 and fp16, per model")
    a = ap.parse_args()
    if a.fp16_logits:
        for name in a.models.split(","):
            print(name, json.dumps(fp16_logits(name, a.tokens)), flush=True)
        return
    if a.worker:
        name, backends, tokens = a.worker
        print(MARK + json.dumps(worker(name, backends.split(","), int(tokens))), flush=True)
        return
    res = run(a.models.split(","), a.backends.split(","), a.tokens, a.busy)
    print(json.dumps(res, indent=1) if a.json else table(res))


if __name__ == "__main__":
    main()
