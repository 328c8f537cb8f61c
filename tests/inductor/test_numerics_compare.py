"""spyre_triton.numerics.compare: a model on the CPU in fp32 against spyre fp16 in IEEE and DLFloat16 numerics.

Small models, so the three runs (and one compilation) take seconds; the transformers variants (the CLI's
GPT-2- and Llama-style models) run under `-m slow` when transformers is installed.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from conftest import DEVICE

from spyre_triton import numerics


class TinyLM(torch.nn.Module):
    """Embedding, a pre-norm MLP block and a vocabulary projection: logits over 64 classes."""

    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(4 * dim, dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, ids):
        h = self.emb(ids)
        h = h + self.down(self.act(self.up(self.norm(h))))
        return self.head(h)


@pytest.fixture(scope="module")
def report():
    torch.manual_seed(0)
    model = TinyLM().eval()
    ids = torch.randint(0, 64, (2, 8))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rep = numerics.compare(model, (ids,))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()), "compare changed the model"
    assert next(model.parameters()).device.type == "cpu"
    return rep


def test_every_leaf_layer_and_the_output_in_both_modes(report):
    layers = {r.name for r in report.layer_rows("ieee")}
    assert layers == {"emb", "norm", "up", "act", "down", "head"}
    assert {r.name for r in report.layer_rows("dl16")} == layers
    assert [r.name for r in report.output_rows()] == ["out", "out"]
    for r in report.rows:
        assert r.nonfinite == 0 and math.isfinite(r.max_rel), r
        assert 0 <= r.mean_abs <= r.max_abs and 0 <= r.mean_rel


def test_errors_are_fp16_sized_and_dl16_is_coarser(report):
    # an embedding lookup returns the weights as the copy to the device rounded them: fp32 -> binary16
    # (half a unit of the 11th bit), and in dl16 mode that binary16 value -> DLFloat16 (the 10th bit)
    for m, bound in (("ieee", 2.0 ** -11), ("dl16", 2.0 ** -10 + 2.0 ** -12)):
        emb = report.get("emb", m, "layer")
        assert 0 < emb.max_rel <= bound, (m, emb)
        out = report.get("out", m, "output")
        assert out.max_rel < 2.0 ** -5, (m, out)
    ieee = sum(r.mean_rel for r in report.layer_rows("ieee"))
    dl16 = sum(r.mean_rel for r in report.layer_rows("dl16"))
    assert dl16 > 1.3 * ieee, (ieee, dl16)


def test_top1_agreement_of_the_logits(report):
    for m in ("ieee", "dl16"):
        top1 = report.get("out", m, "output").top1
        assert top1 is not None and 0.9 <= top1 <= 1.0
    assert report.get("norm", "ieee", "layer").top1 is None  # only outputs are scored


def test_table_summary_and_json(report):
    text = report.table()
    assert "ieee max_abs" in text and "dl16 max_abs" in text and "head" in text
    s = report.summary()
    assert set(s) == {"ieee", "dl16"} and s["dl16"]["worst_layer"] in {r.name for r in report.layer_rows()}
    d = json.loads(json.dumps(report.to_dict()))
    assert len(d["rows"]) == len(report.rows) and d["dtype"] == "float16"



def test_activations_past_binary16s_range_are_held_in_dl16_only():
    """A layer whose f16 output exceeds 65504: inf in IEEE fp16, a DLFloat16 value on the card, so the next
    layer and the logits stay finite in the dl16 run only."""
    torch.manual_seed(0)
    up, down = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)
    with torch.no_grad():
        up.weight.copy_(torch.rand(16, 8) * 2e4)    # outputs of 8e4 or so
        down.weight.copy_(torch.rand(4, 16) * 1e-4)
    model = torch.nn.Sequential(up, torch.nn.ReLU(), down).eval()
    report = numerics.compare(model, (torch.rand(3, 8) + 0.5,))
    assert report.get("0", "ieee", "layer").nonfinite > 0
    assert report.get("2", "ieee", "layer").nonfinite > 0
    for name in ("0", "1", "2"):
        row = report.get(name, "dl16", "layer")
        assert row.nonfinite == 0 and row.max_rel < 4e-3, row

def test_mode_is_restored_and_bad_modes_are_named():
    assert numerics.get_mode() == "ieee"
    with pytest.raises(ValueError, match="fp17"):
        numerics.compare(torch.nn.Linear(2, 2), (torch.randn(1, 2),), modes=("fp17",))


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_cli_on_transformers_models(arch, tmp_path):
    pytest.importorskip("transformers", reason="the models are built from transformers configs")
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "spyre_triton.numerics", "--arch", arch, "--layers", "1",
                        "--json", str(out)], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "top-1 agreement" in r.stdout
    d = json.loads(out.read_text())
    outs = [row for row in d["rows"] if row["kind"] == "output" and row["name"] == "out.logits"]
    assert {row["mode"] for row in outs} == {"ieee", "dl16"}
    assert all(row["top1"] >= 0.9 and row["nonfinite"] == 0 for row in outs)
