"""DTensor tensor parallelism on 2 cards: examples/tp_inference.py's Llama-style decoder (GQA attention,
SwiGLU MLP) sharded with ColwiseParallel/RowwiseParallel and compiled on each rank gives the logits of the
unsharded model on one card."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))
import tp_inference as tp  # noqa: E402

from spyreccl_harness import spawn  # noqa: E402

CONFIG = dict(vocab=128, dim=64, layers=1, n_heads=4, n_kv_heads=2, hidden=128)


def check_tp_logits_match_one_card(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    import spyre_triton
    card = torch.device("spyre", rank)
    x = tp.tokens(batch=2, seq=8, vocab=CONFIG["vocab"]).to(card)
    with torch.no_grad():
        ref = tp.build(**CONFIG)(x.cpu())  # the unsharded model on the CPU: the oracle
        one_card = torch.compile(tp.build(**CONFIG).to(card))(x).cpu()
        mesh = init_device_mesh("spyre", (world,))
        model = torch.compile(tp.tensor_parallel(tp.build(**CONFIG).to(card), mesh))
        logits = model(x)
        with spyre_triton.profile() as prof:
            model(x)
    assert logits.device == card
    torch.testing.assert_close(logits.cpu(), one_card, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(logits.cpu(), ref, rtol=1e-4, atol=1e-4)
    # Megatron sharding: one all_reduce after attention and one after the MLP, per layer
    assert [c.name for c in prof.comms] == ["all_reduce"] * 2 * CONFIG["layers"], prof.comms


def test_tensor_parallel_decoder():
    spawn(check_tp_logits_match_one_card, timeout_s=300)
