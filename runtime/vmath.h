/* Vectorisable f32 math for the SFU loops (math1 on f16, bf16 and f32; f64 keeps libm).
 *
 * A libm call per element stops gcc from vectorising the loop around it, which made exp, tanh,
 * erf, ... loops several times slower than torch's (SLEEF) CPU kernels. Each function here is
 * branch-free straight-line code - range reduction, a polynomial, a rescaling, and selects for the
 * special values - built from what gcc vectorises: float arithmetic, int32 bit operations on the
 * representation, float <-> int32 conversion and compares. Everything is always inlined so that the
 * typed loops of loops.c see one flat body.
 *
 * Accuracy, as the largest error over all 2^32 inputs against the exact result (double libm), in
 * ulps of the f32 result (tests/test_vmath.py samples the same comparison):
 *   exp 0.99  exp2 1.08  exp10 1.26  expm1 1.10  log 0.92  log2 1.26  log10 1.14  log1p 1.01
 *   tanh 1.07  erf 1.32  sqrt 0.5 (correctly rounded)  rsqrt 1.49 (two roundings)  sin 0.73  cos 0.73
 * Subnormal arguments and results included; overflow gives inf, underflow 0 or the once-rounded
 * subnormal, NaN gives NaN, and signed zeros, infinities and domain errors give what C99 Annex F
 * says.
 *
 * No fused multiply-add: the -std=c11 build does not contract a * b + c, so the baseline (SSE4),
 * AVX2 and AVX-512 builds compute bit-identical results and a kernel's output does not depend on the
 * host CPU (fusing would save 5-25% of the arithmetic). Reductions are Cody-Waite (a constant split in
 * two so that k * hi is exact for every k that can occur), and where a product must be exact an
 * operand is cut to 12 significant bits. Only sin and cos use double: to reduce by pi/2 precisely
 * enough next to its multiples, and to round their leading terms once.
 *
 * Polynomial coefficients are discrete minimax fits of our own (a linear program on the relative
 * error over the reduced interval, the coefficients rounded to float one at a time, lowest first,
 * refitting the rest after each), written as exact hex floats. The error of each fit is noted.
 */
#ifndef SPYRE_VMATH_H
#define SPYRE_VMATH_H

#include <math.h>
#include <stdint.h>

#include "fp.h" /* sp_f2u, sp_u2f */

#define VM_INLINE static inline __attribute__((always_inline))

/* ---- helpers ---------------------------------------------------------------------------------- */
/* Round to the nearest integer (ties to even) for |x| < 2^22: adding 1.5 * 2^23 leaves the integer
 * in the low mantissa bits. Returns it as a float, and as an int32 through *k. */
VM_INLINE float vm_rint(float x, int32_t *k) {
    const float t = x + 0x1.8p23f;
    *k = (int32_t)(sp_f2u(t) - 0x4B400000u);
    return t - 0x1.8p23f;
}

/* 2^k for an integer k in [-126, 127] */
VM_INLINE float vm_pow2i(int32_t k) { return sp_u2f((uint32_t)(k + 127) << 23); }

/* x * 2^k for k in [-252, 254] with a single rounding: the first factor keeps x (about 1) normal,
 * so only the second product rounds, and it overflows to inf or rounds into the subnormals as one
 * multiplication by 2^k would. */
VM_INLINE float vm_scale(float x, int32_t k) {
    const int32_t k1 = k >> 1;
    return x * vm_pow2i(k1) * vm_pow2i(k - k1);
}

VM_INLINE float vm_copysign(float mag, float sgn) {
    return sp_u2f((sp_f2u(mag) & 0x7FFFFFFFu) | (sp_f2u(sgn) & 0x80000000u));
}

/* Horner steps */
#define VM_P2(x, c0, c1) ((c1) * (x) + (c0))
#define VM_P3(x, c0, c1, c2) (VM_P2(x, c1, c2) * (x) + (c0))
#define VM_P4(x, c0, c1, c2, c3) (VM_P3(x, c1, c2, c3) * (x) + (c0))
#define VM_P5(x, c0, c1, c2, c3, c4) (VM_P4(x, c1, c2, c3, c4) * (x) + (c0))
#define VM_P6(x, c0, c1, c2, c3, c4, c5) (VM_P5(x, c1, c2, c3, c4, c5) * (x) + (c0))
#define VM_P7(x, c0, c1, c2, c3, c4, c5, c6) (VM_P6(x, c1, c2, c3, c4, c5, c6) * (x) + (c0))
#define VM_P8(x, c0, c1, c2, c3, c4, c5, c6, c7) (VM_P7(x, c1, c2, c3, c4, c5, c6, c7) * (x) + (c0))
#define VM_P9(x, c0, c1, c2, c3, c4, c5, c6, c7, c8) (VM_P8(x, c1, c2, c3, c4, c5, c6, c7, c8) * (x) + (c0))

