/* What each part of the runtime adds to the `spyre_triton._runtime` module. */
#ifndef SPYRE_RUNTIME_H
#define SPYRE_RUNTIME_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int spyre_devmem_register(PyObject *module); /* devmem_py.c */
int spyre_interp_register(PyObject *module); /* interp_py.c */

#endif
