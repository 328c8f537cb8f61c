"""Compile errors of the Spyre backend."""
from triton.compiler.errors import CompilationError as _TritonCompilationError


class CompilationError(_TritonCompilationError):
    """A kernel the Spyre backend cannot compile: names the op and the kernel's source line."""

    def __init__(self, message: str):
        self.src = None
        self.node = None
        self.error_message = message
        self.message = message

    def __reduce__(self):
        return type(self), (self.message,)


class LXOverflowError(CompilationError):
    """The tiles live at one point of the kernel need more LX than a core has."""
