/* The PE array: dst[M,N] = a[M,K] @ b[K,N] + acc, per batch.
 *
 * Structured like a BLIS gemm: blocks of B (KC x NC) and A (MC x KC) are packed (and converted to
 * the compute type: f32 for f16/bf16/fp8/f32 inputs, f64 for f64, i32 for i8) into panels of NR
 * columns / MR rows; a register-blocked micro-kernel accumulates an MR x NR tile of C over KC.
 * The f32 micro-kernel has AVX2+FMA (6 x 16) and AVX-512 (8 x 32) versions chosen at run time, and the
 * f32/f16/bf16 packers AVX2+F16C ones; the others are plain C loops
 * over fixed-size arrays that gcc vectorises. Half-precision outputs accumulate in an f32 buffer
 * and are rounded once at the end.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fp.h"
#include "interp.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SPY_HAVE_AVX2_KERNEL 1
#endif

/* cache blocking (elements): B blocks of KC x NC, A blocks of MC x KC */
#define KC 256
#define MC 120
#define MC_X8 128 /* with eight-row panels */
#define MC_MAX (MC > MC_X8 ? MC : MC_X8) /* the A panel buffer holds either */
#define NC 512
#define NR_MAX 16

/* the input and result dtypes a dot takes: isa.DType.dot_out (isa_gen.h) */
int spy_dot_supported(int t, int t2) { return (spyre_dtype_dot_out[t2] >> t) & 1; }

/* ---- packing: convert to the compute type while copying into panels -------------------------- */
static inline float in_f32(const void *p, size_t i) { return ((const sp_f32 *)p)[i]; }
static inline float in_f16(const void *p, size_t i) { return sp_f16_to_f32(((const sp_u16 *)p)[i]); }
static inline float in_bf16(const void *p, size_t i) { return sp_bf16_to_f32(((const sp_u16 *)p)[i]); }
/* SPYRE_NUMERICS=dl16: f16 operands are DLFloat16 bits (fp.h) */
static inline float in_f16_dl16(const void *p, size_t i) { return sp_dl16_to_f32(((const sp_u16 *)p)[i]); }
static inline double in_f64(const void *p, size_t i) { return ((const sp_f64 *)p)[i]; }
static inline int16_t in_i8(const void *p, size_t i) { return ((const int8_t *)p)[i]; }
/* fp8 packing reads the table of the dtype being packed: a thread-local index */
static __thread int fp8_tls;
static inline float in_fp8(const void *p, size_t i) { return sp_fp8_table[fp8_tls][((const uint8_t *)p)[i]]; }

/* Panels hold KP consecutive k values together (KP = 2 for i8, whose kernel multiplies pairs):
 *   A rows [0, mc) x k [0, kc) (row stride lda) -> per MR rows: [kc/KP][MR][KP], zero padded
 *   B k [0, kc) x cols [0, nc) (row stride ldb) -> per NR cols: [kc/KP][NR][KP], zero padded */
#define KPAD(kc, KP) (((kc) + (KP) - 1) / (KP) * (KP))
#define DEF_PACK_A(NAME, CT, IN, MR, KP)                                                                     \
    static void NAME(CT *restrict out, const void *a, size_t lda, size_t mc, size_t kc) {                    \
        const size_t kp = KPAD(kc, KP);                                                                      \
        for (size_t ir = 0; ir < mc; ir += MR) {                                                             \
            const size_t mr = mc - ir < MR ? mc - ir : MR;                                                   \
            if (mr == MR && KP == 1) { /* a whole panel: no padding to test for, MR rows read in step */      \
                for (size_t k = 0; k < kc; k++)                                                              \
                    for (size_t i = 0; i < MR; i++) out[k * MR + i] = IN(a, (ir + i) * lda + k);            \
            } else {                                                                                         \
                for (size_t k = 0; k < kp; k += KP)                                                          \
                    for (size_t i = 0; i < MR; i++)                                                          \
                        for (size_t q = 0; q < KP; q++)                                                      \
                            out[(k / KP * MR + i) * KP + q] =                                                \
                                (i < mr && k + q < kc) ? IN(a, (ir + i) * lda + k + q) : (CT)0;              \
            }                                                                                                \
            out += kp * MR;                                                                                  \
        }                                                                                                    \
    }
#define DEF_PACK(SFX, CT, IN, MR, NR, KP)                                                                    \
    DEF_PACK_A(pack_a_##SFX, CT, IN, MR, KP)                                                                 \
    static void pack_b_##SFX(CT *restrict out, const void *b, size_t ldb, size_t kc, size_t nc) {            \
        const size_t kp = KPAD(kc, KP);                                                                      \
        for (size_t jr = 0; jr < nc; jr += NR) {                                                             \
            const size_t nr = nc - jr < NR ? nc - jr : NR;                                                   \
            for (size_t k = 0; k < kp; k += KP)                                                              \
                for (size_t q = 0; q < KP; q++) {                                                            \
                    CT *o = out + (k / KP * NR) * KP + q;                                                    \
                    size_t j = 0;                                                                            \
                    if (k + q < kc)                                                                          \
                        for (; j < nr; j++) o[j * KP] = IN(b, (k + q) * ldb + jr + j);                       \
                    for (; j < NR; j++) o[j * KP] = 0;                                                       \
                }                                                                                            \
            out += kp * NR;                                                                                  \
        }                                                                                                    \
    }                                                                                                        \
    /* the same panels from B's transpose: b holds cols [0, nc) x k [0, kc) (row stride ldb) */             \
    static void pack_bt_##SFX(CT *restrict out, const void *b, size_t ldb, size_t kc, size_t nc) {           \
        const size_t kp = KPAD(kc, KP);                                                                      \
        for (size_t jr = 0; jr < nc; jr += NR) {                                                             \
            const size_t nr = nc - jr < NR ? nc - jr : NR;                                                   \
            for (size_t j = 0; j < NR; j++)                                                                  \
                for (size_t k = 0; k < kp; k++)                                                              \
                    out[(k / KP * NR + j) * KP + k % KP] = (j < nr && k < kc) ? IN(b, (jr + j) * ldb + k) : (CT)0; \
            out += kp * NR;                                                                                  \
        }                                                                                                    \
    }
#define MR_F32 6
#define NR_F32 16
#define MR_F64 6
#define NR_F64 8
#define MR_I8 6
#define NR_I8 16
DEF_PACK(f32, float, in_f32, MR_F32, NR_F32, 1)
DEF_PACK(f16, float, in_f16, MR_F32, NR_F32, 1)
DEF_PACK(f16_dl16, float, in_f16_dl16, MR_F32, NR_F32, 1)
DEF_PACK(bf16, float, in_bf16, MR_F32, NR_F32, 1)
DEF_PACK(fp8, float, in_fp8, MR_F32, NR_F32, 1)
DEF_PACK(f64, double, in_f64, MR_F64, NR_F64, 1)
DEF_PACK(i8, int16_t, in_i8, MR_I8, NR_I8, 2)
/* A panels of eight rows, for the AVX-512 kernel */
#define MR_X8 8
DEF_PACK_A(pack_a8_f32, float, in_f32, MR_X8, 1)
DEF_PACK_A(pack_a8_f16, float, in_f16, MR_X8, 1)
DEF_PACK_A(pack_a8_f16_dl16, float, in_f16_dl16, MR_X8, 1)
DEF_PACK_A(pack_a8_bf16, float, in_bf16, MR_X8, 1)
DEF_PACK_A(pack_a8_fp8, float, in_fp8, MR_X8, 1)

