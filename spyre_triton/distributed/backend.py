"""`spyreccl`: a c10d process group for spyre tensors, carried by gloo over CPU aliases.

A card's memory is host memory here, so a spyre tensor has a CPU view over the same bytes
(`_device.cpu_alias`, no copy). Every collective checks its tensors, hands their aliases to a gloo
process group built on the same store, and returns a Work whose wait() and future give back the spyre
tensors. Gloo moves the bytes (TCP between processes, across hosts as torch.distributed does); this
module adds no transport of its own. What gloo lacks is built here from gloo's own operations:
ReduceOp.AVG (a sum, then a division on the card), list all_to_all (sends and receives) and the
coalesced tensor variants (one gloo op per tensor). See docs/distributed.md.
"""
from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Callable, Sequence

import torch
import torch.distributed as dist
import torch._C._distributed_c10d as _c10d
from torch._C._distributed_c10d import ProcessGroup, Work

from ..perf import comm
from . import board

ReduceOp = dist.ReduceOp
# Codes the ranks compare before each collective (ProcessGroupSpyreCCL._agree)
_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2, torch.complex64,
           torch.uint16, torch.uint32, torch.uint64]
_KINDS = ["all_reduce", "all_reduce_coalesced", "broadcast", "reduce", "all_gather", "all_gather_coalesced",
          "all_gather_single", "gather", "scatter", "reduce_scatter", "reduce_scatter_single", "all_to_all_single",
          "all_to_all", "barrier"]
_HEADER_TAG = 1 << 30  # point-to-point headers travel on tag | _HEADER_TAG
_FLOAT_ONLY = {ReduceOp.AVG}
_INT_ONLY = {ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR}
_SUPPORTED = {ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG} | _INT_ONLY


def _dl16_f16(tensors: Sequence[torch.Tensor]) -> bool:
    """f16 spyre tensors in DLFloat16 mode, whose device memory holds DLFloat16's bits."""
    from .. import numerics
    return numerics.get_mode() == "dl16" and any(t.dtype == torch.float16 and t.device.type == "spyre"
                                                 for t in tensors)


def _then(*steps: Callable[[], None] | None) -> Callable[[], None] | None:
    """The steps that are given, in order, as one finish callback (None if there are none)."""
    steps = [s for s in steps if s is not None]
    if not steps:
        return None

    def run():
        for step in steps:
            step()
    return run


def _nothing():
    pass


class _HeldWorks:
    """Keeps each gloo Work this backend starts referenced from Python until a grace period after it was
    first seen complete, then releases it on the thread that starts the next collective.

    gloo's worker thread drops its reference to a work just after completing it. Were that the last
    reference, the work's tensors (whose Python objects torch keeps alive with them) would be freed on the
    worker, which must take the GIL to do it. While the interpreter shuts down, a thread that asks for the
    GIL is stopped in place, which aborts the process from inside a C++ destructor ("terminate called
    without an active exception", the same abort as pytorch/pytorch#190489). Held here, the worker's drop
    is never the last one."""

    GRACE_S = 0.5

    def __init__(self):
        self._lock = threading.Lock()
        self._works: list[list] = []  # [work, time first seen complete or None]

    def hold(self, work):
        now = time.monotonic()
        with self._lock:
            self._works.append([work, None])
            kept, released = [], []
            for entry in self._works:
                if entry[1] is None and entry[0].is_completed():
                    entry[1] = now
                (released if entry[1] is not None and now - entry[1] >= self.GRACE_S else kept).append(entry)
            self._works = kept
        del released  # dropped outside the lock: freeing a work may free tensors
        return work


_HELD = _HeldWorks()


class _Gloo:
    """The group's gloo backend, with every Work it returns held by _HELD."""

    def __init__(self, gloo):
        self._gloo = gloo

    def __getattr__(self, name):
        op = getattr(self._gloo, name)

        def run(*args, **kwargs):
            return _HELD.hold(op(*args, **kwargs))
        return run


