"""Random ops under torch.compile, on the CPU with the plugin loaded and on spyre.

PyTorch's seed wrapper (the OpInfos' wrapper_set_seed) saves and restores the current accelerator's
RNG state inside the compiled function, under no_dispatch(). Dynamo used to trace into torch.spyre's
RNG functions there and fail, on every device, once spyre was the accelerator. docs/random.md says
which stream of numbers each path gives; the tests below check it.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.testing._utils import freeze_rng_state

# (name, fn(x)) over a float32 input in [0, 1): the random ops of the OpInfos that failed this way
RANDOM_OPS = {
    "bernoulli": lambda x: torch.bernoulli(x),
    "cauchy": lambda x: x.clone().cauchy_(),
    "exponential": lambda x: x.clone().exponential_(),
    "geometric": lambda x: x.clone().geometric_(0.3),
    "log_normal": lambda x: x.clone().log_normal_(),
    "normal": lambda x: torch.normal(x, 1.0),
    "uniform": lambda x: x.clone().uniform_(),
    "multinomial": lambda x: torch.multinomial(x + 0.1, 3),
    "dropout": lambda x: F.dropout(x, 0.5),
    "dropout2d": lambda x: F.dropout2d(x.view(1, 2, 4, 4), 0.5),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.5, training=True),
    "rrelu": lambda x: F.rrelu(x - 0.5, training=True),
    "rand_like": lambda x: torch.rand_like(x),
    "randn_like": lambda x: torch.randn_like(x),
    "randint_like": lambda x: torch.randint_like(x, 10),
}


def seeded(op):
    """What the OpInfos' wrapper_set_seed does (torch.testing._internal.common_methods_invocations)."""
    def run(x):
        with freeze_rng_state():
            torch.manual_seed(42)
            return op(x)
    return run


def uniform_input(device):
    return torch.rand(32, generator=torch.Generator().manual_seed(0)).to(device)


@pytest.mark.parametrize("device", ["cpu", "spyre"])
@pytest.mark.parametrize("name", RANDOM_OPS)
@torch._inductor.config.patch(fallback_random=True)  # as test_torchinductor_opinfo.py: eager's numbers
def test_seeded_random_op_compiles(device, name):
    torch._dynamo.reset()
    x = uniform_input(device)
    fn = seeded(RANDOM_OPS[name])
    compiled = torch.compile(fn)
    torch.manual_seed(7)
    got = compiled(x).cpu()
    after = torch.rand(4, device=device).cpu()  # freeze_rng_state restored the state it saved
    torch.manual_seed(7)
    assert torch.equal(torch.rand(4, device=device).cpu(), after)
    torch.testing.assert_close(got, fn(x).cpu())  # same draws; fused arithmetic may round differently
    assert torch.equal(compiled(x).cpu(), got)


def test_rng_state_functions_under_compile():
    torch._dynamo.reset()

    def fn(x):
        state = torch.spyre.get_rng_state()
        a = torch.rand_like(x)
        torch.spyre.set_rng_state(state)
        return a, torch.rand_like(x)

    a, b = torch.compile(fn)(torch.zeros(8, device="spyre"))
    assert torch.equal(a.cpu(), b.cpu())


def draws(x):
    return F.dropout(x, 0.5), torch.rand_like(x), torch.randn_like(x)


@pytest.mark.parametrize("device", ["cpu", "spyre"])
def test_compiled_random_stream(device):
    """Compiled random ops (Inductor's Philox path) are reproducible under torch.manual_seed, have the
    right distribution, and differ from eager's stream unless fallback_random is set."""
    torch._dynamo.reset()
    x = torch.ones(4096, device=device)
    compiled = torch.compile(draws)
    torch.manual_seed(0)
    first = [t.cpu() for t in compiled(x)]
    torch.manual_seed(0)
    again = [t.cpu() for t in compiled(x)]
    torch.manual_seed(0)
    eager = [t.cpu() for t in draws(x)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    dropped, uniform, normal = first
    assert set(dropped.unique().tolist()) == {0.0, 2.0} and abs((dropped == 0).float().mean() - 0.5) < 0.05
    assert 0 <= uniform.min() and uniform.max() < 1 and abs(uniform.mean() - 0.5) < 0.03
    assert abs(normal.mean()) < 0.06 and abs(normal.std() - 1) < 0.06
    assert not any(torch.equal(a, e) for a, e in zip(first, eager))


@pytest.mark.parametrize("device", ["cpu", "spyre"])
@torch._inductor.config.patch(fallback_random=True)
def test_fallback_random_matches_eager(device):
    torch._dynamo.reset()
    x = torch.ones(256, device=device)
    torch.manual_seed(0)
    compiled = [t.cpu() for t in torch.compile(draws)(x)]
    torch.manual_seed(0)
    eager = [t.cpu() for t in draws(x)]
    for c, e in zip(compiled, eager):
        torch.testing.assert_close(c, e, rtol=0, atol=0)


def test_random_opinfos_compile():
    """The OpInfo samples themselves (op_db needs expecttest, which torch's wheel does not require)."""
    pytest.importorskip("expecttest", reason="torch.testing._internal imports expecttest, not installed here")
    from torch.testing._internal.common_methods_invocations import op_db
    names = {"bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
             "nn.functional.dropout", "nn.functional.alpha_dropout", "nn.functional.rrelu"}
    ops = [op for op in op_db if op.name in names]
    assert len(ops) == len(names)
    for device in ("cpu", "spyre"):
        for op in ops:
            sample = next(iter(op.sample_inputs(device, torch.float32)))
            torch._dynamo.reset()
            with torch._inductor.config.patch(fallback_random=True):
                got = torch.compile(op.op)(sample.input, *sample.args, **sample.kwargs)
            want = op.op(sample.input, *sample.args, **sample.kwargs)
            torch.testing.assert_close(got.cpu(), want.cpu(), rtol=0, atol=0, msg=f"{op.name} on {device}")
