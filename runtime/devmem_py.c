/* Device memory as seen from Python: `spyre_triton._runtime` functions and the `_devmem_api` capsule. */
#include "runtime.h" /* Python.h first */
#include "devmem.h"
#include "interp.h" /* spy_launch_count */

static const SpyreDevmemAPI g_api = {
    .version = SPYRE_DEVMEM_API_VERSION,
    .device_count = spyre_device_count,
    .alloc = spyre_alloc,
    .free = spyre_free,
    .mem_check = spyre_mem_check,
    .memory_allocated = spyre_memory_allocated,
    .max_memory_allocated = spyre_max_memory_allocated,
    .reset_peak_memory_stats = spyre_reset_peak_memory_stats,
    .memory_reserved = spyre_memory_reserved,
    .empty_cache = spyre_empty_cache,
    .device_of = spyre_device_of,
    .device_memory_capacity = spyre_device_memory_capacity,
    .memory_limit = spyre_memory_limit,
    .max_memory_reserved = spyre_max_memory_reserved,
    .memory_cached = spyre_memory_cached,
    .allocation_count = spyre_allocation_count,
};

/* Parse a device index argument; sets ValueError when it is not a valid device. */
static int parse_device(PyObject *args, int *dev) {
    if (!PyArg_ParseTuple(args, "i", dev)) return -1;
    if (*dev < 0 || *dev >= spyre_device_count()) {
        PyErr_Format(PyExc_ValueError, "invalid spyre device index %d (device count %d)", *dev,
                     spyre_device_count());
        return -1;
    }
    return 0;
}

static PyObject *py_device_count(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLong(spyre_device_count());
}

#define SIZE_FN(pyname, cfn)                                         \
    static PyObject *pyname(PyObject *self, PyObject *args) {        \
        (void)self;                                                  \
        int dev;                                                     \
        if (parse_device(args, &dev) < 0) return NULL;               \
        return PyLong_FromSize_t(cfn(dev));                          \
    }
SIZE_FN(py_memory_allocated, spyre_memory_allocated)
SIZE_FN(py_max_memory_allocated, spyre_max_memory_allocated)
SIZE_FN(py_memory_reserved, spyre_memory_reserved)
SIZE_FN(py_max_memory_reserved, spyre_max_memory_reserved)
SIZE_FN(py_memory_cached, spyre_memory_cached)
SIZE_FN(py_allocation_count, spyre_allocation_count)
SIZE_FN(py_memory_limit, spyre_memory_limit)
SIZE_FN(py_launch_count, spy_launch_count)
SIZE_FN(py_busy_ns, spy_busy_ns)

