/* tl.device_print / tl.static_print output (tt.print): formatting into a per-core buffer, flushed to
 * stdout when a program ends, so the lines of one program stay together. */
#ifndef SPYRE_PRINT_H
#define SPYRE_PRINT_H

#include "interp.h"

void spy_do_print(SpyExec *X, const SpyDInsn *I); /* the print instruction */
void spy_print_flush(SpyCore *core);              /* write the core's buffered lines to stdout */

#endif