class SpyreCCLWork(Work):
    """One collective in flight: gloo's works over the aliases, then this backend's finishing step.

    wait() and get_future() behave as torch's: wait() returns True once the outputs hold the result
    (or raises, naming the collective); the future's value is the list of spyre output tensors."""

    def __init__(self, pg: "ProcessGroupSpyreCCL", name: str, inner: Sequence[Work], outputs: list,
                 finish: Callable[[], None] | None = None):
        super().__init__()
        # rank and size, not the group: a Work outlives its group in gloo's callbacks, and a group freed on
        # gloo's own thread would join that thread (std::terminate)
        self._rank, self._size = pg.rank(), pg.size()
        self._name, self._inner, self._outputs = name, list(inner), outputs
        self._finish = finish or _nothing
        self._lock = threading.Lock()
        self._future = None
        self._start_ns = time.perf_counter_ns()
        # the transfer the profiler models (a coalesced op is modelled through the works it holds)
        self._modelled = comm.listeners and not any(isinstance(w, SpyreCCLWork) for w in self._inner)

    def _error(self, e: BaseException) -> RuntimeError:
        return RuntimeError(f"spyreccl: {self._name} failed on rank {self._rank} of {self._size}: {e}")

    def _finished(self):
        with self._lock:  # once, whether wait() or the future gets here first
            finish, self._finish = self._finish, None
        if finish is not None:
            finish()
            if self._modelled:
                self._record()

    def _record(self):
        def nbytes(x):
            return sum(nbytes(y) for y in x) if isinstance(x, (list, tuple)) else x.numel() * x.element_size()
        n = nbytes(self._outputs) * (self._size if self._name.startswith("reduce_scatter") else 1)
        comm.record(self._name, n, self._size, time.perf_counter_ns() - self._start_ns)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        try:
            for w in self._inner:
                w.wait(timeout)
        except RuntimeError as e:
            raise self._error(e) from e
        self._finished()
        return True

    def is_completed(self) -> bool:
        if self._finish is None:  # finished through wait() or the future (gloo's own flag may lag its future)
            return True
        done = all(w.is_completed() for w in self._inner)
        if done:
            self._finished()  # a completed Work's outputs hold the result (AVG's division included)
        return done

    def is_success(self) -> bool:
        return all(w.is_success() for w in self._inner)

    def result(self) -> list:
        self.wait()
        return self._outputs

    def source_rank(self) -> int:
        return self._inner[0].source_rank()

    def get_future(self) -> torch.futures.Future:
        if self._future is None:
            def done(f):
                try:
                    for g in f.value():
                        g.value()
                except RuntimeError as e:
                    raise self._error(e) from e
                self._finished()
                return self._outputs
            futs = [w.get_future() for w in self._inner]
            self._future = torch.futures.collect_all(futs).then(done)
        return self._future


class _PendingRecv(Work):
    """A receive whose header is on its way. A thread of its own waits for the header and posts the payload
    receive as soon as it has arrived, without waiting for wait(): gloo completes a send only once its
    receive is posted, so a receive posted lazily would hang programs that wait their sends first.
    Receives on one (source, tag) post their payloads in the order they were made."""

    def __init__(self, pg, header: Work, got, expect, host, src, tag, before: "_PendingRecv | None"):
        super().__init__()
        self.gloo, self.header, self.got, self.expect, self.host = pg._ops, header, got, expect, host
        self.src, self.tag = src, tag
        self.payload: Work | None = None
        self.error: BaseException | None = None
        self.posted = threading.Event()
        self.done = False
        self.lock = threading.Lock()
        self.future = torch.futures.Future()  # as gloo's receive futures: completed by wait()
        threading.Thread(target=self._post, args=(before,), name="spyreccl-recv", daemon=True).start()

    def _post(self, before):
        try:
            if before is not None:
                before.posted.wait()
            self.header.wait()
            src = self.src if self.src is not None else self.header.source_rank()
            n, d = self.got.tolist()
            mine_n, mine_d = self.expect.tolist()
            if (n, d) == (mine_n, mine_d):
                self.payload = self.gloo.recv(self.host, src, self.tag)
            else:
                self.error = RuntimeError(f"rank {src} sent {n} {str(_DTYPES[d])[6:]} elements, but this rank's "
                                          f"receive holds {mine_n} {str(_DTYPES[mine_d])[6:]} elements")
                # take the message off the wire, so that the sender completes and the next message matches
                self.payload = self.gloo.recv([torch.empty(n, dtype=_DTYPES[d])], src, self.tag)
        except RuntimeError as e:  # the header never came (a dead rank, the timeout)
            self.error = e
        finally:
            self.posted.set()

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        with self.lock:  # gloo's works may be waited once
            if not self.done:
                self.posted.wait()
                if self.payload is not None:
                    self.payload.wait(timeout)
                self.done = True
                if self.error is not None:
                    self.future.set_exception(self.error)
                else:
                    self.future.set_result(None)
        if self.error is not None:
            raise self.error
        return True

    def is_completed(self) -> bool:
        return self.done

    def is_success(self) -> bool:
        return self.error is None

    def source_rank(self) -> int:
        return self.src if self.src is not None else self.header.source_rank()

    def get_future(self) -> torch.futures.Future:
        return self.future