/* AVX2 + F16C packers: the same panels, eight k (A, B^T) or eight columns (B) converted per instruction.
 * f16 -> f32 (vcvtph2ps) and bf16 -> f32 (a shift) are exact, so they give the bits of the portable
 * packers; partial panels go to those. A and B^T panels are transposed in registers, 8 x 8 at a time. */
#ifdef SPY_HAVE_AVX2_KERNEL
#define F16C __attribute__((target("avx2,fma,f16c")))
#define F16C_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
F16C_INLINE __m256 ld8_f32(const void *p) { return _mm256_loadu_ps((const float *)p); }
F16C_INLINE __m256 ld8_f16(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
F16C_INLINE __m256 ld8_bf16(const void *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
/* r[i][j] -> r[j][i] */
F16C_INLINE void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20), r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
}
/* MR (6 or 8) rows, eight k at a time transposed in registers; a partial panel goes to TAIL */
#define DEF_PACK_A_AVX2(NAME, SFX, ES, MR, TAIL)                                                                \
    F16C static void NAME(float *restrict out, const void *a, size_t lda, size_t mc, size_t kc) {               \
        const uint8_t *A = a;                                                                                   \
        size_t ir = 0;                                                                                          \
        for (; ir + MR <= mc; ir += MR, out += kc * MR) {                                                       \
            size_t k = 0;                                                                                       \
            for (; k + 8 <= kc; k += 8) {                                                                       \
                __m256 r[8];                                                                                    \
                for (int i = 0; i < MR; i++) r[i] = ld8_##SFX(A + ((ir + i) * lda + k) * ES);                  \
                for (int i = MR; i < 8; i++) r[i] = _mm256_setzero_ps();                                        \
                transpose8(r);                                                                                  \
                for (int q = 0; q < 8; q++) {                                                                   \
                    if (MR == 8) {                                                                              \
                        _mm256_storeu_ps(out + (k + q) * MR, r[q]);                                             \
                    } else { /* six lanes: four, then two (vmaskmovps is slow on AMD) */                        \
                        _mm_storeu_ps(out + (k + q) * MR, _mm256_castps256_ps128(r[q]));                        \
                        _mm_storel_pi((__m64 *)(out + (k + q) * MR + 4), _mm256_extractf128_ps(r[q], 1));      \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
            for (; k < kc; k++)                                                                                 \
                for (int i = 0; i < MR; i++) out[k * MR + i] = in_##SFX(A, (ir + i) * lda + k);               \
        }                                                                                                       \
        if (ir < mc) TAIL(out, A + ir * lda * ES, lda, mc - ir, kc);                                            \
    }
#define DEF_PACK_AVX2(SFX, ES)                                                                                  \
    DEF_PACK_A_AVX2(pack_a_##SFX##_avx2, SFX, ES, MR_F32, pack_a_##SFX)                                         \
    DEF_PACK_A_AVX2(pack_a8_##SFX##_avx2, SFX, ES, MR_X8, pack_a8_##SFX)                                        \
    F16C static void pack_b_##SFX##_avx2(float *restrict out, const void *b, size_t ldb, size_t kc, size_t nc) {  \
        const uint8_t *B = b;                                                                                   \
        size_t jr = 0;                                                                                          \
        for (; jr + NR_F32 <= nc; jr += NR_F32, out += kc * NR_F32)                                             \
            for (size_t k = 0; k < kc; k++) {                                                                   \
                const uint8_t *row = B + (k * ldb + jr) * ES;                                                   \
                _mm256_storeu_ps(out + k * NR_F32, ld8_##SFX(row));                                             \
                _mm256_storeu_ps(out + k * NR_F32 + 8, ld8_##SFX(row + 8 * ES));                                \
            }                                                                                                   \
        if (jr < nc) pack_b_##SFX(out, B + jr * ES, ldb, kc, nc - jr);                                          \
    }                                                                                                           \
    F16C static void pack_bt_##SFX##_avx2(float *restrict out, const void *b, size_t ldb, size_t kc, size_t nc) { \
        const uint8_t *B = b;                                                                                   \
        size_t jr = 0;                                                                                          \
        for (; jr + NR_F32 <= nc; jr += NR_F32, out += kc * NR_F32) {                                           \
            size_t k = 0;                                                                                       \
            for (; k + 8 <= kc; k += 8)                                                                         \
                for (int h = 0; h < NR_F32; h += 8) {                                                           \
                    __m256 r[8];                                                                                \
                    for (int j = 0; j < 8; j++) r[j] = ld8_##SFX(B + ((jr + h + j) * ldb + k) * ES);           \
                    transpose8(r);                                                                              \
                    for (int q = 0; q < 8; q++) _mm256_storeu_ps(out + (k + q) * NR_F32 + h, r[q]);            \
                }                                                                                               \
            for (; k < kc; k++)                                                                                 \
                for (int j = 0; j < NR_F32; j++) out[k * NR_F32 + j] = in_##SFX(B, (jr + j) * ldb + k);       \
        }                                                                                                       \
        if (jr < nc) pack_bt_##SFX(out, B + jr * ldb * ES, ldb, kc, nc - jr);                                   \
    }
DEF_PACK_AVX2(f32, 4)
DEF_PACK_AVX2(f16, 2)
DEF_PACK_AVX2(bf16, 2)
#endif

/* the packers of one input dtype, chosen once for the host (AVX2 + F16C ones where it has them) */
typedef void (*pack_f32_fn)(float *restrict, const void *, size_t, size_t, size_t);
typedef struct { pack_f32_fn a, a8, b, bt; } Packers; /* a: six-row panels, a8: eight-row ones */
static Packers g_pack_f32 = {pack_a_f32, pack_a8_f32, pack_b_f32, pack_bt_f32};
static Packers g_pack_f16 = {pack_a_f16, pack_a8_f16, pack_b_f16, pack_bt_f16};
static Packers g_pack_bf16 = {pack_a_bf16, pack_a8_bf16, pack_b_bf16, pack_bt_bf16};
static const Packers g_pack_f16_dl16 = {pack_a_f16_dl16, pack_a8_f16_dl16, pack_b_f16_dl16, pack_bt_f16_dl16};

/* ---- micro-kernels ------------------------------------------------------------------------------ */
/* C[mr, nr] (row stride ldc) += sum over kk < nk of A[kk][MR][KP] . B[kk][NR][KP]. Portable
 * versions: fixed-size loops that gcc unrolls and vectorises; AVX2 versions chosen at run time. */
#define DEF_UKERNEL(SFX, CT, ACC, MT, MR, NR, KP)                                                            \
    static void uk_##SFX(size_t nk, const CT *restrict A, const CT *restrict B, MT *restrict C, size_t ldc,  \
                         size_t mr, size_t nr) {                                                             \
        ACC c[MR][NR];                                                                                       \
        for (int i = 0; i < MR; i++)                                                                         \
            for (int j = 0; j < NR; j++) c[i][j] = 0;                                                        \
        for (size_t k = 0; k < nk; k++) {                                                                    \
            const CT *restrict bk = B + k * NR * KP, *restrict ak = A + k * MR * KP;                         \
            for (int i = 0; i < MR; i++)                                                                     \
                for (int j = 0; j < NR; j++)                                                                 \
                    for (int q = 0; q < KP; q++) c[i][j] += (ACC)ak[i * KP + q] * (ACC)bk[j * KP + q];       \
        }                                                                                                    \
        for (size_t i = 0; i < mr; i++)                                                                      \
            for (size_t j = 0; j < nr; j++) C[i * ldc + j] = (ACC)C[i * ldc + j] + c[i][j];                  \
    }
DEF_UKERNEL(f32, float, float, sp_f32, MR_F32, NR_F32, 1)
DEF_UKERNEL(f64, double, double, sp_f64, MR_F64, NR_F64, 1)
/* int32 products and sums wrap (unsigned arithmetic, no undefined overflow) */
DEF_UKERNEL(i8, int16_t, uint32_t, sp_i32, MR_I8, NR_I8, 2)

#ifdef SPY_HAVE_AVX2_KERNEL
#define AVX2 __attribute__((target("avx2,fma")))
/* Six rows x two vectors of accumulators in named variables (an array would live in memory),
 * written back whole or through a temporary for partial tiles. */
#define ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define UK_AVX2(NAME, T, CT, MT, VT, MR, NR, ZERO)                                                               \
    AVX2 static void NAME(size_t nk, const CT *restrict A, const CT *restrict B, MT *restrict C, size_t ldc,      \
                          size_t mr, size_t nr) {                                                                 \
        _Static_assert(MR == 6 && NR == 2 * UK_W, "two vectors per row, six rows");                                  \
        VT c00 = ZERO, c01 = ZERO, c10 = ZERO, c11 = ZERO, c20 = ZERO, c21 = ZERO, c30 = ZERO, c31 = ZERO,        \
           c40 = ZERO, c41 = ZERO, c50 = ZERO, c51 = ZERO;                                                        \
        for (size_t k = 0; k < nk; k++) {                                                                         \
            const VT b0 = UK_LOADB(B + k * NR * UK_KP), b1 = UK_LOADB(B + k * NR * UK_KP + UK_W * UK_KP);                           \
            const CT *ak = A + k * MR * UK_KP;                                                                       \
            VT ai;                                                                                                \
            ROWS6(UK_ROW)                                                                                         \
        }                                                                                                         \
        T *Cf = (T *)C;                                                                                           \
        if (mr == MR && nr == NR) {                                                                               \
            ROWS6(UK_WB)                                                                                          \
            return;                                                                                               \
        }                                                                                                         \
        T t[MR][NR] __attribute__((aligned(32)));                                                                 \
        ROWS6(UK_TMP)                                                                                             \
        for (size_t i = 0; i < mr; i++)                                                                           \
            for (size_t j = 0; j < nr; j++) C[i * ldc + j] = (T)((T)C[i * ldc + j] + t[i][j]);                    \
    }
/* per kernel: UK_KP, UK_W (lanes per vector), UK_LOADB, UK_BCAST, UK_MAC, UK_ADD, UK_LOADU, UK_STOREU */
#define UK_ROW(i)                                                                 \
    ai = UK_BCAST(ak + (i) * UK_KP);                                              \
    c##i##0 = UK_MAC(ai, b0, c##i##0);                                            \
    c##i##1 = UK_MAC(ai, b1, c##i##1);
#define UK_WB(i)                                                                                  \
    UK_STOREU(Cf + (i) * ldc, UK_ADD(UK_LOADU(Cf + (i) * ldc), c##i##0));                           \
    UK_STOREU(Cf + (i) * ldc + UK_W, UK_ADD(UK_LOADU(Cf + (i) * ldc + UK_W), c##i##1));
#define UK_TMP(i)                                                                 \
    UK_STOREU(t[i], c##i##0);                                                     \
    UK_STOREU(t[i] + UK_W, c##i##1);

static inline __attribute__((always_inline, target("avx2,fma"))) __m256i bcast_pair(const int16_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
static inline __attribute__((always_inline, target("avx2,fma"))) __m256i mac_i16(__m256i a, __m256i b, __m256i c) {
    return _mm256_add_epi32(c, _mm256_madd_epi16(a, b));
}
#define UK_KP 1
#define UK_W 8
#define UK_LOADB(p) _mm256_load_ps(p)
#define UK_BCAST(p) _mm256_broadcast_ss(p)
#define UK_MAC(a, b, c) _mm256_fmadd_ps(a, b, c)
#define UK_ADD(a, b) _mm256_add_ps(a, b)
#define UK_LOADU(p) _mm256_loadu_ps((const float *)(p))
#define UK_STOREU(p, v) _mm256_storeu_ps((float *)(p), v)
UK_AVX2(uk_f32_avx2, float, float, sp_f32, __m256, MR_F32, NR_F32, _mm256_setzero_ps())
#undef UK_W
#undef UK_LOADB
#undef UK_BCAST
#undef UK_MAC
#undef UK_ADD
#undef UK_LOADU
#undef UK_STOREU
#define UK_W 4
#define UK_LOADB(p) _mm256_loadu_pd(p)
#define UK_BCAST(p) _mm256_broadcast_sd(p)
#define UK_MAC(a, b, c) _mm256_fmadd_pd(a, b, c)
#define UK_ADD(a, b) _mm256_add_pd(a, b)
#define UK_LOADU(p) _mm256_loadu_pd((const double *)(p))
#define UK_STOREU(p, v) _mm256_storeu_pd((double *)(p), v)
UK_AVX2(uk_f64_avx2, double, double, sp_f64, __m256d, MR_F64, NR_F64, _mm256_setzero_pd())
#undef UK_KP
#undef UK_W
#undef UK_LOADB
#undef UK_BCAST
#undef UK_MAC
#undef UK_ADD
#undef UK_LOADU
#undef UK_STOREU
/* int8 inputs as int16 pairs: vpmaddwd multiplies and adds two k at once into int32 lanes */
#define UK_KP 2
#define UK_W 8
#define UK_LOADB(p) _mm256_loadu_si256((const __m256i *)(p))
#define UK_BCAST(p) bcast_pair(p)
#define UK_MAC(a, b, c) mac_i16(a, b, c)
#define UK_ADD(a, b) _mm256_add_epi32(a, b)
#define UK_LOADU(p) _mm256_loadu_si256((const __m256i *)(p))
#define UK_STOREU(p, v) _mm256_storeu_si256((__m256i *)(p), v)
UK_AVX2(uk_i8_avx2, int32_t, int16_t, sp_i32, __m256i, MR_I8, NR_I8, _mm256_setzero_si256())
#endif

#ifdef SPY_HAVE_AVX2_KERNEL
/* AVX-512: eight rows (an eight-row A panel) x two 16-lane vectors (two B panels side by side), sixteen
 * accumulators in zmm registers. Per k, two B loads and eight broadcasts feed sixteen fmas, so the FMA
 * ports set the pace, not the loads (twelve rows x one vector needed thirteen loads for twelve fmas,
 * which bound it on cores with two FMA ports). Each C element still accumulates its products one k at a
 * time with fma, from zero, and is added to C at the end, exactly as the AVX2 kernel does: both give
 * the same bits. With one B panel (nr <= 16) half the kernel runs. */
#define AVX512 __attribute__((target("avx512f,fma")))
#define ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define X8_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define X8_ROW2(i)                                     \
    {                                                  \
        const __m512 ai = _mm512_set1_ps(ak[i]);       \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);    \
        c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);    \
    }
#define X8_ROW1(i) c##i##0 = _mm512_fmadd_ps(_mm512_set1_ps(ak[i]), b0, c##i##0);
#define X8_WB(i)                                                                                       \
    if ((i) < mr) {                                                                                    \
        float *r = C + (i) * ldc;                                                                      \
        _mm512_mask_storeu_ps(r, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, r), c##i##0));            \
        if (two) _mm512_mask_storeu_ps(r + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, r + 16), c##i##1)); \
    }
AVX512 static void uk8_f32_avx512(size_t nk, const float *restrict A, const float *restrict B, sp_f32 *restrict Cm,
                                  size_t ldc, size_t mr, size_t nr) {
    float *C = (float *)Cm;
    const int two = nr > NR_F32;
    const float *B0 = B, *B1 = B + nk * NR_F32; /* the second panel: read only when nr > 16 */
    ROWS8(X8_DECL)
    if (two) {
        for (size_t k = 0; k < nk; k++) {
            const __m512 b0 = _mm512_loadu_ps(B0 + k * NR_F32), b1 = _mm512_loadu_ps(B1 + k * NR_F32);
            const float *ak = A + k * MR_X8;
            ROWS8(X8_ROW2)
        }
    } else {
        for (size_t k = 0; k < nk; k++) {
            const __m512 b0 = _mm512_loadu_ps(B0 + k * NR_F32);
            const float *ak = A + k * MR_X8;
            ROWS8(X8_ROW1)
        }
    }
    const __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
    const __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xFFFFu : nr > 16 ? (1u << (nr - 16)) - 1u : 0u);
    ROWS8(X8_WB)
}
#endif
static int g_use_x8; /* the AVX-512 kernel: eight-row A panels, two B panels a call */

typedef void (*uk_f32_fn)(size_t, const float *restrict, const float *restrict, sp_f32 *restrict, size_t, size_t,
                          size_t);
typedef void (*uk_f64_fn)(size_t, const double *restrict, const double *restrict, sp_f64 *restrict, size_t, size_t,
                          size_t);
typedef void (*uk_i8_fn)(size_t, const int16_t *restrict, const int16_t *restrict, sp_i32 *restrict, size_t, size_t,
                         size_t);
static uk_f32_fn g_uk_f32;
static uk_f64_fn g_uk_f64;
static uk_i8_fn g_uk_i8;
static pthread_once_t g_uk_once = PTHREAD_ONCE_INIT;
#ifdef SPY_HAVE_AVX2_KERNEL
static void pick_skinny(int avx512);
#endif
static void pick_ukernels(void) {
    g_uk_f32 = uk_f32;
    g_uk_f64 = uk_f64;
    g_uk_i8 = uk_i8;
#ifdef SPY_HAVE_AVX2_KERNEL
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !getenv("SPYRE_NO_AVX2")) {
        g_uk_f32 = uk_f32_avx2;
        g_uk_f64 = uk_f64_avx2;
        g_uk_i8 = uk_i8_avx2;
        g_use_x8 = __builtin_cpu_supports("avx512f") && !getenv("SPYRE_NO_AVX512");
        if (__builtin_cpu_supports("f16c"))
            pick_skinny(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                        !getenv("SPYRE_NO_AVX512"));
        if (__builtin_cpu_supports("f16c")) {
            g_pack_f32 = (Packers){pack_a_f32_avx2, pack_a8_f32_avx2, pack_b_f32_avx2, pack_bt_f32_avx2};
            g_pack_f16 = (Packers){pack_a_f16_avx2, pack_a8_f16_avx2, pack_b_f16_avx2, pack_bt_f16_avx2};
            g_pack_bf16 = (Packers){pack_a_bf16_avx2, pack_a8_bf16_avx2, pack_b_bf16_avx2, pack_bt_bf16_avx2};
        }
    }
#endif
}

/* ---- the blocked loop --------------------------------------------------------------------------- */
#define DEF_GEMM(SFX, CT, MT, UK, MR, NR, KP, MCB)                                                           \
    static void gemm_##SFX(MT *C, const void *a, const void *b, size_t M, size_t N, size_t K, size_t lda,    \
                           size_t ldb, size_t es2,                                                           \
                           void (*pack_a)(CT *restrict, const void *, size_t, size_t, size_t),               \
                           void (*pack_b)(CT *restrict, const void *, size_t, size_t, size_t), CT *Ap, CT *Bp,   \
                           int bt) {                                                                         \
        for (size_t jc = 0; jc < N; jc += NC) {                                                              \
            const size_t nc = N - jc < NC ? N - jc : NC;                                                     \
            for (size_t pc = 0; pc < K; pc += KC) {                                                          \
                const size_t kc = K - pc < KC ? K - pc : KC, kp = KPAD(kc, KP);                              \
                if (bt) pack_b(Bp, (const uint8_t *)b + (jc * ldb + pc) * es2, ldb, kc, nc);                \
                else pack_b(Bp, (const uint8_t *)b + (pc * ldb + jc) * es2, ldb, kc, nc);                    \
                for (size_t ic = 0; ic < M; ic += MCB) {                                                     \
                    const size_t mc = M - ic < MCB ? M - ic : MCB;                                           \
                    pack_a(Ap, (const uint8_t *)a + (ic * lda + pc) * es2, lda, mc, kc);                     \
                    for (size_t jr = 0; jr < nc; jr += NR) {                                                 \
                        const size_t nr = nc - jr < NR ? nc - jr : NR;                                       \
                        for (size_t ir = 0; ir < mc; ir += MR) {                                             \
                            const size_t mr = mc - ir < MR ? mc - ir : MR;                                   \
                            UK(kp / KP, Ap + ir * kp, Bp + jr * kp, C + (ic + ir) * N + jc + jr, N, mr, nr); \
                        }                                                                                    \
                    }                                                                                        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }
DEF_GEMM(f32, float, sp_f32, g_uk_f32, MR_F32, NR_F32, 1, MC)
DEF_GEMM(f64, double, sp_f64, g_uk_f64, MR_F64, NR_F64, 1, MC)
DEF_GEMM(i8, int16_t, sp_i32, g_uk_i8, MR_I8, NR_I8, 2, MC)

#ifdef SPY_HAVE_AVX2_KERNEL
/* the AVX-512 kernel's loop: eight-row A panels, and each call covers two B panels (NR = 32) */
DEF_GEMM(f32_x8, float, sp_f32, uk8_f32_avx512, MR_X8, 2 * NR_F32, 1, MC_X8)
#endif

#ifdef SPY_HAVE_AVX2_KERNEL
/* ---- skinny products (M <= SKINNY_M: a decode step's matrix-vector products) ------------------------
 * Packing B and running six- or eight-row micro-kernels over one live row wastes most of both: here B is
 * read once, straight from its rows (or, transposed, eight rows of B^T at a time, turned in registers),
 * and each of A's rows accumulates eight columns per vector. The arithmetic is the blocked loop's, in its
 * order: per KC block, every output starts from zero, takes one fused multiply-add per k in order, and
 * is then added to C. So the bits are those of the packed path.
 *
 * That order makes each vector of accumulators one chain of dependent multiply-adds (a multiply-add's
 * latency per k). So G groups of eight columns run side by side, G * M independent chains, with M and G
 * compile-time constants (the accumulators stay in registers). With B transposed the 8 x 8 transpose
 * needs registers too: G = 4 in the AVX-512VL build (32 vector registers), 2 in the AVX2 one (16), and
 * three or four rows take half as many groups at a time. With B as stored only the accumulators do: eight
 * of them per pass, whatever the build (G = 8 at one row, 4 at two, 2 at three or four). */
#define SKINNY_M 4
#define SKINNY_G 8 /* the most groups a pass takes */
/* eight values of B's row k, columns [j, j + nr) (nr < 8: zeros past it) */
#define DEF_SKINNY(SFX, LD8, IN)                                                                             \
    F16C_INLINE __m256 b_cols_##SFX(const uint8_t *b, size_t ldb, size_t es2, size_t k, size_t j, size_t nr,  \
                                    int bt) {                                                                \
        if (!bt && nr == 8) return LD8(b + (k * ldb + j) * es2);                                             \
        float t[8] = {0};                                                                                    \
        for (size_t q = 0; q < nr; q++) t[q] = bt ? IN(b, (j + q) * ldb + k) : IN(b, k * ldb + j + q);       \
        return _mm256_loadu_ps(t);                                                                           \
    }                                                                                                        \
    /* C[0..M, j..j + nr) += the KC block [pc, pc + kc) of A B, for one partial group (nr <= 8) */           \
    F16C static void skinny_part_##SFX(sp_f32 *C, const uint8_t *a, const uint8_t *b, size_t M, size_t N,    \
                                       size_t lda, size_t ldb, size_t es2, int bt, size_t j, size_t nr,      \
                                       size_t pc, size_t kc) {                                               \
        __m256 acc[SKINNY_M];                                                                                \
        for (size_t i = 0; i < M; i++) acc[i] = _mm256_setzero_ps();                                         \
        for (size_t k = pc; k < pc + kc; k++) {                                                              \
            const __m256 bk = b_cols_##SFX(b, ldb, es2, k, j, nr, bt);                                       \
            for (size_t i = 0; i < M; i++)                                                                   \
                acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(IN(a, i * lda + k)), bk, acc[i]);                    \
        }                                                                                                    \
        for (size_t i = 0; i < M; i++) {                                                                     \
            float t[8];                                                                                      \
            _mm256_storeu_ps(t, acc[i]);                                                                     \
            for (size_t q = 0; q < nr; q++) C[i * N + j + q] += t[q];                                        \
        }                                                                                                    \
    }
DEF_SKINNY(f32, ld8_f32, in_f32)
DEF_SKINNY(f16, ld8_f16, in_f16)
DEF_SKINNY(bf16, ld8_bf16, in_bf16)

/* C[0..M, j..j + 8G) += the KC block [pc, pc + kc) of A B: G whole groups of eight columns; M, G constants */
#define DEF_SKINNY_BLOCK(SFX, LD8, IN, TGT, TAG, GW)                                                           \
    static inline __attribute__((always_inline, target(TGT))) void skinny_blk_##SFX##TAG(                    \
        sp_f32 *C, const uint8_t *a, const uint8_t *b, const size_t M, const size_t G, size_t N, size_t lda,  \
        size_t ldb, size_t es2, int bt, size_t j, size_t pc, size_t kc) {                                    \
        __m256 acc[SKINNY_G][SKINNY_M];                                                                      \
        _Pragma("GCC unroll 4") for (size_t g = 0; g < G; g++)                                               \
            _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++) acc[g][i] = _mm256_setzero_ps();          \
        size_t k = pc;                                                                                       \
        if (bt) { /* rows j.. of B^T are B's columns: transpose 8 x 8 blocks */                              \
            const size_t rs = ldb * es2; /* one row of B^T */                                              \
            for (; k + 8 <= pc + kc; k += 8) {                                                               \
                const uint8_t *p = b + (j * ldb + k) * es2;                                                  \
                _Pragma("GCC unroll 4") for (size_t g = 0; g < G; g++) {                                     \
                    __m256 r[8];                                                                             \
                    _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++, p += rs) r[q] = LD8(p);              \
                    transpose8(r);                                                                           \
                    _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++)                                      \
                        _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++)                               \
                            acc[g][i] = _mm256_fmadd_ps(_mm256_set1_ps(IN(a, i * lda + k + q)), r[q], acc[g][i]); \
                }                                                                                            \
            }                                                                                                \
            for (; k < pc + kc; k++)                                                                         \
                _Pragma("GCC unroll 4") for (size_t g = 0; g < G; g++) {                                     \
                    const __m256 bk = b_cols_##SFX(b, ldb, es2, k, j + 8 * g, 8, 1);                          \
                    _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++)                                   \
                        acc[g][i] = _mm256_fmadd_ps(_mm256_set1_ps(IN(a, i * lda + k)), bk, acc[g][i]);      \
                }                                                                                            \
        } else {                                                                                             \
            for (; k < pc + kc; k++) {                                                                       \
                __m256 av[SKINNY_M];                                                                         \
                _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++) av[i] = _mm256_set1_ps(IN(a, i * lda + k)); \
                _Pragma("GCC unroll 4") for (size_t g = 0; g < G; g++) {                                     \
                    const __m256 bk = LD8(b + (k * ldb + j + 8 * g) * es2);                                  \
                    _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++)                                   \
                        acc[g][i] = _mm256_fmadd_ps(av[i], bk, acc[g][i]);                                   \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        _Pragma("GCC unroll 4") for (size_t g = 0; g < G; g++)                                               \
            _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++) {                                         \
                sp_f32 *c = C + i * N + j + 8 * g;                                                           \
                _mm256_storeu_ps(c, _mm256_add_ps(_mm256_loadu_ps(c), acc[g][i]));                           \
            }                                                                                                \
    }                                                                                                        \
    /* the whole product: G groups at a time, then single groups, then a partial one */                      \
    __attribute__((target(TGT))) static void gemm_skinny_##SFX##TAG(sp_f32 *C, const uint8_t *a,             \
                                                                   const uint8_t *b, size_t M, size_t N,     \
                                                                   size_t K, size_t lda, size_t ldb,         \
                                                                   size_t es2, int bt) {                     \
        size_t j = 0;                                                                                        \
        if (!bt) /* 64 columns per pass, so each row's four cache lines are read together (a weight's */     \
                 /* rows sit a page apart: one line per row per pass left the prefetcher nothing to follow) */ \
            for (; j + 64 <= N; j += 64)                                                                     \
                for (size_t pc = 0; pc < K; pc += KC) {                                                      \
                    const size_t kc = K - pc < KC ? K - pc : KC;                                             \
                    switch (M) {                                                                             \
                    case 1: skinny_blk_##SFX##TAG(C, a, b, 1, 8, N, lda, ldb, es2, bt, j, pc, kc); break;   \
                    case 2:                                                                                  \
                        for (size_t h = 0; h < 2; h++)                                                       \
                            skinny_blk_##SFX##TAG(C, a, b, 2, 4, N, lda, ldb, es2, bt, j + 32 * h, pc, kc);  \
                        break;                                                                               \
                    default:                                                                                 \
                        for (size_t h = 0; h < 4; h++)                                                       \
                            if (M == 3) skinny_blk_##SFX##TAG(C, a, b, 3, 2, N, lda, ldb, es2, bt, j + 16 * h, pc, kc); \
                            else skinny_blk_##SFX##TAG(C, a, b, 4, 2, N, lda, ldb, es2, bt, j + 16 * h, pc, kc); \
                    }                                                                                        \
                }                                                                                            \
        for (; j + 8 * GW <= N; j += 8 * GW)                                                                 \
            for (size_t pc = 0; pc < K; pc += KC) {                                                          \
                const size_t kc = K - pc < KC ? K - pc : KC;                                                 \
                switch (M) {                                                                                 \
                case 1: skinny_blk_##SFX##TAG(C, a, b, 1, GW, N, lda, ldb, es2, bt, j, pc, kc); break;      \
                case 2: skinny_blk_##SFX##TAG(C, a, b, 2, GW, N, lda, ldb, es2, bt, j, pc, kc); break;      \
                default: /* more rows: half the groups at a time */                                          \
                    for (size_t h = 0; h < 2; h++)                                                           \
                        if (M == 3) skinny_blk_##SFX##TAG(C, a, b, 3, GW / 2, N, lda, ldb, es2, bt, j + h * 4 * GW, pc, kc); \
                        else skinny_blk_##SFX##TAG(C, a, b, 4, GW / 2, N, lda, ldb, es2, bt, j + h * 4 * GW, pc, kc); \
                }                                                                                            \
            }                                                                                                \
        for (; j + 8 <= N; j += 8)                                                                           \
            for (size_t pc = 0; pc < K; pc += KC) {                                                          \
                const size_t kc = K - pc < KC ? K - pc : KC;                                                 \
                switch (M) {                                                                                 \
                case 1: skinny_blk_##SFX##TAG(C, a, b, 1, 1, N, lda, ldb, es2, bt, j, pc, kc); break;       \
                case 2: skinny_blk_##SFX##TAG(C, a, b, 2, 1, N, lda, ldb, es2, bt, j, pc, kc); break;       \
                case 3: skinny_blk_##SFX##TAG(C, a, b, 3, 1, N, lda, ldb, es2, bt, j, pc, kc); break;       \
                default: skinny_blk_##SFX##TAG(C, a, b, 4, 1, N, lda, ldb, es2, bt, j, pc, kc);            \
                }                                                                                            \
            }                                                                                                \
        if (j < N)                                                                                           \
            for (size_t pc = 0; pc < K; pc += KC)                                                            \
                skinny_part_##SFX(C, a, b, M, N, lda, ldb, es2, bt, j, N - j, pc, K - pc < KC ? K - pc : KC); \
    }
