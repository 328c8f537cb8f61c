/* The interpreter as seen from Python: `spyre_triton._runtime.Kernel`, launch statistics, and
 * the exceptions DeviceError / DeviceAssertionError.
 *
 *   k = Kernel(binary)                 # parse + validate + decode; ValueError for a bad binary
 *   k.name, k.n_sregs, k.lx_bytes, k.num_args, k.n_insns
 *   k.launch(device, gx, gy, gz, args, num_threads=0)
 *   k.stats() -> {"launches", "programs", "streamed_results", "instructions": {op: count}, "total_instructions"}
 *   set_counting(True)                 # count instructions per opcode (off: no cost)
 */
#define _GNU_SOURCE
#include "runtime.h" /* Python.h first */

#include <inttypes.h>
#include <stddef.h>
#include <structmember.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fp.h"
#include "interp.h"

_Static_assert(sizeof(spyre_insn) == 32, "instruction layout");
_Static_assert(sizeof(spyre_desc) == SPYRE_DESC_BYTES, "descriptor layout (isa.DESC_STRUCT)");

int spy_host_cpus(void); /* launch.c */
const char *spy_simd_name(void);  /* loops.c */

static PyObject *DeviceError, *DeviceAssertionError;
static PyObject *str_data_ptr; /* interned "data_ptr": a pointer argument's address, one method call per launch */
static PyObject *str_calls;    /* interned "calls": a Triton HookChain's list of hooks */

typedef struct {
    PyObject_HEAD SpyKernel *k;
} KernelObject;

static int Kernel_init(KernelObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"binary", NULL};
    Py_buffer view;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*:Kernel", kwlist, &view)) return -1;
    if (self->k) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "Kernel is already initialised");
        return -1;
    }
    SpyKernel *k = spy_kernel_new();
    if (!k) {
        PyBuffer_Release(&view);
        PyErr_NoMemory();
        return -1;
    }
    const int rc = spy_kernel_load(k, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    if (rc < 0) {
        spy_kernel_free(k);
        return -1;
    }
    self->k = k;
    return 0;
}

