"""Figures of the simulated Spyre card that the compiler and runtime share.

Sources (public): 32 AI cores per card, IBM Research blog "Lifting the cover on the IBM Spyre
accelerator" and the torch-spyre project's docs (github.com/torch-spyre/torch-spyre,
docs/source/architecture); 2 MB of LX scratchpad per core with ~1.55 MB left for data, torch-spyre
docs/source/compiler/scratchpad_planning.md. docs/perf-model.md lists every figure with its source.

Override with environment variables before the first compile: SPYRE_LX_TILE_BYTES, SPYRE_ELIDE_COPIES.
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
# Copy elision through view registers (compiler/views.py); SPYRE_ELIDE_COPIES=0 compiles every ld/st
# as a copy through LX, to compare or to rule the elision out when chasing a wrong result.
ELIDE_COPIES = os.environ.get("SPYRE_ELIDE_COPIES", "1") != "0"