static PyObject *py_set_memory_limit(PyObject *self, PyObject *args) {
    (void)self;
    int dev;
    unsigned long long bytes;
    if (!PyArg_ParseTuple(args, "iK", &dev, &bytes)) return NULL;
    if (spyre_set_memory_limit(dev, (size_t)bytes) != 0) {
        PyErr_Format(PyExc_ValueError, "invalid spyre device index %d (device count %d)", dev, spyre_device_count());
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_reset_peak_memory_stats(PyObject *self, PyObject *args) {
    (void)self;
    int dev;
    if (parse_device(args, &dev) < 0) return NULL;
    spyre_reset_peak_memory_stats(dev);
    Py_RETURN_NONE;
}

static PyObject *py_empty_cache(PyObject *self, PyObject *args) {
    (void)self;
    int dev;
    if (parse_device(args, &dev) < 0) return NULL;
    spyre_empty_cache(dev);
    Py_RETURN_NONE;
}

static PyObject *py_device_memory_capacity(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromSize_t(spyre_device_memory_capacity());
}

static PyObject *py_mem_check(PyObject *self, PyObject *args) {
    (void)self;
    int dev;
    unsigned long long addr, nbytes;
    if (!PyArg_ParseTuple(args, "iKK", &dev, &addr, &nbytes)) return NULL;
    SpyreAllocation near = {0, 0};
    int ok = spyre_mem_check(dev, (uintptr_t)addr, (size_t)nbytes, &near);
    return Py_BuildValue("(NKn)", PyBool_FromLong(ok), (unsigned long long)near.base,
                         (Py_ssize_t)near.size);
}

static PyObject *py_device_of(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    if (!PyArg_ParseTuple(args, "K", &addr)) return NULL;
    return PyLong_FromLong(spyre_device_of((uintptr_t)addr));
}

static PyObject *py_alloc(PyObject *self, PyObject *args) {
    (void)self;
    int dev;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "in", &dev, &n)) return NULL;
    if (dev < 0 || dev >= spyre_device_count()) {
        PyErr_Format(PyExc_ValueError, "invalid spyre device index %d", dev);
        return NULL;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative allocation size");
        return NULL;
    }
    void *p;
    Py_BEGIN_ALLOW_THREADS p = spyre_alloc(dev, (size_t)n);
    Py_END_ALLOW_THREADS
    if (p == NULL) {
        PyErr_Format(PyExc_MemoryError,
                     "spyre:%d out of memory allocating %zd bytes (%zu in use, capacity %zu)", dev, n,
                     spyre_memory_allocated(dev), spyre_device_memory_capacity());
        return NULL;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

static PyObject *py_free(PyObject *self, PyObject *args) {
    (void)self;
    int dev;
    unsigned long long addr;
    if (!PyArg_ParseTuple(args, "iK", &dev, &addr)) return NULL;
    if (spyre_free(dev, (void *)(uintptr_t)addr) != 0) {
        PyErr_Format(PyExc_ValueError, "0x%llx is not a live allocation of spyre:%d", addr, dev);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef devmem_methods[] = {
    {"device_count", py_device_count, METH_NOARGS, "Number of simulated Spyre devices."},
    {"memory_allocated", py_memory_allocated, METH_VARARGS,
     "memory_allocated(dev): bytes requested by live allocations."},
    {"max_memory_allocated", py_max_memory_allocated, METH_VARARGS,
     "max_memory_allocated(dev): peak of memory_allocated since start or the last reset."},
    {"reset_peak_memory_stats", py_reset_peak_memory_stats, METH_VARARGS,
     "reset_peak_memory_stats(dev): set the peak to the current value."},
    {"memory_reserved", py_memory_reserved, METH_VARARGS,
     "memory_reserved(dev): host bytes held: live allocations (rounded up to 128-byte sticks, or 2 MB pages when "
     "large) and freed blocks cached for reuse."},
    {"max_memory_reserved", py_max_memory_reserved, METH_VARARGS,
     "max_memory_reserved(dev): peak of memory_reserved since start or the last reset."},
    {"memory_cached", py_memory_cached, METH_VARARGS,
     "memory_cached(dev): bytes of freed blocks the device keeps for reuse (SPYRE_MEMORY_CACHE_BYTES bounds them)."},
    {"empty_cache", py_empty_cache, METH_VARARGS, "empty_cache(dev): return the cached freed blocks to the host."},
    {"allocation_count", py_allocation_count, METH_VARARGS,
     "allocation_count(dev): number of live allocations."},
    {"memory_limit", py_memory_limit, METH_VARARGS,
     "memory_limit(dev): bytes the device may allocate (the capacity unless set_memory_limit lowered it)."},
    {"set_memory_limit", py_set_memory_limit, METH_VARARGS,
     "set_memory_limit(dev, bytes): allocations beyond it fail (clamped to the capacity)."},
    {"launch_count", py_launch_count, METH_VARARGS, "launch_count(dev): kernel launches run on the device so far."},
    {"busy_ns", py_busy_ns, METH_VARARGS, "busy_ns(dev): host nanoseconds spent running launches on the device so far."},
    {"device_memory_capacity", py_device_memory_capacity, METH_NOARGS,
     "Per-device capacity in bytes (SPYRE_DEVICE_MEMORY_BYTES, default: host RAM)."},
    {"mem_check", py_mem_check, METH_VARARGS,
     "mem_check(dev, addr, nbytes) -> (ok, nearest_base, nearest_size)."},
    {"device_of", py_device_of, METH_VARARGS,
     "device_of(addr) -> index of the device owning addr, or -1."},
    {"alloc", py_alloc, METH_VARARGS, "alloc(dev, nbytes) -> address (for tests)."},
    {"free", py_free, METH_VARARGS, "free(dev, addr) (for tests)."},
    {NULL, NULL, 0, NULL},
};

int spyre_devmem_register(PyObject *m) {
    if (PyModule_AddFunctions(m, devmem_methods) < 0) return -1;
    PyObject *cap = PyCapsule_New((void *)&g_api, SPYRE_DEVMEM_CAPSULE, NULL);
    if (cap == NULL) return -1;
    if (PyModule_AddObject(m, "_devmem_api", cap) < 0) {
        Py_DECREF(cap);
        return -1;
    }
    if (PyModule_AddIntConstant(m, "ALLOC_ALIGN", SPYRE_ALLOC_ALIGN) < 0) return -1;
    if (PyModule_AddIntConstant(m, "GUARD_BYTES", SPYRE_GUARD_BYTES) < 0) return -1;
    if (PyModule_AddIntConstant(m, "MAP_GUARD_BYTES", SPYRE_MAP_GUARD_BYTES) < 0) return -1;
    return 0;
}