static void Kernel_dealloc(KernelObject *self) {
    spy_kernel_free(self->k);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static SpyKernel *get_k(KernelObject *self) {
    if (!self->k) PyErr_SetString(PyExc_RuntimeError, "Kernel is not initialised");
    return self->k;
}

/* ---- errors ------------------------------------------------------------------------------------- */
static int set_attr(PyObject *o, const char *name, PyObject *v) {
    if (!v) return -1;
    const int r = PyObject_SetAttrString(o, name, v);
    Py_DECREF(v);
    return r;
}

static PyObject *opt_str(const char *s) {
    if (s) return PyUnicode_FromString(s);
    Py_RETURN_NONE;
}

/* Raise `type(msg)` with attributes: kernel, file, line, address, pid (tuple or None), and extras. */
static void raise_device(PyObject *type, const char *msg, const SpyKernel *k, const SpyLoc *loc, PyObject *address,
                         const uint32_t *pid, PyObject *extras) {
    PyObject *exc = PyObject_CallFunction(type, "s", msg);
    if (!exc) {
        Py_XDECREF(address);
        Py_XDECREF(extras);
        return;
    }
    int ok = set_attr(exc, "kernel", PyUnicode_FromString(k->name)) == 0 &&
             set_attr(exc, "file", opt_str(loc ? loc->file : NULL)) == 0 &&
             set_attr(exc, "line", loc ? PyLong_FromLong(loc->line) : Py_NewRef(Py_None)) == 0 &&
             set_attr(exc, "address", address ? address : Py_NewRef(Py_None)) == 0 &&
             set_attr(exc, "pid", pid ? Py_BuildValue("(III)", pid[0], pid[1], pid[2]) : Py_NewRef(Py_None)) == 0;
    if (ok && extras) {
        PyObject *key, *val;
        Py_ssize_t pos = 0;
        while (ok && PyDict_Next(extras, &pos, &key, &val)) ok = PyObject_SetAttr(exc, key, val) == 0;
    }
    Py_XDECREF(extras);
    if (ok) PyErr_SetObject(type, exc);
    Py_DECREF(exc);
}

static void raise_fault(const SpyKernel *k, const SpyLaunch *L) {
    const SpyFault *f = &L->fault;
    const int32_t li = f->pc < k->n_insns ? k->insn_loc[f->pc] : -1;
    const SpyLoc *loc = li >= 0 ? &k->locs[li] : NULL;
    char where[1024];
    if (loc) snprintf(where, sizeof where, "%s:%ld: %s", loc->file, loc->line, loc->text);
    else snprintf(where, sizeof where, "<no source location> (instruction %u, %s)", f->pc,
                  spyre_opcode_names[k->code[f->pc].op]);
    char msg[2048];
    if (f->kind == FAULT_ASSERT) {
        const char *m = k->strings[f->str];
        if (loc)
            snprintf(msg, sizeof msg, "%s:%ld: device-side assertion failed in kernel '%s' (program pid (%u, %u, %u), "
                     "element %" PRIu64 "): %s\n    %s", loc->file, loc->line, k->name, f->pid[0], f->pid[1], f->pid[2],
                     f->elem, m, loc->text);
        else
            snprintf(msg, sizeof msg, "device-side assertion failed in kernel '%s' (program pid (%u, %u, %u), element %"
                     PRIu64 "): %s\n    at %s", k->name, f->pid[0], f->pid[1], f->pid[2], f->elem, m, where);
        raise_device(DeviceAssertionError, msg, k, loc, NULL, f->pid,
                     Py_BuildValue("{s:s}", "message", m));
        return;
    }
    if (f->kind == FAULT_NOMEM) {
        snprintf(msg, sizeof msg, "kernel '%s' (program pid (%u, %u, %u)) ran out of host memory at %s", k->name,
                 f->pid[0], f->pid[1], f->pid[2], where);
        raise_device(DeviceError, msg, k, loc, NULL, f->pid, NULL);
        return;
    }
    char near[512];
    const uint64_t base = f->nearest.base, size = f->nearest.size, end = base + size;
    const char *arg = f->arg ? k->args[f->arg - 1].name : NULL;
    if (f->kind == FAULT_FREED) {
        snprintf(msg, sizeof msg, "%s of %" PRIu64 " bytes at address 0x%" PRIx64 " through argument '%s' in kernel '%s' "
                 "(program pid (%u, %u, %u), element %" PRIu64 "): the argument's allocation 0x%" PRIx64 " of %" PRIu64
                 " bytes was freed while the launch ran\n    at %s", f->access, f->len, f->addr, arg, k->name, f->pid[0],
                 f->pid[1], f->pid[2], f->elem, base, size, where);
        raise_device(DeviceError, msg, k, loc, PyLong_FromUnsignedLongLong(f->addr), f->pid,
                     Py_BuildValue("{s:s,s:K,s:(KK),s:i,s:s,s:O}", "access", f->access, "size", (unsigned long long)f->len,
                                   "allocation", (unsigned long long)base, (unsigned long long)size, "device", L->device,
                                   "arg", arg, "freed", Py_True));
        return;
    }
    if (arg && base == 0) {
        snprintf(near, sizeof near, "argument '%s' points into no allocation (a null pointer or an empty tensor)", arg);
    } else if (arg && f->kind == FAULT_OOB) {
        /* the access derives from `arg`: say where it falls relative to that argument's allocation */
        if (f->addr >= end)
            snprintf(near, sizeof near, "%" PRIu64 " bytes after the end of argument '%s' (allocation 0x%" PRIx64
                     " of %" PRIu64 " bytes)", f->addr - end, arg, base, size);
        else if (f->addr < base)
            snprintf(near, sizeof near, "%" PRIu64 " bytes before the start of argument '%s' (allocation 0x%" PRIx64
                     " of %" PRIu64 " bytes)", base - f->addr, arg, base, size);
        else
            snprintf(near, sizeof near, "it overruns the end of argument '%s' (allocation 0x%" PRIx64 " of %" PRIu64
                     " bytes) by %" PRIu64 " bytes", arg, base, size, f->addr + f->len - end);
    } else if (base == 0) {
        snprintf(near, sizeof near, "spyre:%d has no allocations", L->device);
    } else if (f->kind == FAULT_MISALIGNED) {
        snprintf(near, sizeof near, "the address is not a multiple of %" PRIu64 " (allocation 0x%" PRIx64 " of %" PRIu64 " bytes)",
                 f->len, base, size);
    } else if (f->addr >= end) {
        snprintf(near, sizeof near, "%" PRIu64 " bytes after the end of the nearest allocation 0x%" PRIx64 " of %" PRIu64 " bytes",
                 f->addr - end, base, size);
    } else if (f->addr < base) {
        snprintf(near, sizeof near, "%" PRIu64 " bytes before the start of the nearest allocation 0x%" PRIx64 " of %" PRIu64 " bytes",
                 base - f->addr, base, size);
    } else {
        snprintf(near, sizeof near, "it overruns the end of the allocation 0x%" PRIx64 " of %" PRIu64 " bytes by %" PRIu64 " bytes",
                 base, size, f->addr + f->len - end);
    }
    snprintf(msg, sizeof msg, "%s %s of %" PRIu64 " bytes at address 0x%" PRIx64 " in kernel '%s' (program pid (%u, %u, %u), "
             "element %" PRIu64 "): %s\n    at %s", f->kind == FAULT_MISALIGNED ? "misaligned" : "out-of-bounds",
             f->access, f->len, f->addr, k->name, f->pid[0], f->pid[1], f->pid[2], f->elem, near, where);
    PyObject *alloc = base ? Py_BuildValue("(KK)", (unsigned long long)base, (unsigned long long)size) : Py_NewRef(Py_None);
    raise_device(DeviceError, msg, k, loc, PyLong_FromUnsignedLongLong(f->addr), f->pid,
                 Py_BuildValue("{s:s,s:K,s:N,s:i,s:N}", "access", f->access, "size", (unsigned long long)f->len,
                               "allocation", alloc, "device", L->device, "arg", opt_str(arg)));
}

/* ---- launch ------------------------------------------------------------------------------------- */
/* The launch value of argument g; *alloc gets the allocation a pointer argument points into ({0, 0} for
 * none: a null pointer), which the accesses derived from it are checked against. */
static int pack_arg(const SpyKernel *k, const SpyArg *g, PyObject *v, int device, uint64_t *bits,
                    SpyArgAlloc *alloc) {
    *bits = 0;
    alloc->base = 0;
    alloc->size = 0;
    alloc->id = 0;
    if (g->kind == ARG_CONSTEXPR || g->kind == ARG_NONE) return 0;
    if (g->kind == ARG_PTR) {
        uint64_t addr = 0;
        if (v != Py_None) {
            PyObject *num;
            if (PyLong_Check(v)) {
                num = Py_NewRef(v);
            } else {
                num = PyObject_CallMethodNoArgs(v, str_data_ptr);
                if (!num) {
                    if (!PyErr_ExceptionMatches(PyExc_AttributeError) || PyObject_HasAttr(v, str_data_ptr)) return -1;
                    PyErr_Clear();
                    PyErr_Format(PyExc_TypeError, "kernel '%s': argument '%s' must be a tensor (with data_ptr()) or "
                                 "an address, not %.100s", k->name, g->name, Py_TYPE(v)->tp_name);
                    return -1;
                }
            }
            addr = PyLong_AsUnsignedLongLongMask(num);
            Py_DECREF(num);
            if (addr == (uint64_t)-1 && PyErr_Occurred()) return -1;
        }
        if (addr) {
            SpyreAllocation near = {0, 0};
            const uint64_t id = spyre_mem_lookup(device, (uintptr_t)addr, &near);
            if (!id) {
                char msg[512];
                snprintf(msg, sizeof msg, "kernel '%s': argument '%s' is not in spyre:%d memory (address 0x%" PRIx64
                         " is not inside any allocation of the device)", k->name, g->name, device, addr);
                raise_device(DeviceError, msg, k, NULL, PyLong_FromUnsignedLongLong(addr), NULL,
                             Py_BuildValue("{s:s,s:i}", "arg", g->name, "device", device));
                return -1;
            }
            alloc->base = near.base;
            alloc->size = near.size;
            alloc->id = id;
        }
        *bits = addr;
        return 0;
    }
    if (g->kind == ARG_INT) {
        if (PyFloat_Check(v)) {
            PyErr_Format(PyExc_TypeError, "kernel '%s': argument '%s' must be an integer, not float", k->name, g->name);
            return -1;
        }
        PyObject *num = PyNumber_Index(v);
        if (!num) return -1;
        const uint64_t u = PyLong_AsUnsignedLongLongMask(num); /* two's complement, any size */
        Py_DECREF(num);
        if (u == (uint64_t)-1 && PyErr_Occurred()) return -1;
        switch (g->dtype) { /* sign-extended to the whole slot */
        case DT_I1: *bits = u != 0; break;
        case DT_I8: *bits = (uint64_t)(int64_t)(int8_t)u; break;
        case DT_I16: *bits = (uint64_t)(int64_t)(int16_t)u; break;
        case DT_I32: *bits = (uint64_t)(int64_t)(int32_t)u; break;
        default: *bits = u; break;
        }
        if (g->dtype == DT_I1 && PyLong_Check(v)) *bits = PyObject_IsTrue(v) ? 1 : 0;
        return 0;
    }
    /* float */
    const double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    switch (g->dtype) {
    case DT_F16: *bits = sp_encode(d, &SP_FMT_F16, 0); break;
    case DT_BF16: *bits = sp_encode(d, &SP_FMT_BF16, 0); break;
    case DT_F32: *bits = sp_f2u((float)d); break;
    default: *bits = sp_d2u(d); break;
    }
    return 0;
}

static int parse_env_threads(void) {
    const char *s = getenv("SPYRE_NUM_THREADS");
    if (!s || !*s) return 0;
    char *end;
    const long v = strtol(s, &end, 10);
    return (*end == 0 && v > 0) ? (int)(v > SPYRE_MAX_CORES ? SPYRE_MAX_CORES : v) : 0;
}

/* ---- the performance model ---------------------------------------------------------------------- */
#define PERF_NAME(n) #n,
static const char *const perf_param_names[] = {SPY_PERF_PARAMS(PERF_NAME)};
static const char *const perf_counter_names[] = {SPY_PERF_COUNTERS(PERF_NAME)};
#undef PERF_NAME
static const char *const perf_unit_names[] = SPY_PERF_UNIT_NAMES;
#define N_PERF_PARAMS (sizeof perf_param_names / sizeof *perf_param_names)
_Static_assert(sizeof(SpyPerfCfg) == N_PERF_PARAMS * sizeof(double), "SpyPerfCfg is an array of doubles");
_Static_assert(sizeof(SpyPerfEvent) == 32, "event layout (spyre_triton.perf)");
#define PERF_MAX_PROGRAMS (1ull << 22)
#define PERF_MAX_CORES 4096

static void perf_free(SpyPerfLaunch *PL) {
    if (!PL) return;
    free(PL->progs);
    free(PL->events);
    free(PL->nevents);
    free(PL);
}

/* The launch's model state from perf (a sequence of floats in perf_param_names() order). */
static SpyPerfLaunch *perf_new(const SpyKernel *k, PyObject *perf, uint64_t nprogs) {
    PyObject *seq = PySequence_Fast(perf, "launch: perf must be a sequence of floats");
    if (!seq) return NULL;
    if ((size_t)PySequence_Fast_GET_SIZE(seq) != N_PERF_PARAMS) {
        PyErr_Format(PyExc_ValueError, "launch: perf needs %zu parameters (perf_param_names()), got %zd",
                     (size_t)N_PERF_PARAMS, PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return NULL;
    }
    SpyPerfLaunch *PL = calloc(1, sizeof *PL);
    if (!PL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    double *vals = (double *)&PL->cfg;
    for (size_t i = 0; i < N_PERF_PARAMS; i++) {
        vals[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (vals[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            perf_free(PL);
            return NULL;
        }
    }
    Py_DECREF(seq);
    const SpyPerfCfg *C = &PL->cfg;
    if (!(C->read_bytes_per_cycle > 0) || !(C->write_bytes_per_cycle > 0) || !(C->stick_bytes >= 1) ||
        !(C->corelets >= 1) || !(C->pe_rows >= 1) || !(C->pe_cols >= 1) || !(C->pe_simd >= 1) ||
        !(C->pe_sustained > 0) || !(C->vector_lanes > 0) || !(C->sfu_lanes > 0) || !(C->num_cores >= 1) ||
        C->num_cores > PERF_MAX_CORES) {
        PyErr_Format(PyExc_ValueError, "kernel '%s': performance model parameters out of range", k->name);
        perf_free(PL);
        return NULL;
    }
    if (nprogs > PERF_MAX_PROGRAMS) {
        PyErr_Format(PyExc_ValueError, "kernel '%s': the performance model handles grids of at most %llu programs, "
                     "not %llu", k->name, (unsigned long long)PERF_MAX_PROGRAMS, (unsigned long long)nprogs);
        perf_free(PL);
        return NULL;
    }
    PL->nprogs = nprogs;
    PL->progs = calloc(nprogs ? nprogs : 1, sizeof *PL->progs);
    const double tp = C->trace_programs > 0 ? C->trace_programs : 0;
    PL->trace_programs = tp < (double)nprogs ? (uint64_t)tp : nprogs;
    PL->trace_events = C->trace_events > 0 ? (uint32_t)(C->trace_events < 1e7 ? C->trace_events : 1e7) : 0;
    if (!PL->trace_events) PL->trace_programs = 0;
    if (PL->trace_programs) {
        PL->events = calloc(PL->trace_programs * PL->trace_events, sizeof *PL->events);
        PL->nevents = calloc(PL->trace_programs, sizeof *PL->nevents);
    }
    if (!PL->progs || (PL->trace_programs && (!PL->events || !PL->nevents))) {
        perf_free(PL);
        PyErr_NoMemory();
        return NULL;
    }
    return PL;
}

/* The model's answer for a finished launch: per-program cycles, the schedule, per-core totals,
 * work counters and the traced programs' instruction events (see spyre_triton/perf/model.py). */
static PyObject *perf_result(const SpyPerfLaunch *PL) {
    const int ncores = (int)PL->cfg.num_cores;
    const uint64_t np = PL->nprogs;
    PyObject *cycles = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(np * sizeof(double)));
    PyObject *core = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(np * sizeof(uint16_t)));
    PyObject *start = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(np * sizeof(double)));
    double *cc = calloc((size_t)ncores, sizeof(double)), *cb = calloc((size_t)ncores * PU_COUNT, sizeof(double));
    double *cx = calloc((size_t)ncores * PX_COUNT, sizeof(double));
    static const char *const extra_names[] = SPY_PERF_EXTRA_NAMES;
    PyObject *ret = NULL, *core_cycles = NULL, *core_busy = NULL, *counters = NULL, *events = NULL, *nev = NULL;
    PyObject *core_extra = NULL;
    if (!cycles || !core || !start || !cc || !cb || !cx) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto out;
    }
    double *cy = (double *)PyBytes_AS_STRING(cycles);
    for (uint64_t p = 0; p < np; p++) cy[p] = PL->progs[p].cycles;
    spy_perf_schedule(PL, ncores, (uint16_t *)PyBytes_AS_STRING(core), (double *)PyBytes_AS_STRING(start), cc, cb,
                      cx);
    if (!(core_cycles = PyTuple_New(ncores)) || !(core_busy = PyTuple_New(ncores))) goto out;
    if (!(core_extra = PyDict_New())) goto out;
    for (int x = 0; x < PX_COUNT; x++) { /* name -> per-core tuple */
        PyObject *col = PyTuple_New(ncores);
        if (!col || PyDict_SetItemString(core_extra, extra_names[x], col) < 0) {
            Py_XDECREF(col);
            goto out;
        }
        Py_DECREF(col);
        for (int c = 0; c < ncores; c++) {
            PyObject *v = PyFloat_FromDouble(cx[c * PX_COUNT + x]);
            if (!v) goto out;
            PyTuple_SET_ITEM(col, c, v);
        }
    }
    for (int c = 0; c < ncores; c++) {
        PyObject *v = PyFloat_FromDouble(cc[c]);
        if (!v) goto out;
        PyTuple_SET_ITEM(core_cycles, c, v);
        PyObject *b = PyTuple_New(PU_COUNT);
        if (!b) goto out;
        PyTuple_SET_ITEM(core_busy, c, b);
        for (int u = 0; u < PU_COUNT; u++) {
            PyObject *x = PyFloat_FromDouble(cb[c * PU_COUNT + u]);
            if (!x) goto out;
            PyTuple_SET_ITEM(b, u, x);
        }
    }
    if (!(counters = PyDict_New())) goto out;
    for (int i = 0; i < PC_COUNT; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(atomic_load(&PL->counters[i]));
        if (!v || PyDict_SetItemString(counters, perf_counter_names[i], v) < 0) {
            Py_XDECREF(v);
            goto out;
        }
        Py_DECREF(v);
    }
    events = PyBytes_FromStringAndSize((const char *)PL->events,
                                       (Py_ssize_t)(PL->trace_programs * PL->trace_events * sizeof(SpyPerfEvent)));
    if (!events || !(nev = PyTuple_New((Py_ssize_t)PL->trace_programs))) goto out;
    for (uint64_t p = 0; p < PL->trace_programs; p++) {
        PyObject *v = PyLong_FromUnsignedLong(PL->nevents[p]);
        if (!v) goto out;
        PyTuple_SET_ITEM(nev, (Py_ssize_t)p, v);
    }
    ret = Py_BuildValue("{s:K,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:I,s:O}", "programs", (unsigned long long)np, "cycles",
                        cycles, "core", core, "start", start, "core_cycles", core_cycles, "core_busy", core_busy,
                        "counters", counters, "events", events, "nevents", nev, "trace_events", PL->trace_events,
                        "core_extra", core_extra);
out:
    Py_XDECREF(cycles);
    Py_XDECREF(core);
    Py_XDECREF(start);
    Py_XDECREF(core_cycles);
    Py_XDECREF(core_busy);
    Py_XDECREF(core_extra);
    Py_XDECREF(counters);
    Py_XDECREF(events);
    Py_XDECREF(nev);
    free(cc);
    free(cx);
    free(cb);
    return ret;
}

/* Runs the grid over the launch arguments items[0..na): the body of Kernel.launch and of Launcher. */
static PyObject *launch_items(KernelObject *self, int device, long long gx, long long gy, long long gz,
                              PyObject *const *items, Py_ssize_t na, int num_threads, PyObject *perf) {
    SpyKernel *k = get_k(self);
    if (!k) return NULL;
    if (device < 0 || device >= spyre_device_count()) {
        PyErr_Format(PyExc_ValueError, "invalid spyre device index %d (device count %d)", device, spyre_device_count());
        return NULL;
    }
    if (gx < 0 || gy < 0 || gz < 0 || gx > UINT32_MAX || gy > UINT32_MAX || gz > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "kernel '%s': bad grid (%lld, %lld, %lld)", k->name, gx, gy, gz);
        return NULL;
    }
    if (num_threads < 0) {
        PyErr_SetString(PyExc_ValueError, "num_threads must be >= 0");
        return NULL;
    }
    if (na != (Py_ssize_t)k->n_args) {
        PyErr_Format(PyExc_TypeError, "kernel '%s' takes %u arguments, got %zd", k->name, k->n_args, na);
        return NULL;
    }
    SpyArgVal stackv[64], *argv = stackv;
    SpyArgAlloc stacka[64], *allocs = stacka;
    if (na > 64 && !(argv = PyMem_Malloc(sizeof(SpyArgVal) * (size_t)na))) return PyErr_NoMemory();
    if (na > 64 && !(allocs = PyMem_Malloc(sizeof(SpyArgAlloc) * (size_t)na))) {
        PyMem_Free(argv);
        return PyErr_NoMemory();
    }
#define FREE_ARGV()                                      \
    do {                                                 \
        if (argv != stackv) PyMem_Free(argv);            \
        if (allocs != stacka) PyMem_Free(allocs);        \
    } while (0)
    uint32_t nargv = 0;
    const uint64_t arg_gen = spyre_mem_generation(device); /* before the look-ups: a free after them shows */
    for (Py_ssize_t i = 0; i < na; i++) {
        const SpyArg *g = &k->args[i];
        uint64_t bits;
        if (pack_arg(k, g, items[i], device, &bits, &allocs[i]) < 0) {
            FREE_ARGV();
            return NULL;
        }
        if (g->slot >= 0) {
            argv[nargv].slot = (uint64_t)g->slot;
            argv[nargv].bits = bits;
            nargv++;
        }
    }

    const uint64_t nprogs = (uint64_t)gx * (uint64_t)gy * (uint64_t)gz;
    SpyPerfLaunch *PL = NULL;
    if (perf != Py_None && nprogs > 0 && !(PL = perf_new(k, perf, nprogs))) {
        FREE_ARGV();
        return NULL;
    }
    atomic_fetch_add(&k->launches, 1);
    if (nprogs == 0) {
        FREE_ARGV();
        Py_RETURN_NONE;
    }
    int nt = 1; /* one program runs on the calling thread: no need to ask how many cores there are */
    if (nprogs > 1) {
        nt = num_threads ? num_threads : parse_env_threads();
        if (!nt) nt = spy_host_cpus();
        if (nt > SPYRE_MAX_CORES) nt = SPYRE_MAX_CORES;
        if ((uint64_t)nt > nprogs) nt = (int)nprogs;
    }

    if (k->has_print) { /* device output goes straight to fd 1: write out what is buffered before it */
        PyObject *out = PySys_GetObject("stdout");
        PyObject *r = out && out != Py_None ? PyObject_CallMethod(out, "flush", NULL) : NULL;
        Py_XDECREF(r);
        PyErr_Clear();
        fflush(stdout);
    }
    SpyLaunch L;
    memset(&L, 0, sizeof L);
    L.k = k;
    L.device = device;
    L.grid[0] = (uint32_t)gx;
    L.grid[1] = (uint32_t)gy;
    L.grid[2] = (uint32_t)gz;
    L.nprogs = nprogs;
    L.argv = argv;
    L.nargv = nargv;
    L.arg_alloc = allocs;
    L.arg_gen = arg_gen;
    L.counting = atomic_load(&spy_counting);
    L.perf = PL;
    Py_INCREF(self);
    const int rc = spy_launch(&L, nt);
    FREE_ARGV();
    PyObject *ret = NULL;
    if (rc == 0) ret = PL ? perf_result(PL) : Py_NewRef(Py_None);
    else if (rc == 1) raise_fault(k, &L);
    perf_free(PL);
    Py_DECREF(self);
    return ret;
#undef FREE_ARGV
}

