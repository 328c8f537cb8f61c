/* The typed loops of loops.c compiled again for AVX2 + FMA + F16C (x86-64 only): 256-bit
 * vectors, and f16 conversions by the F16C instructions. loops.c picks this build at run time
 * when the CPU has them but not AVX-512 (loops_avx512.c), or SPYRE_NO_AVX512=1 is set, and for
 * what the AVX-512 build leaves out; SPYRE_NO_AVX2=1 forces the baseline. FMA is enabled but
 * nothing is fused implicitly (-std=c11 keeps a * b + c as two roundings), so the SFU's vmath.h
 * functions give the same bits in every build. */
#if defined(__x86_64__) && !defined(SPY_BASELINE_ONLY)
#pragma GCC target("avx2,fma,f16c")
#define SPY_LOOPS_VARIANT avx2
#define SPY_USE_F16C 1
#include "loops.c"
#else
typedef int spy_loops_avx2_unused;
#endif
