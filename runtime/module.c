/* The `spyre_triton._runtime` extension: device memory and the interpreter, no torch. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "runtime.h"

static struct PyModuleDef runtime_module = {
    PyModuleDef_HEAD_INIT, "spyre_triton._runtime",
    "Spyre device memory and the Spyre instruction interpreter.", -1, NULL,
};

PyMODINIT_FUNC PyInit__runtime(void) {
    PyObject *m = PyModule_Create(&runtime_module);
    if (m == NULL) return NULL;
    if (spyre_devmem_register(m) < 0 || spyre_interp_register(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