static PyObject *Kernel_launch(KernelObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"device", "gx", "gy", "gz", "args", "num_threads", "perf", NULL};
    int device, num_threads = 0;
    long long gx, gy, gz;
    PyObject *argseq, *perf = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iLLLO|iO:launch", kwlist, &device, &gx, &gy, &gz, &argseq,
                                     &num_threads, &perf))
        return NULL;
    PyObject *seq = PySequence_Fast(argseq, "launch: args must be a sequence");
    if (!seq) return NULL;
    PyObject *ret = launch_items(self, device, gx, gy, gz, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq),
                                 num_threads, perf);
    Py_DECREF(seq);
    return ret;
}

static PyObject *Kernel_stats(KernelObject *self, PyObject *noargs) {
    (void)noargs;
    SpyKernel *k = get_k(self);
    if (!k) return NULL;
    PyObject *ins = PyDict_New();
    if (!ins) return NULL;
    unsigned long long total = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        const unsigned long long c = atomic_load(&k->counts[op]);
        if (!c) continue;
        total += c;
        PyObject *v = PyLong_FromUnsignedLongLong(c);
        if (!v || PyDict_SetItemString(ins, spyre_opcode_names[op], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(ins);
            return NULL;
        }
        Py_DECREF(v);
    }
    return Py_BuildValue("{s:K,s:K,s:K,s:N,s:K,s:O}", "launches", (unsigned long long)atomic_load(&k->launches),
                         "programs", (unsigned long long)atomic_load(&k->programs), "streamed_results",
                         (unsigned long long)atomic_load(&k->streamed), "instructions", ins,
                         "total_instructions", total, "counting", atomic_load(&spy_counting) ? Py_True : Py_False);
}