#define SKINNY_AVX2 "avx2,fma,f16c"
#define SKINNY_AVX512 "avx2,fma,f16c,avx512f,avx512vl"
/* groups side by side: 16 vector registers hold two groups' chains and a transpose, 32 hold four */
DEF_SKINNY_BLOCK(f32, ld8_f32, in_f32, SKINNY_AVX2, _avx2, 2)
DEF_SKINNY_BLOCK(f16, ld8_f16, in_f16, SKINNY_AVX2, _avx2, 2)
DEF_SKINNY_BLOCK(bf16, ld8_bf16, in_bf16, SKINNY_AVX2, _avx2, 2)
DEF_SKINNY_BLOCK(f32, ld8_f32, in_f32, SKINNY_AVX512, _avx512, 4)
DEF_SKINNY_BLOCK(f16, ld8_f16, in_f16, SKINNY_AVX512, _avx512, 4)
DEF_SKINNY_BLOCK(bf16, ld8_bf16, in_bf16, SKINNY_AVX512, _avx512, 4)

/* ---- skinny products with B transposed (a Linear's weight: rows of B^T contiguous in k) ----------------
 * The in-order loop above must turn eight rows of B^T at a time into columns (24 shuffles per 64
 * products), which bounds it far below the memory rate. Here each output is a dot product instead: eight
 * lanes take k, k + 8, ... in order, then one fixed tree adds the lanes, then the tail (K % 8) adds in
 * order. So a row's bits depend on K and its own data only: the same at M = 1, 2, 3 or 4 (a decode batch
 * of up to four rows is batch-invariant), though not the bits of the packed path, which runs for M > 4.
 * R rows of B^T run side by side (R * M independent chains); M and R are compile-time constants. */
