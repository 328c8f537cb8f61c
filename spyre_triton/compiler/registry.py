"""Handler tables: each handler module (one per TTIR dialect family) fills its own table, and lower.py
merges them explicitly. An op handled by two modules is an error, not an override that depends on
import order."""
from __future__ import annotations


def table():
    """A module's handler table (TTIR op name -> handler) and the decorator that fills it."""
    handlers = {}

    def handles(*names):
        def register(fn):
            for n in names:
                if n in handlers:
                    raise ValueError(f"two handlers for {n} in {fn.__module__}")
                handlers[n] = fn
            return fn
        return register
    return handlers, handles


def merge(*modules) -> dict:
    """The handler tables of `modules` as one; each op must be handled by one module only."""
    merged = {}
    for m in modules:
        for name, fn in m.HANDLERS.items():
            if name in merged:
                raise ValueError(f"{name} is lowered by both {merged[name].__module__} and {m.__name__}")
            merged[name] = fn
    return merged
