"""Compile errors of the Spyre backend."""
from __future__ import annotations

from triton.compiler.errors import CompilationError as _TritonCompilationError
from triton.runtime.errors import OutOfResources


class CompilationError(_TritonCompilationError):
    """A kernel the Spyre backend cannot compile: names the op and the kernel's source line."""

    def __init__(self, message: str):
        self.src = None
        self.node = None
        self.error_message = message
        self.message = message

    def __reduce__(self):
        return type(self), (self.message,)


class LXOverflowError(CompilationError, OutOfResources):
    """The tiles live at one point of the kernel need more LX than a core has. Also Triton's
    OutOfResources, so that autotuners (`@triton.autotune`, Inductor's) pass over a config whose tiles do
    not fit, as they pass over one that needs too much shared memory on a GPU."""

    def __init__(self, message: str, required: int | None = None, limit: int | None = None):
        super().__init__(message)
        self.required, self.limit, self.name = required, limit, "LX bytes"


class CarryRollback(Exception):
    """A loop's optimistic affine carry did not hold: lower the loop again, materialised (ops_scf.py)."""

    def __init__(self, loop_op, arg_index):
        self.loop_op, self.arg_index = loop_op, arg_index