static PyObject *Kernel_reset_stats(KernelObject *self, PyObject *noargs) {
    (void)noargs;
    SpyKernel *k = get_k(self);
    if (!k) return NULL;
    atomic_store(&k->launches, 0);
    atomic_store(&k->programs, 0);
    atomic_store(&k->streamed, 0);
    for (int op = 0; op < OP_COUNT; op++) atomic_store(&k->counts[op], 0);
    Py_RETURN_NONE;
}

static PyObject *Kernel_insn_info(KernelObject *self, PyObject *arg) {
    SpyKernel *k = get_k(self);
    if (!k) return NULL;
    const long pc = PyLong_AsLong(arg);
    if (pc == -1 && PyErr_Occurred()) return NULL;
    if (pc < 0 || pc >= (long)k->n_insns) {
        PyErr_Format(PyExc_IndexError, "instruction %ld out of range (%u instructions)", pc, k->n_insns);
        return NULL;
    }
    const SpyDInsn *I = &k->code[pc];
    const int32_t li = k->insn_loc[pc];
    if (li < 0) return Py_BuildValue("(ssOiO)", spyre_opcode_names[I->op], spyre_dtype_names[I->t], Py_None, 0, Py_None);
    const SpyLoc *L = &k->locs[li];
    return Py_BuildValue("(sssls)", spyre_opcode_names[I->op], spyre_dtype_names[I->t], L->file, L->line, L->text);
}

