/* Placeholder until the interpreter lands: registers nothing. */
#include "runtime.h"
int spyre_interp_register(PyObject *module) { (void)module; return 0; }
