"""The lowering folds scalar arithmetic on constants (index and address arithmetic) through
isa_ref, the executable definition of each opcode: a folded result is what the instruction would
have computed at run time, wrap-around, division by zero and i1 included."""
import numpy as np
import pytest

from spyre_triton import isa_ref
from spyre_triton.compiler import dtypes

EDGES = {
    "i1": [0, 1],
    "i8": [0, 1, -1, 7, -128, 127],
    "i16": [0, 3, -1, -32768, 32767],
    "i32": [0, 1, -1, 5, -7, 2**31 - 1, -2**31],
    "i64": [0, 1, -1, 12, -2**63, 2**63 - 1],
}
OPS = ("add", "sub", "mul", "divs", "rems", "divu", "remu", "maxs", "mins", "shl", "shrs", "and", "xor")


@pytest.mark.parametrize("dtype", list(EDGES))
def test_folding_matches_the_instruction_reference_on_whole_tiles(dtype):
    vals = EDGES[dtype]
    pairs = [(a, b) for a in vals for b in vals]
    st = isa_ref.storage(dtype)
    for op in OPS:
        tile = isa_ref.elementwise(op, dtype, [np.array([dtypes.const_bits(a, dtype) for a, _ in pairs], dtype=st),
                                               np.array([dtypes.const_bits(b, dtype) for _, b in pairs], dtype=st)])
        folded = [dtypes.fold(op, a, b, dtype) for a, b in pairs]
        assert folded == [dtypes.wrap(int(r), dtype) for r in tile], (op, dtype)


def test_folding_wraps_and_divides_as_the_machine_does():
    assert dtypes.fold("add", 2**31 - 1, 1, "i32") == -2**31
    assert dtypes.fold("mul", 2**62, 4, "i64") == 0
    assert dtypes.fold("divs", -7, 2, "i32") == -3      # truncates toward zero
    assert dtypes.fold("rems", -7, 2, "i32") == -1
    assert dtypes.fold("divs", 5, 0, "i32") == 0        # no trap: 0
    assert dtypes.fold("divs", -2**31, -1, "i32") == -2**31
    assert dtypes.fold("add", 1, 1, "i1") == 0


def test_float_folding_rounds_to_the_dtype():
    assert dtypes.fold("add", 0.1, 0.2, "f32") == float(np.float32(np.float32(0.1) + np.float32(0.2)))
    assert dtypes.fold("add", 0.1, 0.2, "f64") == 0.1 + 0.2
    assert dtypes.fold("mul", 65504.0, 2.0, "f16") == float("inf")
