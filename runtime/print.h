/* tl.device_print / tl.static_print output (tt.print): formatting into a per-core buffer, flushed to
 * stdout when a program ends, so the lines of one program stay together. */
#ifndef SPYRE_PRINT_H
#define SPYRE_PRINT_H

#include "interp.h"

/* The print instruction's string operand is the text printed after the index (Triton's prefix, with
 * "(operand k) " appended when the print has several operands), optionally behind a layout header
 * the compiler writes:
 *
 *     HDR [d0 {, d} ] [ x repeat ] HDR text         HDR = '\x1f'
 *
 * d0, d1, ...: the operand's shape; element i (row-major) prints as `idx (i0, i1, ...)`, each index
 *              padded to ceil(log10(d)) digits as Triton does. Without dims the n elements print with
 *              a flat index (a scalar prints `idx ()`).
 * repeat:      lines per element. A GPU prints a scalar once per thread, so the backend sets it to
 *              num_warps * warp_size for scalar operands and prints without operands.
 *
 * Each line: `pid (x, y, z) idx (...)<text><value>`, or `pid (x, y, z)<text>` without operands. */
#define SPYRE_PRINT_HDR '\x1f'
#define SPYRE_PRINT_MAX_RANK 16
#define SPYRE_PRINT_MAX_REPEAT 65536 /* bound on repeat: num_warps * warp_size is at most 2048 */

void spy_do_print(SpyExec *X, const SpyDInsn *I); /* the print instruction */
void spy_print_flush(SpyCore *core);              /* write the core's buffered lines to stdout */

#endif
