"""What an SSA value of the TTIR becomes during lowering.

- `Const`: a compile-time scalar. Folded into arithmetic; placed in a scalar register on demand.
- `Scalar`: a scalar register of the core.
- `Affine`: a tensor whose elements are `base + sum(coef[d] * idx[d])` with a scalar base and a scalar
  coefficient per dimension (None for a dimension the value does not vary along). Splats, ranges and
  pointer arithmetic stay in this form, so a load or store through them becomes one DMA descriptor.
  It is materialised into a tile only when an instruction needs the elements. A coefficient may also
  be a 1-D integer `Tile` (an offset vector): that dimension then adds `vec[idx[d]]`, not
  `coef * idx[d]`. Row indices, `offs % M` and Inductor's `x // n`, `x % n` index splits take this
  form, and a load through them is one DMA with a row table instead of a gather per element. An
  offset vector whose values split the dimension in two strided ones (`i % 64`, `i // 64`, sums and
  multiples of them) carries that `pattern`, and a DMA reads the dimension as those two.
- `Tile`: a dense row-major tensor in LX: a view into a `Buffer` (the unit of LX allocation).
- `Bounds`: an i1 tensor that is true where `idx[d] < limit[d]` in every bounded dimension: a mask
  that a DMA descriptor carries as bounds (see masks.py).

An integer `Scalar` or `Tile` may carry `Facts` (a range and a known divisor of its values: a program
id is >= 0, `k * BLOCK_K` is a multiple of BLOCK_K). They let splits.py divide an affine index by a
constant dimension by dimension. Facts take no part in equality: two handles of one register are equal.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod


@dataclass(eq=False)
class Buffer:
    nbytes: int
    uses: list = field(default_factory=list)  # indices of the instructions that read or write it
    offset: int | None = None  # byte offset in LX, set by the allocator
    what: str = ""  # for error messages: the op and source line that made it


@dataclass(frozen=True)
class Facts:
    """What is known of every value of an integer: lo <= v <= hi (None: unbounded on that side) and
    v % mult == 0 (mult 0: v is 0). Facts past the value's type are dropped (splits.with_facts);
    whether an affine sum may wrap is splits.may_wrap's question."""
    lo: int | None = None
    hi: int | None = None
    mult: int = 1


@dataclass(frozen=True)
class Const:
    value: int | float
    dtype: str


@dataclass(frozen=True)
class Scalar:
    slot: int
    dtype: str
    facts: Facts | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Affine:
    base: Const | Scalar
    coefs: tuple  # per dimension: Const | Scalar | Tile (an offset vector) | None
    shape: tuple
    dtype: str

    @property
    def is_splat(self) -> bool:
        return all(c is None for c in self.coefs)


@dataclass(frozen=True)
class Tile:
    buf: Buffer
    off: int
    shape: tuple
    dtype: str
    facts: Facts | None = field(default=None, compare=False, repr=False)  # of its elements; a view has none
    # an offset vector's layout when the index analysis knows it: element i is
    # inner * (i % k) + outer * (i // k) for pattern = (inner, outer, k); a descriptor then reads the
    # dimension as two strided ones, [n / k, k], not through the vector (splits.py)
    pattern: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def numel(self) -> int:
        return prod(self.shape)

    def view(self, shape=None, dtype=None, off=0) -> "Tile":
        return Tile(self.buf, self.off + off, tuple(self.shape if shape is None else shape),
                    self.dtype if dtype is None else dtype)


@dataclass(frozen=True)
class Bounds:
    limits: tuple  # per dimension: Const | Scalar (i64) | None
    shape: tuple
    dtype: str = "i1"


def shape_of(v) -> tuple:
    return v.shape if isinstance(v, (Affine, Tile, Bounds)) else ()


def splat_const(v) -> Const | None:
    """The constant every element of v is (v a Const, or an Affine splat of one); None otherwise."""
    if isinstance(v, Const):
        return v
    if isinstance(v, Affine) and v.is_splat and isinstance(v.base, Const):
        return v.base
    return None


def is_scalar(v) -> bool:
    return isinstance(v, (Const, Scalar))