#define GEMV_R 8
F16C_INLINE float hsum8(__m256 v) { /* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#define DEF_GEMV_BT(SFX, LD8, IN)                                                                              \
    F16C_INLINE void gemv_bt_blk_##SFX(sp_f32 *C, const uint8_t *a, const uint8_t *b, const size_t M,         \
                                       const size_t R, size_t N, size_t K, size_t lda, size_t ldb, size_t es2, \
                                       size_t j) {                                                          \
        __m256 acc[GEMV_R][SKINNY_M];                                                                        \
        _Pragma("GCC unroll 8") for (size_t r = 0; r < R; r++)                                               \
            _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++) acc[r][i] = _mm256_setzero_ps();          \
        size_t k = 0;                                                                                        \
        const uint8_t *next = b + (j + R) * ldb * es2; /* the next group's rows: fetched while these run */  \
        for (; k + 8 <= K; k += 8) {                                                                         \
            __m256 av[SKINNY_M];                                                                             \
            if (!((k * es2) & 63) && j + 2 * R <= N)                                                         \
                _Pragma("GCC unroll 8") for (size_t r = 0; r < R; r++)                                       \
                    _mm_prefetch((const char *)next + (r * ldb + k) * es2, _MM_HINT_T0);                     \
            _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++) av[i] = LD8(a + (i * lda + k) * es2);     \
            _Pragma("GCC unroll 8") for (size_t r = 0; r < R; r++) {                                         \
                const __m256 bv = LD8(b + ((j + r) * ldb + k) * es2);                                        \
                _Pragma("GCC unroll 4") for (size_t i = 0; i < M; i++)                                       \
                    acc[r][i] = _mm256_fmadd_ps(av[i], bv, acc[r][i]);                                       \
            }                                                                                                \
        }                                                                                                    \
        for (size_t r = 0; r < R; r++)                                                                       \
            for (size_t i = 0; i < M; i++) {                                                                 \
                float s = hsum8(acc[r][i]);                                                                  \
                for (size_t q = k; q < K; q++) s = fmaf(IN(a, i * lda + q), IN(b, (j + r) * ldb + q), s);    \
                C[i * N + j + r] += s;                                                                       \
            }                                                                                                \
    }                                                                                                        \
    /* R rows of B^T at a time (fewer as M grows: the accumulators stay in 16 registers), then single rows */ \
    F16C static void gemv_bt_##SFX(sp_f32 *C, const uint8_t *a, const uint8_t *b, size_t M, size_t N, size_t K, \
                                   size_t lda, size_t ldb, size_t es2) {                                     \
        size_t j = 0;                                                                                        \
        switch (M) {                                                                                         \
        case 1: for (; j + 8 <= N; j += 8) gemv_bt_blk_##SFX(C, a, b, 1, 8, N, K, lda, ldb, es2, j); break;  \
        case 2: for (; j + 4 <= N; j += 4) gemv_bt_blk_##SFX(C, a, b, 2, 4, N, K, lda, ldb, es2, j); break;  \
        case 3: for (; j + 3 <= N; j += 3) gemv_bt_blk_##SFX(C, a, b, 3, 3, N, K, lda, ldb, es2, j); break;  \
        default: for (; j + 2 <= N; j += 2) gemv_bt_blk_##SFX(C, a, b, 4, 2, N, K, lda, ldb, es2, j);        \
        }                                                                                                    \
        for (; j < N; j++) switch (M) {                                                                      \
            case 1: gemv_bt_blk_##SFX(C, a, b, 1, 1, N, K, lda, ldb, es2, j); break;                         \
            case 2: gemv_bt_blk_##SFX(C, a, b, 2, 1, N, K, lda, ldb, es2, j); break;                         \
            case 3: gemv_bt_blk_##SFX(C, a, b, 3, 1, N, K, lda, ldb, es2, j); break;                         \
            default: gemv_bt_blk_##SFX(C, a, b, 4, 1, N, K, lda, ldb, es2, j);                               \
            }                                                                                                \
    }