/* ln 2 split: LN2_HI has 15 significant bits, so k * LN2_HI is exact for |k| < 512 */
#define VM_LN2_HI 0x1.62e4p-1f
#define VM_LN2_LO 0x1.7f7d1cp-20f
#define VM_LOG2E 0x1.715476p+0f

/* ---- exponentials ------------------------------------------------------------------------------ */
/* e^r - 1 - r for |r| <= 0.35 (ln2/2 and some): r^2 * P(r), relative error of e^r 3.4e-9 */
VM_INLINE float vm_expm1_tail(float r) {
    const float p = VM_P5(r, 0x1.fffffcp-2f, 0x1.55548cp-3f, 0x1.5558b8p-5f, 0x1.123e62p-7f, 0x1.6a4eacp-10f);
    return (r * r) * p;
}

/* x = k ln2 + r, |r| <= ln2/2 (x already clamped so that |k| is small) */
VM_INLINE float vm_exp_reduce(float x, int32_t *k) {
    const float kf = vm_rint(x * VM_LOG2E, k);
    return (x - kf * VM_LN2_HI) - kf * VM_LN2_LO; /* the first difference is exact (Sterbenz) */
}

VM_INLINE float vm_expf(float x) {
    /* past the clamps the result is inf or 0 anyway; NaN passes (compares are false) */
    x = x > 89.0f ? 89.0f : x;
    x = x < -104.0f ? -104.0f : x;
    int32_t k;
    const float r = vm_exp_reduce(x, &k);
    return vm_scale(1.0f + (r + vm_expm1_tail(r)), k);
}

/* e^x for |x| < 87 (results normal, one power-of-two factor): for tanh and erf */
VM_INLINE float vm_exp_mid(float x) {
    int32_t k;
    const float r = vm_exp_reduce(x, &k);
    return (1.0f + (r + vm_expm1_tail(r))) * vm_pow2i(k);
}

VM_INLINE float vm_exp2f(float x) {
    x = x > 129.0f ? 129.0f : x;
    x = x < -151.0f ? -151.0f : x;
    int32_t k;
    const float r = x - vm_rint(x, &k); /* exact */
    /* 2^r = 1 + r Q(r), |r| <= 1/2, relative error 3.0e-9 */
    const float q = VM_P6(r, 0x1.62e43p-1f, 0x1.ebfbdcp-3f, 0x1.c6af7cp-5f, 0x1.3b2de0p-7f, 0x1.5f082ep-10f,
                          0x1.416b5ep-13f);
    return vm_scale(1.0f + r * q, k);
}

VM_INLINE float vm_exp10f(float x) {
    x = x > 39.0f ? 39.0f : x;
    x = x < -46.0f ? -46.0f : x;
    int32_t k;
    const float kf = vm_rint(x * 0x1.a934f0p+1f, &k); /* x log2(10) */
    /* log10(2) split: 14 significant bits in the high part */
    const float r = (x - kf * 0x1.344p-2f) - kf * 0x1.3509f8p-18f;
    /* 10^r = 1 + r Q(r), |r| <= log10(2)/2, relative error 2.9e-9 */
    const float q = VM_P6(r, 0x1.26bb1cp+1f, 0x1.53524ap+1f, 0x1.046f96p+1f, 0x1.2bd9fep+0f, 0x1.157054p-1f,
                          0x1.a6490cp-3f);
    return vm_scale(1.0f + r * q, k);
}

/* e^x - 1 = 2^k (e^r - 2^-k) = 2^k ((r + c) + (e^r - 1 - r)) with c = 1 - 2^-k: no cancellation
 * for small x (k = 0: c = 0), c is exact for k <= 24, and r + c is mostly exact too, so the sum
 * rounds about once before the exact scaling */
VM_INLINE float vm_expm1f(float x) {
    const float xc = x > 89.0f ? 89.0f : x < -18.0f ? -18.0f : x; /* below -18 the result is -1 */
    int32_t k;
    const float r = vm_exp_reduce(xc, &k);
    const float p = vm_pow2i(-(k > 100 ? 100 : k)), c = 1.0f - p, tail = vm_expm1_tail(r);
    /* k = 0, 1: c is 0 or 1/2 and r + c is nearly always exact; else adding c last rounds once, as
     * in exp, and what c lost to rounding (k > 24) goes into the small part */
    const float y = vm_scale(k == 0 || k == 1 ? (r + c) + tail : c + ((r + tail) + ((1.0f - c) - p)), k);
    return x == 0.0f ? x : y; /* -0 */
}

