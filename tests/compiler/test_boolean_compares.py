"""Compares of a boolean with 0 or 1 (spyre_triton/compiler/ops.py boolean_compare).

Inductor writes `((x == y) == 0).to(tl.int64) != 0` for `x != y` in its safe softmax, and `mask == 0` for
`not mask`. Such a compare is the boolean itself or its negation, and the negation of a compare is the
inverse compare (`oeq` -> `une`, `slt` -> `sge`, ...), so the chain is one compare instead of a compare, two
widenings and two integer compares. Every predicate's inverse is checked against torch on values with
NaN, infinities and signed zeros (an inverse that forgot NaN would differ there), and the kernels must
have no integer compare left."""
import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import mnemonics

from conftest import DEVICE

FLOAT_PREDS = ["==", "!=", "<", "<=", ">", ">="]


@triton.jit
def negated_float_compare(x_ptr, y_ptr, o_ptr, N: tl.constexpr, PRED: tl.constexpr, FORM: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    if PRED == 0:
        c = x == y
    elif PRED == 1:
        c = x != y
    elif PRED == 2:
        c = x < y
    elif PRED == 3:
        c = x <= y
    elif PRED == 4:
        c = x > y
    else:
        c = x >= y
    if FORM == 0:      # Inductor's chain: not c, widened, compared with 0
        out = ((c == 0).to(tl.int64)) != 0
    elif FORM == 1:    # not c, written as != 1
        out = c != 1
    elif FORM == 2:    # c itself, widened with sign
        out = c.to(tl.int32, bitcast=False).to(tl.int64) != 0
    else:              # c itself, written as == 1
        out = c == 1
    tl.store(o_ptr + r, out.to(tl.int8))


def special_values():
    v = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 2.5])
    x, y = torch.meshgrid(v, v, indexing="ij")
    return x.flatten(), y.flatten()


TORCH = {0: torch.eq, 1: torch.ne, 2: torch.lt, 3: torch.le, 4: torch.gt, 5: torch.ge}


@pytest.mark.parametrize("pred", range(6), ids=FLOAT_PREDS)
@pytest.mark.parametrize("form", range(4), ids=["not_widened", "ne_1", "itself_widened", "eq_1"])
def test_float_compare_and_its_negation(pred, form):
    x, y = special_values()
    o = torch.empty(64, dtype=torch.int8, device=DEVICE)
    h = negated_float_compare[(1,)](x.to(DEVICE), y.to(DEVICE), o, N=64, PRED=pred, FORM=form)
    want = TORCH[pred](x, y)
    if form in (0, 1):
        want = ~want
    assert torch.equal(o.cpu(), want.to(torch.int8))
    names = mnemonics(h)
    assert [m for m in names if m.startswith("cmpf.")] and not [m for m in names if m.startswith("cmpi.")], names


@triton.jit
def negated_int_compare(x_ptr, y_ptr, o_ptr, N: tl.constexpr, UNSIGNED: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    if UNSIGNED:
        x, y = x.to(tl.uint32, bitcast=True), y.to(tl.uint32, bitcast=True)
    lt = (x < y) == 0
    le = (x <= y) == 0
    eq = (x == y) == 0
    tl.store(o_ptr + r, lt.to(tl.int8) + 2 * le.to(tl.int8) + 4 * eq.to(tl.int8))


@pytest.mark.parametrize("unsigned", [False, True])
def test_int_compare_negations(unsigned):
    v = torch.tensor([0, 1, -1, 2**31 - 1, -2**31, 7], dtype=torch.int32)
    x, y = (t.flatten() for t in torch.meshgrid(v, v, indexing="ij"))
    x, y = torch.cat([x, x[:28]]), torch.cat([y, y[:28]])  # 64 elements
    o = torch.empty(64, dtype=torch.int8, device=DEVICE)
    h = negated_int_compare[(1,)](x.to(DEVICE), y.to(DEVICE), o, N=64, UNSIGNED=unsigned)
    xs, ys = (x.to(torch.int64) & 0xFFFFFFFF, y.to(torch.int64) & 0xFFFFFFFF) if unsigned else (x, y)
    want = (~(xs < ys)).to(torch.int8) + 2 * (~(xs <= ys)).to(torch.int8) + 4 * (~(xs == ys)).to(torch.int8)
    assert torch.equal(o.cpu(), want)
    assert len([m for m in mnemonics(h) if m.startswith("cmpi.")]) == 3


@triton.jit
def not_of_a_loaded_boolean(m_ptr, o_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    m = tl.load(m_ptr + r) != 0   # a boolean that is not a compare of its own: negated with xor
    tl.store(o_ptr + r, ((m == 0).to(tl.int64) != 0).to(tl.int8))


def test_not_of_a_boolean_that_is_no_compare():
    m = torch.tensor([0, 1, 2, -3] * 16, dtype=torch.int8)
    o = torch.empty(64, dtype=torch.int8, device=DEVICE)
    not_of_a_loaded_boolean[(1,)](m.to(DEVICE), o, N=64)
    assert torch.equal(o.cpu(), (m == 0).to(torch.int8))