static PyObject *Kernel_get_name(KernelObject *self, void *c) {
    (void)c;
    SpyKernel *k = get_k(self);
    return k ? PyUnicode_FromString(k->name) : NULL;
}
#define UINT_GETTER(field)                                              \
    static PyObject *Kernel_get_##field(KernelObject *self, void *c) {  \
        (void)c;                                                        \
        SpyKernel *k = get_k(self);                                     \
        return k ? PyLong_FromUnsignedLong(k->field) : NULL;            \
    }
UINT_GETTER(n_sregs)
UINT_GETTER(lx_bytes)
UINT_GETTER(n_insns)
static PyObject *Kernel_get_num_args(KernelObject *self, void *c) {
    (void)c;
    SpyKernel *k = get_k(self);
    return k ? PyLong_FromUnsignedLong(k->n_args) : NULL;
}

static PyMethodDef Kernel_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))Kernel_launch, METH_VARARGS | METH_KEYWORDS,
     "launch(device, gx, gy, gz, args, num_threads=0, perf=None): run the grid; args has one entry per kernel "
     "argument (tensors or addresses for pointers, ints, floats, None; constexprs are ignored). With perf (the "
     "performance model's parameters, perf_param_names() order) the launch is also modelled and returns the "
     "model's result (a dict, see spyre_triton.perf)."},
    {"stats", (PyCFunction)Kernel_stats, METH_NOARGS,
     "stats() -> dict: launches, programs, results written with streaming stores (streamed_results), and\n"
     "(with set_counting(True)) instructions executed per opcode."},
    {"reset_stats", (PyCFunction)Kernel_reset_stats, METH_NOARGS, "Zero the statistics."},
    {"insn_info", (PyCFunction)Kernel_insn_info, METH_O,
     "insn_info(pc) -> (mnemonic, dtype, file, line, source text): instruction pc and where it came from "
     "(file None when unknown)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Kernel_getset[] = {
    {"name", (getter)Kernel_get_name, NULL, "kernel name", NULL},
    {"n_sregs", (getter)Kernel_get_n_sregs, NULL, "scalar registers", NULL},
    {"lx_bytes", (getter)Kernel_get_lx_bytes, NULL, "LX bytes per program", NULL},
    {"num_args", (getter)Kernel_get_num_args, NULL, "arguments launch() expects", NULL},
    {"n_insns", (getter)Kernel_get_n_insns, NULL, "instructions", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "spyre_triton._runtime.Kernel",
    .tp_basicsize = sizeof(KernelObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Kernel(binary): a Spyre binary, validated and decoded, ready to launch.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Kernel_init,
    .tp_dealloc = (destructor)Kernel_dealloc,
    .tp_methods = Kernel_methods,
    .tp_getset = Kernel_getset,
};

/* ---- Triton's launcher protocol ---------------------------------------------------------------- */
/* Launcher(fallback, arg_index, device_fn, trackers, listeners) is what CompiledKernel.run calls:
 *   launcher(gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter_hook, exit_hook, *args)
 * It takes the common case in C (no hooks, or empty HookChains; nothing tracking launches; a non-empty grid): the kernel's
 * arguments are args[i] for i in arg_index (all of args when it is None), the device is device_fn(). Every
 * other case goes to fallback, the Python launcher (backend/driver.py), with the same arguments; so does
 * the explanation of a DeviceError: fallback.explain(error, args) may raise a clearer one. trackers and
 * listeners are the Python lists whose non-emptiness means launches are being timed or profiled. */
#define LAUNCHER_FIXED 9 /* gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter, exit */

typedef struct {
    PyObject_HEAD vectorcallfunc vectorcall;
    PyObject *fallback, *device_fn, *trackers, *listeners;
    Py_ssize_t nidx; /* -1: the kernel takes args as they come */
    Py_ssize_t idx[];
} LauncherObject;

static PyObject *launcher_explain(LauncherObject *self, PyObject *const *args, Py_ssize_t n) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb) PyException_SetTraceback(value, tb);
    PyObject *targs = PyTuple_New(n);
    if (targs) {
        for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(targs, i, Py_NewRef(args[i]));
        PyObject *r = PyObject_CallMethod(self->fallback, "explain", "OO", value, targs);
        Py_DECREF(targs);
        if (!r) { /* the clearer error (raised from the device's) */
            Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
            return NULL;
        }
        Py_DECREF(r);
    }
    if (!targs) PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return NULL;
}