/* ---- logarithms -------------------------------------------------------------------------------- */
/* x = 2^e m with m in [sqrt(1/2), sqrt(2)): returns f = m - 1 (exact) and e, for finite x > 0
 * (subnormals are scaled by 2^23 first) */
VM_INLINE float vm_log_reduce(float x, float *e) {
    const int sub = x < 0x1p-126f;
    uint32_t ix = sp_f2u(sub ? x * 0x1p23f : x);
    ix += 0x3F800000u - 0x3F3504F3u; /* m = sqrt(1/2) lands on the exponent of 1.0 */
    *e = (float)((int32_t)(ix >> 23) - 127 - (sub ? 23 : 0));
    return sp_u2f((ix & 0x007FFFFFu) + 0x3F3504F3u) - 1.0f;
}

/* log(1 + f) - f for f in [sqrt(1/2) - 1, sqrt(2) - 1]: -f^2/2 + f^3 P(f), P's relative error
 * (of log(1 + f)) 6.0e-9 */
VM_INLINE float vm_log1p_tail(float f) {
    const float p = VM_P8(f, 0x1.555554p-2f, -0x1.000232p-2f, 0x1.99a058p-3f, -0x1.546f38p-3f, 0x1.22cfd0p-3f,
                          -0x1.0d9a2ep-3f, 0x1.05b4b6p-3f, -0x1.392a04p-4f);
    return (f * f) * (f * p - 0.5f);
}

/* the special values of log-like functions of x: +0/-0 -> -inf, +inf -> +inf, x < 0 or NaN -> NaN */
VM_INLINE float vm_log_special(float x, float y) {
    y = x == 0.0f ? -INFINITY : y;
    y = x == INFINITY ? x : y;
    return x < 0.0f || x != x ? NAN : y;
}

VM_INLINE float vm_logf(float x) {
    float e;
    const float f = vm_log_reduce(x, &e);
    const float y = (e * VM_LN2_LO + vm_log1p_tail(f)) + f;
    return vm_log_special(x, y + e * VM_LN2_HI);
}

/* log(1 + f) / ln(b) as hi + lo: f is cut to 12 significant bits, fh, so that fh * ihi is exact
 * (ihi = 1/ln(b) to 12 bits); everything else goes into lo */
VM_INLINE float vm_log_scaled(float f, float ihi, float ilo, float ifull, float *lo) {
    const float fh = sp_u2f(sp_f2u(f) & 0xFFFFF000u);
    *lo = ((f - fh) + vm_log1p_tail(f)) * ifull + fh * ilo;
    return fh * ihi;
}

VM_INLINE float vm_log2f(float x) {
    float e, lo;
    const float f = vm_log_reduce(x, &e);
    const float hi = vm_log_scaled(f, 0x1.716p+0f, -0x1.7135a8p-13f, VM_LOG2E, &lo);
    return vm_log_special(x, e + (hi + lo));
}

VM_INLINE float vm_log10f(float x) {
    float e, lo;
    const float f = vm_log_reduce(x, &e);
    const float hi = vm_log_scaled(f, 0x1.bccp-2f, -0x1.09d5b2p-15f, 0x1.bcb7b2p-2f, &lo);
    /* e log10(2) with log10(2) split (14 bits high: e * hi exact) */
    return vm_log_special(x, e * 0x1.344p-2f + (hi + (lo + e * 0x1.3509f8p-18f)));
}

/* log1p(x) = log(u) + c / u with u = 1 + x rounded and c = x - (u - 1) the rounding error */
VM_INLINE float vm_log1pf(float x) {
    const float u = 1.0f + x;
    const float c = (x - (u - 1.0f)) / u;
    float e;
    const float f = vm_log_reduce(u, &e);
    const float y = (e * VM_LN2_LO + (vm_log1p_tail(f) + c)) + f;
    const float r = vm_log_special(u, y + e * VM_LN2_HI);
    return x == 0.0f ? x : x == INFINITY ? x : r; /* -0; inf (c is NaN there) */
}

/* ---- tanh, erf --------------------------------------------------------------------------------- */
/* odd: computed for |x|, the sign put back last (which also keeps -0) */
VM_INLINE float vm_tanhf(float x) {
    const float ax = fabsf(x);
    /* |x| < 0.9: x + x^3 P(x^2), relative error 1.1e-9 */
    const float z = ax * ax;
    const float p = VM_P7(z, -0x1.55554ep-2f, 0x1.110f38p-3f, -0x1.b9ca4ep-5f, 0x1.62f1cap-6f, -0x1.0ed7a8p-7f,
                          0x1.529d4cp-9f, -0x1.ddd836p-12f);
    const float small = ax + ax * (z * p);
    /* else 1 - 2 / (e^2|x| + 1); past 9.1 that is 1 in f32 */
    const float big = 1.0f - 2.0f / (vm_exp_mid(2.0f * (ax > 9.1f ? 9.1f : ax)) + 1.0f);
    return vm_copysign(ax < 0.9f ? small : big, x);
}