class ProcessGroupSpyreCCL(ProcessGroup):
    """The process group `init_process_group` builds for `spyreccl`: created as (store, rank, size, timeout)."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._ops = _Gloo(self._gloo)  # collectives go through here (see _HeldWorks)
        # gloo serves CPU tensors (the "cpu:gloo" half of a mixed backend string) and the group's
        # name, sequence numbers and shutdown, which c10d keeps per registered backend
        self._register_backend(torch.device("cpu"), ProcessGroup.BackendType.GLOO, self._gloo)
        self._set_default_backend(ProcessGroup.BackendType.GLOO)
        self._card: int | None = None  # this rank's card: set by the first spyre collective
        # gloo aborts the process when sizes differ and mixes dtypes silently: the ranks compare first,
        # through shared memory when they are all on this host (board.py), else in a gloo all_gather
        self._check = os.environ.get("SPYRE_CCL_CHECK", "1") != "0"
        self._seq = 0
        use_board = self._check and size > 1 and os.environ.get("SPYRE_CCL_BOARD", "1") != "0"
        self._board = board.attach(store, rank, size, 3 + 2 * size, timeout) if use_board else None
        self._last_recv: dict[tuple, _PendingRecv] = {}  # the latest receive per (source, tag)
        self._p2p_lock = threading.Lock()

    def getBackendName(self) -> str:
        return "spyreccl"

    # --- checks: every tensor on this rank's card, one dtype where the collective needs one ----------
    def _serves_cpu(self) -> bool:
        config = dist.distributed_c10d._world.pg_backend_config.get(self, "cpu:")  # a BackendConfig
        return "cpu:" in str(config)

    def _card_of(self, t: torch.Tensor, name: str) -> int:
        bound = getattr(self, "bound_device_id", None)
        if self._card is None:
            self._card = bound.index if bound is not None and bound.type == "spyre" and bound.index is not None \
                else t.device.index
        if t.device.index != self._card:
            raise ValueError(f"spyreccl: {name} on rank {self.rank()} got a tensor on {t.device}, but this "
                             f"rank's card is spyre:{self._card} (each rank uses one card: "
                             f"torch.spyre.set_device(local_rank) before its first collective)")
        return self._card

    def _host(self, tensors: Sequence[torch.Tensor], name: str) -> list[torch.Tensor]:
        """CPU tensors over the same bytes as `tensors` (no copies), after checking their devices."""
        types = {t.device.type for t in tensors}
        if len(types) > 1:
            raise ValueError(f"spyreccl: {name} on rank {self.rank()} mixes devices "
                             f"({', '.join(sorted(str(t.device) for t in tensors))}); give it tensors of one card")
        if types == {"cpu"}:
            if not self._serves_cpu():
                raise ValueError(f"spyreccl: {name} on rank {self.rank()} got a CPU tensor; this process group "
                                 f"serves spyre tensors only (move it with .to('spyre'), or create the group with "
                                 f"backend='cpu:gloo,spyre:spyreccl')")
            return list(tensors)
        if types and types != {"spyre"}:
            raise ValueError(f"spyreccl: {name} on rank {self.rank()} got a tensor on {tensors[0].device}")
        from ..device import _C
        out = []
        for t in tensors:
            self._card_of(t, name)
            if not t.is_contiguous():
                raise ValueError(f"spyreccl: {name} on rank {self.rank()} needs contiguous tensors, got one "
                                 f"of shape {tuple(t.shape)} and strides {t.stride()} (call .contiguous())")
            out.append(_C.cpu_alias(t))
        return out

    def _same_dtype(self, tensors: Sequence[torch.Tensor], name: str) -> None:
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) > 1:
            raise TypeError(f"spyreccl: {name} on rank {self.rank()} mixes dtypes {sorted(map(str, dtypes))}")

    def _agree(self, name: str, dtype: torch.dtype | None, numel: int, send: Sequence[int] = (),
               recv: Sequence[int] = ()) -> None:
        """Every rank states the collective, dtype and element count it is about to run (for all-to-all:
        the elements it sends to and receives from each rank) on the group's shared-memory board, or in
        one small gloo all_gather across hosts, and all raise if they disagree, where gloo would abort
        the process or mix dtypes without a word."""
        if not self._check:
            return
        n = self.size()
        mine = [_KINDS.index(name), -1 if dtype is None else _DTYPES.index(dtype), numel]
        mine += list(send) + [0] * (n - len(send)) + list(recv) + [0] * (n - len(recv))
        self._seq += 1
        try:
            if self._board is not None:
                rows = self._board.exchange(self._seq, mine)
            else:
                everyone = torch.zeros(n * len(mine), dtype=torch.int64)
                self._ops._allgather_base(everyone, torch.tensor(mine, dtype=torch.int64),
                                          _c10d.AllgatherOptions()).wait()
                rows = everyone.view(n, len(mine)).tolist()
        except RuntimeError as e:
            raise RuntimeError(f"spyreccl: {name} failed on rank {self.rank()} of {n}: {e}") from e

        def says(r):
            k, d, e = rows[r][:3]
            return f"rank {r}: {_KINDS[k]}" + ("" if d < 0 else f" of {e} {str(_DTYPES[d])[6:]} elements")
        if name in ("all_to_all", "all_to_all_single"):
            bad = rows[0][:2] != rows[self.rank()][:2] or any(
                rows[r][3 + p] != rows[p][3 + n + r] for r in range(n) for p in range(n))
        elif name == "barrier":
            bad = any(row[0] != rows[0][0] for row in rows)
        else:
            bad = any(row[:3] != rows[0][:3] for row in rows)
        if bad:
            raise RuntimeError(f"spyreccl: {name} on rank {self.rank()}: the ranks disagree ("
                               + "; ".join(says(r) for r in range(n)) + ")")

    def _reduce_op(self, op, dtype: torch.dtype, name: str):
        """The op gloo runs (AVG runs as SUM) and the division to finish with (or None)."""
        op = getattr(op, "op", op)  # a ReduceOp object (options carry these) to its RedOpType
        if op not in _SUPPORTED:
            raise ValueError(f"spyreccl: {name} does not support {op} (supported: SUM, AVG, PRODUCT, MIN, MAX, "
                             f"and BAND, BOR, BXOR on integers)")
        if op in _FLOAT_ONLY and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"spyreccl: {name} with {op} needs a floating-point tensor, got {dtype}")
        if op in _INT_ONLY and (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"spyreccl: {name} with {op} needs an integer or bool tensor, got {dtype}")
        return (ReduceOp.SUM, self.size()) if op == ReduceOp.AVG else (op, None)

    def _work(self, name, inner, outputs, finish=None) -> SpyreCCLWork:
        return SpyreCCLWork(self, name, inner if isinstance(inner, (list, tuple)) else [inner], outputs, finish)

    @staticmethod
    def _divide(tensors: Sequence[torch.Tensor], n: int | None):
        if n is None:
            return None

        def finish():
            for t in tensors:
                t.div_(n)
        return finish

    @staticmethod
    def _summands(tensors: Sequence[torch.Tensor], h: list[torch.Tensor]):
        """Host tensors a reduction adds, and what to run once it has, given the tensors' host aliases `h`:
        in DLFloat16 mode f16 device memory holds DLFloat16's bits, which gloo cannot add, so it adds
        float32 copies of their values and the sums are stored back as DLFloat16 (rounded once). Otherwise
        the aliases, and nothing."""
        if not _dl16_f16(tensors):
            return h, None
        from ..device import _C
        values = [_C.dl16_values(t) for t in tensors]

        def store():
            for t, v in zip(tensors, values):
                _C.write_f16(t, v)
        return values, store

    # --- collectives ----------------------------------------------------------------------------------
    def broadcast(self, tensors, opts):
        h = self._host(tensors, "broadcast")
        self._same_dtype(tensors, "broadcast")
        self._agree("broadcast", tensors[0].dtype, sum(t.numel() for t in tensors))
        return self._work("broadcast", self._ops.broadcast(h, opts), list(tensors))

    def allreduce(self, tensors, opts):
        h, store = self._summands(tensors, self._host(tensors, "all_reduce"))
        self._same_dtype(tensors, "all_reduce")
        op, n = self._reduce_op(opts.reduceOp, tensors[0].dtype, "all_reduce")
        self._agree("all_reduce", tensors[0].dtype, sum(t.numel() for t in tensors))
        o = dist.AllreduceOptions()
        o.reduceOp, o.timeout = op, opts.timeout
        return self._work("all_reduce", self._ops.allreduce(h, o), list(tensors),
                          _then(self._divide(h, n), store))

    def allreduce_coalesced(self, tensors, opts):
        h, store = self._summands(tensors, self._host(tensors, "all_reduce_coalesced"))
        self._same_dtype(tensors, "all_reduce_coalesced")
        op, n = self._reduce_op(opts.reduceOp, tensors[0].dtype, "all_reduce_coalesced")
        self._agree("all_reduce_coalesced", tensors[0].dtype, sum(t.numel() for t in tensors))
        o = dist.AllreduceCoalescedOptions()
        o.reduceOp, o.timeout = op, opts.timeout
        return self._work("all_reduce_coalesced", self._ops.allreduce_coalesced(h, o), list(tensors),
                          _then(self._divide(h, n), store))

    def reduce(self, tensors, opts):
        h, store = self._summands(tensors, self._host(tensors, "reduce"))
        op, n = self._reduce_op(opts.reduceOp, tensors[0].dtype, "reduce")
        self._agree("reduce", tensors[0].dtype, sum(t.numel() for t in tensors))
        o = dist.ReduceOptions()
        o.reduceOp, o.rootRank, o.rootTensor, o.timeout = op, opts.rootRank, opts.rootTensor, opts.timeout
        finish = _then(self._divide(h, n), store) if self.rank() == opts.rootRank else None
        return self._work("reduce", self._ops.reduce(h, o), list(tensors), finish)

    def allgather(self, output_lists, inputs, opts):
        flat = [t for ts in output_lists for t in ts]
        h_in = self._host(list(inputs) + flat, "all_gather")[:len(inputs)]
        h_out = [self._host(ts, "all_gather") for ts in output_lists]
        self._same_dtype(list(inputs) + flat, "all_gather")
        self._agree("all_gather", inputs[0].dtype, sum(t.numel() for t in inputs))
        return self._work("all_gather", self._ops.allgather(h_out, h_in, opts), list(output_lists))

    def allgather_coalesced(self, output_lists, inputs, opts):
        h_in = self._host(inputs, "all_gather_coalesced")
        h_out = [self._host(ts, "all_gather_coalesced") for ts in output_lists]
        self._same_dtype(list(inputs), "all_gather_coalesced")
        self._agree("all_gather_coalesced", inputs[0].dtype, sum(t.numel() for t in inputs))
        return self._work("all_gather_coalesced", self._ops.allgather_coalesced(h_out, h_in, opts),
                          list(output_lists))

    def all_gather_single(self, output, input, opts):
        h_out, h_in = self._host([output, input], "all_gather_single")
        self._same_dtype([output, input], "all_gather_single")
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"spyreccl: all_gather_single on rank {self.rank()}: the output has {output.numel()} "
                             f"elements, not world size {self.size()} x the input's {input.numel()}")
        self._agree("all_gather_single", input.dtype, input.numel())
        return self._work("all_gather_single", self._ops._allgather_base(h_out, h_in, opts), [output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        works = [self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._work("all_gather_single_coalesced", works, list(outputs))

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, inputs, opts):
        flat = [t for ts in output_lists for t in ts]
        h_in = self._host(list(inputs) + flat, "gather")[:len(inputs)]
        h_out = [self._host(ts, "gather") for ts in output_lists]
        self._same_dtype(list(inputs) + flat, "gather")
        self._agree("gather", inputs[0].dtype, sum(t.numel() for t in inputs))
        return self._work("gather", self._ops.gather(h_out, h_in, opts), list(output_lists))

    def scatter(self, outputs, input_lists, opts):
        flat = [t for ts in input_lists for t in ts]
        h_out = self._host(list(outputs) + flat, "scatter")[:len(outputs)]
        h_in = [self._host(ts, "scatter") for ts in input_lists]
        self._same_dtype(list(outputs) + flat, "scatter")
        self._agree("scatter", outputs[0].dtype, sum(t.numel() for t in outputs))
        return self._work("scatter", self._ops.scatter(h_out, h_in, opts), list(outputs))

    def reduce_scatter(self, outputs, input_lists, opts):
        flat = [t for ts in input_lists for t in ts]
        h_out, store = self._summands(outputs, self._host(list(outputs) + flat, "reduce_scatter")[:len(outputs)])
        h_in = [self._summands(ts, self._host(ts, "reduce_scatter"))[0] for ts in input_lists]
        self._same_dtype(list(outputs) + flat, "reduce_scatter")
        op, n = self._reduce_op(opts.reduceOp, outputs[0].dtype, "reduce_scatter")
        self._agree("reduce_scatter", outputs[0].dtype, sum(t.numel() for t in outputs))
        o = dist.ReduceScatterOptions()
        o.reduceOp, o.timeout = op, opts.timeout
        return self._work("reduce_scatter", self._ops.reduce_scatter(h_out, h_in, o), list(outputs),
                          _then(self._divide(h_out, n), store))

    def reduce_scatter_single(self, output, input, opts):
        h_out, h_in = self._host([output, input], "reduce_scatter_single")
        (h_out,), store = self._summands([output], [h_out])
        (h_in,), _ = self._summands([input], [h_in])
        self._same_dtype([output, input], "reduce_scatter_single")
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"spyreccl: reduce_scatter_single on rank {self.rank()}: the input has {input.numel()} "
                             f"elements, not world size {self.size()} x the output's {output.numel()}")
        op, n = self._reduce_op(opts.reduceOp, output.dtype, "reduce_scatter_single")
        self._agree("reduce_scatter_single", output.dtype, output.numel())
        o = dist.ReduceScatterOptions()
        o.reduceOp, o.timeout = op, opts.timeout
        return self._work("reduce_scatter_single", self._ops._reduce_scatter_base(h_out, h_in, o), [output],
                          _then(self._divide([h_out], n), store))

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        works = [self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._work("reduce_scatter_single_coalesced", works, list(outputs))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        h_out, h_in = self._host([output, input], "all_to_all_single")
        self._same_dtype([output, input], "all_to_all_single")
        self._agree("all_to_all_single", input.dtype, input.numel(),
                    self._split_elems(input, input_splits), self._split_elems(output, output_splits))
        return self._work("all_to_all_single",
                          self._ops.alltoall_base(h_out, h_in, list(output_splits), list(input_splits), opts),
                          [output])

    alltoall_base = all_to_all_single

    def _split_elems(self, t: torch.Tensor, splits: Sequence[int]) -> list[int]:
        """Elements per rank of an all_to_all_single buffer: its rows split as given, or evenly."""
        row = t[0].numel() if t.dim() > 0 and t.shape[0] > 0 else 1
        if len(splits) == 0:
            if t.dim() == 0 or t.shape[0] % self.size():
                raise ValueError(f"spyreccl: all_to_all_single on rank {self.rank()}: {tuple(t.shape)} does not "
                                 f"split evenly over {self.size()} ranks; give the split sizes")
            return [t.numel() // self.size()] * self.size()
        if len(splits) != self.size() or sum(splits) != (t.shape[0] if t.dim() else 0):
            raise ValueError(f"spyreccl: all_to_all_single on rank {self.rank()}: split sizes {list(splits)} do "
                             f"not cover the {tuple(t.shape)} buffer in {self.size()} parts")
        return [n * row for n in splits]

    def alltoall(self, outputs, inputs, opts):
        """Peer by peer: a send of inputs[p] and a receive into outputs[p] for every other rank p."""
        if len(outputs) != self.size() or len(inputs) != self.size():
            raise ValueError(f"spyreccl: all_to_all on rank {self.rank()} needs {self.size()} input and output "
                             f"tensors, got {len(inputs)} and {len(outputs)}")
        h_out = self._host(outputs, "all_to_all")
        h_in = self._host(inputs, "all_to_all")
        self._same_dtype(list(outputs) + list(inputs), "all_to_all")
        self._agree("all_to_all", inputs[0].dtype, sum(t.numel() for t in inputs),
                    [t.numel() for t in inputs], [t.numel() for t in outputs])
        me = self.rank()
        h_out[me].copy_(h_in[me])
        works = []
        for p in range(self.size()):
            if p != me:
                works.append(self._ops.send([h_in[p]], p, 0))
                works.append(self._ops.recv([h_out[p]], p, 0))
        return self._work("all_to_all", works, list(outputs))

    # --- point to point -------------------------------------------------------------------------------
    # gloo aborts the receiving process when a message is longer than the receive buffer, and fills a
    # longer buffer in part without a word. So every send is preceded by a header (element count and
    # dtype) on a tag of its own, and a receive posts its payload once it has read the header
    # (_PendingRecv): a mismatch drains the message into a scratch buffer and raises on the receiving
    # rank.
    def _header(self, tensors, name):
        self._same_dtype(tensors, name)
        return torch.tensor([sum(t.numel() for t in tensors), _DTYPES.index(tensors[0].dtype)], dtype=torch.int64)

    def _check_tag(self, tag, name):
        if not 0 <= tag < _HEADER_TAG:
            raise ValueError(f"spyreccl: {name} on rank {self.rank()}: tag {tag} is outside [0, 2**30) "
                             f"(larger tags carry spyreccl's message headers)")

    def send(self, tensors, dst, tag):
        host = self._host(tensors, "send")
        if not self._check:
            return self._work("send", self._ops.send(host, dst, tag), list(tensors))
        self._check_tag(tag, "send")
        header = self._ops.send([self._header(tensors, "send")], dst, tag | _HEADER_TAG)
        return self._work("send", [header, self._ops.send(host, dst, tag)], list(tensors))

    def recv(self, tensors, src, tag):
        return self._recv(tensors, src, tag)

    def recv_anysource(self, tensors, tag):
        return self._recv(tensors, None, tag)

    def _recv(self, tensors, src, tag):
        host = self._host(tensors, "recv")
        if not self._check:
            inner = self._ops.recv(host, src, tag) if src is not None else self._ops.recv_anysource(host, tag)
            return self._work("recv", inner, list(tensors))
        self._check_tag(tag, "recv")
        expect = self._header(tensors, "recv")
        got = torch.zeros(2, dtype=torch.int64)
        header = (self._ops.recv([got], src, tag | _HEADER_TAG) if src is not None
                  else self._ops.recv_anysource([got], tag | _HEADER_TAG))
        with self._p2p_lock:
            before = self._last_recv.get((src, tag))
            pending = self._last_recv[(src, tag)] = _PendingRecv(self, header, got, expect, host, src, tag, before)
        return self._work("recv", [pending], list(tensors))

    def barrier(self, opts=None):
        self._agree("barrier", None, 0)
        return self._work("barrier", self._ops.barrier(opts if opts is not None else dist.BarrierOptions()), [])