/* A launch hook that does nothing: None, or a Triton HookChain whose list of calls is empty. */
static int idle_hook(PyObject *h) {
    if (h == Py_None) return 1;
    PyObject *calls = PyObject_GetAttr(h, str_calls);
    if (!calls) {
        PyErr_Clear();
        return 0;
    }
    const int idle = PyList_CheckExact(calls) && PyList_GET_SIZE(calls) == 0;
    Py_DECREF(calls);
    return idle;
}

static int small_int(PyObject *o, long long *v) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow;
    *v = PyLong_AsLongLongAndOverflow(o, &overflow);
    return !overflow && !(*v == -1 && PyErr_Occurred());
}

static PyObject *Launcher_call(LauncherObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    long long g[3];
    if (kwnames || n < LAUNCHER_FIXED || !idle_hook(args[7]) || !idle_hook(args[8]) || PyList_GET_SIZE(self->trackers) ||
        PyList_GET_SIZE(self->listeners) || !PyObject_TypeCheck(args[4], &KernelType) || !small_int(args[0], &g[0]) ||
        !small_int(args[1], &g[1]) || !small_int(args[2], &g[2]) || g[0] <= 0 || g[1] <= 0 || g[2] <= 0)
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *const *user = args + LAUNCHER_FIXED;
    const Py_ssize_t nuser = n - LAUNCHER_FIXED;
    PyObject *stack[64];
    PyObject *const *items = user;
    Py_ssize_t na = nuser;
    if (self->nidx >= 0) {
        if (self->nidx > 64) return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
        for (Py_ssize_t i = 0; i < self->nidx; i++) {
            if (self->idx[i] >= nuser) return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
            stack[i] = user[self->idx[i]];
        }
        items = stack;
        na = self->nidx;
    }
    PyObject *dev = PyObject_CallNoArgs(self->device_fn);
    if (!dev) return NULL;
    const long device = PyLong_AsLong(dev);
    Py_DECREF(dev);
    if (device == -1 && PyErr_Occurred()) return NULL;
    PyObject *r = launch_items((KernelObject *)args[4], (int)device, g[0], g[1], g[2], items, na, 0, Py_None);
    if (!r && PyErr_ExceptionMatches(DeviceError)) return launcher_explain(self, user, nuser);
    return r;
}

static PyObject *Launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *fallback, *index, *device_fn, *trackers, *listeners;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Launcher() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOO!O!:Launcher", &fallback, &index, &device_fn, &PyList_Type, &trackers, &PyList_Type,
                          &listeners))
        return NULL;
    if (!PyCallable_Check(fallback) || !PyCallable_Check(device_fn)) {
        PyErr_SetString(PyExc_TypeError, "Launcher: fallback and device_fn must be callable");
        return NULL;
    }
    PyObject *seq = index == Py_None ? NULL : PySequence_Fast(index, "Launcher: arg_index must be a sequence or None");
    if (index != Py_None && !seq) return NULL;
    const Py_ssize_t nidx = seq ? PySequence_Fast_GET_SIZE(seq) : -1;
    LauncherObject *self = PyObject_GC_NewVar(LauncherObject, type, nidx > 0 ? nidx : 0);
    if (!self) {
        Py_XDECREF(seq);
        return NULL;
    }
    self->vectorcall = (vectorcallfunc)Launcher_call;
    self->nidx = nidx;
    for (Py_ssize_t i = 0; i < nidx; i++) {
        const Py_ssize_t v = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (v < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Launcher: arg_index entries must be >= 0");
            self->fallback = self->device_fn = self->trackers = self->listeners = NULL;
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
        self->idx[i] = v;
    }
    Py_XDECREF(seq);
    self->fallback = Py_NewRef(fallback);
    self->device_fn = Py_NewRef(device_fn);
    self->trackers = Py_NewRef(trackers);
    self->listeners = Py_NewRef(listeners);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int Launcher_traverse(LauncherObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    Py_VISIT(self->device_fn);
    Py_VISIT(self->trackers);
    Py_VISIT(self->listeners);
    return 0;
}

static int Launcher_clear(LauncherObject *self) {
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->device_fn);
    Py_CLEAR(self->trackers);
    Py_CLEAR(self->listeners);
    return 0;
}

static void Launcher_dealloc(LauncherObject *self) {
    PyObject_GC_UnTrack(self);
    Launcher_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* attributes not found here are the Python launcher's (name, arg_names, ...) */
static PyObject *Launcher_getattro(LauncherObject *self, PyObject *name) {
    PyObject *r = PyObject_GenericGetAttr((PyObject *)self, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError) || !self->fallback) return r;
    PyErr_Clear();
    return PyObject_GetAttr(self->fallback, name);
}