DEF_GEMV_BT(f32, ld8_f32, in_f32)
DEF_GEMV_BT(f16, ld8_f16, in_f16)
DEF_GEMV_BT(bf16, ld8_bf16, in_bf16)

typedef void (*skinny_fn)(sp_f32 *, const uint8_t *, const uint8_t *, size_t, size_t, size_t, size_t, size_t, size_t,
                          int);
/* by input dtype (f32, f16, bf16), from the widest build the CPU runs (pick_ukernels) */
static skinny_fn g_skinny[3];
static void pick_skinny(int avx512) {
    g_skinny[0] = avx512 ? gemm_skinny_f32_avx512 : gemm_skinny_f32_avx2;
    g_skinny[1] = avx512 ? gemm_skinny_f16_avx512 : gemm_skinny_f16_avx2;
    g_skinny[2] = avx512 ? gemm_skinny_bf16_avx512 : gemm_skinny_bf16_avx2;
}
#endif

/* ---- SPYRE_NUMERICS=dl16, fp8 inputs: the PE array's FP16 accumulator ----------------------------
 * torch-spyre's fp8 matmul "accumulates in FP16", and on the card FP16 is DLFloat16 (docs/numerics.md).
 * Modelled per K block of FP8_DL16_KBLOCK values: the block's products (exact in f32) are summed in f32
 * in k order, added to the accumulator, and the accumulator rounds to DLFloat16. The block is what one
 * PE takes in a cycle: pe_simd = 8 lanes along K, two 8-bit values per 16-bit lane (the perf model's
 * pe_rate_8bit = 2). The accumulator starts from C (acc or zero) rounded to DLFloat16.
 * Columns go in chunks of FP8_DL16_NC: a K block of B's chunk is decoded once and serves every row, and
 * the inner loops are plain f32 loops over the chunk, which vectorise. */
