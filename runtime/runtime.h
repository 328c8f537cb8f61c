/* What each part of the runtime adds to the `spyre_triton._runtime` module. */
#ifndef SPYRE_RUNTIME_H
#define SPYRE_RUNTIME_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int spyre_devmem_register(PyObject *module); /* devmem_py.c */
int spyre_interp_register(PyObject *module); /* interp_py.c */

/* loader.c: parse, validate and decode a spyrebin into k: 0, or -1 with a ValueError set */
struct SpyKernel;
int spy_kernel_load(struct SpyKernel *k, const uint8_t *raw, size_t len);

#endif
