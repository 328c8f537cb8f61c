/* Typed inner loops of the vector unit and the SFU, written once and expanded over dtypes.
 *
 * Like NumPy's .c.src templates, but with the C preprocessor: each operation is an inline element
 * function per dtype (`e_<op>_<dt>`), and loop macros expand it into the broadcast variants
 * (vector/vector, scalar/vector, vector/scalar, and all 7 mixes for three sources) with restrict
 * pointers and no per-element dtype switch, so gcc vectorises the common case. The interpreter
 * resolves the function pointer of each instruction once, at load (see the spy_k_* lookups at the
 * end).
 *
 * Dtype families:
 *   integers  i1 i8 i16 i32 i64: st_<dt> storage type; ls_/lu_ load as signed/unsigned (i1 is the
 *             low bit: -1/0 signed, 1/0 unsigned); put_ stores the low bits of an unsigned value,
 *             so every result wraps around.
 *   floats    f16 bf16 f32 f64: ld_ converts storage to the compute type (float, or double for
 *             f64), pt_ rounds back to nearest even.
 *   fp8       only converted (cvt), through double and the generic encoder of fp.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* Results never depend on floating-point exception flags here; without trapping math gcc may
 * evaluate both arms of a select (and compare NaNs) speculatively, which is what lets the half
 * conversions and the NaN-aware min/max vectorise. Values are unchanged (this is not fast-math). */
#pragma GCC optimize("no-trapping-math")
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp.h"
#include "interp.h"
#include "vmath.h"

/* This file is compiled three times: as itself (baseline x86-64-v2 or any other target), and
 * through loops_avx2.c (AVX2/FMA/F16C) and loops_avx512.c (AVX-512 F/BW/CD/DQ/VL, 512-bit
 * vectors) on x86-64. Those define SPY_LOOPS_VARIANT as their suffix (avx2, avx512), and KFN names
 * the lookups of each build (name_avx2, name_avx512; name_base for the baseline); the baseline build
 * also defines the public spy_k_* functions, which pick a build once by CPU. The libm-bound SFU
 * functions (all f64 ones, and the f32 ones vmath.h does not have), the generic conversions and
 * atomics exist only in the baseline build. */
#define KFN_CAT_(name, sfx) name##_##sfx
#define KFN_CAT(name, sfx) KFN_CAT_(name, sfx)
#ifdef SPY_LOOPS_VARIANT
#define KFN(name) KFN_CAT(name, SPY_LOOPS_VARIANT)
#else
#define KFN(name) KFN_CAT(name, base)
#endif
#if defined(SPY_USE_F16C) || defined(SPY_USE_AVX512)
#include <immintrin.h>
#endif

/* ---- dtype families ------------------------------------------------------------------------- */
typedef uint8_t st_i1; typedef int8_t sc_i1; typedef uint8_t uc_i1; typedef uint32_t uw_i1; typedef sp_u8 mt_i1;
typedef int8_t st_i8; typedef int8_t sc_i8; typedef uint8_t uc_i8; typedef uint32_t uw_i8; typedef sp_i8 mt_i8;
typedef int16_t st_i16; typedef int16_t sc_i16; typedef uint16_t uc_i16; typedef uint32_t uw_i16; typedef sp_i16 mt_i16;
typedef int32_t st_i32; typedef int32_t sc_i32; typedef uint32_t uc_i32; typedef uint32_t uw_i32; typedef sp_i32 mt_i32;
typedef int64_t st_i64; typedef int64_t sc_i64; typedef uint64_t uc_i64; typedef uint64_t uw_i64; typedef sp_i64 mt_i64;
/* double-width products for mulhi (32-bit for the narrow types: with 64-bit ones gcc 12 vectorises
 * the unsigned 16-bit case into a signed pmulhw) */
typedef int32_t ws_i1, ws_i8, ws_i16;
typedef uint32_t wu_i1, wu_i8, wu_i16;
typedef int64_t ws_i32;
typedef uint64_t wu_i32;
typedef __int128 ws_i64;
typedef unsigned __int128 wu_i64;
enum { BITS_i1 = 1, BITS_i8 = 8, BITS_i16 = 16, BITS_i32 = 32, BITS_i64 = 64 };

static inline sc_i1 ls_i1(st_i1 x) { return (sc_i1)(0 - (x & 1)); }
static inline uc_i1 lu_i1(st_i1 x) { return (uc_i1)(x & 1); }
static inline st_i1 put_i1(uw_i1 r) { return (st_i1)(r & 1u); }
#define PLAIN_INT(d)                                                       \
    static inline sc_##d ls_##d(st_##d x) { return (sc_##d)x; }            \
    static inline uc_##d lu_##d(st_##d x) { return (uc_##d)x; }            \
    static inline st_##d put_##d(uw_##d r) { return (st_##d)r; }
PLAIN_INT(i8)
PLAIN_INT(i16)
PLAIN_INT(i32)
PLAIN_INT(i64)

typedef uint16_t st_f16; typedef float ct_f16; typedef sp_u16 mt_f16;
typedef uint16_t st_bf16; typedef float ct_bf16; typedef sp_u16 mt_bf16;
typedef float st_f32; typedef float ct_f32; typedef sp_f32 mt_f32;
typedef double st_f64; typedef double ct_f64; typedef sp_f64 mt_f64;
/* SPYRE_NUMERICS=dl16: f16 storage holds DLFloat16's bits, as on the card (fp.h) */
static inline float ld_f16(st_f16 x) { return SP_DL16() ? sp_dl16_to_f32(x) : sp_f16_to_f32(x); }
static inline st_f16 pt_f16(float x) { return SP_DL16() ? sp_f32_to_dl16(x) : sp_f32_to_f16(x); }
static inline float ld_bf16(st_bf16 x) { return sp_bf16_to_f32(x); }
static inline st_bf16 pt_bf16(float x) { return sp_f32_to_bf16(x); }
static inline float ld_f32(st_f32 x) { return x; }
static inline st_f32 pt_f32(float x) { return x; }
static inline double ld_f64(st_f64 x) { return x; }
static inline st_f64 pt_f64(double x) { return x; }

/* X(dt, DT) lists; floats also carry the helper suffix of their compute type (f: float, d: double) */
#define INT_DTS(X) SPYRE_INT_DTYPES(X) /* isa.DTYPES (isa_gen.h) */
#define FLT_DTS(X) X(f16, F16, f) X(bf16, BF16, f) X(f32, F32, f) X(f64, F64, d)

/* ---- loop templates ------------------------------------------------------------------------- */
#define LOOP_UN(NAME, MO, MA, F)                                                               \
    static void NAME(void *restrict d_, const void *restrict a_, size_t n) {                   \
        MO *restrict d = (MO *)d_;                                                             \
        const MA *restrict a = (const MA *)a_;                                                 \
        for (size_t i = 0; i < n; i++) d[i] = F(a[i]);                                         \
    }

#define LOOP_BIN(NAME, MO, MA, MB, F) LOOP_BIN_Q(NAME, MO, MA, MB, F, 0, F)
/* QUICK: FQ gives F's bits when the broadcast operand is not NaN (add and mul: see NAN1) */
#define LOOP_BIN_Q(NAME, MO, MA, MB, F, QUICK, FQ)                                                           \
    static void NAME##_v0(void *restrict d_, const void *restrict a_, const void *restrict b_, size_t n) {   \
        MO *restrict d = (MO *)d_;                                                                           \
        const MA *restrict a = (const MA *)a_;                                                               \
        const MB *restrict b = (const MB *)b_;                                                               \
        for (size_t i = 0; i < n; i++) d[i] = F(a[i], b[i]);                                                 \
    }                                                                                                        \
    static void NAME##_v1(void *restrict d_, const void *restrict a_, const void *restrict b_, size_t n) {   \
        MO *restrict d = (MO *)d_;                                                                           \
        const MA av = *(const MA *)a_;                                                                       \
        const MB *restrict b = (const MB *)b_;                                                               \
        if (QUICK && av == av)                                                                               \
            for (size_t i = 0; i < n; i++) d[i] = FQ(av, b[i]);                                              \
        else                                                                                                 \
            for (size_t i = 0; i < n; i++) d[i] = F(av, b[i]);                                               \
    }                                                                                                        \
    static void NAME##_v2(void *restrict d_, const void *restrict a_, const void *restrict b_, size_t n) {   \
        MO *restrict d = (MO *)d_;                                                                           \
        const MA *restrict a = (const MA *)a_;                                                               \
        const MB bv = *(const MB *)b_;                                                                       \
        if (QUICK && bv == bv)                                                                               \
            for (size_t i = 0; i < n; i++) d[i] = FQ(a[i], bv);                                              \
        else                                                                                                 \
            for (size_t i = 0; i < n; i++) d[i] = F(a[i], bv);                                               \
    }

/* Three sources: one always-inline body, instantiated with constant broadcast flags. */
#define NO_QUICK(x, y, z, b1, b2, b3) (x)
#define NO_PLAIN(x, y, z) (x)
#define LOOP_TERN(NAME, MO, MA, MB, MC, F) LOOP_TERN_Q(NAME, MO, MA, MB, MC, F, 0, NO_QUICK, NO_PLAIN)
/* QUICK: FQ(x, y, z, b1, b2, b3) gives F's bits when the broadcast operands are not NaN (sp_fma_bcast),
 * and FP(x, y, z), the plain operation, gives them when no operand is NaN. Three tiles, the result
 * in none of them: the plain loop first, then F's if a result is NaN (a NaN operand, or an invalid
 * operation such as inf * 0, which F then gives the same default NaN). Without a NaN result no
 * operand was NaN, as FP propagates every NaN. */
#define LOOP_TERN_Q(NAME, MO, MA, MB, MC, F, QUICK, FQ, FP)                                                  \
    static inline __attribute__((always_inline)) void NAME##_body(                                          \
        void *restrict d_, const void *restrict a_, const void *restrict b_, const void *restrict c_,       \
        size_t n, const int b1, const int b2, const int b3) {                                               \
        MO *restrict d = (MO *)d_;                                                                           \
        const MA *restrict a = (const MA *)a_;                                                               \
        const MB *restrict b = (const MB *)b_;                                                               \
        const MC *restrict c = (const MC *)c_;                                                               \
        const MA a0 = a[0];                                                                                  \
        const MB b0 = b[0];                                                                                  \
        const MC c0 = c[0];                                                                                  \
        if (QUICK && (b1 | b2 | b3) && (!b1 || a0 == a0) && (!b2 || b0 == b0) && (!b3 || c0 == c0)) {      \
            for (size_t i = 0; i < n; i++)                                                                   \
                d[i] = FQ(b1 ? a0 : a[i], b2 ? b0 : b[i], b3 ? c0 : c[i], b1, b2, b3);                     \
            return;                                                                                          \
        }                                                                                                    \
        if (QUICK && !(b1 | b2 | b3) && d_ != a_ && d_ != b_ && d_ != c_) {                                  \
            int nan = 0;                                                                                     \
            for (size_t i = 0; i < n; i++) {                                                                 \
                const MO r = FP(a[i], b[i], c[i]);                                                           \
                d[i] = r;                                                                                    \
                nan |= r != r;                                                                               \
            }                                                                                                \
            if (!nan) return;                                                                                \
        }                                                                                                    \
        for (size_t i = 0; i < n; i++) d[i] = F(b1 ? a0 : a[i], b2 ? b0 : b[i], b3 ? c0 : c[i]);             \
    }                                                                                                        \
    TERN_VARIANT(NAME, 0, 0, 0, 0) TERN_VARIANT(NAME, 1, 1, 0, 0) TERN_VARIANT(NAME, 2, 0, 1, 0)             \
    TERN_VARIANT(NAME, 3, 1, 1, 0) TERN_VARIANT(NAME, 4, 0, 0, 1) TERN_VARIANT(NAME, 5, 1, 0, 1)             \
    TERN_VARIANT(NAME, 6, 0, 1, 1)
#define TERN_VARIANT(NAME, V, B1, B2, B3)                                                                    \
    static void NAME##_v##V(void *restrict d, const void *restrict a, const void *restrict b,               \
                            const void *restrict c, size_t n) {                                              \
        NAME##_body(d, a, b, c, n, B1, B2, B3);                                                              \
    }
#define TERN_ROW(NAME) {NAME##_v0, NAME##_v1, NAME##_v2, NAME##_v3, NAME##_v4, NAME##_v5, NAME##_v6}

