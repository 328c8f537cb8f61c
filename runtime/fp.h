/* Floating-point formats narrower than f32: f16, bf16 and the fp8 family.
 *
 * Values of these types are stored as raw bits. Arithmetic converts to f32, computes and rounds
 * back. The fast conversions below (f16 <-> f32, bf16 <-> f32) are branch-free bit manipulation
 * so that loops using them vectorise; the generic encoder (`sp_encode`) rounds a double to any
 * small format with round-to-nearest-even or round-toward-zero, and follows the overflow rules of
 * each kind of format:
 *   IEEE    (f16, bf16, f32, f8e5m2): infinities; rtne overflows to inf, rtz to the largest finite.
 *   FN      (f8e4m3fn, f8e4m3b15): no infinities; S.1111.111 is NaN; overflow and inf saturate to
 *           the largest finite value (448 for e4m3fn, 1.75 for e4m3b15).
 *   FNUZ    (f8e4m3fnuz, f8e5m2fnuz): no infinities, no negative zero; 0x80 is the only NaN;
 *           overflow and inf saturate (240, 57344); -0 becomes +0.
 */
#ifndef SPYRE_FP_H
#define SPYRE_FP_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isa_gen.h"

static inline uint32_t sp_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float sp_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint64_t sp_d2u(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static inline double sp_u2d(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

/* f16 -> f32, exact. Normal values are rebiased by a multiplication; subnormals come out of a
 * magic-number subtraction; the choice between them is a select, so the loop vectorises. */
static inline float sp_f16_to_f32(uint16_t h) {
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    /* exponent rebias 15 -> 127 done as (bits >> 3 with bias 15+224) * 2^-112; inf/NaN stay so */
    const float normalized = sp_u2f((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    /* subnormal m * 2^-24: put m in the mantissa of 0.5 and subtract 0.5 */
    const float denormalized = sp_u2f((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t bits = two_w < (1u << 27) ? sp_f2u(denormalized) : sp_f2u(normalized);
    return sp_u2f(sign | bits);
}

/* f32 -> f16, round to nearest even; overflow gives inf; NaN gives a quiet NaN of the same sign with
 * the top 10 bits of its mantissa (the quiet bit set), as F16C's vcvtps2ph does: the SIMD builds of
 * loops.c convert with it, and every build gives the same bits.
 * Rounding is done by the FPU: adding a power of two chosen so that the f16's last mantissa bit
 * is the f32's last mantissa bit, the sum's low bits are the rounded f16 (exponent and mantissa). */
static inline uint16_t sp_f32_to_f16(float f) {
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f; /* overflows to inf where f16 does */
    const uint32_t w = sp_f2u(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    bias = bias < 0x71000000u ? 0x71000000u : bias;
    base = sp_u2f((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = sp_f2u(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u | ((w >> 13) & 0x3FFu) : nonsign));
}

static inline float sp_bf16_to_f32(uint16_t h) { return sp_u2f((uint32_t)h << 16); }

/* f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t sp_f32_to_bf16(float f) {
    const uint32_t u = sp_f2u(f);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

/* ---- DLFloat16 (isa.DL16) and the numerics mode ------------------------------------------------ */
/* The numerics mode (enum spyre_numerics): NUMERICS_DL16 rounds every f16 value the simulated card
 * converts through IBM's DLFloat16 (docs/numerics.md). Set between launches (_runtime.set_numerics);
 * a launch reads it as it runs. */
extern int sp_numerics_mode;
#define SP_DL16() __builtin_expect(sp_numerics_mode == NUMERICS_DL16, 0)

#define SP_DL16_SHIFT (23 - SPYRE_DL16_MBITS) /* f32 mantissa bits DLFloat16 drops */
/* the f32 bits of DLFloat16's largest finite value (all-ones exponent, mantissa one below all ones:
 * all ones is the special value) and of its smallest nonzero one (exponent field 0 is a normal
 * binade, but mantissa 0 there is zero) */
#define SP_DL16_MAX_BITS                                                                                 \
    (((uint32_t)((1 << SPYRE_DL16_EBITS) - 1 - SPYRE_DL16_BIAS + 127) << 23) |                          \
     (((1u << SPYRE_DL16_MBITS) - 2) << SP_DL16_SHIFT))
#define SP_DL16_MIN_BITS (((uint32_t)(127 - SPYRE_DL16_BIAS) << 23) | (1u << SP_DL16_SHIFT))

/* f32 -> DLFloat16 -> f32: round to nearest with ties away from zero (IBM's conversions add half a
 * unit and truncate), flush what rounds below the smallest nonzero value to a zero of the same sign,
 * and give what rounds above the largest finite value, infinities and NaNs the one special value,
 * which reads back as a quiet NaN. Branch-free, so tile loops over it vectorise. */
static inline float sp_round_dl16(float f) {
    const uint32_t u = sp_f2u(f);
    const uint32_t a = u & 0x7FFFFFFFu;
    const uint32_t r = (a + (1u << (SP_DL16_SHIFT - 1))) & ~((1u << SP_DL16_SHIFT) - 1u);
    uint32_t out = (u & 0x80000000u) | (r < SP_DL16_MIN_BITS ? 0u : r);
    out = r > SP_DL16_MAX_BITS ? 0x7FC00000u : out;
    return sp_u2f(out);
}
static inline void sp_round_dl16_n(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = sp_round_dl16(x[i]);
}
/* DLFloat16's own bits: sign, 6-bit exponent (bias 31), 9-bit fraction; exponent and fraction all
 * ones is the one special value (NaN and infinity), exponent and fraction zero is zero. Encoding
 * rounds as sp_round_dl16 does; the shift by SP_DL16_SHIFT moves an f32's exponent and fraction bits
 * into place once the exponent is rebased. Both are branch-free, so tile loops over them vectorise. */
#define SP_DL16_REBASE ((uint32_t)(127 - SPYRE_DL16_BIAS) << 23)
#define SP_DL16_SPECIAL ((1u << (SPYRE_DL16_EBITS + SPYRE_DL16_MBITS)) - 1u) /* also the magnitude mask */
#define SP_DL16_SIGN (1u << (SPYRE_DL16_EBITS + SPYRE_DL16_MBITS))
static inline uint16_t sp_f32_to_dl16(float f) {
    const uint32_t u = sp_f2u(f);
    const uint32_t r = ((u & 0x7FFFFFFFu) + (1u << (SP_DL16_SHIFT - 1))) & ~((1u << SP_DL16_SHIFT) - 1u);
    uint32_t mag = r < SP_DL16_MIN_BITS ? 0u : (r - SP_DL16_REBASE) >> SP_DL16_SHIFT;
    mag = r > SP_DL16_MAX_BITS ? SP_DL16_SPECIAL : mag;
    return (uint16_t)(((u >> 16) & SP_DL16_SIGN) | mag);
}
/* f32 -> DLFloat16 bits, truncated (Triton's rtz downcast): what truncates below the smallest value
 * is zero and past the largest finite one is the largest finite one; NaN and infinities stay special */
static inline uint16_t sp_f32_to_dl16_rtz(float f) {
    const uint32_t u = sp_f2u(f), a = u & 0x7FFFFFFFu;
    const uint32_t r = a & ~((1u << SP_DL16_SHIFT) - 1u);
    uint32_t mag = r < SP_DL16_MIN_BITS ? 0u : r > SP_DL16_MAX_BITS ? (SP_DL16_MAX_BITS - SP_DL16_REBASE) >> SP_DL16_SHIFT
                                                                    : (r - SP_DL16_REBASE) >> SP_DL16_SHIFT;
    mag = a >= 0x7F800000u ? SP_DL16_SPECIAL : mag;
    return (uint16_t)(((u >> 16) & SP_DL16_SIGN) | mag);
}
static inline float sp_dl16_to_f32(uint16_t h) {
    const uint32_t mag = h & SP_DL16_SPECIAL, sign = (uint32_t)(h & SP_DL16_SIGN) << 16;
    uint32_t out = mag == 0 ? sign : sign | ((mag << SP_DL16_SHIFT) + SP_DL16_REBASE);
    out = mag == SP_DL16_SPECIAL ? 0x7FC00000u : out;
    return sp_u2f(out);
}
/* binary16 bits <-> DLFloat16 bits (through f32: a binary16 value is exact there) */
static inline uint16_t sp_f16_to_dl16(uint16_t h) { return sp_f32_to_dl16(sp_f16_to_f32(h)); }
static inline uint16_t sp_dl16_to_f16(uint16_t h) { return sp_f32_to_f16(sp_dl16_to_f32(h)); }
static inline void sp_f32_to_dl16_n(uint16_t *h, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] = sp_f32_to_dl16(f[i]);
}
static inline void sp_dl16_to_f32_n(float *f, const uint16_t *h, size_t n) {
    for (size_t i = 0; i < n; i++) f[i] = sp_dl16_to_f32(h[i]);
}

/* f16 bits rounded through DLFloat16 (values, not bits, are DLFloat16's: the storage stays binary16) */
static inline uint16_t sp_f16_round_dl16(uint16_t h) { return sp_f32_to_f16(sp_round_dl16(sp_f16_to_f32(h))); }
static inline void sp_f16_round_dl16_n(uint16_t *h, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] = sp_f16_round_dl16(h[i]);
}

/* ---- generic small formats ------------------------------------------------------------------ */
/* The formats are isa.py's (isa_gen.h's spyre_dtype_format, by dtype code). */
typedef spyre_float_format sp_fmt;
#define SP_FMT_F16 spyre_dtype_format[DT_F16]
#define SP_FMT_BF16 spyre_dtype_format[DT_BF16]
#define SP_FMT_FP8 (spyre_dtype_format + SPYRE_FP8_FIRST) /* indexed by dtype code - SPYRE_FP8_FIRST */

static inline int sp_fmt_emax_field(const sp_fmt *F) {
    return F->style == FMT_IEEE ? (1 << F->ebits) - 2 : (1 << F->ebits) - 1;
}
static inline uint32_t sp_fmt_max_mant(const sp_fmt *F) {
    uint32_t all = (1u << F->mbits) - 1;
    return F->style == FMT_FN ? all - 1 : all;
}
static inline double sp_fmt_max(const sp_fmt *F) {
    return ldexp(1.0 + (double)sp_fmt_max_mant(F) / (double)(1u << F->mbits), sp_fmt_emax_field(F) - F->bias);
}

/* Decode raw bits of format F to double (exact). */
static inline double sp_decode(uint32_t bits, const sp_fmt *F) {
    const uint32_t nb = 1u + F->ebits + F->mbits;
    const uint32_t sign = (bits >> (nb - 1)) & 1u;
    const uint32_t e = (bits >> F->mbits) & ((1u << F->ebits) - 1);
    const uint32_t m = bits & ((1u << F->mbits) - 1);
    if (F->style == FMT_FNUZ && sign && e == 0 && m == 0) return NAN;
    if (F->style == FMT_IEEE && e == (1u << F->ebits) - 1) return m ? NAN : (sign ? -INFINITY : INFINITY);
    if (F->style == FMT_FN && e == (1u << F->ebits) - 1 && m == (1u << F->mbits) - 1) return NAN;
    double v = e == 0 ? ldexp((double)m, 1 - F->bias - F->mbits)
                      : ldexp((double)(m | (1u << F->mbits)), (int)e - F->bias - F->mbits);
    return sign ? -v : v;
}

/* Round x to format F (rtz: toward zero, else to nearest even) and return the raw bits. */
static inline uint32_t sp_encode(double x, const sp_fmt *F, int rtz) {
    const uint32_t nb = 1u + F->ebits + F->mbits;
    const uint32_t sbit = signbit(x) ? 1u << (nb - 1) : 0u;
    const uint32_t eall = (1u << F->ebits) - 1;
    const uint32_t inf = eall << F->mbits;
    const uint32_t maxcode = ((uint32_t)sp_fmt_emax_field(F) << F->mbits) | sp_fmt_max_mant(F);
    if (isnan(x)) {
        if (F->style == FMT_IEEE) return sbit | inf | (1u << (F->mbits - 1));
        if (F->style == FMT_FN) return sbit | ((1u << (nb - 1)) - 1);
        return 1u << (nb - 1);
    }
    const double a = fabs(x);
    if (a == 0) return F->style == FMT_FNUZ ? 0u : sbit;
    if (isinf(a)) return sbit | (F->style == FMT_IEEE ? inf : maxcode);
    int e;
    (void)frexp(a, &e);
    int E = e - 1; /* a in [2^E, 2^(E+1)) */
    const int emin = 1 - F->bias;
    if (E < emin) E = emin;
    double m = ldexp(a, F->mbits - E); /* a in units of the last mantissa place: exact */
    m = rtz ? trunc(m) : nearbyint(m);
    if (ldexp(m, E - F->mbits) > sp_fmt_max(F))
        return sbit | ((F->style == FMT_IEEE && !rtz) ? inf : maxcode);
    if (m == 0) return F->style == FMT_FNUZ ? 0u : sbit;
    uint64_t mi = (uint64_t)m;
    if (mi >> (F->mbits + 1)) { /* rounded up into the next binade */
        mi >>= 1;
        E += 1;
    }
    if (mi < (1u << F->mbits)) return sbit | (uint32_t)mi; /* subnormal */
    return sbit | ((uint32_t)(E + F->bias) << F->mbits) | (uint32_t)(mi - (1u << F->mbits));
}

/* Integer -> double, rounding to odd when the value needs more than 53 bits, so that a second
 * rounding to a format of at most 51 significant bits is the correctly rounded result. */
static inline double sp_u64_to_double_rto(uint64_t u) {
    if (u < (1ull << 53)) return (double)u;
    const int drop = 64 - __builtin_clzll(u) - 53;
    uint64_t kept = u >> drop;
    if (u & ((1ull << drop) - 1)) kept |= 1u;
    return ldexp((double)kept, drop);
}
static inline double sp_i64_to_double_rto(int64_t v) {
    return v < 0 ? -sp_u64_to_double_rto((uint64_t)0 - (uint64_t)v) : sp_u64_to_double_rto((uint64_t)v);
}

/* fp8 decode tables (float), filled by sp_fp_init(); indexed [dtype - SPYRE_FP8_FIRST][bits]. */
extern float sp_fp8_table[SPYRE_FP8_COUNT][256];
void sp_fp_init(void);

#endif
