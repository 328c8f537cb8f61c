/* The typed loops of loops.c compiled a third time, for AVX-512 (x86-64 only): F, BW, CD, DQ and VL
 * (x86-64-v4) with FMA and F16C, 512-bit vectors, and f16 conversions by vcvtph2ps / vcvtps2ph on
 * zmm registers. loops.c picks this build at run time when the CPU has them (SPYRE_NO_AVX512=1
 * stops at the AVX2 build, SPYRE_NO_AVX2=1 at the baseline); lookups this build leaves NULL fall
 * through to the AVX2 build, then the baseline.
 *
 * gcc's tunings for several AVX-512 CPUs prefer 256-bit vectors (a clock penalty on early Xeons);
 * prefer-vector-width=512 asks for full-width loops, which CPUs with 512-bit units (Zen 5, Sapphire
 * Rapids) run at twice the AVX2 throughput. As in the AVX2 build nothing is fused implicitly
 * (-std=c11 keeps a * b + c as two roundings), so the SFU's vmath.h functions and every other loop
 * give the same bits in all three builds. */
#if defined(__x86_64__) && !defined(SPY_BASELINE_ONLY)
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512cd,avx512dq,avx512vl", "prefer-vector-width=512")
#define SPY_LOOPS_VARIANT avx512
#define SPY_USE_F16C 1
#define SPY_USE_AVX512 1
#include "loops.c"
#else
typedef int spy_loops_avx512_unused;
#endif