/* ---- integer element operations --------------------------------------------------------------- */
#define DEF_INT_ELEMS(d, D)                                                                                   \
    static inline st_##d e_add_##d(st_##d a, st_##d b) { return put_##d((uw_##d)lu_##d(a) + (uw_##d)lu_##d(b)); } \
    static inline st_##d e_sub_##d(st_##d a, st_##d b) { return put_##d((uw_##d)lu_##d(a) - (uw_##d)lu_##d(b)); } \
    static inline st_##d e_mul_##d(st_##d a, st_##d b) { return put_##d((uw_##d)lu_##d(a) * (uw_##d)lu_##d(b)); } \
    static inline st_##d e_divs_##d(st_##d a, st_##d b) {                                                    \
        const sc_##d x = ls_##d(a), y = ls_##d(b);                                                           \
        if (y == 0) return put_##d(0);                                                                       \
        if (y == -1) return put_##d((uw_##d)0 - (uw_##d)x);                                                  \
        return put_##d((uw_##d)(x / y));                                                                     \
    }                                                                                                        \
    static inline st_##d e_rems_##d(st_##d a, st_##d b) {                                                    \
        const sc_##d x = ls_##d(a), y = ls_##d(b);                                                           \
        if (y == 0 || y == -1) return put_##d(0);                                                            \
        return put_##d((uw_##d)(x % y));                                                                     \
    }                                                                                                        \
    static inline st_##d e_divu_##d(st_##d a, st_##d b) {                                                    \
        const uc_##d x = lu_##d(a), y = lu_##d(b);                                                           \
        return put_##d(y == 0 ? 0 : (uw_##d)(x / y));                                                        \
    }                                                                                                        \
    static inline st_##d e_remu_##d(st_##d a, st_##d b) {                                                    \
        const uc_##d x = lu_##d(a), y = lu_##d(b);                                                           \
        return put_##d(y == 0 ? 0 : (uw_##d)(x % y));                                                        \
    }                                                                                                        \
    static inline st_##d e_and_##d(st_##d a, st_##d b) { return put_##d((uw_##d)(lu_##d(a) & lu_##d(b))); } \
    static inline st_##d e_or_##d(st_##d a, st_##d b) { return put_##d((uw_##d)(lu_##d(a) | lu_##d(b))); }  \
    static inline st_##d e_xor_##d(st_##d a, st_##d b) { return put_##d((uw_##d)(lu_##d(a) ^ lu_##d(b))); } \
    static inline st_##d e_shl_##d(st_##d a, st_##d b) {                                                     \
        const uc_##d s = lu_##d(b);                                                                          \
        return put_##d(s >= BITS_##d ? 0 : (uw_##d)((uw_##d)lu_##d(a) << s));                               \
    }                                                                                                        \
    static inline st_##d e_shrs_##d(st_##d a, st_##d b) {                                                    \
        uc_##d s = lu_##d(b);                                                                                \
        s = s >= BITS_##d ? BITS_##d - 1 : s;                                                                \
        return put_##d((uw_##d)(ls_##d(a) >> s));                                                           \
    }                                                                                                        \
    static inline st_##d e_shru_##d(st_##d a, st_##d b) {                                                    \
        const uc_##d s = lu_##d(b);                                                                          \
        return put_##d(s >= BITS_##d ? 0 : (uw_##d)(lu_##d(a) >> s));                                       \
    }                                                                                                        \
    static inline st_##d e_maxs_##d(st_##d a, st_##d b) {                                                    \
        return put_##d((uw_##d)(ls_##d(a) > ls_##d(b) ? ls_##d(a) : ls_##d(b)));                             \
    }                                                                                                        \
    static inline st_##d e_mins_##d(st_##d a, st_##d b) {                                                    \
        return put_##d((uw_##d)(ls_##d(a) < ls_##d(b) ? ls_##d(a) : ls_##d(b)));                             \
    }                                                                                                        \
    static inline st_##d e_maxu_##d(st_##d a, st_##d b) {                                                    \
        return put_##d((uw_##d)(lu_##d(a) > lu_##d(b) ? lu_##d(a) : lu_##d(b)));                             \
    }                                                                                                        \
    static inline st_##d e_minu_##d(st_##d a, st_##d b) {                                                    \
        return put_##d((uw_##d)(lu_##d(a) < lu_##d(b) ? lu_##d(a) : lu_##d(b)));                             \
    }                                                                                                        \
    static inline st_##d e_mulhis_##d(st_##d a, st_##d b) {                                                  \
        return put_##d((uw_##d)(((ws_##d)ls_##d(a) * (ws_##d)ls_##d(b)) >> BITS_##d));                       \
    }                                                                                                        \
    static inline st_##d e_mulhiu_##d(st_##d a, st_##d b) {                                                  \
        return put_##d((uw_##d)(((wu_##d)lu_##d(a) * (wu_##d)lu_##d(b)) >> BITS_##d));                       \
    }                                                                                                        \
    static inline st_##d e_absi_##d(st_##d a) {                                                              \
        const sc_##d x = ls_##d(a);                                                                          \
        return put_##d(x < 0 ? (uw_##d)0 - (uw_##d)x : (uw_##d)x);                                           \
    }                                                                                                        \
    static inline st_##d e_ctpop_##d(st_##d a) { return put_##d((uw_##d)__builtin_popcountll(lu_##d(a))); }  \
    static inline st_##d e_ctlz_##d(st_##d a) {                                                              \
        const uint64_t x = lu_##d(a);                                                                        \
        return put_##d(x == 0 ? BITS_##d : (uw_##d)(__builtin_clzll(x) - (64 - BITS_##d)));                  \
    }                                                                                                        \
    static inline st_##d e_cttz_##d(st_##d a) {                                                              \
        const uint64_t x = lu_##d(a);                                                                        \
        return put_##d(x == 0 ? BITS_##d : (uw_##d)__builtin_ctzll(x));                                      \
    }                                                                                                        \
    static inline uint8_t e_icmp_eq_##d(st_##d a, st_##d b) { return lu_##d(a) == lu_##d(b); }              \
    static inline uint8_t e_icmp_ne_##d(st_##d a, st_##d b) { return lu_##d(a) != lu_##d(b); }              \
    static inline uint8_t e_icmp_slt_##d(st_##d a, st_##d b) { return ls_##d(a) < ls_##d(b); }              \
    static inline uint8_t e_icmp_sle_##d(st_##d a, st_##d b) { return ls_##d(a) <= ls_##d(b); }             \
    static inline uint8_t e_icmp_sgt_##d(st_##d a, st_##d b) { return ls_##d(a) > ls_##d(b); }              \
    static inline uint8_t e_icmp_sge_##d(st_##d a, st_##d b) { return ls_##d(a) >= ls_##d(b); }             \
    static inline uint8_t e_icmp_ult_##d(st_##d a, st_##d b) { return lu_##d(a) < lu_##d(b); }              \
    static inline uint8_t e_icmp_ule_##d(st_##d a, st_##d b) { return lu_##d(a) <= lu_##d(b); }             \
    static inline uint8_t e_icmp_ugt_##d(st_##d a, st_##d b) { return lu_##d(a) > lu_##d(b); }              \
    static inline uint8_t e_icmp_uge_##d(st_##d a, st_##d b) { return lu_##d(a) >= lu_##d(b); }
INT_DTS(DEF_INT_ELEMS)

/* ---- float element operations ----------------------------------------------------------------- */
/* NaN payloads. With two NaN operands x86 returns the first source's (quieted), and which operand gcc
 * makes the first source of a commutative a + b, a * b or fma varies from loop to loop and build to
 * build. So the commutative operations take the NaN explicitly: x + NAN1(x, y) is x + x (x quieted)
 * when x is NaN, else x + y (y quieted when y is NaN, the sum's own NaN for inf - inf), in either
 * operand order: the result of an elementwise operation with NaN operands is the first of them,
 * quieted, in every build (sub and div keep their order anyway).
 * In the AVX-512 build the select is on the bits: as x != x ? x : y gcc folds y's load into a masked
 * blend, whose fault-suppressing load makes a streaming add from device memory ~14% slower on Zen 5;
 * in the AVX2 build it is the other way round (vpblendvb costs ~10% against vblendvps). Same bits. */
#ifdef SPY_USE_AVX512
static inline float sp_nan1_f(float x, float y) {
    const uint32_t m = 0u - (uint32_t)(x != x);
    return sp_u2f((sp_f2u(x) & m) | (sp_f2u(y) & ~m));
}
static inline double sp_nan1_d(double x, double y) {
    const uint64_t m = 0u - (uint64_t)(x != x);
    return sp_u2d((sp_d2u(x) & m) | (sp_d2u(y) & ~m));
}
#else
static inline float sp_nan1_f(float x, float y) { return x != x ? x : y; }
static inline double sp_nan1_d(double x, double y) { return x != x ? x : y; }
#endif
#define NAN1(x, y) _Generic((x), float: sp_nan1_f, double: sp_nan1_d)(x, y)
/* The default NaN, which an invalid operation (inf - inf, 0 * inf) gives: x86's "indefinite" has the
 * sign bit set. Float reductions return it for any NaN result (see ptn_ below). */
#if defined(__x86_64__) || defined(__i386__)
#define SP_DNAN_F32 0xFFC00000u
#define SP_DNAN_F64 0xFFF8000000000000ull
#else
#define SP_DNAN_F32 0x7FC00000u
#define SP_DNAN_F64 0x7FF8000000000000ull
#endif
static inline float sp_dnan_f(float v) { return v != v ? sp_u2f(SP_DNAN_F32) : v; }
static inline double sp_dnan_d(double v) { return v != v ? sp_u2d(SP_DNAN_F64) : v; }
/* `|`, not `||`: both compares always run, so the select is branch-free and the loops vectorise */
static inline float sp_maxnum_f(float x, float y) { return ((x > y) | (y != y)) ? x : y; }
static inline double sp_maxnum_d(double x, double y) { return ((x > y) | (y != y)) ? x : y; }
static inline float sp_minnum_f(float x, float y) { return ((x < y) | (y != y)) ? x : y; }
static inline double sp_minnum_d(double x, double y) { return ((x < y) | (y != y)) ? x : y; }
static inline float sp_maximum_f(float x, float y) {
    if (x != x || y != y) return x + NAN1(x, y);
    if (x == y) return sp_u2f(sp_f2u(x) & sp_f2u(y)); /* +0 beats -0 */
    return x > y ? x : y;
}
static inline double sp_maximum_d(double x, double y) {
    if (x != x || y != y) return x + NAN1(x, y);
    if (x == y) return sp_u2d(sp_d2u(x) & sp_d2u(y));
    return x > y ? x : y;
}
static inline float sp_minimum_f(float x, float y) {
    if (x != x || y != y) return x + NAN1(x, y);
    if (x == y) return sp_u2f(sp_f2u(x) | sp_f2u(y)); /* -0 beats +0 */
    return x < y ? x : y;
}
static inline double sp_minimum_d(double x, double y) {
    if (x != x || y != y) return x + NAN1(x, y);
    if (x == y) return sp_u2d(sp_d2u(x) | sp_d2u(y));
    return x < y ? x : y;
}
static inline float sp_fmod_f(float x, float y) { return fmodf(x, y); }
static inline double sp_fmod_d(double x, double y) { return fmod(x, y); }
/* fma whose NaN operands are all the first NaN one: fma(x, x, x) when x is NaN, fma(x, y, y) when y
 * is the first, so the fma meets one NaN value whichever operand form gcc picks. Written as three
 * selects on x and y, not as a chain through y1 = NAN1(x, y): gcc if-converts the chain into four
 * compares and four blends, and the accumulating fma ran 1.5x slower than this form. */
static inline float sp_fma_f(float x, float y, float z) {
    return fmaf(x, NAN1(x, y), NAN1(x, NAN1(y, z)));
}
static inline double sp_fma_d(double x, double y, double z) {
    return fma(x, NAN1(x, y), NAN1(x, NAN1(y, z)));
}
/* The same fma when the broadcast operands (flags b1, b2, b3; at least one set) are not NaN: only the
 * other operands can be the first NaN, and with a single one left fma's own NaN propagation gives it. */
#define FMA_BCAST_BODY(FMA, x, y, z, b1, b2, b3)                                                          \
    ((b1) + (b2) + (b3) >= 2 ? FMA(x, y, z)                                                               \
     : (b1)                  ? FMA(x, y, NAN1(y, z))                                                      \
     : (b2)                  ? FMA(x, y, NAN1(x, z))                                                      \
                             : FMA(x, NAN1(x, y), z))
static inline float sp_fma_bcast_f(float x, float y, float z, int b1, int b2, int b3) {
    return FMA_BCAST_BODY(fmaf, x, y, z, b1, b2, b3);
}
static inline double sp_fma_bcast_d(double x, double y, double z, int b1, int b2, int b3) {
    return FMA_BCAST_BODY(fma, x, y, z, b1, b2, b3);
}
/* fma for f16/bf16 rounds once: the f32 result is rounded to odd (p' = 24 >= p + 2), so the final
 * rounding to the half type sees a sticky bit and cannot round a second time. a * b is exact in f64
 * (two half significands); TwoSum gives s + err == a * b + c exactly. */
static inline float e_fma_half_f32(float a, float b, float c) {
    const double p = (double)a * (double)b, s = p + (double)c;
    if (!isfinite(s)) {
        const float n = NAN1(a, NAN1(b, c)); /* the first NaN operand, quieted (see NAN1) */
        return n != n ? n + n : (float)s;
    }
    const double bb = s - p, err = (p - (s - bb)) + ((double)c - bb);
    const float t = (float)s;
    if (!isfinite(t)) return t;
    const double d = s - (double)t;
    const int sgn = d != 0 ? (d > 0 ? 1 : -1) : (err > 0 ? 1 : err < 0 ? -1 : 0);
    if (sgn == 0 || (sp_f2u(t) & 1)) return t; /* exact, or already odd */
    return nextafterf(t, sgn > 0 ? INFINITY : -INFINITY);
}

/* the fma each element type computes in its compute type */
static inline float sp_fmae_f32(float x, float y, float z) { return sp_fma_f(x, y, z); }
static inline double sp_fmae_f64(double x, double y, double z) { return sp_fma_d(x, y, z); }
static inline float sp_fmae_f16(float x, float y, float z) { return e_fma_half_f32(x, y, z); }
static inline float sp_fmae_bf16(float x, float y, float z) { return e_fma_half_f32(x, y, z); }

#define CLAMP_BODY(x, lo, hi) ((x) > (lo) ? ((x) < (hi) ? (x) : (hi)) : ((lo) < (hi) ? (lo) : (hi)))
static inline float sp_clamp_f(float x, float lo, float hi) { return CLAMP_BODY(x, lo, hi); }
static inline double sp_clamp_d(double x, double lo, double hi) { return CLAMP_BODY(x, lo, hi); }
static inline float sp_clampn_f(float x, float lo, float hi) { return x != x ? x : CLAMP_BODY(x, lo, hi); }
static inline double sp_clampn_d(double x, double lo, double hi) { return x != x ? x : CLAMP_BODY(x, lo, hi); }

#define DEF_FLT_ELEMS(d, D, p)                                                                                \
    static inline st_##d e_add_##d(st_##d a, st_##d b) {                                                    \
        const ct_##d x = ld_##d(a), y = ld_##d(b);                                                           \
        return pt_##d(x + NAN1(x, y));                                                                       \
    }                                                                                                        \
    static inline st_##d e_add_plain_##d(st_##d a, st_##d b) { return pt_##d(ld_##d(a) + ld_##d(b)); }      \
    static inline st_##d e_mul_plain_##d(st_##d a, st_##d b) { return pt_##d(ld_##d(a) * ld_##d(b)); }      \
    static inline st_##d e_sub_##d(st_##d a, st_##d b) { return pt_##d(ld_##d(a) - ld_##d(b)); }            \
    static inline st_##d e_mul_##d(st_##d a, st_##d b) {                                                    \
        const ct_##d x = ld_##d(a), y = ld_##d(b);                                                           \
        return pt_##d(x * NAN1(x, y));                                                                       \
    }                                                                                                        \
    static inline st_##d e_divf_##d(st_##d a, st_##d b) { return pt_##d(ld_##d(a) / ld_##d(b)); }           \
    static inline st_##d e_remf_##d(st_##d a, st_##d b) { return pt_##d(sp_fmod_##p(ld_##d(a), ld_##d(b))); } \
    static inline st_##d e_maxnumf_##d(st_##d a, st_##d b) { return pt_##d(sp_maxnum_##p(ld_##d(a), ld_##d(b))); } \
    static inline st_##d e_minnumf_##d(st_##d a, st_##d b) { return pt_##d(sp_minnum_##p(ld_##d(a), ld_##d(b))); } \
    static inline st_##d e_maximumf_##d(st_##d a, st_##d b) { return pt_##d(sp_maximum_##p(ld_##d(a), ld_##d(b))); } \
    static inline st_##d e_minimumf_##d(st_##d a, st_##d b) { return pt_##d(sp_minimum_##p(ld_##d(a), ld_##d(b))); } \
    static inline st_##d e_fma_##d(st_##d a, st_##d b, st_##d c) {                                          \
        return pt_##d(sp_fmae_##d(ld_##d(a), ld_##d(b), ld_##d(c)));                                         \
    }                                                                                                        \
    static inline st_##d e_clamp_##d(st_##d x, st_##d lo, st_##d hi) {                                       \
        return pt_##d(sp_clamp_##p(ld_##d(x), ld_##d(lo), ld_##d(hi)));                                     \
    }                                                                                                        \
    static inline st_##d e_clampn_##d(st_##d x, st_##d lo, st_##d hi) {                                      \
        return pt_##d(sp_clampn_##p(ld_##d(x), ld_##d(lo), ld_##d(hi)));                                    \
    }                                                                                                        \
    static inline uint8_t e_fcmp_false_##d(st_##d a, st_##d b) { (void)a, (void)b; return 0; }              \
    static inline uint8_t e_fcmp_oeq_##d(st_##d a, st_##d b) { return ld_##d(a) == ld_##d(b); }             \
    static inline uint8_t e_fcmp_ogt_##d(st_##d a, st_##d b) { return ld_##d(a) > ld_##d(b); }              \
    static inline uint8_t e_fcmp_oge_##d(st_##d a, st_##d b) { return ld_##d(a) >= ld_##d(b); }             \
    static inline uint8_t e_fcmp_olt_##d(st_##d a, st_##d b) { return ld_##d(a) < ld_##d(b); }              \
    static inline uint8_t e_fcmp_ole_##d(st_##d a, st_##d b) { return ld_##d(a) <= ld_##d(b); }             \
    static inline uint8_t e_fcmp_one_##d(st_##d a, st_##d b) {                                               \
        const ct_##d x = ld_##d(a), y = ld_##d(b);                                                           \
        return x < y || x > y;                                                                               \
    }                                                                                                        \
    static inline uint8_t e_fcmp_ord_##d(st_##d a, st_##d b) {                                               \
        const ct_##d x = ld_##d(a), y = ld_##d(b);                                                           \
        return x == x && y == y;                                                                             \
    }                                                                                                        \
    static inline uint8_t e_fcmp_ueq_##d(st_##d a, st_##d b) {                                               \
        const ct_##d x = ld_##d(a), y = ld_##d(b);                                                           \
        return !(x < y || x > y);                                                                            \
    }                                                                                                        \
    static inline uint8_t e_fcmp_ugt_##d(st_##d a, st_##d b) { return !(ld_##d(a) <= ld_##d(b)); }          \
    static inline uint8_t e_fcmp_uge_##d(st_##d a, st_##d b) { return !(ld_##d(a) < ld_##d(b)); }           \
    static inline uint8_t e_fcmp_ult_##d(st_##d a, st_##d b) { return !(ld_##d(a) >= ld_##d(b)); }          \
    static inline uint8_t e_fcmp_ule_##d(st_##d a, st_##d b) { return !(ld_##d(a) > ld_##d(b)); }           \
    static inline uint8_t e_fcmp_une_##d(st_##d a, st_##d b) { return ld_##d(a) != ld_##d(b); }             \
    static inline uint8_t e_fcmp_uno_##d(st_##d a, st_##d b) {                                               \
        const ct_##d x = ld_##d(a), y = ld_##d(b);                                                           \
        return x != x || y != y;                                                                             \
    }                                                                                                        \
    static inline uint8_t e_fcmp_true_##d(st_##d a, st_##d b) { (void)a, (void)b; return 1; }
