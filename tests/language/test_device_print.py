"""tl.device_print / print: the exact text, in Triton's GPU format (what upstream test_subprocess.py checks).

    pid (<x>, <y>, <z>) idx (<i0>, <i1>, ...)<prefix>(operand <k>) <value>

Each index is padded to ceil(log10(dim)) digits; "(operand k) " only when a print has several operands;
a scalar (and a print without operands) prints once per GPU thread, num_warps * warp_size lines.
"""
from collections import Counter
from itertools import product

import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE
WARP = 32  # SpyreOptions.warp_size


@triton.jit
def print_1d(X, N: tl.constexpr):
    tl.device_print("x: ", tl.load(X + tl.arange(0, N)))


@triton.jit
def print_1d_builtin(X, N: tl.constexpr):
    print("x:", tl.load(X + tl.arange(0, N)))  # Triton adds the space after the prefix


@triton.jit
def print_hex(X, N: tl.constexpr):
    tl.device_print("x: ", tl.load(X + tl.arange(0, N)), hex=True)


@triton.jit
def print_2d(X, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.device_print("", x)


@triton.jit
def print_3d(X, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    i = tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C + tl.arange(0, C)[None, None, :]
    tl.device_print("v ", tl.load(X + i))


@triton.jit
def print_splat_2d(M: tl.constexpr, N: tl.constexpr):
    tl.device_print("x ", tl.full([M, N], 1, tl.int32))  # Triton turns the prefix into " x: "


@triton.jit
def print_two(X, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    y = tl.full((N, ), 1, tl.int32)
    print("", x, y)


@triton.jit
def print_scalar(S):
    print("x:", tl.load(S))


@triton.jit
def print_pid():
    print("", tl.program_id(0))


@triton.jit
def print_text():
    print("no arg")


def ar(n, dtype=torch.int32):
    return torch.arange(n, dtype=torch.int32).to(dtype).to(DEVICE)


def lines_1d(n, prefix, fmt=str, width=None):
    w = len(str(n - 1)) if width is None else width
    return [f"pid (0, 0, 0) idx ({i:{w}}){prefix}{fmt(i)}" for i in range(n)]


# (name, launch, expected lines in order). Each case runs one program unless its lines say otherwise.
CASES = [
    ("1d_int32", lambda: print_1d[(1, )](ar(16), N=16), lines_1d(16, " x: ")),
    ("1d_width1", lambda: print_1d[(1, )](ar(8), N=8), lines_1d(8, " x: ")),
    ("1d_width3", lambda: print_1d[(1, )](ar(128), N=128), lines_1d(128, " x: ")),
    ("1d_float32", lambda: print_1d[(1, )](ar(4, torch.float32), N=4),
     lines_1d(4, " x: ", lambda i: f"{i}.000000")),
    ("1d_float16", lambda: print_1d[(1, )](ar(4, torch.float16), N=4),
     lines_1d(4, " x: ", lambda i: f"{i}.000000")),
    ("1d_uint8", lambda: print_1d[(1, )](ar(4, torch.uint8) + 250, N=4), lines_1d(4, " x: ", lambda i: 250 + i)),
    ("1d_negative", lambda: print_1d[(1, )](-ar(4), N=4), lines_1d(4, " x: ", lambda i: -i)),
    ("1d_builtin_print", lambda: print_1d_builtin[(1, )](ar(4), N=4), lines_1d(4, " x: ")),
    ("1d_hex_int16", lambda: print_hex[(1, )](ar(4, torch.int16) - 1, N=4),
     lines_1d(4, " x: ", lambda i: f"0x{(i - 1) & 0xFFFF:04x}")),
    ("2d_4x32", lambda: print_2d[(1, )](ar(128), M=4, N=32),
     [f"pid (0, 0, 0) idx ({i}, {j:2}): {i * 32 + j}" for i, j in product(range(4), range(32))]),
    ("2d_16x2", lambda: print_2d[(1, )](ar(32), M=16, N=2),
     [f"pid (0, 0, 0) idx ({i:2}, {j}): {i * 2 + j}" for i, j in product(range(16), range(2))]),
    ("2d_row", lambda: print_2d[(1, )](ar(4), M=1, N=4),  # a dimension of size 1: width 0
     [f"pid (0, 0, 0) idx (0, {j}): {j}" for j in range(4)]),
    ("3d", lambda: print_3d[(1, )](ar(2 * 4 * 16), A=2, B=4, C=16),
     [f"pid (0, 0, 0) idx ({i}, {j}, {k:2}) v: {i * 64 + j * 16 + k}"
      for i, j, k in product(range(2), range(4), range(16))]),
    ("two_operands", lambda: print_two[(1, )](ar(16), N=16),
     [f"pid (0, 0, 0) idx ({i:2}): (operand 0) {i}" for i in range(16)] +
     [f"pid (0, 0, 0) idx ({i:2}): (operand 1) 1" for i in range(16)]),
    ("scalar_int32", lambda: print_scalar[(1, )](torch.tensor(42, dtype=torch.int32, device=DEVICE), num_warps=4),
     ["pid (0, 0, 0) idx () x: 42"] * (4 * WARP)),
    ("scalar_float64_1warp",
     lambda: print_scalar[(1, )](torch.tensor(42, dtype=torch.float64, device=DEVICE), num_warps=1),
     ["pid (0, 0, 0) idx () x: 42.000000"] * WARP),
    ("scalar_pid", lambda: print_pid[(1, )](num_warps=2), ["pid (0, 0, 0) idx (): 0"] * (2 * WARP)),
    ("no_operands", lambda: print_text[(1, )](num_warps=4), ["pid (0, 0, 0) no arg"] * (4 * WARP)),
]


@pytest.mark.parametrize("name, launch, expected", CASES, ids=[c[0] for c in CASES])
def test_print_text(name, launch, expected, capfd):
    capfd.readouterr()
    launch()
    assert capfd.readouterr().out.splitlines() == expected


def test_print_every_program_and_splat_2d(capfd):
    """Two programs (lines of different programs may interleave by program, so compare as a multiset),
    and a splat operand printed element by element with a 2-d index (upstream device_print_large)."""
    capfd.readouterr()
    print_splat_2d[(1, 2)](M=8, N=16)
    got = Counter(capfd.readouterr().out.splitlines())
    assert got == Counter(f"pid (0, {p}, 0) idx ({i}, {j:2}) x: 1" for p, i, j in product(range(2), range(8), range(16)))
