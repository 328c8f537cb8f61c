"""`compare(model, inputs)`: is my model numerically fine on the card?

The model runs three ways: on the CPU in float32 (the reference), compiled on spyre in float16 with IEEE
binary16 numerics, and the same with the card's DLFloat16 numerics (`SPYRE_NUMERICS=dl16`). Forward hooks
on the leaf modules record each layer's output; the report gives, per layer and per model output, the
error of each spyre run against the reference, and for logits how often their top-1 class agrees.

Errors of a tensor `y` against the reference `r` (both as float64):
    max_abs  = max |y - r|             mean_abs = mean |y - r|
    max_rel  = max |y - r| / max |r|   mean_rel = mean |y - r| / mean |r|   (normwise: no blow-up at r = 0)
    top1     = share of positions whose argmax over the last dimension equals the reference's
    nonfinite = elements that are inf or NaN where the reference is finite
"""
from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field

import torch

from . import MODES, mode as _mode

__all__ = ["compare", "Report", "Row"]


@dataclass
class Row:
    name: str        # module path (layer) or output path (output)
    kind: str        # 'layer' | 'output'
    mode: str        # 'ieee' | 'dl16'
    max_abs: float
    mean_abs: float
    max_rel: float
    mean_rel: float
    nonfinite: int
    top1: float | None = None  # outputs with a last dimension of at least 2 (logits)


@dataclass
class Report:
    rows: list = field(default_factory=list)
    modes: tuple = ()
    dtype: str = "float16"

    def layer_rows(self, mode: str | None = None) -> list:
        return [r for r in self.rows if r.kind == "layer" and (mode is None or r.mode == mode)]

    def output_rows(self, mode: str | None = None) -> list:
        return [r for r in self.rows if r.kind == "output" and (mode is None or r.mode == mode)]

    def get(self, name: str, mode: str, kind: str | None = None) -> Row:
        for r in self.rows:
            if r.name == name and r.mode == mode and (kind is None or r.kind == kind):
                return r
        raise KeyError(f"no {kind or 'row'} {name!r} in mode {mode!r}")

    def summary(self) -> dict:
        """Per mode: the worst layer (by max_rel), the output errors and top-1 agreement."""
        out = {}
        for m in self.modes:
            layers = self.layer_rows(m)
            worst = max(layers, key=lambda r: r.max_rel if math.isfinite(r.max_rel) else math.inf, default=None)
            outs = self.output_rows(m)
            out[m] = {"worst_layer": worst.name if worst else None,
                      "worst_layer_max_rel": worst.max_rel if worst else None,
                      "output_max_rel": max((r.max_rel for r in outs), default=None),
                      "top1": min((r.top1 for r in outs if r.top1 is not None), default=None),
                      "nonfinite": sum(r.nonfinite for r in self.rows if r.mode == m)}
        return out

    def to_dict(self) -> dict:
        return {"modes": list(self.modes), "dtype": self.dtype, "rows": [asdict(r) for r in self.rows],
                "summary": self.summary()}

    def table(self) -> str:
        """Per layer and output, side by side for each mode: max/mean relative error (and max abs, top-1)."""
        names = []
        for r in self.rows:
            if (r.kind, r.name) not in names:
                names.append((r.kind, r.name))
        head = f"{'':6} {'layer / output':40}"
        for m in self.modes:
            head += f" | {m + ' max_abs':>12} {'max_rel':>9} {'mean_rel':>9} {'top1':>6} {'!fin':>5}"
        lines = [f"spyre {self.dtype} against CPU float32", head, "-" * len(head)]
        for kind, name in names:
            line = f"{kind:6} {name[-40:]:40}"
            for m in self.modes:
                try:
                    r = self.get(name, m, kind)
                except KeyError:
                    line += " | " + " " * 45
                    continue
                top1 = f"{r.top1:6.1%}" if r.top1 is not None else f"{'':6}"
                line += f" | {r.max_abs:12.4g} {r.max_rel:9.3g} {r.mean_rel:9.3g} {top1} {r.nonfinite:5d}"
            lines.append(line)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)):
        for e in x:
            t = _first_tensor(e)
            if t is not None:
                return t
    if isinstance(x, dict):
        for e in x.values():
            t = _first_tensor(e)
            if t is not None:
                return t
    return None


def _flatten(x, prefix="out"):
    """(path, tensor) for the floating-point tensors of a model's output (tuples, dicts, ModelOutput)."""
    if isinstance(x, torch.Tensor):
        return [(prefix, x)] if x.is_floating_point() else []
    items = []
    if isinstance(x, dict) or hasattr(x, "items"):
        for k, v in x.items():
            items += _flatten(v, f"{prefix}.{k}")
    elif isinstance(x, (tuple, list)):
        for i, v in enumerate(x):
            items += _flatten(v, f"{prefix}[{i}]")
    return items