static PyMemberDef Launcher_members[] = {
    {"fallback", T_OBJECT, offsetof(LauncherObject, fallback), READONLY, "the Python launcher behind this one"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "spyre_triton._runtime.Launcher",
    .tp_basicsize = sizeof(LauncherObject),
    .tp_itemsize = sizeof(Py_ssize_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Launcher(fallback, arg_index, device_fn, trackers, listeners): Triton's kernel launcher, in C for "
              "the common case (see runtime/interp_py.c).",
    .tp_new = Launcher_new,
    .tp_dealloc = (destructor)Launcher_dealloc,
    .tp_traverse = (traverseproc)Launcher_traverse,
    .tp_clear = (inquiry)Launcher_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(LauncherObject, vectorcall),
    .tp_getattro = (getattrofunc)Launcher_getattro,
    .tp_members = Launcher_members,
};

/* ---- module functions ------------------------------------------------------------------------- */
static PyObject *py_set_counting(PyObject *self, PyObject *arg) {
    (void)self;
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    atomic_store(&spy_counting, on);
    Py_RETURN_NONE;
}
static PyObject *py_get_counting(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyBool_FromLong(atomic_load(&spy_counting));
}
static PyObject *py_stream_store_bytes(PyObject *self, PyObject *args) {
    (void)self;
    long long n = -1;
    if (!PyArg_ParseTuple(args, "|L:stream_store_bytes", &n)) return NULL;
    if (n < -1 || (n == -1 && PyTuple_GET_SIZE(args) == 1)) {
        PyErr_Format(PyExc_ValueError, "stream_store_bytes: n must be a byte count >= 0, got %lld", n);
        return NULL;
    }
    const uint64_t old = spy_stream_threshold();
    if (n >= 0) atomic_store(&spy_stream_bytes, (uint64_t)n == UINT64_MAX ? UINT64_MAX - 1 : (uint64_t)n);
    return PyLong_FromUnsignedLongLong(old);
}
static PyObject *py_synchronize(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    Py_RETURN_NONE; /* launches are synchronous */
}
static PyObject *py_current_stream(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *device = Py_None;
    if (!PyArg_UnpackTuple(args, "current_stream", 0, 1, &device)) return NULL;
    return PyLong_FromLong(0); /* one in-order stream per device */
}
static PyObject *py_default_num_threads(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    int nt = parse_env_threads();
    if (!nt) nt = spy_host_cpus();
    return PyLong_FromLong(nt > SPYRE_MAX_CORES ? SPYRE_MAX_CORES : nt);
}

static PyObject *py_set_numerics(PyObject *self, PyObject *arg) {
    (void)self;
    const long mode = PyLong_AsLong(arg);
    if (mode == -1 && PyErr_Occurred()) return NULL;
    if (mode != NUMERICS_IEEE && mode != NUMERICS_DL16) {
        PyErr_Format(PyExc_ValueError, "set_numerics: mode %ld is not one of isa.NUMERICS_MODES (0..1)", mode);
        return NULL;
    }
    const int prev = sp_numerics_mode;
    sp_numerics_mode = (int)mode;
    return PyLong_FromLong(prev);
}

static PyObject *py_get_numerics(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLong(sp_numerics_mode);
}

/* round_dl16(buffer): round a writable buffer of f32 (format 'f') or f16 ('e') values through
 * DLFloat16 in place, by the runtime's own conversion (the tests compare it with a NumPy oracle). */
static PyObject *py_round_dl16(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const char *f = v.format ? v.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (strcmp(f, "f") == 0 && v.itemsize == 4) {
        sp_round_dl16_n((float *)v.buf, (size_t)(v.len / 4));
    } else if (strcmp(f, "e") == 0 && v.itemsize == 2) {
        sp_f16_round_dl16_n((uint16_t *)v.buf, (size_t)(v.len / 2));
    } else {
        PyBuffer_Release(&v);
        PyErr_Format(PyExc_TypeError, "round_dl16: expected a contiguous float32 or float16 buffer, got format '%s'", f);
        return NULL;
    }
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

/* A contiguous buffer of `fmt` items (`size` bytes each), writable if asked: 0, or -1 with TypeError. */
static int get_items(PyObject *o, Py_buffer *v, const char *fmt, Py_ssize_t size, int writable, const char *who) {
    if (PyObject_GetBuffer(o, v, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (strcmp(f, fmt) == 0 && v->itemsize == size) return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected a contiguous buffer of format '%s', got '%s'", who, fmt, f);
    PyBuffer_Release(v);
    return -1;
}

/* dl16_encode(f32 values, uint16 out) and dl16_decode(uint16 bits, f32 out): DLFloat16's own bits, as
 * f16 device memory holds them in DLFloat16 mode, by the runtime's conversions (tests: NumPy oracle). */
static PyObject *py_dl16_convert(PyObject *args, int encode) {
    PyObject *src, *dst;
    const char *who = encode ? "dl16_encode" : "dl16_decode";
    if (!PyArg_ParseTuple(args, encode ? "OO:dl16_encode" : "OO:dl16_decode", &src, &dst)) return NULL;
    Py_buffer s, d;
    if (get_items(src, &s, encode ? "f" : "H", encode ? 4 : 2, 0, who) < 0) return NULL;
    if (get_items(dst, &d, encode ? "H" : "f", encode ? 2 : 4, 1, who) < 0) {
        PyBuffer_Release(&s);
        return NULL;
    }
    const size_t n = (size_t)(s.len / s.itemsize);
    if ((size_t)(d.len / d.itemsize) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %zu values in, room for %zd out", who, n, d.len / d.itemsize);
    } else if (encode) {
        sp_f32_to_dl16_n((uint16_t *)d.buf, (const float *)s.buf, n);
    } else {
        sp_dl16_to_f32_n((float *)d.buf, (const uint16_t *)s.buf, n);
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&d);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}
static PyObject *py_dl16_encode(PyObject *self, PyObject *args) { (void)self; return py_dl16_convert(args, 1); }
static PyObject *py_dl16_decode(PyObject *self, PyObject *args) { (void)self; return py_dl16_convert(args, 0); }

static PyObject *py_simd(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyUnicode_FromString(spy_simd_name());
}

static PyObject *names_tuple(const char *const *names, size_t n) {
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(names[i]);
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    return t;
}
static PyObject *py_perf_param_names(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return names_tuple(perf_param_names, N_PERF_PARAMS);
}
static PyObject *py_perf_counter_names(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return names_tuple(perf_counter_names, PC_COUNT);
}
static PyObject *py_perf_unit_names(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return names_tuple(perf_unit_names, PU_COUNT);
}

/* replay(plan): a launch graph's replay (spyre_triton/graphs.py). plan is a tuple of
 * (kernel, device, gx, gy, gz, args) tuples, launched in order with no Python in between; the first
 * launch that fails stops the replay with its error. */
static PyObject *py_replay(PyObject *self, PyObject *plan) {
    if (!PyTuple_CheckExact(plan)) {
        PyErr_SetString(PyExc_TypeError, "replay: plan must be a tuple");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(plan); i++) {
        PyObject *e = PyTuple_GET_ITEM(plan, i);
        long long g[3];
        if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 6 || !PyObject_TypeCheck(PyTuple_GET_ITEM(e, 0), &KernelType) ||
            !PyTuple_CheckExact(PyTuple_GET_ITEM(e, 5)) || !small_int(PyTuple_GET_ITEM(e, 2), &g[0]) ||
            !small_int(PyTuple_GET_ITEM(e, 3), &g[1]) || !small_int(PyTuple_GET_ITEM(e, 4), &g[2])) {
            PyErr_Format(PyExc_TypeError, "replay: entry %zd is not (kernel, device, gx, gy, gz, args)", i);
            return NULL;
        }
        const long device = PyLong_AsLong(PyTuple_GET_ITEM(e, 1));
        if (device == -1 && PyErr_Occurred()) return NULL;
        PyObject *args = PyTuple_GET_ITEM(e, 5);
        PyObject *r = launch_items((KernelObject *)PyTuple_GET_ITEM(e, 0), (int)device, g[0], g[1], g[2],
                                   &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), 0, Py_None);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static PyMethodDef interp_methods[] = {
    {"perf_param_names", py_perf_param_names, METH_NOARGS,
     "Names of the performance model's parameters, in the order Kernel.launch(perf=...) takes them."},
    {"perf_counter_names", py_perf_counter_names, METH_NOARGS, "Names of the performance model's work counters."},
    {"perf_unit_names", py_perf_unit_names, METH_NOARGS, "Names of the units of a modelled core, in result order."},
    {"simd", py_simd, METH_NOARGS,
     "Which build of the typed loops runs: 'avx512' (AVX-512 F/BW/CD/DQ/VL+FMA+F16C, 512-bit vectors), 'avx2' "
     "(AVX2+FMA+F16C; SPYRE_NO_AVX512=1 stops at it) or 'baseline' (SPYRE_NO_AVX2=1 forces it)."},
    {"set_numerics", py_set_numerics, METH_O,
     "set_numerics(mode) -> the previous mode: isa.NUMERICS_MODES index (0 ieee, 1 dl16) for later launches."},
    {"get_numerics", py_get_numerics, METH_NOARGS, "The numerics mode launches run in (isa.NUMERICS_MODES index)."},
    {"dl16_encode", py_dl16_encode, METH_VARARGS,
     "dl16_encode(f32 values, uint16 out): DLFloat16's bits of each value (round to nearest, ties away)."},
    {"dl16_decode", py_dl16_decode, METH_VARARGS, "dl16_decode(uint16 bits, f32 out): the values of DLFloat16 bits."},
    {"round_dl16", py_round_dl16, METH_O,
     "round_dl16(buffer): round a writable contiguous float32 or float16 buffer through DLFloat16 in place."},
    {"set_counting", py_set_counting, METH_O, "set_counting(on): count executed instructions per opcode."},
    {"stream_store_bytes", py_stream_store_bytes, METH_VARARGS,
     "stream_store_bytes([n]) -> the previous value: the bytes of elementwise results in device memory a launch\n"
     "writes from which they go out with non-temporal stores (default: the host's last-level cache size);\n"
     "0: never. With n, sets it for later launches."},
    {"get_counting", py_get_counting, METH_NOARGS, "Whether instructions are being counted."},
    {"synchronize", py_synchronize, METH_VARARGS, "synchronize(device=None): launches are synchronous; no-op."},
    {"current_stream", py_current_stream, METH_VARARGS,
     "current_stream(device=None) -> 0: each device has one in-order stream (launches are synchronous)."},
    {"replay", py_replay, METH_O,
     "replay(plan): launch (kernel, device, gx, gy, gz, args) entries in order, in C (a launch graph's replay)."},
    {"default_num_threads", py_default_num_threads, METH_NOARGS,
     "Cores a launch uses by default: min(32, host CPUs), or SPYRE_NUM_THREADS."},
    {NULL, NULL, 0, NULL},
};

int spyre_interp_register(PyObject *m) {
    sp_fp_init();
    if (!(str_data_ptr = PyUnicode_InternFromString("data_ptr"))) return -1;
    if (!(str_calls = PyUnicode_InternFromString("calls"))) return -1;
    if (PyType_Ready(&KernelType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "Kernel", (PyObject *)&KernelType) < 0) return -1;
    if (PyType_Ready(&LauncherType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "Launcher", (PyObject *)&LauncherType) < 0) return -1;
    DeviceError = PyErr_NewExceptionWithDoc(
        "spyre_triton._runtime.DeviceError",
        "A kernel faulted on the device (out-of-bounds access, bad argument). Attributes: kernel, file, line, "
        "address, pid; an out-of-bounds access also access, size, allocation (base, size), device and arg (the name of "
        "the pointer argument the access derives from, None when the compiler could not tell).", PyExc_RuntimeError, NULL);
    if (!DeviceError || PyModule_AddObjectRef(m, "DeviceError", DeviceError) < 0) return -1;
    DeviceAssertionError = PyErr_NewExceptionWithDoc(
        "spyre_triton._runtime.DeviceAssertionError", "A device-side assertion (tl.device_assert) failed.",
        DeviceError, NULL);
    if (!DeviceAssertionError || PyModule_AddObjectRef(m, "DeviceAssertionError", DeviceAssertionError) < 0) return -1;
    if (PyModule_AddFunctions(m, interp_methods) < 0) return -1;
    if (PyModule_AddIntConstant(m, "LX_BYTES_MAX", SPYRE_LX_BYTES_MAX) < 0) return -1;
    if (PyModule_AddIntConstant(m, "SREGS_MAX", SPYRE_SREGS_MAX) < 0) return -1;
    if (PyModule_AddIntConstant(m, "MAX_CORES", SPYRE_MAX_CORES) < 0) return -1;
    return 0;
}