#define FP8_DL16_KBLOCK 16
#define FP8_DL16_NC 512
/* the decoded B block and one row's block sums live in the A panel buffer */
_Static_assert((FP8_DL16_KBLOCK + 1) * FP8_DL16_NC <= (size_t)MC_MAX * KC * 8 / sizeof(float),
               "the fp8 dl16 buffers fit the A panel buffer");

/* Bd[kk][0, nc) = B[k0 + kk][jc, jc + nc) decoded, for kk < kb */
static void fp8_dl16_decode_b(float *restrict Bd, const uint8_t *b, size_t ldb, int bt, const float *tab, size_t k0,
                              size_t kb, size_t jc, size_t nc) {
    for (size_t kk = 0; kk < kb; kk++)
        for (size_t j = 0; j < nc; j++)
            Bd[kk * FP8_DL16_NC + j] = tab[bt ? b[(jc + j) * ldb + k0 + kk] : b[(k0 + kk) * ldb + jc + j]];
}

static void dot_fp8_dl16(sp_f32 *C, const uint8_t *a, const uint8_t *b, size_t M, size_t N, size_t K, size_t lda,
                         size_t ldb, int bt, const float *tab, float *scratch) {
    float *restrict Bd = scratch, *restrict blk = scratch + FP8_DL16_KBLOCK * FP8_DL16_NC;
    sp_round_dl16_n((float *)C, M * N);
    for (size_t jc = 0; jc < N; jc += FP8_DL16_NC) {
        const size_t nc = N - jc < FP8_DL16_NC ? N - jc : FP8_DL16_NC;
        for (size_t k0 = 0; k0 < K; k0 += FP8_DL16_KBLOCK) {
            const size_t kb = K - k0 < FP8_DL16_KBLOCK ? K - k0 : FP8_DL16_KBLOCK;
            fp8_dl16_decode_b(Bd, b, ldb, bt, tab, k0, kb, jc, nc);
            for (size_t i = 0; i < M; i++) {
                memset(blk, 0, nc * sizeof(float));
                for (size_t kk = 0; kk < kb; kk++) {
                    const float av = tab[a[i * lda + k0 + kk]];
                    const float *restrict bk = Bd + kk * FP8_DL16_NC;
                    for (size_t j = 0; j < nc; j++) blk[j] += av * bk[j];
                }
                float *restrict c = (float *)C + i * N + jc;
                for (size_t j = 0; j < nc; j++) c[j] = sp_round_dl16(c[j] + blk[j]);
            }
        }
    }
}