def _leaves(model: torch.nn.Module):
    return [(n, m) for n, m in model.named_modules() if n and not any(True for _ in m.children())]


def _run(model, inputs, kwargs, record: dict, fn=None):
    """Run (fn or model)(*inputs, **kwargs) (fn: model compiled) with a forward hook on each leaf module of
    model storing its output in record."""
    handles = []
    for name, m in _leaves(model):
        def hook(mod, args, out, name=name):
            t = _first_tensor(out)
            if t is not None and t.is_floating_point():
                record[name] = t.detach()
        handles.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad():
            return (model if fn is None else fn)(*inputs, **kwargs)
    finally:
        for h in handles:
            h.remove()


def _errors(y: torch.Tensor, r: torch.Tensor) -> dict:
    y = y.detach().to("cpu", torch.float64)
    r = r.detach().to("cpu", torch.float64)
    if y.shape != r.shape:
        raise ValueError(f"compare: shape {tuple(y.shape)} on spyre against {tuple(r.shape)} on the CPU")
    fin = torch.isfinite(r)
    bad = int((fin & ~torch.isfinite(y)).sum())
    d = (y - r).abs()[fin & torch.isfinite(y)]
    ref = r.abs()[fin]
    if d.numel() == 0:
        return {"max_abs": math.nan, "mean_abs": math.nan, "max_rel": math.nan, "mean_rel": math.nan, "nonfinite": bad}
    ref_max = float(ref.max()) if ref.numel() else 0.0
    ref_mean = float(ref.mean()) if ref.numel() else 0.0
    mx, mean = float(d.max()), float(d.mean())
    return {"max_abs": mx, "mean_abs": mean, "max_rel": mx / ref_max if ref_max else (0.0 if mx == 0 else math.inf),
            "mean_rel": mean / ref_mean if ref_mean else (0.0 if mean == 0 else math.inf), "nonfinite": bad}


def _top1(y: torch.Tensor, r: torch.Tensor) -> float | None:
    if r.dim() < 1 or r.shape[-1] < 2:
        return None
    a = y.detach().to("cpu", torch.float32).argmax(-1)
    b = r.detach().to("cpu", torch.float32).argmax(-1)
    return float((a == b).double().mean())


def _to(x, device, dtype):
    if isinstance(x, torch.Tensor):
        return x.to(device, dtype) if x.is_floating_point() else x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(_to(e, device, dtype) for e in x)
    if isinstance(x, dict):
        return {k: _to(v, device, dtype) for k, v in x.items()}
    return x


def _move(model, device, dtype):
    m = copy.deepcopy(model).to(device=device, dtype=dtype)
    if hasattr(m, "tie_weights"):  # Module.to("spyre") makes new parameters: tie shared ones again
        m.tie_weights()
    return m.eval()


def compare(model: torch.nn.Module, inputs, kwargs: dict | None = None, modes=("ieee", "dl16"),
            dtype: torch.dtype = torch.float16, device: str = "spyre", compile: bool = True) -> Report:
    """Run `model(*inputs, **kwargs)` on the CPU in float32 and on `device` in `dtype` in each numerics mode
    (compiled with torch.compile unless compile=False), and report each layer's and output's error.

    `model` is left as it is (each run uses a copy). Integer inputs (token ids) keep their dtype."""
    kwargs = dict(kwargs or {})
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"compare: numerics mode {m!r} is not one of {', '.join(MODES)}")
    ref_layers: dict = {}
    ref_model = _move(model, "cpu", torch.float32)
    ref_out = _run(ref_model, _to(inputs, "cpu", torch.float32), _to(kwargs, "cpu", torch.float32), ref_layers)
    ref_outs = dict(_flatten(ref_out))
    report = Report(modes=tuple(modes), dtype=str(dtype).replace("torch.", ""))
    dev_model = _move(model, device, dtype)
    fwd = torch.compile(dev_model) if compile else dev_model
    for m in modes:
        layers: dict = {}
        with _mode(m):
            out = _run(dev_model, _to(inputs, device, dtype), _to(kwargs, device, dtype), layers, fwd)
            layers = {k: v.to("cpu", torch.float32) for k, v in layers.items()}
            outs = {k: v.to("cpu", torch.float32) for k, v in _flatten(out)}
        for name, r in ref_layers.items():
            if name in layers and layers[name].shape == r.shape:
                report.rows.append(Row(name, "layer", m, **_errors(layers[name], r)))
        for name, r in ref_outs.items():
            if name in outs:
                report.rows.append(Row(name, "output", m, **_errors(outs[name], r), top1=_top1(outs[name], r)))
    return report