FLT_DTS(DEF_FLT_ELEMS)

/* ---- half precision: chunks converted to f32, computed by the f32 element ops, rounded back ---- */
/* f16 <-> f32 chunk conversions: F16C instructions in the SIMD builds (16 lanes at a time in the
 * AVX-512 one, then 8), bit manipulation otherwise. All round to nearest even and keep NaN payloads
 * as the bit manipulation does. */
#define HCHUNK 256
static inline void h2f_f16(float *restrict o, const sp_u16 *restrict h, size_t n) {
    size_t i = 0;
    if (SP_DL16()) {
        sp_dl16_to_f32_n(o, h, n);
        return;
    }
#ifdef SPY_USE_AVX512
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
#endif
#ifdef SPY_USE_F16C
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
#endif
    for (; i < n; i++) o[i] = sp_f16_to_f32(h[i]);
}
static inline void f2h_f16(sp_u16 *restrict h, const float *restrict o, size_t n) {
    size_t i = 0;
    if (SP_DL16()) {
        sp_f32_to_dl16_n(h, o, n);
        return;
    }
#ifdef SPY_USE_AVX512
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(o + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
#ifdef SPY_USE_F16C
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(o + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++) h[i] = sp_f32_to_f16(o[i]);
}
static inline void h2f_bf16(float *restrict o, const sp_u16 *restrict h, size_t n) {
    for (size_t i = 0; i < n; i++) o[i] = sp_bf16_to_f32(h[i]);
}
static inline void f2h_bf16(sp_u16 *restrict h, const float *restrict o, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] = sp_f32_to_bf16(o[i]);
}

/* OUT(H, dst, i0, fr, m): store m f32 results (rounded to H), or m i1 results (already u8) */
#define HOUT_ROUND(H, d, i0, fr, m) f2h_##H((sp_u16 *)(d) + (i0), fr, m)
#define HOUT_BOOL(H, d, i0, fr, m) memcpy((uint8_t *)(d) + (i0), fr, m)
#define LOOP_BIN_HALF(NAME, H, RT, F32OP, OUT)                                                               \
    static inline __attribute__((always_inline)) void NAME##_body(                                          \
        void *restrict d_, const void *restrict a_, const void *restrict b_, size_t n, const int b1,        \
        const int b2) {                                                                                      \
        const sp_u16 *restrict a = (const sp_u16 *)a_, *restrict b = (const sp_u16 *)b_;                    \
        float fa[HCHUNK], fb[HCHUNK], a0 = 0, b0 = 0;                                                        \
        RT fr[HCHUNK];                                                                                       \
        if (b1) h2f_##H(&a0, a, 1);                                                                          \
        if (b2) h2f_##H(&b0, b, 1);                                                                          \
        for (size_t i = 0; i < n; i += HCHUNK) {                                                             \
            const size_t m = n - i < HCHUNK ? n - i : HCHUNK;                                                \
            if (!b1) h2f_##H(fa, a + i, m);                                                                  \
            if (!b2) h2f_##H(fb, b + i, m);                                                                  \
            for (size_t j = 0; j < m; j++) fr[j] = F32OP(b1 ? a0 : fa[j], b2 ? b0 : fb[j]);                  \
            OUT(H, d_, i, fr, m);                                                                            \
        }                                                                                                    \
    }                                                                                                        \
    static void NAME##_v0(void *restrict d, const void *restrict a, const void *restrict b, size_t n) {     \
        NAME##_body(d, a, b, n, 0, 0);                                                                       \
    }                                                                                                        \
    static void NAME##_v1(void *restrict d, const void *restrict a, const void *restrict b, size_t n) {     \
        NAME##_body(d, a, b, n, 1, 0);                                                                       \
    }                                                                                                        \
    static void NAME##_v2(void *restrict d, const void *restrict a, const void *restrict b, size_t n) {     \
        NAME##_body(d, a, b, n, 0, 1);                                                                       \
    }
#define LOOP_TERN_HALF(NAME, H, F32OP)                                                                       \
    static inline __attribute__((always_inline)) void NAME##_body(                                          \
        void *restrict d_, const void *restrict a_, const void *restrict b_, const void *restrict c_,       \
        size_t n, const int b1, const int b2, const int b3) {                                               \
        const sp_u16 *restrict a = (const sp_u16 *)a_, *restrict b = (const sp_u16 *)b_,                    \
                     *restrict c = (const sp_u16 *)c_;                                                       \
        float fa[HCHUNK], fb[HCHUNK], fc[HCHUNK], fr[HCHUNK], a0 = 0, b0 = 0, c0 = 0;                         \
        if (b1) h2f_##H(&a0, a, 1);                                                                          \
        if (b2) h2f_##H(&b0, b, 1);                                                                          \
        if (b3) h2f_##H(&c0, c, 1);                                                                          \
        for (size_t i = 0; i < n; i += HCHUNK) {                                                             \
            const size_t m = n - i < HCHUNK ? n - i : HCHUNK;                                                \
            if (!b1) h2f_##H(fa, a + i, m);                                                                  \
            if (!b2) h2f_##H(fb, b + i, m);                                                                  \
            if (!b3) h2f_##H(fc, c + i, m);                                                                  \
            for (size_t j = 0; j < m; j++) fr[j] = F32OP(b1 ? a0 : fa[j], b2 ? b0 : fb[j], b3 ? c0 : fc[j]);  \
            f2h_##H((sp_u16 *)d_ + i, fr, m);                                                                \
        }                                                                                                    \
    }                                                                                                        \
    TERN_VARIANT(NAME, 0, 0, 0, 0) TERN_VARIANT(NAME, 1, 1, 0, 0) TERN_VARIANT(NAME, 2, 0, 1, 0)             \
    TERN_VARIANT(NAME, 3, 1, 1, 0) TERN_VARIANT(NAME, 4, 0, 0, 1) TERN_VARIANT(NAME, 5, 1, 0, 1)             \
    TERN_VARIANT(NAME, 6, 0, 1, 1)

/* per-dtype choice of loop template: f16/bf16 go through f32 chunks */
#define DEF_BIN_H(o, O, d, D) LOOP_BIN_HALF(k_##o##_##d, d, float, e_##o##_f32, HOUT_ROUND)
#define DEF_CMP_H(o, O, d, D) LOOP_BIN_HALF(k_##o##_##d, d, uint8_t, e_##o##_f32, HOUT_BOOL)
#define DEF_BIN_f16 DEF_BIN_H
#define DEF_BIN_bf16 DEF_BIN_H
#define DEF_BIN_f32 DEF_BIN_FLT
#define DEF_BIN_f64 DEF_BIN_FLT
/* f32/f64 add and mul with a broadcast operand that is not NaN: the plain operation (see LOOP_BIN_Q) */
#define DEF_BIN_FLT(o, O, d, D) DEF_BIN_FLT_##o(o, d)
#define DEF_BIN_FLT_QUICK(o, d) LOOP_BIN_Q(k_##o##_##d, mt_##d, mt_##d, mt_##d, e_##o##_##d, 1, e_##o##_plain_##d)
#define DEF_BIN_FLT_PLAIN(o, d) LOOP_BIN(k_##o##_##d, mt_##d, mt_##d, mt_##d, e_##o##_##d)
#define DEF_BIN_FLT_add DEF_BIN_FLT_QUICK
#define DEF_BIN_FLT_mul DEF_BIN_FLT_QUICK
#define DEF_BIN_FLT_sub DEF_BIN_FLT_PLAIN
#define DEF_BIN_FLT_divf DEF_BIN_FLT_PLAIN
#define DEF_BIN_FLT_remf DEF_BIN_FLT_PLAIN
#define DEF_BIN_FLT_maxnumf DEF_BIN_FLT_PLAIN
#define DEF_BIN_FLT_minnumf DEF_BIN_FLT_PLAIN
#define DEF_BIN_FLT_maximumf DEF_BIN_FLT_PLAIN
#define DEF_BIN_FLT_minimumf DEF_BIN_FLT_PLAIN
#define DEF_CMP_f16 DEF_CMP_H
#define DEF_CMP_bf16 DEF_CMP_H
#define DEF_CMP_f32 DEF_CMP
#define DEF_CMP_f64 DEF_CMP

/* ---- binary and comparison loops, and their tables ------------------------------------------ */
#define INT_BINOPS_SIMD(X, d, D)                                                                              \
    X(add, ADD, d, D) X(sub, SUB, d, D) X(mul, MUL, d, D) X(and, AND, d, D) X(or, OR, d, D) X(xor, XOR, d, D) \
    X(shl, SHL, d, D) X(shrs, SHRS, d, D) X(shru, SHRU, d, D) X(maxs, MAXS, d, D) X(mins, MINS, d, D)        \
    X(maxu, MAXU, d, D) X(minu, MINU, d, D)
#define INT_BINOPS_SCALAR(X, d, D)                                                                            \
    X(divs, DIVS, d, D) X(divu, DIVU, d, D) X(rems, REMS, d, D) X(remu, REMU, d, D) X(mulhis, MULHIS, d, D)  \
    X(mulhiu, MULHIU, d, D)
/* The SIMD builds leave out what wider vectors do not speed up (integer division has no SIMD
 * instruction; i1 arithmetic is rare): their lookups return NULL there and the baseline is used. */
#ifdef SPY_LOOPS_VARIANT
#define INT_BINOPS(X, d, D) INT_BINOPS_SIMD(X, d, D)
#define INT_DTS_V(X) X(i8, I8) X(i16, I16) X(i32, I32) X(i64, I64)
#else
#define INT_BINOPS(X, d, D) INT_BINOPS_SIMD(X, d, D) INT_BINOPS_SCALAR(X, d, D)
#define INT_DTS_V(X) INT_DTS(X)
#endif
#define FLT_BINOPS(X, d, D)                                                                                   \
    X(add, ADD, d, D) X(sub, SUB, d, D) X(mul, MUL, d, D) X(divf, DIVF, d, D) X(remf, REMF, d, D)            \
    X(maxnumf, MAXNUMF, d, D) X(minnumf, MINNUMF, d, D) X(maximumf, MAXIMUMF, d, D)                          \
    X(minimumf, MINIMUMF, d, D)
#define ICMP_PREDS(X, d, D)                                                                                   \
    X(icmp_eq, EQ, d, D) X(icmp_ne, NE, d, D) X(icmp_slt, SLT, d, D) X(icmp_sle, SLE, d, D)                  \
    X(icmp_sgt, SGT, d, D) X(icmp_sge, SGE, d, D) X(icmp_ult, ULT, d, D) X(icmp_ule, ULE, d, D)              \
    X(icmp_ugt, UGT, d, D) X(icmp_uge, UGE, d, D)
#define FCMP_PREDS(X, d, D)                                                                                   \
    X(fcmp_false, FALSE, d, D) X(fcmp_oeq, OEQ, d, D) X(fcmp_ogt, OGT, d, D) X(fcmp_oge, OGE, d, D)          \
    X(fcmp_olt, OLT, d, D) X(fcmp_ole, OLE, d, D) X(fcmp_one, ONE, d, D) X(fcmp_ord, ORD, d, D)              \
    X(fcmp_ueq, UEQ, d, D) X(fcmp_ugt, UGT, d, D) X(fcmp_uge, UGE, d, D) X(fcmp_ult, ULT, d, D)              \
    X(fcmp_ule, ULE, d, D) X(fcmp_une, UNE, d, D) X(fcmp_uno, UNO, d, D) X(fcmp_true, TRUE, d, D)

#define DEF_BIN(o, O, d, D) LOOP_BIN(k_##o##_##d, mt_##d, mt_##d, mt_##d, e_##o##_##d)
#define DEF_CMP(o, O, d, D) LOOP_BIN(k_##o##_##d, uint8_t, mt_##d, mt_##d, e_##o##_##d)
#define GEN_INT_BIN(d, D) INT_BINOPS(DEF_BIN, d, D) ICMP_PREDS(DEF_CMP, d, D)
#define GEN_FLT_BIN(d, D, p) FLT_BINOPS(DEF_BIN_##d, d, D) FCMP_PREDS(DEF_CMP_##d, d, D)
INT_DTS_V(GEN_INT_BIN)
FLT_DTS(GEN_FLT_BIN)

#ifdef SPY_LOOPS_VARIANT
/* i32 division and remainder in the vector builds: through double, which vectorises (there is no
 * SIMD integer division) and is exact. For y != 0 the quotient t = x / y is an integer, rounded to
 * itself, or at least 1/|y| from every integer, while rounding moves it by at most
 * |t| * 2^-53 <= 2^31 / |y| * 2^-53 < 1/|y|: truncating the double gives trunc(t). y = 0 and y = -1
 * (where INT_MIN / -1 leaves int32) take the same results as the scalar loops, by selects. */
