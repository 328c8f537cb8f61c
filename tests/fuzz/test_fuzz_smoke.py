"""A seeded smoke run of the differential fuzzer (tools/fuzz.py): random kernels on spyre against
Triton's interpreter. `./run.sh fuzz N` runs more."""
import importlib.util
import os

import pytest
import torch

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "fuzz.py")
_spec = importlib.util.spec_from_file_location("spyre_tools_fuzz", _PATH)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

SMOKE_KERNELS = 240


@pytest.fixture(scope="module")
def reference():
    ref = fuzz.Reference()
    yield ref
    ref.close()


def test_smoke_run_has_no_mismatch(reference):
    results = [fuzz.run_case(fuzz.generate(seed), reference) for seed in range(SMOKE_KERNELS)]
    failures = [r.report() for r in results if r.status in ("mismatch", "error")]
    assert not failures, f"{len(failures)} of {len(results)} kernels failed:\n\n" + "\n\n".join(failures)
    families = fuzz.summary(results)
    assert set(families) == set(fuzz.FAMILIES), families  # every family ran


def test_generation_is_reproducible_from_the_seed():
    for seed in (0, 7, 123):
        a, b = fuzz.generate(seed), fuzz.generate(seed)
        assert a.source == b.source and a.grid == b.grid and a.constexprs == b.constexprs
        for x, y in zip(a.args, b.args):
            assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y


class _OffByOneReference:
    """The real interpreter's answer with one element's high bit flipped: the runner must notice."""

    def __init__(self, ref):
        self.ref = ref

    def submit(self, case):
        self.ref.submit(case)

    def result(self):
        out = self.ref.result()
        first = out[0].reshape(-1)[:1].view(torch.uint8)  # the first element's bytes, little-endian
        first[-1] ^= 0x40  # a high bit: an exponent bit of a float, a large step of an integer
        return out


@pytest.mark.parametrize("family", ["expr", "dot", "atomic"])
def test_a_wrong_answer_is_reported_with_seed_and_source(reference, family):
    case = fuzz.generate(1000, family)
    r = fuzz.run_case(case, _OffByOneReference(reference))
    assert r.status in ("mismatch", "known"), r.report()
    text = r.report()
    assert "seed=1000" in text and case.source in text and "differ" in text


def test_compare_is_bitwise_for_integers_and_tolerant_for_floats():
    a = torch.tensor([1, 2, -3], dtype=torch.int64)
    assert fuzz.compare(a, a.clone(), exact=False) is None
    assert "spyre 3, interpreter 2" in fuzz.compare(a + torch.tensor([0, 1, 0]), a, exact=False)
    f = torch.tensor([1.0, float("nan"), float("inf"), -0.0])
    assert fuzz.compare(f, f.clone(), exact=True) is None
    assert fuzz.compare(f * (1 + 1e-7), f, exact=False) is None
    assert fuzz.compare(torch.tensor([1.0, float("nan"), float("inf"), 0.0]), f, exact=True) is not None  # -0.0
    assert fuzz.compare(torch.tensor([1.0, 1.0, float("inf"), -0.0]), f, exact=False) is not None  # NaN lost