VM_INLINE float vm_erff(float x) {
    const float ax = fabsf(x);
    const float z = x * x;
    /* |x| < 1: x + x P(x^2), relative error 9.5e-10 */
    const float p = VM_P8(z, 0x1.06eba8p-3f, -0x1.812740p-2f, 0x1.ce2d74p-4f, -0x1.b80450p-6f, 0x1.54833ep-8f,
                          -0x1.a99de8p-11f, 0x1.69d8eep-14f, -0x1.2539f2p-19f);
    const float small = x + x * p;
    /* 1 <= |x| < 3.92: 1 - e^(-x^2) G(|x|), G = erfcx fitted in t = |x| - 2.46, absolute error of
     * erfc 2.4e-9. The errors of this branch (the rounding of x^2 included) scale with erfc, at
     * most 0.19 of erf here. Past 3.92, erf is 1 in f32. */
    const float t = ax - 2.46f;
    const float g = VM_P9(t, 0x1.b5e824p-3f, -0x1.38d500p-4f, 0x1.a88f1ap-6f, -0x1.16eabcp-7f, 0x1.40c88ap-9f,
                          -0x1.9b2d26p-11f, 0x1.fcac02p-12f, 0x1.904664p-13f, 0x1.c01ed8p-14f);
    const float big = 1.0f - vm_exp_mid(-(z > 16.0f ? 16.0f : z)) * g;
    return ax < 1.0f ? small : vm_copysign(ax > 3.92f ? 1.0f : big, x);
}

/* ---- sin, cos ---------------------------------------------------------------------------------- */
/* For |x| <= VM_TRIG_MAX: x = j pi/2 + r with |r| <= pi/4, reduced in double - j * P1 is exact (P1 is
 * pi/2 to 31 bits, j < 2^20), and P2 carries the next 53 bits - so r keeps its relative precision
 * even next to a multiple of pi/2; then sin r or cos r by the quadrant j mod 4. Larger |x|, inf and
 * NaN are the caller's (libm's Payne-Hanek reduction, element by element: they are rare). */
#define VM_TRIG_MAX 0x1p19f
VM_INLINE int vm_trig_slow(float x) { return !(fabsf(x) <= VM_TRIG_MAX); }

/* sin r and cos r for |r| <= pi/4 (relative errors 1.6e-10 and 7.2e-12), and the quadrant */
VM_INLINE int32_t vm_sincos_core(float x, float *s, float *c) {
    const double xd = x;
    const double jd = (xd * 0x1.45f306dc9c883p-1 + 0x1.8p52) - 0x1.8p52; /* rint(x 2/pi) */
    const double rd = (xd - jd * 0x1.921fb544p+0) - jd * 0x1.0b4611a626331p-34, zd = rd * rd;
    const float r = (float)rd, z = (float)zd;
    /* the leading terms r and 1 - r^2/2 in double, the small tails in float: one rounding that counts */
    const float st = r * (z * VM_P4(z, -0x1.555556p-3f, 0x1.111174p-7f, -0x1.a05954p-13f, 0x1.7c2c4ep-19f));
    const float ct = z * (z * VM_P4(z, 0x1.555556p-5f, -0x1.6c175ep-10f, 0x1.a071c4p-16f, -0x1.361b2ep-22f));
    *s = (float)(rd + (double)st);
    *c = (float)((1.0 - 0.5 * zd) + (double)ct);
    return (int32_t)jd & 3;
}

VM_INLINE float vm_sinf(float x) {
    float s, c;
    const int32_t q = vm_sincos_core(x, &s, &c); /* sin, cos, -sin, -cos */
    const float y = q & 1 ? c : s;
    return x == 0.0f ? x : q & 2 ? -y : y; /* -0 */
}

VM_INLINE float vm_cosf(float x) {
    float s, c;
    const int32_t q = vm_sincos_core(x, &s, &c); /* cos, -sin, -cos, sin */
    const float y = q & 1 ? s : c;
    return (q + 1) & 2 ? -y : y;
}

/* ---- roots ------------------------------------------------------------------------------------- */
/* the hardware square root (correctly rounded); the reciprocal square root rounds twice */
VM_INLINE float vm_sqrtf(float x) { return __builtin_sqrtf(x); }
VM_INLINE float vm_rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }

#endif