static int ensure_scratch(void **scratch, size_t *cap, size_t need) {
    if (*cap >= need) return 0;
    void *p = NULL;
    if (posix_memalign(&p, 64, need) != 0) return -1;
    free(*scratch);
    *scratch = p;
    *cap = need;
    return 0;
}

int spy_dot(int t, int t2, void *dst, const void *a, const void *b, const void *acc, size_t M, size_t N, size_t K,
            size_t lda, size_t ldb, size_t batch, int bt, void **scratch, size_t *scratch_cap) {
    pthread_once(&g_uk_once, pick_ukernels);
    const size_t es = spyre_dtype_bytes[t], es2 = spyre_dtype_bytes[t2];
    const int half_out = (t == DT_F16 || t == DT_BF16);
    const int dl16 = SP_DL16() && (t == DT_F16 || t2 == DT_F16); /* f16 operands and results through DLFloat16 */
    const int fp8_dl16 = SP_DL16() && t2 >= SPYRE_FP8_FIRST && t2 < SPYRE_FP8_FIRST + SPYRE_FP8_COUNT;
    const size_t nb = batch ? batch : 1;
    /* a result overlapping an input is computed aside and copied at the end */
    const uint8_t *dlo = dst, *dhi = dlo + nb * M * N * es;
    if (!lda) lda = K;
    if (!ldb) ldb = bt ? K : N;
    /* elements spanned by `rows` rows of `cols` at stride ld */
#define ROWS_SPAN(rows, ld, cols) ((rows) != 0 ? ((rows) - 1) * (ld) + (cols) : 0)
    const uint8_t *alo = a, *ahi = alo + ROWS_SPAN(nb * M, lda, K) * es2, *blo = b;
    const uint8_t *bhi = blo + (bt ? ROWS_SPAN(nb * N, ldb, K) : ROWS_SPAN(nb * K, ldb, N)) * es2;
#undef ROWS_SPAN
    const int alias = (alo < dhi && dlo < ahi) || (blo < dhi && dlo < bhi);
    const size_t panels = (size_t)MC_MAX * KC + (size_t)KC * (NC + NR_MAX);
    const size_t cbytes = half_out ? M * N * sizeof(float) : 0, obytes = alias ? nb * M * N * es : 0;
    const size_t need = panels * 8 + 64 + (cbytes + 63) / 64 * 64 + obytes;
    if (ensure_scratch(scratch, scratch_cap, need) < 0) return -1;
    uint8_t *base = (uint8_t *)*scratch;
    void *Ap = base, *Bp = base + (size_t)MC_MAX * KC * 8;
    float *Cbuf = half_out ? (float *)(base + panels * 8 + 64) : NULL;
    uint8_t *out = alias ? base + panels * 8 + 64 + (cbytes + 63) / 64 * 64 : (uint8_t *)dst;

    for (size_t bi = 0; bi < nb; bi++) {
        uint8_t *d = out + bi * M * N * es;
        const uint8_t *ab = (const uint8_t *)a + bi * M * K * es2;
        const uint8_t *bb = (const uint8_t *)b + bi * K * N * es2;
        const uint8_t *cb = acc ? (const uint8_t *)acc + bi * M * N * es : NULL;
        /* C = acc */
        if (half_out) {
            if (cb) {
                for (size_t i = 0; i < M * N; i++)
                    Cbuf[i] = t == DT_F16 ? (dl16 ? sp_dl16_to_f32 : sp_f16_to_f32)(((const sp_u16 *)cb)[i])
                                          : sp_bf16_to_f32(((const sp_u16 *)cb)[i]);
            } else {
                memset(Cbuf, 0, M * N * sizeof(float));
            }
        } else if (!cb) {
            memset(d, 0, M * N * es);
        } else if (cb != d) {
            memmove(d, cb, M * N * es);
        }
        if (M == 0 || N == 0 || K == 0) goto round;
        if (fp8_dl16) {
            dot_fp8_dl16(half_out ? (sp_f32 *)Cbuf : (sp_f32 *)d, ab, bb, M, N, K, lda, ldb, bt,
                         sp_fp8_table[t2 - SPYRE_FP8_FIRST], (float *)Ap);
            goto round;
        }
        switch (t2) {
        case DT_F64: gemm_f64((sp_f64 *)d, ab, bb, M, N, K, lda, ldb, es2, pack_a_f64, bt ? pack_bt_f64 : pack_b_f64, Ap, Bp, bt); break;
        case DT_I8: gemm_i8((sp_i32 *)d, ab, bb, M, N, K, lda, ldb, es2, pack_a_i8, bt ? pack_bt_i8 : pack_b_i8, Ap, Bp, bt); break;
        default: { /* f32 compute: f32, f16, bf16 and fp8 inputs */
            static const Packers pack_fp8 = {pack_a_fp8, pack_a8_fp8, pack_b_fp8, pack_bt_fp8};
            const Packers *pk = t2 == DT_F32    ? &g_pack_f32
                                : t2 == DT_F16  ? (dl16 ? &g_pack_f16_dl16 : &g_pack_f16)
                                : t2 == DT_BF16 ? &g_pack_bf16
                                                : &pack_fp8;
            sp_f32 *Cf = half_out ? (sp_f32 *)Cbuf : (sp_f32 *)d;
            if (pk == &pack_fp8) fp8_tls = t2 - SPYRE_FP8_FIRST;
#ifdef SPY_HAVE_AVX2_KERNEL
            if (M <= SKINNY_M && g_skinny[0] && (t2 == DT_F32 || (t2 == DT_F16 && !dl16) || t2 == DT_BF16)) {
                if (bt) (t2 == DT_F32 ? gemv_bt_f32 : t2 == DT_F16 ? gemv_bt_f16 : gemv_bt_bf16)(Cf, ab, bb, M, N, K, lda, ldb, es2);
                else g_skinny[t2 == DT_F32 ? 0 : t2 == DT_F16 ? 1 : 2](Cf, ab, bb, M, N, K, lda, ldb, es2, bt);
                break;
            }
            if (g_use_x8) {
                gemm_f32_x8(Cf, ab, bb, M, N, K, lda, ldb, es2, pk->a8, bt ? pk->bt : pk->b, Ap, Bp, bt);
                break;
            }
#endif
            gemm_f32(Cf, ab, bb, M, N, K, lda, ldb, es2, pk->a, bt ? pk->bt : pk->b, Ap, Bp, bt);
            break;
        }
        }
    round:
        if (half_out) {
            sp_u16 *o = (sp_u16 *)d;
            if (t == DT_F16 && dl16)
                sp_f32_to_dl16_n(o, Cbuf, M * N);
            else if (t == DT_F16)
                for (size_t i = 0; i < M * N; i++) o[i] = sp_f32_to_f16(Cbuf[i]);
            else
                for (size_t i = 0; i < M * N; i++) o[i] = sp_f32_to_bf16(Cbuf[i]);
        }
    }
    if (alias) memcpy(dst, out, nb * M * N * es);
    return 0;
}
