"""Figures of the simulated Spyre card that the compiler and runtime share (see ../shared/spyre-hw.md).

Override with environment variables before the first compile: SPYRE_LX_TILE_BYTES.
"""
import os

ARCH = "spyre1"
NUM_CORES = 32  # AI cores per card
LX_BYTES = 2 * 1024 * 1024  # scratchpad per core
# The part of LX a kernel's tiles may use: the rest holds program, debug and backend reserves
# (~1.55 MB is left for data on the real card).
LX_TILE_BYTES = int(os.environ.get("SPYRE_LX_TILE_BYTES", 1_572_864))
WARP_SIZE = 32  # Spyre has no warps; Triton's launch arithmetic wants a number
MAX_NUM_REGS = 65536
