"""Index splits: an affine integer tensor divided by a constant, kept affine dimension by dimension.

Inductor reads a permuted operand through a flat index that varies along two dimensions of the tile,
`xindex = k + 256 * m`, and splits it again: `xindex % 64`, `(xindex // 64) % 4`, `xindex // 32768`.
Computed element by element, the pointer becomes a tile of addresses and the load a gather per
element. Divided term by term, the pieces are constants, scalars and offset vectors along one
dimension (values.py), and the load stays one DMA.

The rule. Write v as a sum of terms (its base, and coef[d] * idx[d] for each dimension) and let D > 0
be a constant. Every term must be known to be >= 0 (`Facts`). Put the terms into three groups: A, whose
terms are multiples of D; P, the base and/or one dimension; R, the rest; such that, with
g = gcd(D, a divisor of every term of P), 0 <= sum(R) <= g - 1. Then

    v // D = sum(A) / D + P // D            v % D = P % D + sum(R)

Why this is exact, for floor division: v = D * (sum(A) / D) + P + R with sum(A) / D an integer, so
floor(v / D) = sum(A) / D + floor((P + R) / D). With P = g * p and D = g * D' (p, D' integers) and
R / g in [0, 1): floor((P + R) / D) = floor((p + R / g) / D') = floor(p / D') = floor(P / D), because
floor(x / n) = floor(floor(x) / n) for an integer n > 0 and floor(p + R / g) = p. The remainder is
v - D * floor(v / D) = (P - D * floor(P / D)) + R. Triton's `//` and `%` on signed integers truncate
(arith.divsi, arith.remsi: C semantics); truncation is floor for v >= 0 and P >= 0, which is why every
term must be >= 0: with a negative coefficient, or a base of unknown sign, nothing is rewritten. Nor is
an index whose sum may wrap around its type (`may_wrap`): the rule holds for the sum, not for what is
left of it after wrapping.

sum(A) / D divides each term of A exactly (a constant folded, a scalar or an offset vector divided by
D); P // D and P % D are one scalar, or one vector along P's dimension; R's terms stay as they are.
Which split is taken: P empty (nothing is computed), the base alone (one scalar), then one dimension
without and with the base (one vector of that dimension's extent).

Facts come from constants, program ids (>= 0), loop induction variables (from their bounds and step),
`tt.divisibility` of integer kernel arguments, `tl.assume(x >= c)`, and the scalar and vector arithmetic
below. They make the rule apply to Inductor's matmul templates, whose bases are `k_idx * BLOCK_K` and
`pid_m * BLOCK_M % M`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import gcd

from . import dtypes
from .ttir import Block
from .values import Affine, Const, Facts, Scalar, Tile

UNKNOWN = Facts()


# -- facts of values ---------------------------------------------------------------------------
def facts_of(v) -> Facts:
    if isinstance(v, Const):
        return Facts(int(v.value), int(v.value), abs(int(v.value))) if isinstance(v.value, int) else UNKNOWN
    if isinstance(v, (Scalar, Tile)) and v.facts is not None:
        return v.facts
    return UNKNOWN


def with_facts(v, f: Facts):
    """v (a Scalar or Tile) carrying f; anything else as it is. Facts that run past v's type (the
    arithmetic that made v wrapped around) say nothing."""
    if isinstance(v, (Scalar, Tile)) and f != UNKNOWN and not dtypes.is_float(v.dtype) and _within(f, v.dtype):
        return replace(v, facts=f)
    return v


def _within(f: Facts, dtype: str) -> bool:
    if dtype == "i1":
        return True
    bits = dtypes.nbytes(dtype) * 8
    return (f.lo is None or f.lo >= -(1 << bits - 1)) and (f.hi is None or f.hi < 1 << bits - 1)


def may_wrap(v: Affine, address: bool = False) -> bool:
    """Whether an element of v may differ from base + sum(coef[d] * idx[d]) computed without bounds:
    whether the sum may leave v's type, where the type wraps it. Casts, splits and masks rewrite v term
    by term, which is exact only for a sum that stays in the type; on one that may wrap they work on
    the elements. A stride times the index (a constant or a register coefficient) must have known
    bounds, and the sum of those must fit the type (an index times a scalar of unknown size may wrap).
    The base and offset vectors are values of the type: the sum is checked on the sides their facts
    bound; on a side they do not, it is taken not to wrap (`pid * BLOCK + tl.arange(0, BLOCK)`, or a
    row index plus a column, within one tile of the type's limit).

    `address`: v is an i32 pointer offset (addptr). A register stride of unknown size is then taken not
    to wrap either, as Triton's own analysis takes it: `offs_m[:, None] * stride_am` is how every kernel
    addresses a matrix, and one whose i32 offsets wrap addresses memory gigabytes from what it meant, on
    any backend. Its descriptor keeps the stride; a constant stride that provably wraps does not."""
    if v.dtype == "i1" or dtypes.is_float(v.dtype):
        return False
    lo = hi = 0
    anchored = [facts_of(v.base)]  # terms checked on the sides their facts bound
    for c, n in zip(v.coefs, v.shape):
        if c is None or n == 1:
            continue
        f = _dim_facts(c, n)
        if isinstance(c, Tile) or (address and isinstance(c, Scalar) and None in (f.lo, f.hi)):
            anchored.append(f)
        elif f.lo is None or f.hi is None:
            return True
        else:
            lo, hi = lo + f.lo, hi + f.hi
    if not fits(Facts(lo, hi), v.dtype):
        return True
    for f in anchored:
        lo, hi = _both(lo, f.lo, int.__add__), _both(hi, f.hi, int.__add__)
    return not _within(Facts(lo, hi), v.dtype)


def _both(x, y, fn):
    return None if x is None or y is None else fn(x, y)


def nonneg(f: Facts) -> bool:
    return f.lo is not None and f.lo >= 0


def add(a: Facts, b: Facts) -> Facts:
    return Facts(_both(a.lo, b.lo, int.__add__), _both(a.hi, b.hi, int.__add__), gcd(a.mult, b.mult))


def sub(a: Facts, b: Facts) -> Facts:
    return Facts(_both(a.lo, b.hi, int.__sub__), _both(a.hi, b.lo, int.__sub__), gcd(a.mult, b.mult))


def mul(a: Facts, b: Facts) -> Facts:
    if None not in (a.lo, a.hi, b.lo, b.hi):
        ends = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        return Facts(min(ends), max(ends), a.mult * b.mult)
    lo = a.lo * b.lo if nonneg(a) and nonneg(b) else None
    return Facts(lo, None, a.mult * b.mult)


def div(a: Facts, b: Facts) -> Facts:
    """a // b (truncating) for a >= 0 and b >= 1; else nothing is known."""
    if not nonneg(a) or b.lo is None or b.lo < 1:
        return UNKNOWN
    exact = b.lo == b.hi and a.mult % b.lo == 0  # a constant that divides every a
    return Facts(a.lo // b.hi if b.hi is not None else 0, _both(a.hi, b.lo, int.__floordiv__),
                 a.mult // b.lo if exact else 1)


def rem(a: Facts, b: Facts) -> Facts:
    """a % b (sign of a; the ISA gives 0 for b == 0) for a >= 0: within [0, a] and below b."""
    if not nonneg(a):
        return UNKNOWN
    g = gcd(a.mult, b.mult)  # a - (a // b) * b
    if b.lo == b.hi and b.lo is not None and b.lo >= 1 and a.hi is not None and a.hi < b.lo:
        return a  # a < b: a % b is a
    hi = a.hi
    if b.lo is not None and b.lo >= 1 and b.hi is not None:
        top = b.hi - 1 if g == 0 else (b.hi - 1) // g * g  # the largest multiple of g below b
        hi = top if hi is None else min(hi, top)
    return Facts(0, hi, g)


def minimum(a: Facts, b: Facts) -> Facts:
    his = [h for h in (a.hi, b.hi) if h is not None]
    return Facts(_both(a.lo, b.lo, min), min(his) if his else None, gcd(a.mult, b.mult))


def maximum(a: Facts, b: Facts) -> Facts:
    los = [x for x in (a.lo, b.lo) if x is not None]
    return Facts(max(los) if los else None, _both(a.hi, b.hi, max), gcd(a.mult, b.mult))


BINOP_FACTS = {"add": add, "sub": sub, "mul": mul, "divs": div, "rems": rem, "mins": minimum, "maxs": maximum}


def binop(op: str, a, b) -> Facts:
    """Facts of `a op b` (signed integer values), from the facts of a and b."""
    fn = BINOP_FACTS.get(op)
    return fn(facts_of(a), facts_of(b)) if fn else UNKNOWN


def fits(f: Facts, dtype: str) -> bool:
    bits = dtypes.nbytes(dtype) * 8
    return f.lo is not None and f.hi is not None and -(1 << bits - 1) <= f.lo and f.hi < 1 << bits - 1


def survives_cast(f: Facts, src: str, dst: str) -> bool:
    """Every value with facts f keeps its value through a sign extension or truncation from src to dst."""
    return dtypes.nbytes(dst) >= dtypes.nbytes(src) or fits(f, dst)


def cast(f: Facts, src: str, dst: str) -> Facts:
    """Facts of a sign extension or truncation from src to dst (kept when every value survives it)."""
    return f if survives_cast(f, src, dst) else UNKNOWN


def loop_iv(lb, ub, step) -> Facts:
    """The induction variable of `for iv in range(lb, ub, step)` with step >= 1, in the body: lb <= iv < ub,
    and iv = lb + j * step."""
    fl, fu, fs = facts_of(lb), facts_of(ub), facts_of(step)
    if fs.lo is None or fs.lo < 1:
        return UNKNOWN
    return Facts(fl.lo, None if fu.hi is None else fu.hi - 1, gcd(fl.mult, fs.mult))


def assumed(L, op):
    """`tl.assume(x >= c)` (also >, <=, <): the scalar x carries the bound from here on. Only within the
    block that defines x, so the assumption holds wherever the refined value is used."""
    cmp = op.operands[0].owner
    if getattr(cmp, "name", None) != "arith.cmpi":
        return
    x_val = cmp.operands[0]
    x, c = L.values.get(x_val), L.values.get(cmp.operands[1])
    block = x_val.owner if isinstance(x_val.owner, Block) else getattr(x_val.owner, "parent", None)
    if not isinstance(x, Scalar) or not isinstance(c, Const) or block is not op.parent:
        return
    f = facts_of(x)
    bound = {"sge": (c.value, None), "sgt": (c.value + 1, None), "sle": (None, c.value), "slt": (None, c.value - 1)}
    lo, hi = bound.get(cmp.attrs.get("predicate"), (None, None))
    L.values[x_val] = replace(x, facts=Facts(_tighter(lo, f.lo, max), _tighter(hi, f.hi, min), f.mult))


def _tighter(x, y, fn):
    known = [v for v in (x, y) if v is not None]
    return fn(known) if known else None


# -- dividing an affine value by a constant ----------------------------------------------------
@dataclass(eq=False)
class Term:
    dim: int | None  # None: (a part of) the base
    value: object  # the base part, or dim's coefficient: Const | Scalar | Tile (an offset vector)
    facts: Facts  # of the term's values (for a dimension, over its whole extent)


def const_divisor(b) -> int | None:
    """The divisor as a positive constant, else None."""
    c = b.base if isinstance(b, Affine) and b.is_splat else b
    if isinstance(c, Const) and isinstance(c.value, int) and c.value > 0:
        return c.value
    return None


def divide(L, opcode: str, v: Affine, D: int) -> Affine | None:
    """v // D (opcode "divs") or v % D ("rems") as an affine value, or None when the rule does not apply."""
    if may_wrap(v):
        return None
    terms = _terms(v, D)
    if terms is None:
        return None
    A = [t for t in terms if t.facts.mult % D == 0]
    split = _split([t for t in terms if t.facts.mult % D != 0], D)
    if split is None:
        return None
    P, R = split
    if opcode == "divs":
        return _assemble(L, v, [_exact_div(L, t, D, v.dtype) for t in A] + _p_part(L, v, P, D, opcode))
    return _assemble(L, v, _p_part(L, v, P, D, opcode) + R)


def _terms(v: Affine, D: int):
    """v's nonzero terms, or None when one may be negative. A constant base b >= D gives two terms,
    D * (b // D) and b % D, so that its multiple of D leaves the remainder."""
    terms = []
    if isinstance(v.base, Const):
        b = int(v.base.value)
        for part in ((b // D * D, b % D) if b > 0 else (b,)):
            if part:
                terms.append(Term(None, Const(part, v.dtype), facts_of(Const(part, v.dtype))))
    else:
        terms.append(Term(None, v.base, facts_of(v.base)))
    for d, (c, n) in enumerate(zip(v.coefs, v.shape)):
        if c is not None and n > 1:  # a dimension of extent 1 only ever adds coef * 0
            terms.append(Term(d, c, _dim_facts(c, n)))
    return terms if all(nonneg(t.facts) for t in terms) else None


def _dim_facts(c, n: int) -> Facts:
    """Facts of coef * idx over idx in [0, n) (an offset vector: of its elements)."""
    if isinstance(c, Tile):
        return facts_of(c)
    return mul(facts_of(c), Facts(0, n - 1, 1))


def _split(S, D: int):
    """(P, R) of the terms that are not multiples of D (see the module doc), or None."""
    base = [t for t in S if t.dim is None]
    dims = [t for t in S if t.dim is not None]
    candidates = [[], base] + [p for t in dims for p in ([t], [t] + base)]
    for P in candidates:
        R = [t for t in S if all(t is not p for p in P)]
        g = gcd(D, *(t.facts.mult for t in P))
        hi = sum(t.facts.hi for t in R) if all(t.facts.hi is not None for t in R) else None
        if hi is not None and hi < g:
            return P, R
    return None


def _exact_div(L, t: Term, D: int, dtype: str) -> Term:
    """A term that is a multiple of D, divided by D (exactly: nothing is rounded)."""
    f = div(t.facts, facts_of(Const(D, dtype)))
    if isinstance(t.value, Const):
        return Term(t.dim, Const(int(t.value.value) // D, dtype), f)
    if isinstance(t.value, Tile):
        p = t.value.pattern
        q = (p[0] // D, p[1] // D, p[2]) if p is not None and p[0] % D == 0 and p[1] % D == 0 else None
        return Term(t.dim, with_pattern(with_facts(L.elementwise("divs", dtype, [t.value, Const(D, dtype)]), f), q), f)
    return Term(t.dim, L.s_binop("divs", t.value, Const(D, dtype), dtype), f)


def _p_part(L, v: Affine, P, D: int, opcode: str):
    """P // D or P % D (P >= 0): nothing, one scalar, or one vector along P's dimension."""
    if not P:
        return []
    fP = Facts(0, 0, 0)
    for t in P:
        fP = add(fP, t.facts)
    d = next((t for t in P if t.dim is not None), None)
    base = next((t.value for t in P if t.dim is None), None)
    f = BINOP_FACTS[opcode](fP, facts_of(Const(D, v.dtype)))
    if d is None:
        if isinstance(base, Const):  # both >= 0: floor and truncation agree
            x = int(base.value)
            return [Term(None, Const(x // D if opcode == "divs" else x % D, v.dtype), f)]
        return [Term(None, L.s_binop(opcode, base, Const(D, v.dtype), v.dtype), f)]
    vec = _vector(L, v, d, base)
    out = with_facts(L.elementwise(opcode, v.dtype, [vec, Const(D, v.dtype)]), f)
    return [Term(d.dim, with_pattern(out, _split_pattern(d, base, D, v.shape[d.dim], opcode)), f)]


def _split_pattern(d: Term, base, D: int, n: int, opcode: str):
    """For a constant stride c, (c * i) % D and (c * i) // D over i < n split the dimension in two when D
    is a multiple of c and k = D / c divides n: they are c * (i % k) and i // k (Tile.pattern)."""
    if base is not None or not isinstance(d.value, Const) or not isinstance(d.value.value, int):
        return None
    c = d.value.value
    if c <= 0 or D % c or not 1 < D // c < n or n % (D // c):
        return None
    return (c, 0, D // c) if opcode == "rems" else (0, 1, D // c)


# -- offset vectors that split their dimension in two (Tile.pattern) ---------------------------
def pattern_of(c, k: int | None = None):
    """The (inner, outer, k) pattern of a coefficient: a Tile's own; a constant stride c is
    (c, c * k, k) for whichever k the other operand has."""
    if isinstance(c, Tile):
        return c.pattern
    if isinstance(c, Const) and isinstance(c.value, int) and k is not None:
        return (c.value, c.value * k, k)
    return None


def with_pattern(v, pattern):
    return replace(v, pattern=pattern) if isinstance(v, Tile) and pattern is not None else v


def sum_pattern(x, y):
    """The pattern of x + y, two coefficients of one dimension, or None."""
    k = next((p[2] for p in (pattern_of(x), pattern_of(y)) if p is not None), None)
    px, py = pattern_of(x, k), pattern_of(y, k)
    if px is None or py is None or px[2] != py[2]:
        return None
    return (px[0] + py[0], px[1] + py[1], k)


def scaled_pattern(c, s):
    """The pattern of the offset vector c times the scalar s, or None."""
    p = pattern_of(c)
    if p is None or not isinstance(s, Const) or not isinstance(s.value, int):
        return None
    return (p[0] * s.value, p[1] * s.value, p[2])


def _vector(L, v: Affine, d: Term, base) -> Tile:
    """The values of d's term (plus the base) along d's dimension: a 1-D tile."""
    if isinstance(d.value, Tile):
        return d.value if base is None else L.elementwise("add", v.dtype, [d.value, base])
    n = v.shape[d.dim]
    return L.materialize(Affine(base if base is not None else Const(0, v.dtype), (d.value,), (n,), v.dtype))


def _assemble(L, v: Affine, parts) -> Affine:
    """The affine value whose terms are `parts` (at most one per dimension)."""
    base, coefs = Const(0, v.dtype), [None] * len(v.shape)
    for t in parts:
        if t.dim is None:
            base = L.s_binop("add", base, t.value, v.dtype)
        else:
            coefs[t.dim] = t.value
    return Affine(base, tuple(coefs), v.shape, v.dtype)