static inline st_i32 e_divs_fast_i32(st_i32 a, st_i32 b) {
    const int32_t x = ls_i32(a), y = ls_i32(b);
    const int32_t q = (int32_t)((double)x / (double)(y == 0 || y == -1 ? 1 : y));
    const int32_t neg = (int32_t)(0u - (uint32_t)x);
    return put_i32((uw_i32)(y == 0 ? 0 : y == -1 ? neg : q));
}
static inline st_i32 e_rems_fast_i32(st_i32 a, st_i32 b) {
    const int32_t x = ls_i32(a), y = ls_i32(b);
    const int32_t q = (int32_t)((double)x / (double)(y == 0 || y == -1 ? 1 : y));
    const uint32_t r = (uint32_t)x - (uint32_t)q * (uint32_t)y;
    return put_i32((uw_i32)(y == 0 || y == -1 ? 0 : r));
}
LOOP_BIN(k_divs_i32, mt_i32, mt_i32, mt_i32, e_divs_fast_i32)
LOOP_BIN(k_rems_i32, mt_i32, mt_i32, mt_i32, e_rems_fast_i32)
#define TAB_DIV_I32 [OP_DIVS][DT_I32] = {k_divs_i32_v0, k_divs_i32_v1, k_divs_i32_v2}, \
                    [OP_REMS][DT_I32] = {k_rems_i32_v0, k_rems_i32_v1, k_rems_i32_v2},
#else
#define TAB_DIV_I32 /* the baseline's are in INT_BINOPS_SCALAR */
#endif

#define TAB_BIN(o, O, d, D) [OP_##O][DT_##D] = {k_##o##_##d##_v0, k_##o##_##d##_v1, k_##o##_##d##_v2},
#define TAB_INT_BIN(d, D) INT_BINOPS(TAB_BIN, d, D)
#define TAB_FLT_BIN(d, D, p) FLT_BINOPS(TAB_BIN, d, D)
static const spy_bin_fn bin_tab[OP_COUNT][DT_COUNT][3] = {INT_DTS_V(TAB_INT_BIN) FLT_DTS(TAB_FLT_BIN) TAB_DIV_I32};

#define TAB_ICMP(o, O, d, D) [ICMP_##O][DT_##D] = {k_##o##_##d##_v0, k_##o##_##d##_v1, k_##o##_##d##_v2},
#define TAB_FCMP(o, O, d, D) [FCMP_##O][DT_##D] = {k_##o##_##d##_v0, k_##o##_##d##_v1, k_##o##_##d##_v2},
#define TAB_INT_CMP(d, D) ICMP_PREDS(TAB_ICMP, d, D)
#define TAB_FLT_CMP(d, D, p) FCMP_PREDS(TAB_FCMP, d, D)
static const spy_bin_fn icmp_tab[ICMP_COUNT][DT_COUNT][3] = {INT_DTS_V(TAB_INT_CMP)};
static const spy_bin_fn fcmp_tab[FCMP_COUNT][DT_COUNT][3] = {FLT_DTS(TAB_FLT_CMP)};

spy_bin_fn KFN(spy_k_binary)(int op, int dt, int variant) {
    if (op < 0 || op >= OP_COUNT || dt < 0 || dt >= DT_COUNT || variant < 0 || variant > 2) return NULL;
    return bin_tab[op][dt][variant];
}

spy_bin_fn KFN(spy_k_cmp)(int op, int pred, int dt, int variant) {
    if (dt < 0 || dt >= DT_COUNT || variant < 0 || variant > 2 || pred < 0) return NULL;
    if (op == OP_CMPI) return pred < ICMP_COUNT ? icmp_tab[pred][dt][variant] : NULL;
    if (op == OP_CMPF) return pred < FCMP_COUNT ? fcmp_tab[pred][dt][variant] : NULL;
    return NULL;
}

/* ---- integer unary ops ---------------------------------------------------------------------- */
#define INT_UNOPS(X, d, D) X(absi, ABSI, d, D) X(ctpop, CTPOP, d, D) X(ctlz, CTLZ, d, D) X(cttz, CTTZ, d, D)
#define DEF_UN(o, O, d, D) LOOP_UN(k_##o##_##d, mt_##d, mt_##d, e_##o##_##d)
#define GEN_INT_UN(d, D) INT_UNOPS(DEF_UN, d, D)
INT_DTS_V(GEN_INT_UN)
#define TAB_UN(o, O, d, D) [OP_##O - OP_ABSI][DT_##D] = k_##o##_##d,
#define TAB_INT_UN(d, D) INT_UNOPS(TAB_UN, d, D)
static const spy_un_fn un_tab[4][DT_COUNT] = {INT_DTS_V(TAB_INT_UN)};

spy_un_fn KFN(spy_k_unary)(int op, int dt) {
    if (op < OP_ABSI || op > OP_CTTZ || dt < 0 || dt >= DT_COUNT) return NULL;
    return un_tab[op - OP_ABSI][dt];
}

/* ---- ternary: select (any dtype, by size), fma and clamp (floats) ---------------------------- */
/* In the AVX-512 build a mask, not `?:`, which it would turn into masked loads, slower when the
 * operands stream from device memory (see sp_nan1_f) */
#ifdef SPY_USE_AVX512
#define SEL_BITS(T, c, x, y) ((T)(((x) & (T)(0u - (T)((c) & 1))) | ((y) & (T) ~(T)(0u - (T)((c) & 1)))))
#else
#define SEL_BITS(T, c, x, y) (((c) & 1) ? (x) : (y))
#endif
static inline uint8_t e_sel_u8(uint8_t c, uint8_t x, uint8_t y) { return SEL_BITS(uint8_t, c, x, y); }
static inline uint16_t e_sel_u16(uint8_t c, uint16_t x, uint16_t y) { return SEL_BITS(uint16_t, c, x, y); }
static inline uint32_t e_sel_u32(uint8_t c, uint32_t x, uint32_t y) { return SEL_BITS(uint32_t, c, x, y); }
static inline uint64_t e_sel_u64(uint8_t c, uint64_t x, uint64_t y) { return SEL_BITS(uint64_t, c, x, y); }
LOOP_TERN(k_sel1, sp_u8, sp_u8, sp_u8, sp_u8, e_sel_u8)
LOOP_TERN(k_sel2, sp_u16, sp_u8, sp_u16, sp_u16, e_sel_u16)
LOOP_TERN(k_sel4, sp_u32, sp_u8, sp_u32, sp_u32, e_sel_u32)
LOOP_TERN(k_sel8, sp_u64, sp_u8, sp_u64, sp_u64, e_sel_u64)
static const spy_tern_fn sel_tab[4][7] = {TERN_ROW(k_sel1), TERN_ROW(k_sel2), TERN_ROW(k_sel4), TERN_ROW(k_sel8)};

