"""i32 division and remainder: the vector builds compute them through double (exact, see loops.c), the
baseline with the integer divide. Both must give C's truncating quotient and a remainder with the sign of
the dividend, 0 for a zero divisor, and INT_MIN / -1 wrapping to INT_MIN, over random and extreme values,
with a vector divisor and a broadcast one (Inductor's `x // 64`, `x % 3`)."""
import numpy as np
import pytest

from asm_helpers import run_elementwise

EXTREMES = np.array([0, 1, -1, 2, -2, 3, 7, -7, 64, 2**31 - 1, -2**31, -2**31 + 1, 2**30, 123456789, -987654321],
                    dtype=np.int64)


def reference(op, a, b):
    a, b = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b == 0, 1, b)
    q = np.where(b == 0, 0, np.sign(a) * np.sign(safe) * (np.abs(a) // np.abs(safe)))  # truncating, in int64
    r = np.where(b == 0, 0, a - q * safe)
    out = q if op == "divs" else r
    return ((out + 2**31) % 2**32 - 2**31).astype(np.int32)  # INT_MIN / -1 wraps


@pytest.mark.parametrize("op", ["divs", "rems"])
@pytest.mark.parametrize("divisor", ["vector", 1, -1, 0, 3, -64, 2**31 - 1, -2**31])
def test_i32_division(op, divisor):
    rng = np.random.default_rng(7)
    a = np.concatenate([np.repeat(EXTREMES, len(EXTREMES)), rng.integers(-2**31, 2**31, 3000)]).astype(np.int32)
    if divisor == "vector":
        b = np.concatenate([np.tile(EXTREMES, len(EXTREMES)), rng.integers(-2**31, 2**31, 1500),
                            rng.integers(-300, 300, 1500)]).astype(np.int32)
        got = run_elementwise(op, "i32", [a, b])
    else:
        b = np.full(len(a), divisor, dtype=np.int32)
        got = run_elementwise(op, "i32", [a, b[:1]], bcast=(2,), n=len(a))
    np.testing.assert_array_equal(got, reference(op, a, b))
