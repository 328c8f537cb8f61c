"""examples/llm_latency.py: the Granite-8B widths, the bounds and collectives it adds, and the table's
invariants on its tiny configuration (one TP 2 row: a shard on one card, collectives from the link model;
under `-m slow`, as it compiles a model four times)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

import llm_latency as L  # noqa: E402

GRANITE = L.CONFIGS["granite-3.3-8b"]


def test_granite_widths_are_an_8b_model():
    # ibm-granite/granite-3.3-8b-instruct: 8.17e9 parameters, the embedding tied to the lm_head
    assert abs(L.weight_bytes(GRANITE) / 2 / 8.17e9 - 1) < 0.005


@pytest.mark.parametrize("tp", [2, 4])
def test_a_shard_holds_its_share_of_the_weights(tp):
    s = L.shard(GRANITE, tp)
    assert s.heads * tp == GRANITE.heads and s.kv_heads * tp == GRANITE.kv_heads and s.ffn * tp == GRANITE.ffn
    # the norms stay whole on every rank; everything else splits
    assert abs(L.weight_bytes(s) * tp / L.weight_bytes(GRANITE) - 1) < 1e-3


def test_shard_refuses_an_uneven_split():
    with pytest.raises(ValueError, match="kv_heads = 8 is not divisible"):
        L.shard(GRANITE, 16)


def test_bounds_and_collectives():
    pre, dec = L.bounds_ns(GRANITE, 1, 64)
    # decode reads every weight once: 16.3 GB at 204.8 GB/s
    assert dec == pytest.approx((L.weight_bytes(GRANITE) + L.kv_bytes(GRANITE, 1, 65)) / L.CARD_BW * 1e9)
    assert 79e6 < dec < 81e6 and pre >= dec * 0.99
    assert L.collectives_ns(GRANITE, 1, 1, 1) == 0
    # 81 all-reduces of one position's hidden state and a logits gather: latency-bound at TP 2
    two, four = L.collectives_ns(GRANITE, 2, 1, 1), L.collectives_ns(GRANITE, 4, 1, 1)
    assert 81 * 2 * 2000 < two < four


@pytest.mark.slow  # compiles four graphs (prefill and decode, with 2 layers and with 1): 1-4 minutes here
def test_table_invariants_at_the_tiny_config(capsys):
    pytest.importorskip("transformers", reason="the model is built from a transformers config")
    (row,) = L.main(["--config", "tiny", "--tp", "2", "--batch", "1", "--prompt", "8"])
    assert row["tpot_ms"] >= row["tpot_bound_ms"] > 0 and row["ttft_ms"] >= row["ttft_bound_ms"] > 0
    assert row["ratio"] == pytest.approx(row["tpot_ms"] / row["tpot_bound_ms"])
    assert 0 < row["comm_share_tpot"] < 1 and 0 < row["comm_share_ttft"] < 1
    assert row["layer_tpot_us"] > 0 and row["base_tpot_us"] > 0  # both parts of the scaling are measured
    assert "tiny" in capsys.readouterr().out