#define FMA_PLAIN_f fmaf
#define FMA_PLAIN_d fma
#define GEN_FLT_TERN(d, D, p)                                                                \
    LOOP_TERN_Q(k_fma_##d, mt_##d, mt_##d, mt_##d, mt_##d, e_fma_##d, 1, sp_fma_bcast_##p, FMA_PLAIN_##p) \
    LOOP_TERN(k_clamp_##d, mt_##d, mt_##d, mt_##d, mt_##d, e_clamp_##d)                      \
    LOOP_TERN(k_clampn_##d, mt_##d, mt_##d, mt_##d, mt_##d, e_clampn_##d)
#define GEN_HALF_TERN(d)                                                        \
    LOOP_TERN_HALF(k_fma_##d, d, e_fma_half_f32)                                \
    LOOP_TERN_HALF(k_clamp_##d, d, e_clamp_f32)                                 \
    LOOP_TERN_HALF(k_clampn_##d, d, e_clampn_f32)
GEN_FLT_TERN(f32, F32, f)
GEN_FLT_TERN(f64, F64, d)
GEN_HALF_TERN(f16)
GEN_HALF_TERN(bf16)
#define TAB_FLT_TERN(d, D, p) [DT_##D] = {TERN_ROW(k_fma_##d), TERN_ROW(k_clamp_##d), TERN_ROW(k_clampn_##d)},
static const spy_tern_fn ftern_tab[DT_COUNT][3][7] = {FLT_DTS(TAB_FLT_TERN)};

/* binchain: dst = (x op1 y) op2 z, op1 and op2 each add, sub or mul (f32, f64), each rounded as its own
 * instruction would round it: the bits of the two instructions, without writing and reading the tile
 * between them. The quick form (broadcast operands not NaN, as in LOOP_BIN_Q) takes the plain operation
 * where one operand is such a broadcast: the other is then the only one that can be NaN, and the plain
 * operation passes its payload whichever operand order gcc picks. */
#define BINCHAIN_PAIRS(X, d) \
    X(add, add, d) X(add, sub, d) X(add, mul, d) X(sub, add, d) X(sub, sub, d) X(sub, mul, d) X(mul, add, d) X(mul, sub, d) X(mul, mul, d)
#define DEF_SUB_PLAIN(d, D, p) static inline st_##d e_sub_plain_##d(st_##d a, st_##d b) { return e_sub_##d(a, b); }
DEF_SUB_PLAIN(f32, F32, f)
DEF_SUB_PLAIN(f64, F64, d)
#define DEF_BINCHAIN(o1, o2, d)                                                                                 \
    static inline st_##d e_##o1##_##o2##_##d(st_##d x, st_##d y, st_##d z) {                                 \
        return e_##o2##_##d(e_##o1##_##d(x, y), z);                                                          \
    }                                                                                                        \
    static inline st_##d q_##o1##_##o2##_##d(st_##d x, st_##d y, st_##d z, int b1, int b2, int b3) {         \
        const st_##d t = b1 || b2 ? e_##o1##_plain_##d(x, y) : e_##o1##_##d(x, y);                           \
        return b3 ? e_##o2##_plain_##d(t, z) : e_##o2##_##d(t, z);                                           \
    }                                                                                                        \
    static inline st_##d p_##o1##_##o2##_##d(st_##d x, st_##d y, st_##d z) {                                 \
        return e_##o2##_plain_##d(e_##o1##_plain_##d(x, y), z);                                              \
    }                                                                                                        \
    LOOP_TERN_Q(k_##o1##_##o2##_##d, mt_##d, mt_##d, mt_##d, mt_##d, e_##o1##_##o2##_##d, 1, q_##o1##_##o2##_##d, \
                p_##o1##_##o2##_##d)
BINCHAIN_PAIRS(DEF_BINCHAIN, f32)
BINCHAIN_PAIRS(DEF_BINCHAIN, f64)
#define TAB_BINCHAIN(o1, o2, d) TERN_ROW(k_##o1##_##o2##_##d),
static const spy_tern_fn binchain_tab[2][BINCHAIN_COUNT][7] = {{BINCHAIN_PAIRS(TAB_BINCHAIN, f32)},
                                                                 {BINCHAIN_PAIRS(TAB_BINCHAIN, f64)}};

spy_tern_fn KFN(spy_k_ternary)(int op, int dt, int variant, int flag) {
    if (dt < 0 || dt >= DT_COUNT || variant < 0 || variant > 6) return NULL;
    if (op == OP_SELECT) {
        switch (spyre_dtype_bytes[dt]) {
        case 1: return sel_tab[0][variant];
        case 2: return sel_tab[1][variant];
        case 4: return sel_tab[2][variant];
        case 8: return sel_tab[3][variant];
        }
        return NULL;
    }
    if (op == OP_FMA) return ftern_tab[dt][0][variant];
    if (op == OP_CLAMP) return ftern_tab[dt][flag ? 2 : 1][variant];
    if (op == OP_BINCHAIN && flag >= 0 && flag < BINCHAIN_COUNT && (dt == DT_F32 || dt == DT_F64))
        return binchain_tab[dt == DT_F64][flag][variant];
    return NULL;
}

/* ---- SFU: math1 / math2 ---------------------------------------------------------------------- */
/* X(name, ENUM, float expression, double expression) of x. f16, bf16 and f32 compute the float
 * expression, f64 the double one.
 *
 * MATH1_VEC: float expressions without a libm call (vmath.h, or single instructions), so the loops
 * vectorise; built in every build, the AVX2 one giving 8 lanes and the AVX-512 one 16. f64 keeps libm
 * (baseline build). */
#define MATH1_VEC(X)                                                                                         \
    X(exp, EXP, vm_expf(x), exp(x)) X(exp2, EXP2, vm_exp2f(x), exp2(x)) X(exp10, EXP10, vm_exp10f(x), exp10(x)) \
    X(expm1, EXPM1, vm_expm1f(x), expm1(x)) X(log, LOG, vm_logf(x), log(x))                                \
    X(log2, LOG2, vm_log2f(x), log2(x)) X(log10, LOG10, vm_log10f(x), log10(x))                             \
    X(log1p, LOG1P, vm_log1pf(x), log1p(x)) X(tanh, TANH, vm_tanhf(x), tanh(x)) X(erf, ERF, vm_erff(x), erf(x)) \
    X(sqrt, SQRT, vm_sqrtf(x), sqrt(x)) X(rsqrt, RSQRT, vm_rsqrtf(x), 1.0 / sqrt(x))                        \
    X(floor, FLOOR, floorf(x), floor(x)) X(ceil, CEIL, ceilf(x), ceil(x)) X(trunc, TRUNC, truncf(x), trunc(x)) \
    X(rint, RINT, rintf(x), rint(x)) X(nearbyint, NEARBYINT, nearbyintf(x), nearbyint(x))                   \
    X(abs, ABS, fabsf(x), fabs(x)) X(neg, NEG, -x, -x) X(rcp, RCP, 1.0f / x, 1.0 / x)                       \
    X(signbit, SIGNBIT, sp_signbit_f(x), sp_signbit_d(x))                                                   \
    X(isnan, ISNAN, isnan(x) ? 1.0f : 0.0f, isnan(x) ? 1.0 : 0.0)                                           \
    X(isinf, ISINF, isinf(x) ? 1.0f : 0.0f, isinf(x) ? 1.0 : 0.0)                                           \
    X(isfinite, ISFINITE, isfinite(x) ? 1.0f : 0.0f, isfinite(x) ? 1.0 : 0.0)

/* (a plain signbit() here makes gcc 12 ICE when it vectorises the bf16 loop) */
static inline float sp_signbit_f(float x) { return (sp_f2u(x) & 0x80000000u) ? 1.0f : 0.0f; }
static inline double sp_signbit_d(double x) { return (sp_d2u(x) >> 63) ? 1.0 : 0.0; }

#define DEF_M1E(nm, NM, fe, de)                                   \
    static inline float m1f_##nm(float x) { return fe; }         \
    static inline double m1d_##nm(double x) { return de; }

/* f16/bf16 go through f32 chunks like the binary ops (F16C conversions in the SIMD builds) */
#define LOOP_UN_HALF(NAME, H, F32OP)                                                                         \
    static void NAME(void *restrict d_, const void *restrict a_, size_t n) {                                \
        const sp_u16 *restrict a = (const sp_u16 *)a_;                                                       \
        float fa[HCHUNK], fr[HCHUNK];                                                                        \
        for (size_t i = 0; i < n; i += HCHUNK) {                                                             \
            const size_t m = n - i < HCHUNK ? n - i : HCHUNK;                                                \
            h2f_##H(fa, a + i, m);                                                                           \
            for (size_t j = 0; j < m; j++) fr[j] = F32OP(fa[j]);                                             \
            f2h_##H((sp_u16 *)d_ + i, fr, m);                                                                \
        }                                                                                                    \
    }
#define DEF_M1_LOOP(nm, NM, fe, de, d, p)                                                           \
    static inline st_##d e_m1_##nm##_##d(st_##d a) { return pt_##d(m1##p##_##nm(ld_##d(a))); }     \
    LOOP_UN(k_m1_##nm##_##d, mt_##d, mt_##d, e_m1_##nm##_##d)
#define GEN_M1_f16(nm, NM, fe, de) LOOP_UN_HALF(k_m1_##nm##_f16, f16, m1f_##nm)
#define GEN_M1_bf16(nm, NM, fe, de) LOOP_UN_HALF(k_m1_##nm##_bf16, bf16, m1f_##nm)
#define GEN_M1_f32(nm, NM, fe, de) DEF_M1_LOOP(nm, NM, fe, de, f32, f)
#define GEN_M1_f64(nm, NM, fe, de) DEF_M1_LOOP(nm, NM, fe, de, f64, d)
#define GEN_M1_F(nm, NM, fe, de) GEN_M1_f16(nm, NM, fe, de) GEN_M1_bf16(nm, NM, fe, de) GEN_M1_f32(nm, NM, fe, de)
MATH1_VEC(DEF_M1E)
MATH1_VEC(GEN_M1_F)

/* MATH1_FIX: vectorised for all but a few arguments (m1big_), which libm redoes (m1slow_) after the
 * vector pass over each chunk; in place (d == a) works since a chunk is stored only at the end */
#define MATH1_FIX(X) X(sin, SIN, vm_sinf(x), sin(x)) X(cos, COS, vm_cosf(x), cos(x))
static inline int m1big_sin(float x) { return vm_trig_slow(x); }
static inline int m1big_cos(float x) { return vm_trig_slow(x); }
static inline float m1slow_sin(float x) { return sinf(x); }
static inline float m1slow_cos(float x) { return cosf(x); }
#define CHUNK_IN_f16(o, a, i, m) h2f_f16(o, (const sp_u16 *)(a) + (i), m)
#define CHUNK_IN_bf16(o, a, i, m) h2f_bf16(o, (const sp_u16 *)(a) + (i), m)
#define CHUNK_IN_f32(o, a, i, m) memcpy(o, (const float *)(a) + (i), (m) * sizeof(float))
#define CHUNK_OUT_f16(d, i, r, m) f2h_f16((sp_u16 *)(d) + (i), r, m)
#define CHUNK_OUT_bf16(d, i, r, m) f2h_bf16((sp_u16 *)(d) + (i), r, m)
#define CHUNK_OUT_f32(d, i, r, m) memcpy((float *)(d) + (i), r, (m) * sizeof(float))
#define LOOP_M1_FIX(nm, H)                                                                                   \
    static void k_m1_##nm##_##H(void *restrict d_, const void *restrict a_, size_t n) {                     \
        float fa[HCHUNK], fr[HCHUNK];                                                                        \
        for (size_t i = 0; i < n; i += HCHUNK) {                                                             \
            const size_t m = n - i < HCHUNK ? n - i : HCHUNK;                                                \
            int big = 0;                                                                                     \
            CHUNK_IN_##H(fa, a_, i, m);                                                                      \
            for (size_t j = 0; j < m; j++) {                                                                 \
                fr[j] = m1f_##nm(fa[j]);                                                                     \
                big |= m1big_##nm(fa[j]);                                                                    \
            }                                                                                                \
            if (big)                                                                                         \
                for (size_t j = 0; j < m; j++)                                                               \
                    if (m1big_##nm(fa[j])) fr[j] = m1slow_##nm(fa[j]);                                       \
            CHUNK_OUT_##H(d_, i, fr, m);                                                                     \
        }                                                                                                    \
    }
#define GEN_M1_FIX(nm, NM, fe, de) LOOP_M1_FIX(nm, f16) LOOP_M1_FIX(nm, bf16) LOOP_M1_FIX(nm, f32)
MATH1_FIX(DEF_M1E)
MATH1_FIX(GEN_M1_FIX)

#ifndef SPY_LOOPS_VARIANT /* the rest of the SFU: baseline build only (libm-bound, no gain from SIMD) */
/* erfinv: a rational first guess (Giles, "Approximating the erfinv function") polished by two
 * Newton steps on erf, in double. */
static double sp_erfinv_d(double y) {
    if (y != y || y < -1 || y > 1) return NAN;
    if (y == 1) return INFINITY;
    if (y == -1) return -INFINITY;
    double w = -log((1.0 - y) * (1.0 + y)), x;
    if (w < 6.25) {
        w -= 3.125;
        x = -3.6444120640178196996e-21;
        x = -1.685059138182016589e-19 + x * w;
        x = 1.2858480715256400167e-18 + x * w;
        x = 1.115787767802518096e-17 + x * w;
        x = -1.333171662854620906e-16 + x * w;
        x = 2.0972767875968561637e-17 + x * w;
        x = 6.6376381343583238325e-15 + x * w;
        x = -4.0545662729752068639e-14 + x * w;
        x = -8.1519341976054721522e-14 + x * w;
        x = 2.6335093153082322977e-12 + x * w;
        x = -1.2975133253453532498e-11 + x * w;
        x = -5.4154120542946279317e-11 + x * w;
        x = 1.051212273321532285e-09 + x * w;
        x = -4.1126339803469836976e-09 + x * w;
        x = -2.9070369957882005086e-08 + x * w;
        x = 4.2347877827932403518e-07 + x * w;
        x = -1.3654692000834678645e-06 + x * w;
        x = -1.3882523362786468719e-05 + x * w;
        x = 0.0001867342080340571352 + x * w;
        x = -0.00074070253416626697512 + x * w;
        x = -0.0060336708714301490533 + x * w;
        x = 0.24015818242558961693 + x * w;
        x = 1.6536545626831027356 + x * w;
    } else if (w < 16.0) {
        w = sqrt(w) - 3.25;
        x = 2.2137376921775787049e-09;
        x = 9.0756561938885390979e-08 + x * w;
        x = -2.7517406297064545428e-07 + x * w;
        x = 1.8239629214389227755e-08 + x * w;
        x = 1.5027403968909827627e-06 + x * w;
        x = -4.013867526981545969e-06 + x * w;
        x = 2.9234449089955446044e-06 + x * w;
        x = 1.2475304481671778723e-05 + x * w;
        x = -4.7318229009055733981e-05 + x * w;
        x = 6.8284851459573175448e-05 + x * w;
        x = 2.4031110387097893999e-05 + x * w;
        x = -0.0003550375203628474796 + x * w;
        x = 0.00095328937973738049703 + x * w;
        x = -0.0016882755560235047313 + x * w;
        x = 0.0024914420961078508066 + x * w;
        x = -0.0037512085075692412107 + x * w;
        x = 0.005370914553590063617 + x * w;
        x = 1.0052589676941592334 + x * w;
        x = 3.0838856104922207635 + x * w;
    } else {
        w = sqrt(w) - 5.0;
        x = -2.7109920616438573243e-11;
        x = -2.5556418169965252055e-10 + x * w;
        x = 1.5076572693500548083e-09 + x * w;
        x = -3.7894654401267369937e-09 + x * w;
        x = 7.6157012080783393804e-09 + x * w;
        x = -1.4960026627149240478e-08 + x * w;
        x = 2.9147953450901080826e-08 + x * w;
        x = -6.7711997758452339498e-08 + x * w;
        x = 2.2900482228026654717e-07 + x * w;
        x = -9.9298272942317002539e-07 + x * w;
        x = 4.5260625972231537039e-06 + x * w;
        x = -1.9681778105531670567e-05 + x * w;
        x = 7.5995277030017761139e-05 + x * w;
        x = -0.00021503011930044477347 + x * w;
        x = -0.00013871931833623122026 + x * w;
        x = 1.0103004648645343977 + x * w;
        x = 4.8499064014085844221 + x * w;
    }
    x *= y;
    for (int i = 0; i < 2; i++) {
        const double err = erf(x) - y;
        x -= err / (1.1283791670955126 * exp(-x * x));
    }
    return x;
}
static float sp_erfinv_f(float y) { return (float)sp_erfinv_d(y); }

/* Inverse of the standard normal CDF: sqrt(2) * erfinv(2p - 1), with the tails computed from
 * erfc so that small p keeps its precision (one Newton step on erfc). */
static double sp_normcdfinv_d(double p) {
    if (p != p || p < 0 || p > 1) return NAN;
    if (p == 0) return -INFINITY;
    if (p == 1) return INFINITY;
    double x;
    if (p > 0.01 && p < 0.99) return 1.4142135623730951 * sp_erfinv_d(2 * p - 1);
    /* tails: x = -sqrt(2) erfcinv(2p) */
    const double q = p < 0.5 ? p : 1 - p;
    double t = sqrt(-2 * log(q));
    x = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t));
    for (int i = 0; i < 3; i++) { /* Newton on 0.5 erfc(-x / sqrt2) = q */
        const double f = 0.5 * erfc(-x * 0.7071067811865476) - q;
        x -= f / (0.3989422804014327 * exp(-0.5 * x * x));
    }
    return p < 0.5 ? x : -x;
}
static float sp_normcdfinv_f(float p) { return (float)sp_normcdfinv_d(p); }

static double sp_sinpi_d(double x) {
    if (!isfinite(x)) return NAN;
    const double r = fmod(x, 2.0), ar = fabs(r);
    double s;
    if (ar <= 0.25) s = sin(M_PI * ar);
    else if (ar <= 0.75) s = cos(M_PI * (ar - 0.5));
    else if (ar <= 1.25) s = sin(M_PI * (1.0 - ar));
    else if (ar <= 1.75) s = -cos(M_PI * (ar - 1.5));
    else s = -sin(M_PI * (2.0 - ar));
    return r < 0 ? -s : s;
}
static double sp_cospi_d(double x) {
    if (!isfinite(x)) return NAN;
    const double r = fmod(fabs(x), 2.0);
    if (r <= 0.25) return cos(M_PI * r);
    if (r <= 0.75) return sin(M_PI * (0.5 - r));
    if (r <= 1.25) return -cos(M_PI * (r - 1.0));
    if (r <= 1.75) return sin(M_PI * (r - 1.5));
    return cos(M_PI * (2.0 - r));
}
static float sp_lgamma_f(float x) { int s; return lgammaf_r(x, &s); }
static double sp_lgamma_d(double x) { int s; return lgamma_r(x, &s); }

/* MATH1_LIB: one libm call (or a double-precision routine above) per element */
#define MATH1_LIB(X)                                                                                         \
    X(cbrt, CBRT, cbrtf(x), cbrt(x)) X(tan, TAN, tanf(x), tan(x)) X(asin, ASIN, asinf(x), asin(x))          \
    X(acos, ACOS, acosf(x), acos(x)) X(atan, ATAN, atanf(x), atan(x)) X(sinh, SINH, sinhf(x), sinh(x))      \
    X(cosh, COSH, coshf(x), cosh(x))                                                                        \
    X(asinh, ASINH, asinhf(x), asinh(x)) X(acosh, ACOSH, acoshf(x), acosh(x))                              \
    X(atanh, ATANH, atanhf(x), atanh(x)) X(erfc, ERFC, erfcf(x), erfc(x))                                   \
    X(erfinv, ERFINV, sp_erfinv_f(x), sp_erfinv_d(x)) X(lgamma, LGAMMA, sp_lgamma_f(x), sp_lgamma_d(x))     \
    X(tgamma, TGAMMA, tgammaf(x), tgamma(x)) X(round, ROUND, roundf(x), round(x))                           \
    X(j0, J0, j0f(x), j0(x)) X(j1, J1, j1f(x), j1(x)) X(y0, Y0, y0f(x), y0(x)) X(y1, Y1, y1f(x), y1(x))     \
    X(normcdf, NORMCDF, 0.5f * erfcf(-x * 0.70710678118654752f), 0.5 * erfc(-x * 0.70710678118654752))    \
    X(normcdfinv, NORMCDFINV, sp_normcdfinv_f(x), sp_normcdfinv_d(x))                                       \
    X(sinpi, SINPI, (float)sp_sinpi_d(x), sp_sinpi_d(x)) X(cospi, COSPI, (float)sp_cospi_d(x), sp_cospi_d(x))
MATH1_LIB(DEF_M1E)
MATH1_LIB(GEN_M1_F)
MATH1_VEC(GEN_M1_f64)
MATH1_FIX(GEN_M1_f64)
MATH1_LIB(GEN_M1_f64)
#endif /* libm-bound SFU */

#define TAB_M1_F(nm, NM, fe, de)                                                                               \
    [MATH1_##NM][DT_F16] = k_m1_##nm##_f16, [MATH1_##NM][DT_BF16] = k_m1_##nm##_bf16,                          \
    [MATH1_##NM][DT_F32] = k_m1_##nm##_f32,
#define TAB_M1_D(nm, NM, fe, de) [MATH1_##NM][DT_F64] = k_m1_##nm##_f64,
/* the SIMD builds have the vectorised f16/bf16/f32 loops only; NULL elsewhere picks the baseline */
static const spy_un_fn m1_tab[MATH1_COUNT][DT_COUNT] = {
    MATH1_VEC(TAB_M1_F) MATH1_FIX(TAB_M1_F)
#ifndef SPY_LOOPS_VARIANT
    MATH1_LIB(TAB_M1_F) MATH1_VEC(TAB_M1_D) MATH1_FIX(TAB_M1_D) MATH1_LIB(TAB_M1_D)
#endif
};

spy_un_fn KFN(spy_k_math1)(int fn, int dt) {
    if (fn < 0 || fn >= MATH1_COUNT || dt < 0 || dt >= DT_COUNT) return NULL;
    return m1_tab[fn][dt];
}

#ifndef SPY_LOOPS_VARIANT /* math2: baseline build only (libm-bound) */
static inline float sp_ldexp_f(float x, float y) {
    if (y != y) return NAN;
    return ldexpf(x, y > 100000.f ? 100000 : y < -100000.f ? -100000 : (int)y);
}
static inline double sp_ldexp_d(double x, double y) {
    if (y != y) return NAN;
    return ldexp(x, y > 100000. ? 100000 : y < -100000. ? -100000 : (int)y);
}
#define MATH2_LIST(X)                                                                                         \
    X(pow, POW, powf(x, y), pow(x, y)) X(atan2, ATAN2, atan2f(x, y), atan2(x, y))                            \
    X(fmod, FMOD, fmodf(x, y), fmod(x, y)) X(remainder, REMAINDER, remainderf(x, y), remainder(x, y))        \
    X(hypot, HYPOT, hypotf(x, y), hypot(x, y)) X(copysign, COPYSIGN, copysignf(x, y), copysign(x, y))        \
    X(fdim, FDIM, fdimf(x, y), fdim(x, y)) X(nextafter, NEXTAFTER, nextafterf(x, y), nextafter(x, y))        \
    X(ldexp, LDEXP, sp_ldexp_f(x, y), sp_ldexp_d(x, y)) X(fmaxnum, FMAXNUM, fmaxf(x, y), fmax(x, y))          \
    X(fminnum, FMINNUM, fminf(x, y), fmin(x, y))
#define DEF_M2E(nm, NM, fe, de)                                           \
    static inline float m2f_##nm(float x, float y) { return fe; }        \
    static inline double m2d_##nm(double x, double y) { return de; }
MATH2_LIST(DEF_M2E)
#define DEF_M2_LOOP(nm, NM, fe, de, d, p)                                                                       \
    static inline st_##d e_m2_##nm##_##d(st_##d a, st_##d b) { return pt_##d(m2##p##_##nm(ld_##d(a), ld_##d(b))); } \
    LOOP_BIN(k_m2_##nm##_##d, mt_##d, mt_##d, mt_##d, e_m2_##nm##_##d)
#define GEN_M2_f16(nm, NM, fe, de) DEF_M2_LOOP(nm, NM, fe, de, f16, f)
#define GEN_M2_bf16(nm, NM, fe, de) DEF_M2_LOOP(nm, NM, fe, de, bf16, f)
#define GEN_M2_f32(nm, NM, fe, de) DEF_M2_LOOP(nm, NM, fe, de, f32, f)
#define GEN_M2_f64(nm, NM, fe, de) DEF_M2_LOOP(nm, NM, fe, de, f64, d)
MATH2_LIST(GEN_M2_f16)
MATH2_LIST(GEN_M2_bf16)
MATH2_LIST(GEN_M2_f32)
MATH2_LIST(GEN_M2_f64)

/* nextafter of a 16-bit format steps its own representation, not f32's. */
static inline uint16_t sp_nextafter_h(uint16_t a, uint16_t b, float x, float y) {
    if (x != x) return a;
    if (y != y) return b;
    if (x == y) return b;
    if (x == 0) return (uint16_t)((b & 0x8000u) | 1u);
    return (uint16_t)(((x < y) == (x > 0)) ? a + 1 : a - 1);
}
static inline st_f16 e_nexth_f16(st_f16 a, st_f16 b) { return sp_nextafter_h(a, b, ld_f16(a), ld_f16(b)); }
static inline st_bf16 e_nexth_bf16(st_bf16 a, st_bf16 b) { return sp_nextafter_h(a, b, ld_bf16(a), ld_bf16(b)); }
LOOP_BIN(k_nexth_f16, mt_f16, mt_f16, mt_f16, e_nexth_f16)
LOOP_BIN(k_nexth_bf16, mt_bf16, mt_bf16, mt_bf16, e_nexth_bf16)

#define TAB_M2(nm, NM, fe, de)                                                                              \
    [MATH2_##NM] = {[DT_F16] = {k_m2_##nm##_f16_v0, k_m2_##nm##_f16_v1, k_m2_##nm##_f16_v2},                 \
                    [DT_BF16] = {k_m2_##nm##_bf16_v0, k_m2_##nm##_bf16_v1, k_m2_##nm##_bf16_v2},             \
                    [DT_F32] = {k_m2_##nm##_f32_v0, k_m2_##nm##_f32_v1, k_m2_##nm##_f32_v2},                 \
                    [DT_F64] = {k_m2_##nm##_f64_v0, k_m2_##nm##_f64_v1, k_m2_##nm##_f64_v2}},
static const spy_bin_fn m2_tab[MATH2_COUNT][DT_COUNT][3] = {MATH2_LIST(TAB_M2)};

spy_bin_fn KFN(spy_k_math2)(int fn, int dt, int variant) {
    if (fn < 0 || fn >= MATH2_COUNT || dt < 0 || dt >= DT_COUNT || variant < 0 || variant > 2) return NULL;
    if (fn == MATH2_NEXTAFTER && dt == DT_F16)
        return (spy_bin_fn[]){k_nexth_f16_v0, k_nexth_f16_v1, k_nexth_f16_v2}[variant];
    if (fn == MATH2_NEXTAFTER && dt == DT_BF16)
        return (spy_bin_fn[]){k_nexth_bf16_v0, k_nexth_bf16_v1, k_nexth_bf16_v2}[variant];
    return m2_tab[fn][dt][variant];
}

#endif /* math2 */

/* ---- reductions ----------------------------------------------------------------------------- */
/* Reduce [outer, len, inner] over len (a 2-D source may have strided rows: ld). A single row (inner == 1) reduces in RED_LANES interleaved
 * lanes and then a fixed tree, so the loop vectorises and the result is deterministic; float add/mul
 * reassociate too, since Triton leaves the order of tl.sum undefined (GPUs reduce as trees). */
#define RED_CHUNK 256
#define RED_LANES SPYRE_RED_LANES /* the ISA's (isa.py): 4 zmm (8 ymm) accumulator chains */
#define RED_PF_ROWS 8 /* rows of a strided source (views of device memory) fetched ahead of the one reduced */
#define DEF_RED(NAME, MT, ACC_T, LOADACC, COMBINE, STOREACC, IDENT, REORDER)                                 \
    static void NAME(void *restrict d_, const void *restrict s_, size_t outer, size_t len, size_t inner,       \
                     size_t ld) {                                                                             \
        MT *restrict dst = (MT *)d_;                                                                          \
        const MT *restrict src = (const MT *)s_;                                                              \
        /* rows of a strided 2-D source (ld): the outer rows when inner == 1, else the len rows */            \
        const size_t ostride = ld && inner == 1 ? ld : len * inner, lstride = ld && inner != 1 ? ld : inner;  \
        for (size_t o = 0; o < outer; o++) {                                                                  \
            const MT *so = src + o * ostride;                                                                 \
            MT *dout = dst + o * inner;                                                                       \
            if (len == 0) {                                                                                   \
                for (size_t i = 0; i < inner; i++) dout[i] = STOREACC(IDENT);                                 \
                continue;                                                                                     \
            }                                                                                                 \
            if (REORDER && inner == 1 && len >= 2 * RED_LANES) {                                              \
                ACC_T lane[RED_LANES];                                                                        \
                for (int j = 0; j < RED_LANES; j++) lane[j] = LOADACC(so[j]);                                 \
                size_t l = RED_LANES;                                                                         \
                for (; l + RED_LANES <= len; l += RED_LANES)                                                  \
                    for (int j = 0; j < RED_LANES; j++) lane[j] = COMBINE(lane[j], LOADACC(so[l + j]));       \
                /* a fixed tree: deterministic; unrolled, so that each level is vector adds of known width */    \
                _Pragma("GCC unroll 8") for (int w = RED_LANES / 2; w >= 1; w /= 2)                           \
                    for (int j = 0; j < w; j++) lane[j] = COMBINE(lane[j], lane[j + w]);                      \
                ACC_T r = lane[0];                                                                            \
                for (; l < len; l++) r = COMBINE(r, LOADACC(so[l]));                                          \
                dout[0] = STOREACC(r);                                                                        \
                continue;                                                                                     \
            }                                                                                                 \
            for (size_t i0 = 0; i0 < inner; i0 += RED_CHUNK) {                                                \
                const size_t m = inner - i0 < RED_CHUNK ? inner - i0 : RED_CHUNK;                             \
                ACC_T acc[RED_CHUNK];                                                                         \
                for (size_t j = 0; j < m; j++) acc[j] = LOADACC(so[i0 + j]);                                  \
                for (size_t l = 1; l < len; l++) {                                                            \
                    const MT *row = so + l * lstride + i0;                                                    \
                    if (ld && l + RED_PF_ROWS < len) /* strided device memory rows: fetch ahead */            \
                        for (size_t b = 0; b < m * sizeof(MT); b += 64)                                       \
                            __builtin_prefetch((const char *)(row + RED_PF_ROWS * lstride) + b, 0, 3);        \
                    for (size_t j = 0; j < m; j++) acc[j] = COMBINE(acc[j], LOADACC(row[j]));                 \
                }                                                                                             \
                for (size_t j = 0; j < m; j++) dout[i0 + j] = STOREACC(acc[j]);                               \
            }                                                                                                 \
        }                                                                                                     \
    }
#define ID(x) (x)
#define INT_REDOPS(X, d, D)                                                                                  \
    X(add, ADD, e_add_##d, put_##d(0), d, D) X(mul, MUL, e_mul_##d, put_##d(1), d, D)                       \
    X(maxs, MAXS, e_maxs_##d, put_##d((uw_##d)1 << (BITS_##d - 1)), d, D)                                   \
    X(mins, MINS, e_mins_##d, put_##d(((uw_##d)1 << (BITS_##d - 1)) - 1), d, D)                             \
    X(maxu, MAXU, e_maxu_##d, put_##d(0), d, D) X(minu, MINU, e_minu_##d, put_##d((uw_##d)-1), d, D)        \
    X(and, AND, e_and_##d, put_##d((uw_##d)-1), d, D) X(or, OR, e_or_##d, put_##d(0), d, D)                 \
    X(xor, XOR, e_xor_##d, put_##d(0), d, D)
#define DEF_INT_RED(nm, NM, COMB, IDENT, d, D) DEF_RED(r_##nm##_##d, mt_##d, st_##d, ID, COMB, ID, IDENT, 1)
#define GEN_INT_RED(d, D) INT_REDOPS(DEF_INT_RED, d, D)
INT_DTS_V(GEN_INT_RED)

/* Float reductions. add, mul, maximum and minimum store a NaN result as the default NaN (ptn_): in a
 * partial result two NaNs can meet, and which one's payload survives depends on the operand order gcc
 * picks, but that the result is NaN does not. (Replacing NaN inputs by the default NaN instead does
 * not work: gcc folds x + -NaN into x - +NaN in the scalar loops, which flips the sign; and the
 * elementwise ops' NAN1 would put a compare and a blend into each lane's dependency chain.) maxnum
 * and minnum only select, and keep the payload. */
#define RADD(x, y) ((x) + (y))
#define RMUL(x, y) ((x) * (y))
#define DEF_PTN(d, D, p) static inline st_##d ptn_##d(ct_##d x) { return pt_##d(sp_dnan_##p(x)); }
FLT_DTS(DEF_PTN)
#define FLT_REDOPS(X, d, D, p)                                                                               \
    X(add, ADD, RADD, 0, ptn, d, D) X(mul, MUL, RMUL, 1, ptn, d, D)                                         \
    X(maxnum, MAXNUM, sp_maxnum_##p, -INFINITY, pt, d, D) X(minnum, MINNUM, sp_minnum_##p, INFINITY, pt, d, D) \
    X(maximum, MAXIMUM, sp_maximum_##p, -INFINITY, ptn, d, D)                                               \
    X(minimum, MINIMUM, sp_minimum_##p, INFINITY, ptn, d, D)
#define DEF_FLT_RED(nm, NM, COMB, IDENT, ST, d, D) \
    DEF_RED(r_##nm##_##d, mt_##d, ct_##d, ld_##d, COMB, ST##_##d, IDENT, 1)
#define GEN_FLT_RED(d, D, p) FLT_REDOPS(DEF_FLT_RED, d, D, p)
FLT_DTS(GEN_FLT_RED)

#define TAB_INT_RED1(nm, NM, COMB, IDENT, d, D) [RED_##NM][DT_##D] = r_##nm##_##d,
#define TAB_INT_RED(d, D) INT_REDOPS(TAB_INT_RED1, d, D)
#define TAB_FLT_RED1(nm, NM, COMB, IDENT, ST, d, D) [RED_##NM][DT_##D] = r_##nm##_##d,
#define TAB_FLT_RED(d, D, p) FLT_REDOPS(TAB_FLT_RED1, d, D, p)
static const spy_red_fn red_tab[RED_COUNT][DT_COUNT] = {INT_DTS_V(TAB_INT_RED) FLT_DTS(TAB_FLT_RED)};

spy_red_fn KFN(spy_k_red)(int redop, int dt) {
    if (redop < 0 || redop >= RED_COUNT || dt < 0 || dt >= DT_COUNT) return NULL;
#ifdef SPY_USE_AVX512
    /* f32 min/max: a row reduces in 32 dependent lanes, here two zmm chains whose compare goes through
     * a mask register, which is slower (10-25% on Zen 5) than the AVX2 build's four ymm chains with
     * vector masks. NULL picks the AVX2 build. (f16/bf16 gain from the zmm conversions, f64 breaks even.) */
    if (dt == DT_F32 && (redop == RED_MAXNUM || redop == RED_MINNUM || redop == RED_MAXIMUM || redop == RED_MINIMUM))
        return NULL;
#endif
    return red_tab[redop][dt];
}

/* ---- conversions ---------------------------------------------------------------------------- */
/* Direct typed loops for the common pairs. */
static inline int64_t sp_fptosi(double x, int64_t lo, int64_t hi) {
    if (x != x) return 0;
    if (x <= (double)lo) return lo;
    if (x >= (double)hi) return hi;
    return (int64_t)x;
}
static inline uint64_t sp_fptoui(double x, uint64_t hi) {
    if (x != x || x <= 0) return 0;
    if (x >= (double)hi) return hi;
    return (uint64_t)x;
}
#define SMIN_i1 (-1)
#define SMAX_i1 0
#define SMIN_i8 INT8_MIN
#define SMAX_i8 INT8_MAX
#define SMIN_i16 INT16_MIN
#define SMAX_i16 INT16_MAX
#define SMIN_i32 INT32_MIN
#define SMAX_i32 INT32_MAX
#define SMIN_i64 INT64_MIN
#define SMAX_i64 INT64_MAX
#define UMAX_i1 1u
#define UMAX_i8 UINT8_MAX
#define UMAX_i16 UINT16_MAX
#define UMAX_i32 UINT32_MAX
#define UMAX_i64 UINT64_MAX

/* float -> float through the compute type: src f16/bf16/f32, dst f16/bf16/f32/f64 */
#define DEF_CVT_FF(s, d)                                                                     \
    static inline st_##d e_cvt_##s##_##d(st_##s a) { return (st_##d)pt_##d(ld_##s(a)); }    \
    LOOP_UN(c_ff_##s##_##d, mt_##d, mt_##s, e_cvt_##s##_##d)
#define DEF_CVT_FF_SRC(s) DEF_CVT_FF(s, f16) DEF_CVT_FF(s, bf16) DEF_CVT_FF(s, f32) DEF_CVT_FF(s, f64)
DEF_CVT_FF_SRC(f16)
DEF_CVT_FF_SRC(bf16)
DEF_CVT_FF_SRC(f32)
static inline st_f32 e_cvt_f64_f32(st_f64 a) { return (float)a; }
LOOP_UN(c_ff_f64_f32, mt_f32, mt_f64, e_cvt_f64_f32)
static inline st_f64 e_cvt_f64_f64(st_f64 a) { return a; }
LOOP_UN(c_ff_f64_f64, mt_f64, mt_f64, e_cvt_f64_f64)

/* int -> int (sext / zext / truncate) and int -> f32/f64 */
#define DEF_CVT_II(s, S, d, D)                                                                              \
    static inline st_##d e_sext_##s##_##d(st_##s a) { return put_##d((uw_##d)(int64_t)ls_##s(a)); }        \
    static inline st_##d e_zext_##s##_##d(st_##s a) { return put_##d((uw_##d)(uint64_t)lu_##s(a)); }       \
    LOOP_UN(c_sext_##s##_##d, mt_##d, mt_##s, e_sext_##s##_##d)                                             \
    LOOP_UN(c_zext_##s##_##d, mt_##d, mt_##s, e_zext_##s##_##d)
#define DEF_CVT_IF(s, S, d, D, p)                                                                           \
    static inline st_##d e_sitofp_##s##_##d(st_##s a) { return (st_##d)ls_##s(a); }                        \
    static inline st_##d e_uitofp_##s##_##d(st_##s a) { return (st_##d)lu_##s(a); }                        \
    LOOP_UN(c_sitofp_##s##_##d, mt_##d, mt_##s, e_sitofp_##s##_##d)                                         \
    LOOP_UN(c_uitofp_##s##_##d, mt_##d, mt_##s, e_uitofp_##s##_##d)
#define DEF_CVT_FI(s, S, p, d, D)                                                                           \
    static inline st_##d e_fptosi_##s##_##d(st_##s a) {                                                     \
        return put_##d((uw_##d)sp_fptosi((double)ld_##s(a), SMIN_##d, SMAX_##d));                           \
    }                                                                                                       \
    static inline st_##d e_fptoui_##s##_##d(st_##s a) {                                                     \
        return put_##d((uw_##d)sp_fptoui((double)ld_##s(a), UMAX_##d));                                     \
    }                                                                                                       \
    static inline st_##d e_boolf_##s##_##d(st_##s a) { return put_##d(ld_##s(a) != 0); }                   \
    LOOP_UN(c_fptosi_##s##_##d, mt_##d, mt_##s, e_fptosi_##s##_##d)                                         \
    LOOP_UN(c_fptoui_##s##_##d, mt_##d, mt_##s, e_fptoui_##s##_##d)                                         \
    LOOP_UN(c_boolf_##s##_##d, mt_##d, mt_##s, e_boolf_##s##_##d)
#define DEF_CVT_BOOLI(s, S, d, D)                                                                           \
    static inline st_##d e_booli_##s##_##d(st_##s a) { return put_##d(lu_##s(a) != 0); }                   \
    LOOP_UN(c_booli_##s##_##d, mt_##d, mt_##s, e_booli_##s##_##d)
#define CVT_II_DST(s, S) DEF_CVT_II(s, S, i1, I1) DEF_CVT_II(s, S, i8, I8) DEF_CVT_II(s, S, i16, I16) \
    DEF_CVT_II(s, S, i32, I32) DEF_CVT_II(s, S, i64, I64) DEF_CVT_BOOLI(s, S, i1, I1)               \
    DEF_CVT_IF(s, S, f32, F32, f) DEF_CVT_IF(s, S, f64, F64, d)
INT_DTS(CVT_II_DST)
#define CVT_FI_SRC(s, S, p) DEF_CVT_FI(s, S, p, i1, I1) DEF_CVT_FI(s, S, p, i8, I8) DEF_CVT_FI(s, S, p, i16, I16) \
    DEF_CVT_FI(s, S, p, i32, I32) DEF_CVT_FI(s, S, p, i64, I64)
FLT_DTS(CVT_FI_SRC)

#define TAB_II1(s, S, d, D) [DT_##S][DT_##D] = {c_sext_##s##_##d, c_zext_##s##_##d},
#define TAB_II(s, S) TAB_II1(s, S, i1, I1) TAB_II1(s, S, i8, I8) TAB_II1(s, S, i16, I16) TAB_II1(s, S, i32, I32) \
    TAB_II1(s, S, i64, I64)
static const spy_un_fn cvt_ii_tab[DT_COUNT][DT_COUNT][2] = {INT_DTS(TAB_II)};
#define TAB_IF(s, S) [DT_##S] = {[DT_F32] = {c_sitofp_##s##_f32, c_uitofp_##s##_f32}, \
                                 [DT_F64] = {c_sitofp_##s##_f64, c_uitofp_##s##_f64}},
static const spy_un_fn cvt_if_tab[DT_COUNT][DT_COUNT][2] = {INT_DTS(TAB_IF)};
#define TAB_FI1(s, S, d, D) [DT_##S][DT_##D] = {c_fptosi_##s##_##d, c_fptoui_##s##_##d, c_boolf_##s##_##d},
#define TAB_FI(s, S, p) TAB_FI1(s, S, i1, I1) TAB_FI1(s, S, i8, I8) TAB_FI1(s, S, i16, I16) \
    TAB_FI1(s, S, i32, I32) TAB_FI1(s, S, i64, I64)
static const spy_un_fn cvt_fi_tab[DT_COUNT][DT_COUNT][3] = {FLT_DTS(TAB_FI)};
#define TAB_BOOLI(s, S) [DT_##S] = c_booli_##s##_i1,
static const spy_un_fn cvt_booli_tab[DT_COUNT] = {INT_DTS(TAB_BOOLI)};
#define TAB_FF_ROW(s, S) [DT_##S] = {[DT_F16] = c_ff_##s##_f16, [DT_BF16] = c_ff_##s##_bf16, \
                                     [DT_F32] = c_ff_##s##_f32, [DT_F64] = c_ff_##s##_f64},
static const spy_un_fn cvt_ff_tab[DT_COUNT][DT_COUNT] = {
    TAB_FF_ROW(f16, F16) TAB_FF_ROW(bf16, BF16) TAB_FF_ROW(f32, F32)
    [DT_F64] = {[DT_F32] = c_ff_f64_f32, [DT_F64] = c_ff_f64_f64}};

static int is_int(int dt) { return dt >= DT_I1 && dt <= DT_I64; }
static int is_flt(int dt) { return dt >= DT_F16 && dt < DT_COUNT; }
/* conversions between these two are exact (widening, or the same type) */
static int ff_exact(int d, int s) {
    return d == s || (d == DT_F32 && (s == DT_F16 || s == DT_BF16)) ||
           (d == DT_F64 && (s == DT_F16 || s == DT_BF16 || s == DT_F32));
}

static void c_h2f_f16(void *restrict d, const void *restrict a, size_t n) { h2f_f16(d, a, n); }
static void c_f2h_f16(void *restrict d, const void *restrict a, size_t n) { f2h_f16(d, a, n); }

spy_un_fn KFN(spy_k_cvt_direct)(int mode, int d, int s) {
    if (d < 0 || d >= DT_COUNT || s < 0 || s >= DT_COUNT) return NULL;
    if (s == DT_F16 && d == DT_F32 && (mode == CVT_FPEXT || mode == CVT_RTNE || mode == CVT_RTZ)) return c_h2f_f16;
    if (s == DT_F32 && d == DT_F16 && (mode == CVT_FPEXT || mode == CVT_RTNE)) return c_f2h_f16;
    switch (mode) {
    case CVT_SEXT: return is_int(d) && is_int(s) ? cvt_ii_tab[s][d][0] : NULL;
    case CVT_ZEXT: return is_int(d) && is_int(s) ? cvt_ii_tab[s][d][1] : NULL;
    case CVT_SITOFP: return is_int(s) ? cvt_if_tab[s][d][0] : NULL;
    case CVT_UITOFP: return is_int(s) ? cvt_if_tab[s][d][1] : NULL;
    case CVT_FPTOSI: return is_int(d) ? cvt_fi_tab[s][d][0] : NULL;
    case CVT_FPTOUI: return is_int(d) ? cvt_fi_tab[s][d][1] : NULL;
    case CVT_FPEXT:
    case CVT_RTNE: return is_flt(d) && is_flt(s) ? cvt_ff_tab[s][d] : NULL;
    case CVT_RTZ: return ff_exact(d, s) ? cvt_ff_tab[s][d] : NULL;
    case CVT_BOOL:
        if (d != DT_I1) return NULL;
        return is_int(s) ? cvt_booli_tab[s] : cvt_fi_tab[s][d][2];
    }
    return NULL;
}

#ifndef SPY_LOOPS_VARIANT /* generic conversions: baseline build only (no gain from SIMD) */
/* Generic conversion: a reader to a chunk of 64-bit values (int64, uint64 or double), a writer
 * from it. Covers every pair, fp8 included. */
#define DEF_RD_INT(s, S)                                                                         \
    static void rd_s_##s(void *restrict t_, const void *restrict a_, size_t n) {                 \
        int64_t *restrict t = t_;                                                                \
        const mt_##s *restrict a = a_;                                                           \
        for (size_t i = 0; i < n; i++) t[i] = ls_##s(a[i]);                                      \
    }                                                                                            \
    static void rd_u_##s(void *restrict t_, const void *restrict a_, size_t n) {                 \
        uint64_t *restrict t = t_;                                                               \
        const mt_##s *restrict a = a_;                                                           \
        for (size_t i = 0; i < n; i++) t[i] = lu_##s(a[i]);                                      \
    }                                                                                            \
    static void wr_i_##s(void *restrict d_, const void *restrict t_, size_t n) {                 \
        mt_##s *restrict d = d_;                                                                 \
        const uint64_t *restrict t = t_;                                                         \
        for (size_t i = 0; i < n; i++) d[i] = put_##s((uw_##s)t[i]);                            \
    }                                                                                            \
    static void wr_fptosi_##s(void *restrict d_, const void *restrict t_, size_t n) {            \
        mt_##s *restrict d = d_;                                                                 \
        const double *restrict t = t_;                                                           \
        for (size_t i = 0; i < n; i++) d[i] = put_##s((uw_##s)sp_fptosi(t[i], SMIN_##s, SMAX_##s)); \
    }                                                                                            \
    static void wr_fptoui_##s(void *restrict d_, const void *restrict t_, size_t n) {            \
        mt_##s *restrict d = d_;                                                                 \
        const double *restrict t = t_;                                                           \
        for (size_t i = 0; i < n; i++) d[i] = put_##s((uw_##s)sp_fptoui(t[i], UMAX_##s));        \
    }                                                                                            \
    static void wr_booli_##s(void *restrict d_, const void *restrict t_, size_t n) {             \
        mt_##s *restrict d = d_;                                                                 \
        const uint64_t *restrict t = t_;                                                         \
        for (size_t i = 0; i < n; i++) d[i] = put_##s(t[i] != 0);                                \
    }                                                                                            \
    static void wr_boolf_##s(void *restrict d_, const void *restrict t_, size_t n) {             \
        mt_##s *restrict d = d_;                                                                 \
        const double *restrict t = t_;                                                           \
        for (size_t i = 0; i < n; i++) d[i] = put_##s(t[i] != 0);                                \
    }
INT_DTS(DEF_RD_INT)

/* float readers (to double) and writers (from double, or from int64/uint64 for sitofp/uitofp) */
#define DEF_RW_FLT(NAME, MT, TODOUBLE, RTNE, RTZ, FROMI64, FROMU64)                                 \
    static void rd_f_##NAME(void *restrict t_, const void *restrict a_, size_t n) {                 \
        double *restrict t = t_;                                                                    \
        const MT *restrict a = a_;                                                                  \
        for (size_t i = 0; i < n; i++) t[i] = TODOUBLE(a[i]);                                       \
    }                                                                                               \
    static void wr_rtne_##NAME(void *restrict d_, const void *restrict t_, size_t n) {              \
        MT *restrict d = d_;                                                                        \
        const double *restrict t = t_;                                                              \
        for (size_t i = 0; i < n; i++) d[i] = RTNE(t[i]);                                           \
    }                                                                                               \
    static void wr_rtz_##NAME(void *restrict d_, const void *restrict t_, size_t n) {               \
        MT *restrict d = d_;                                                                        \
        const double *restrict t = t_;                                                              \
        for (size_t i = 0; i < n; i++) d[i] = RTZ(t[i]);                                            \
    }                                                                                               \
    static void wr_sitofp_##NAME(void *restrict d_, const void *restrict t_, size_t n) {            \
        MT *restrict d = d_;                                                                        \
        const int64_t *restrict t = t_;                                                             \
        for (size_t i = 0; i < n; i++) d[i] = FROMI64(t[i]);                                        \
    }                                                                                               \
    static void wr_uitofp_##NAME(void *restrict d_, const void *restrict t_, size_t n) {            \
        MT *restrict d = d_;                                                                        \
        const uint64_t *restrict t = t_;                                                            \
        for (size_t i = 0; i < n; i++) d[i] = FROMU64(t[i]);                                        \
    }

static inline float sp_d2f_rtz(double x) {
    float f = (float)x;
    if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
    return f;
}
#define D_ID(x) (x)
#define F16_TOD(x) ((double)ld_f16(x))
#define BF16_TOD(x) ((double)sp_bf16_to_f32(x))
/* in DLFloat16 mode, through f32: IBM's conversions round f32 to nearest (ties away); rtz truncates */
#define F16_RTNE(x) (SP_DL16() ? sp_f32_to_dl16((float)(x)) : (uint16_t)sp_encode((x), &SP_FMT_F16, 0))
#define F16_RTZ(x) (SP_DL16() ? sp_f32_to_dl16_rtz(sp_d2f_rtz(x)) : (uint16_t)sp_encode((x), &SP_FMT_F16, 1))
#define BF16_RTNE(x) ((uint16_t)sp_encode((x), &SP_FMT_BF16, 0))
#define BF16_RTZ(x) ((uint16_t)sp_encode((x), &SP_FMT_BF16, 1))
#define F16_I64(x) F16_RTNE(sp_i64_to_double_rto(x))
#define F16_U64(x) F16_RTNE(sp_u64_to_double_rto(x))
#define BF16_I64(x) BF16_RTNE(sp_i64_to_double_rto(x))
#define BF16_U64(x) BF16_RTNE(sp_u64_to_double_rto(x))
#define F32_RTNE(x) ((float)(x))
#define F32_I64(x) ((float)(x))
#define F64_I64(x) ((double)(x))
DEF_RW_FLT(f16, mt_f16, F16_TOD, F16_RTNE, F16_RTZ, F16_I64, F16_U64)
DEF_RW_FLT(bf16, mt_bf16, BF16_TOD, BF16_RTNE, BF16_RTZ, BF16_I64, BF16_U64)
DEF_RW_FLT(f32, mt_f32, D_ID, F32_RTNE, sp_d2f_rtz, F32_I64, F32_I64)
DEF_RW_FLT(f64, mt_f64, D_ID, D_ID, D_ID, F64_I64, F64_I64)
#define DEF_FP8(NAME, IDX)                                                                                   \
    static inline double fp8d_##NAME(uint8_t x) { return (double)sp_fp8_table[IDX][x]; }                    \
    static inline uint8_t fp8e_##NAME(double x) { return (uint8_t)sp_encode(x, &SP_FMT_FP8[IDX], 0); }      \
    static inline uint8_t fp8z_##NAME(double x) { return (uint8_t)sp_encode(x, &SP_FMT_FP8[IDX], 1); }      \
    static inline uint8_t fp8i_##NAME(int64_t x) { return fp8e_##NAME(sp_i64_to_double_rto(x)); }           \
    static inline uint8_t fp8u_##NAME(uint64_t x) { return fp8e_##NAME(sp_u64_to_double_rto(x)); }          \
    DEF_RW_FLT(NAME, sp_u8, fp8d_##NAME, fp8e_##NAME, fp8z_##NAME, fp8i_##NAME, fp8u_##NAME)
DEF_FP8(f8e4m3fn, DT_F8E4M3FN - SPYRE_FP8_FIRST)
DEF_FP8(f8e5m2, DT_F8E5M2 - SPYRE_FP8_FIRST)
DEF_FP8(f8e4m3fnuz, DT_F8E4M3FNUZ - SPYRE_FP8_FIRST)
DEF_FP8(f8e5m2fnuz, DT_F8E5M2FNUZ - SPYRE_FP8_FIRST)
DEF_FP8(f8e4m3b15, DT_F8E4M3B15 - SPYRE_FP8_FIRST)

#define ALL_FLT_NAMES(X) X(f16, F16) X(bf16, BF16) X(f32, F32) X(f64, F64) X(f8e4m3fn, F8E4M3FN) \
    X(f8e5m2, F8E5M2) X(f8e4m3fnuz, F8E4M3FNUZ) X(f8e5m2fnuz, F8E5M2FNUZ) X(f8e4m3b15, F8E4M3B15)
enum { RD_S, RD_U, RD_F };
enum { WR_I, WR_FPTOSI, WR_FPTOUI, WR_BOOLI, WR_BOOLF, WR_RTNE, WR_RTZ, WR_SITOFP, WR_UITOFP, WR_COUNT };
#define TAB_RD_I(s, S) [DT_##S] = {[RD_S] = rd_s_##s, [RD_U] = rd_u_##s},
#define TAB_RD_F(s, S) [DT_##S] = {[RD_F] = rd_f_##s},
static const spy_rd_fn rd_tab[DT_COUNT][3] = {INT_DTS(TAB_RD_I) ALL_FLT_NAMES(TAB_RD_F)};
#define TAB_WR_I(s, S) [DT_##S] = {[WR_I] = wr_i_##s, [WR_FPTOSI] = wr_fptosi_##s, [WR_FPTOUI] = wr_fptoui_##s, \
                                   [WR_BOOLI] = wr_booli_##s, [WR_BOOLF] = wr_boolf_##s},
#define TAB_WR_F(s, S) [DT_##S] = {[WR_RTNE] = wr_rtne_##s, [WR_RTZ] = wr_rtz_##s, [WR_SITOFP] = wr_sitofp_##s, \
                                   [WR_UITOFP] = wr_uitofp_##s},
static const spy_wr_fn wr_tab[DT_COUNT][WR_COUNT] = {INT_DTS(TAB_WR_I) ALL_FLT_NAMES(TAB_WR_F)};

int KFN(spy_k_cvt_generic)(int mode, int d, int s, spy_rd_fn *rd, spy_wr_fn *wr) {
    if (d < 0 || d >= DT_COUNT || s < 0 || s >= DT_COUNT) return -1;
    int r = -1, w = -1;
    switch (mode) {
    case CVT_SEXT: if (is_int(d) && is_int(s)) r = RD_S, w = WR_I; break;
    case CVT_ZEXT: if (is_int(d) && is_int(s)) r = RD_U, w = WR_I; break;
    case CVT_SITOFP: if (is_flt(d) && is_int(s)) r = RD_S, w = WR_SITOFP; break;
    case CVT_UITOFP: if (is_flt(d) && is_int(s)) r = RD_U, w = WR_UITOFP; break;
    case CVT_FPTOSI: if (is_int(d) && is_flt(s)) r = RD_F, w = WR_FPTOSI; break;
    case CVT_FPTOUI: if (is_int(d) && is_flt(s)) r = RD_F, w = WR_FPTOUI; break;
    case CVT_FPEXT:
    case CVT_RTNE: if (is_flt(d) && is_flt(s)) r = RD_F, w = WR_RTNE; break;
    case CVT_RTZ: if (is_flt(d) && is_flt(s)) r = RD_F, w = WR_RTZ; break;
    case CVT_BOOL:
        if (is_int(d)) {
            if (is_int(s)) r = RD_U, w = WR_BOOLI;
            else r = RD_F, w = WR_BOOLF;
        }
        break;
    }
    if (r < 0 || !rd_tab[s][r] || !wr_tab[d][w]) return -1;
    *rd = rd_tab[s][r];
    *wr = wr_tab[d][w];
    return 0;
}

#endif /* generic conversions */

#ifndef SPY_LOOPS_VARIANT
void spy_cvt_generic(spy_rd_fn rd, spy_wr_fn wr, size_t des, size_t ses, void *dst, const void *src, size_t n) {
    uint64_t tmp[256];
    for (size_t i = 0; i < n; i += 256) {
        const size_t m = n - i < 256 ? n - i : 256;
        rd(tmp, (const uint8_t *)src + i * ses, m);
        wr((uint8_t *)dst + i * des, tmp, m);
    }
}
#endif

/* ---- fills, iota ---------------------------------------------------------------------------- */
#ifndef SPY_LOOPS_VARIANT
#define FILL_LOOP(MT, T)                                                        \
    {                                                                           \
        MT *restrict d = (MT *)dst;                                             \
        const T v = (T)bits;                                                    \
        for (size_t i = 0; i < n; i++) d[i] = v;                                \
    }
void spy_fill_bits(void *dst, uint64_t bits, size_t es, size_t n) {
    if (bits == 0 || es == 1) { /* zeros (tl.zeros accumulators): libc's memset has the widest stores */
        memset(dst, (int)(bits & 0xFF), n * es);
        return;
    }
    switch (es) {
    case 2: FILL_LOOP(sp_u16, uint16_t) break;
    case 4: FILL_LOOP(sp_u32, uint32_t) break;
    case 8: FILL_LOOP(sp_u64, uint64_t) break;
    }
}

void spy_fill(void *dst, size_t es, size_t n) {
    if (n <= 1) return;
    uint64_t bits = 0;
    memcpy(&bits, dst, es);
    spy_fill_bits((uint8_t *)dst + es, bits, es, n - 1);
}

#define IOTA_LOOP(d)                                                             \
    {                                                                            \
        mt_##d *restrict p = (mt_##d *)dst;                                      \
        for (size_t i = 0; i < n; i++) p[i] = put_##d((uw_##d)((uw_##d)(int64_t)start + (uw_##d)i)); \
    }
void spy_iota(void *dst, int dt, int32_t start, size_t n) {
    switch (dt) {
    case DT_I1: IOTA_LOOP(i1) break;
    case DT_I8: IOTA_LOOP(i8) break;
    case DT_I16: IOTA_LOOP(i16) break;
    case DT_I32: IOTA_LOOP(i32) break;
    case DT_I64: IOTA_LOOP(i64) break;
    }
}

#endif /* fills, iota */

#ifndef SPY_LOOPS_VARIANT /* atomics: baseline build only (no gain from SIMD) */
/* ---- atomics -------------------------------------------------------------------------------- */
/* One element at a host address (checked and aligned by the caller). Native fetch-ops where the
 * host has them; compare-and-swap loops over the element functions otherwise. */
typedef uint8_t ut_i1; typedef uint8_t ut_i8; typedef uint16_t ut_i16; typedef uint32_t ut_i32; typedef uint64_t ut_i64;
typedef uint16_t ut_f16; typedef uint16_t ut_bf16; typedef uint32_t ut_f32; typedef uint64_t ut_f64;
static inline st_f32 b2s_f32(ut_f32 x) { return sp_u2f(x); }
static inline ut_f32 s2b_f32(st_f32 x) { return sp_f2u(x); }
static inline st_f64 b2s_f64(ut_f64 x) { return sp_u2d(x); }
static inline ut_f64 s2b_f64(st_f64 x) { return sp_d2u(x); }
#define B2S_SAME(d) static inline st_##d b2s_##d(ut_##d x) { return (st_##d)x; } \
                    static inline ut_##d s2b_##d(st_##d x) { return (ut_##d)x; }
B2S_SAME(i1) B2S_SAME(i8) B2S_SAME(i16) B2S_SAME(i32) B2S_SAME(i64) B2S_SAME(f16) B2S_SAME(bf16)

#define DEF_ATOM_CAS(nm, d, F)                                                                            \
    static void a_##nm##_##d(void *addr, const void *val, void *old) {                                    \
        ut_##d *p = (ut_##d *)addr, v, o, nw;                                                             \
        memcpy(&v, val, sizeof v);                                                                        \
        o = __atomic_load_n(p, __ATOMIC_RELAXED);                                                         \
        do {                                                                                              \
            nw = s2b_##d(F(b2s_##d(o), b2s_##d(v)));                                                      \
        } while (!__atomic_compare_exchange_n(p, &o, nw, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));         \
        memcpy(old, &o, sizeof o);                                                                        \
    }
#define DEF_ATOM_NATIVE(nm, d, BUILTIN)                                                                   \
    static void a_##nm##_##d(void *addr, const void *val, void *old) {                                    \
        ut_##d v, o;                                                                                      \
        memcpy(&v, val, sizeof v);                                                                        \
        o = BUILTIN((ut_##d *)addr, v, __ATOMIC_SEQ_CST);                                                 \
        memcpy(old, &o, sizeof o);                                                                        \
    }
static inline st_i1 e_xchg_i1(st_i1 a, st_i1 b) { (void)a; return put_i1(b); }
DEF_ATOM_CAS(add, i1, e_add_i1)
DEF_ATOM_CAS(max, i1, e_maxs_i1)
DEF_ATOM_CAS(min, i1, e_mins_i1)
DEF_ATOM_CAS(umax, i1, e_maxu_i1)
DEF_ATOM_CAS(umin, i1, e_minu_i1)
DEF_ATOM_CAS(and, i1, e_and_i1)
DEF_ATOM_CAS(or, i1, e_or_i1)
DEF_ATOM_CAS(xor, i1, e_xor_i1)
DEF_ATOM_CAS(xchg, i1, e_xchg_i1)
#define GEN_ATOM_INT(d)                                        \
    DEF_ATOM_NATIVE(add, d, __atomic_fetch_add)                \
    DEF_ATOM_NATIVE(and, d, __atomic_fetch_and)                \
    DEF_ATOM_NATIVE(or, d, __atomic_fetch_or)                  \
    DEF_ATOM_NATIVE(xor, d, __atomic_fetch_xor)                \
    DEF_ATOM_NATIVE(xchg, d, __atomic_exchange_n)              \
    DEF_ATOM_CAS(max, d, e_maxs_##d)                           \
    DEF_ATOM_CAS(min, d, e_mins_##d)                           \
    DEF_ATOM_CAS(umax, d, e_maxu_##d)                          \
    DEF_ATOM_CAS(umin, d, e_minu_##d)
GEN_ATOM_INT(i8)
GEN_ATOM_INT(i16)
GEN_ATOM_INT(i32)
GEN_ATOM_INT(i64)
#define GEN_ATOM_FLT(d, D, p)                                  \
    DEF_ATOM_CAS(fadd, d, e_add_##d)                           \
    DEF_ATOM_CAS(fmax, d, e_maxnumf_##d)                       \
    DEF_ATOM_CAS(fmin, d, e_minnumf_##d)                       \
    DEF_ATOM_NATIVE(xchg, d, __atomic_exchange_n)
FLT_DTS(GEN_ATOM_FLT)

#define TAB_ATOM_I(d, D) [DT_##D] = {[ATOM_ADD] = a_add_##d, [ATOM_FADD] = a_add_##d, [ATOM_MAX] = a_max_##d, \
    [ATOM_MIN] = a_min_##d, [ATOM_UMAX] = a_umax_##d, [ATOM_UMIN] = a_umin_##d, [ATOM_AND] = a_and_##d,        \
    [ATOM_OR] = a_or_##d, [ATOM_XOR] = a_xor_##d, [ATOM_XCHG] = a_xchg_##d},
/* on floats, add is fadd and max/min compare as floats (NaN ignored) */
#define TAB_ATOM_F(d, D, p) [DT_##D] = {[ATOM_ADD] = a_fadd_##d, [ATOM_FADD] = a_fadd_##d, \
    [ATOM_MAX] = a_fmax_##d, [ATOM_MIN] = a_fmin_##d, [ATOM_XCHG] = a_xchg_##d},
static const spy_atom_fn atom_tab[DT_COUNT][ATOM_COUNT] = {INT_DTS(TAB_ATOM_I) FLT_DTS(TAB_ATOM_F)};

spy_atom_fn KFN(spy_k_atom)(int atomop, int dt) {
    if (atomop < 0 || atomop >= ATOM_COUNT || dt < 0 || dt >= DT_COUNT) return NULL;
    return atom_tab[dt][atomop];
}

#endif /* atomics */

/* ---- init and dispatch (baseline build only) ------------------------------------------------- */
#ifndef SPY_LOOPS_VARIANT
float sp_fp8_table[SPYRE_FP8_COUNT][256];
int sp_numerics_mode = NUMERICS_IEEE;
void sp_fp_init(void) {
    for (int f = 0; f < SPYRE_FP8_COUNT; f++)
        for (int b = 0; b < 256; b++) sp_fp8_table[f][b] = (float)sp_decode((uint32_t)b, &SP_FMT_FP8[f]);
}

/* SPY_BASELINE_ONLY (the sanitizer builds of run.sh): the typed loops are compiled once, without the
 * SIMD builds, which are the same source and took two thirds of an instrumented build's time */
#if defined(__x86_64__) && !defined(SPY_BASELINE_ONLY)
#define DECL_SIMD_BUILD(sfx)                                \
    spy_bin_fn spy_k_binary_##sfx(int, int, int);           \
    spy_bin_fn spy_k_cmp_##sfx(int, int, int, int);         \
    spy_un_fn spy_k_unary_##sfx(int, int);                  \
    spy_un_fn spy_k_math1_##sfx(int, int);                  \
    spy_tern_fn spy_k_ternary_##sfx(int, int, int, int);    \
    spy_red_fn spy_k_red_##sfx(int, int);                   \
    spy_un_fn spy_k_cvt_direct_##sfx(int, int, int);
DECL_SIMD_BUILD(avx2)
DECL_SIMD_BUILD(avx512)
/* The build this process runs, chosen once by CPU: 2 = AVX-512 (F, BW, CD, DQ, VL, with AVX2, FMA
 * and F16C) unless SPYRE_NO_AVX512 or SPYRE_NO_AVX2 is set; 1 = AVX2 + FMA + F16C unless
 * SPYRE_NO_AVX2 is set; 0 = the baseline. All three give the same bits (no fused multiply-add). */
int spy_simd_level(void) {
    static int v = -1;
    if (v < 0) {
        __builtin_cpu_init();
        const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c") && !getenv("SPYRE_NO_AVX2");
        const int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512vl") && !getenv("SPYRE_NO_AVX512");
        v = avx512 ? 2 : avx2 ? 1 : 0;
    }
    return v;
}
/* the widest allowed build that has the kernel (a NULL lookup falls through), else the baseline */
#define PICK(name, ...)                                                                          \
    (spy_simd_level() >= 2 && name##_avx512(__VA_ARGS__) ? name##_avx512(__VA_ARGS__)           \
     : spy_simd_level() >= 1 && name##_avx2(__VA_ARGS__) ? name##_avx2(__VA_ARGS__)             \
     : name##_base(__VA_ARGS__))
#else
int spy_simd_level(void) { return 0; }
#define PICK(name, ...) name##_base(__VA_ARGS__)
#endif
const char *spy_simd_name(void) {
    static const char *const names[] = {"baseline", "avx2", "avx512"};
    return names[spy_simd_level()];
}
spy_bin_fn spy_k_binary(int op, int dt, int v) { return PICK(spy_k_binary, op, dt, v); }
spy_bin_fn spy_k_cmp(int op, int pred, int dt, int v) { return PICK(spy_k_cmp, op, pred, dt, v); }
spy_un_fn spy_k_unary(int op, int dt) { return PICK(spy_k_unary, op, dt); }
spy_tern_fn spy_k_ternary(int op, int dt, int v, int flag) { return PICK(spy_k_ternary, op, dt, v, flag); }
spy_un_fn spy_k_math1(int fn, int dt) { return PICK(spy_k_math1, fn, dt); }
spy_bin_fn spy_k_math2(int fn, int dt, int v) { return spy_k_math2_base(fn, dt, v); }
spy_red_fn spy_k_red(int redop, int dt) { return PICK(spy_k_red, redop, dt); }
spy_un_fn spy_k_cvt_direct(int mode, int d, int s) { return PICK(spy_k_cvt_direct, mode, d, s); }
int spy_k_cvt_generic(int mode, int d, int s, spy_rd_fn *rd, spy_wr_fn *wr) {
    return spy_k_cvt_generic_base(mode, d, s, rd, wr);
}
spy_atom_fn spy_k_atom(int atomop, int dt) { return spy_k_atom_base(atomop, dt); }
#endif /* !SPY_LOOPS_VARIANT */
