"""The Spyre compiler: TTIR parser (ttir.py), lowering (lower.py, ops.py), LX allocation (lx_alloc.py)."""
