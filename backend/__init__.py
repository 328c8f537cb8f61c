"""The `spyre` Triton backend plugin (entry point `triton.backends: spyre`).

Triton imports `compiler` and `driver` from here. Setting TRITON_BACKEND=spyre makes spyre the
active backend even where a GPU backend is also active.
"""
import os

if os.environ.get("TRITON_BACKEND") == "spyre":
    os.environ["TRITON_DEFAULT_BACKEND"] = "spyre"
