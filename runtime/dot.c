/* The PE array: dst[M,N] = a[M,K] @ b[K,N] + acc, per batch.
 *
 * Structured like a BLIS gemm: blocks of B (KC x NC) and A (MC x KC) are packed (and converted to
 * the compute type: f32 for f16/bf16/fp8/f32 inputs, f64 for f64, i32 for i8) into panels of NR
 * columns / MR rows; a register-blocked micro-kernel accumulates an MR x NR tile of C over KC.
 * The f32 micro-kernel has an AVX2+FMA version chosen at run time; the others are plain C loops
 * over fixed-size arrays that gcc vectorises. Half-precision outputs accumulate in an f32 buffer
 * and are rounded once at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "fp.h"
#include "interp.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SPY_HAVE_AVX2_KERNEL 1
#endif

#define MR 6
#define NR 16
#define KC 256
#define MC 120
#define NC 512

int spy_dot_supported(int t, int t2) {
    switch (t2) {
    case DT_F16: case DT_BF16: case DT_F32:
    case DT_F8E4M3FN: case DT_F8E5M2: case DT_F8E4M3FNUZ: case DT_F8E5M2FNUZ: case DT_F8E4M3B15:
        return t == DT_F32 || t == DT_F16 || t == DT_BF16;
    case DT_F64: return t == DT_F64;
    case DT_I8: return t == DT_I32;
    }
    return 0;
}

/* ---- packing: convert to the compute type while copying into panels -------------------------- */
static inline float in_f32(const void *p, size_t i) { return ((const sp_f32 *)p)[i]; }
static inline float in_f16(const void *p, size_t i) { return sp_f16_to_f32(((const sp_u16 *)p)[i]); }
static inline float in_bf16(const void *p, size_t i) { return sp_bf16_to_f32(((const sp_u16 *)p)[i]); }
static inline double in_f64(const void *p, size_t i) { return ((const sp_f64 *)p)[i]; }
static inline int32_t in_i8(const void *p, size_t i) { return ((const int8_t *)p)[i]; }

/* A block rows [0, mc) x cols [0, kc) of a row-major matrix with row stride lda -> MR-row panels */
#define DEF_PACK(SFX, CT, IN)                                                                                \
    static void pack_a_##SFX(CT *restrict out, const void *a, size_t lda, size_t mc, size_t kc) {            \
        for (size_t ir = 0; ir < mc; ir += MR) {                                                             \
            const size_t mr = mc - ir < MR ? mc - ir : MR;                                                   \
            for (size_t k = 0; k < kc; k++) {                                                                \
                size_t i = 0;                                                                                \
                for (; i < mr; i++) out[k * MR + i] = IN(a, (ir + i) * lda + k);                             \
                for (; i < MR; i++) out[k * MR + i] = 0;                                                     \
            }                                                                                                \
            out += kc * MR;                                                                                  \
        }                                                                                                    \
    }                                                                                                        \
    static void pack_b_##SFX(CT *restrict out, const void *b, size_t ldb, size_t kc, size_t nc) {            \
        for (size_t jr = 0; jr < nc; jr += NR) {                                                             \
            const size_t nr = nc - jr < NR ? nc - jr : NR;                                                   \
            for (size_t k = 0; k < kc; k++) {                                                                \
                size_t j = 0;                                                                                \
                for (; j < nr; j++) out[k * NR + j] = IN(b, k * ldb + jr + j);                               \
                for (; j < NR; j++) out[k * NR + j] = 0;                                                     \
            }                                                                                                \
            out += kc * NR;                                                                                  \
        }                                                                                                    \
    }
DEF_PACK(f32, float, in_f32)
DEF_PACK(f16, float, in_f16)
DEF_PACK(bf16, float, in_bf16)
DEF_PACK(f64, double, in_f64)
DEF_PACK(i8, int32_t, in_i8)

/* fp8 packing reads the table of the dtype being packed: a thread-local index */
static __thread int fp8_tls;
static inline float in_fp8_tls(const void *p, size_t i) { return sp_fp8_table[fp8_tls][((const uint8_t *)p)[i]]; }
DEF_PACK(fp8, float, in_fp8_tls)

/* ---- micro-kernels ------------------------------------------------------------------------------ */
/* C[mr, nr] (row stride ldc) += Ap[kc][MR] * Bp[kc][NR]; ADD(c, x) accumulates x into C. */
#define DEF_UKERNEL(SFX, CT, MT, MULADD)                                                                     \
    static void uk_##SFX(size_t kc, const CT *restrict A, const CT *restrict B, MT *restrict C, size_t ldc, \
                         size_t mr, size_t nr) {                                                             \
        CT c[MR][NR];                                                                                        \
        for (int i = 0; i < MR; i++)                                                                         \
            for (int j = 0; j < NR; j++) c[i][j] = 0;                                                        \
        for (size_t k = 0; k < kc; k++) {                                                                    \
            const CT *restrict bk = B + k * NR;                                                              \
            for (int i = 0; i < MR; i++) {                                                                   \
                const CT ai = A[k * MR + i];                                                                 \
                for (int j = 0; j < NR; j++) c[i][j] = MULADD(c[i][j], ai, bk[j]);                           \
            }                                                                                                \
        }                                                                                                    \
        for (size_t i = 0; i < mr; i++)                                                                      \
            for (size_t j = 0; j < nr; j++) C[i * ldc + j] = MULADD(C[i * ldc + j], 1, c[i][j]);             \
    }
#define MULADD_F(c, a, b) ((c) + (a) * (b))
#define MULADD_I(c, a, b) ((int32_t)((uint32_t)(c) + (uint32_t)(a) * (uint32_t)(b)))
DEF_UKERNEL(f32, float, sp_f32, MULADD_F)
DEF_UKERNEL(f64, double, sp_f64, MULADD_F)
DEF_UKERNEL(i32, int32_t, sp_i32, MULADD_I)

#ifdef SPY_HAVE_AVX2_KERNEL
__attribute__((target("avx2,fma"))) static void uk_f32_avx2(size_t kc, const float *restrict A,
                                                            const float *restrict B, sp_f32 *restrict C,
                                                            size_t ldc, size_t mr, size_t nr) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
           c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
           c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
           c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_load_ps(B + k * NR), b1 = _mm256_load_ps(B + k * NR + 8);
        const float *a = A + k * MR;
        __m256 ai;
        ai = _mm256_broadcast_ss(a + 0); c00 = _mm256_fmadd_ps(ai, b0, c00); c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a + 1); c10 = _mm256_fmadd_ps(ai, b0, c10); c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a + 2); c20 = _mm256_fmadd_ps(ai, b0, c20); c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a + 3); c30 = _mm256_fmadd_ps(ai, b0, c30); c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a + 4); c40 = _mm256_fmadd_ps(ai, b0, c40); c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a + 5); c50 = _mm256_fmadd_ps(ai, b0, c50); c51 = _mm256_fmadd_ps(ai, b1, c51);
    }
    float *Cf = (float *)C;
    if (mr == MR && nr == NR) {
#define ROW(i, x0, x1)                                                                          \
    _mm256_storeu_ps(Cf + i * ldc, _mm256_add_ps(_mm256_loadu_ps(Cf + i * ldc), x0));            \
    _mm256_storeu_ps(Cf + i * ldc + 8, _mm256_add_ps(_mm256_loadu_ps(Cf + i * ldc + 8), x1));
        ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31) ROW(4, c40, c41) ROW(5, c50, c51)
#undef ROW
        return;
    }
    float t[MR][NR] __attribute__((aligned(32)));
    _mm256_store_ps(t[0], c00); _mm256_store_ps(t[0] + 8, c01);
    _mm256_store_ps(t[1], c10); _mm256_store_ps(t[1] + 8, c11);
    _mm256_store_ps(t[2], c20); _mm256_store_ps(t[2] + 8, c21);
    _mm256_store_ps(t[3], c30); _mm256_store_ps(t[3] + 8, c31);
    _mm256_store_ps(t[4], c40); _mm256_store_ps(t[4] + 8, c41);
    _mm256_store_ps(t[5], c50); _mm256_store_ps(t[5] + 8, c51);
    for (size_t i = 0; i < mr; i++)
        for (size_t j = 0; j < nr; j++) C[i * ldc + j] += t[i][j];
}
#endif

typedef void (*uk_f32_fn)(size_t, const float *restrict, const float *restrict, sp_f32 *restrict, size_t, size_t,
                          size_t);
static uk_f32_fn pick_uk_f32(void) {
#ifdef SPY_HAVE_AVX2_KERNEL
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return uk_f32_avx2;
#endif
    return uk_f32;
}

/* ---- the blocked loop --------------------------------------------------------------------------- */
#define DEF_GEMM(SFX, CT, MT, UK)                                                                            \
    static void gemm_##SFX(MT *C, const void *a, const void *b, size_t M, size_t N, size_t K, size_t es2,    \
                           void (*pack_a)(CT *restrict, const void *, size_t, size_t, size_t),               \
                           void (*pack_b)(CT *restrict, const void *, size_t, size_t, size_t), CT *Ap, CT *Bp) { \
        for (size_t jc = 0; jc < N; jc += NC) {                                                              \
            const size_t nc = N - jc < NC ? N - jc : NC;                                                     \
            for (size_t pc = 0; pc < K; pc += KC) {                                                          \
                const size_t kc = K - pc < KC ? K - pc : KC;                                                 \
                pack_b(Bp, (const uint8_t *)b + (pc * N + jc) * es2, N, kc, nc);                             \
                for (size_t ic = 0; ic < M; ic += MC) {                                                      \
                    const size_t mc = M - ic < MC ? M - ic : MC;                                             \
                    pack_a(Ap, (const uint8_t *)a + (ic * K + pc) * es2, K, mc, kc);                         \
                    for (size_t jr = 0; jr < nc; jr += NR) {                                                 \
                        const size_t nr = nc - jr < NR ? nc - jr : NR;                                       \
                        for (size_t ir = 0; ir < mc; ir += MR) {                                             \
                            const size_t mr = mc - ir < MR ? mc - ir : MR;                                   \
                            UK(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * N + jc + jr, N, mr, nr);     \
                        }                                                                                    \
                    }                                                                                        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }
static uk_f32_fn g_uk_f32;
#define UK_F32_DISPATCH(...) g_uk_f32(__VA_ARGS__)
DEF_GEMM(f32, float, sp_f32, UK_F32_DISPATCH)
DEF_GEMM(f64, double, sp_f64, uk_f64)
DEF_GEMM(i32, int32_t, sp_i32, uk_i32)

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
            size_t batch, void **scratch, size_t *scratch_cap) {
    if (!g_uk_f32) g_uk_f32 = pick_uk_f32();
    const size_t es = spyre_dtype_bytes[t], es2 = spyre_dtype_bytes[t2];
    const int half_out = (t == DT_F16 || t == DT_BF16);
    const size_t panels = (size_t)MC * KC + (size_t)KC * (NC + NR);
    const size_t need = panels * 8 + 64 + (half_out ? M * N * sizeof(float) : 0);
    if (ensure_scratch(scratch, scratch_cap, need) < 0) return -1;
    uint8_t *base = (uint8_t *)*scratch;
    void *Ap = base, *Bp = base + (size_t)MC * KC * 8;
    float *Cbuf = half_out ? (float *)(base + panels * 8 + 64) : NULL;

    for (size_t bi = 0; bi < (batch ? batch : 1); bi++) {
        uint8_t *d = (uint8_t *)dst + bi * M * N * es;
        const uint8_t *ab = (const uint8_t *)a + bi * M * K * es2;
        const uint8_t *bb = (const uint8_t *)b + bi * K * N * es2;
        const uint8_t *cb = acc ? (const uint8_t *)acc + bi * M * N * es : NULL;
        /* C = acc */
        if (half_out) {
            if (cb) {
                for (size_t i = 0; i < M * N; i++)
                    Cbuf[i] = t == DT_F16 ? sp_f16_to_f32(((const sp_u16 *)cb)[i]) : sp_bf16_to_f32(((const sp_u16 *)cb)[i]);
            } else {
                memset(Cbuf, 0, M * N * sizeof(float));
            }
        } else if (!cb) {
            memset(d, 0, M * N * es);
        } else if (cb != d) {
            memmove(d, cb, M * N * es);
        }
        if (M == 0 || N == 0 || K == 0) goto round;
        switch (t2) {
        case DT_F32: gemm_f32(half_out ? (sp_f32 *)Cbuf : (sp_f32 *)d, ab, bb, M, N, K, es2, pack_a_f32, pack_b_f32, Ap, Bp); break;
        case DT_F16: gemm_f32(half_out ? (sp_f32 *)Cbuf : (sp_f32 *)d, ab, bb, M, N, K, es2, pack_a_f16, pack_b_f16, Ap, Bp); break;
        case DT_BF16: gemm_f32(half_out ? (sp_f32 *)Cbuf : (sp_f32 *)d, ab, bb, M, N, K, es2, pack_a_bf16, pack_b_bf16, Ap, Bp); break;
        case DT_F64: gemm_f64((sp_f64 *)d, ab, bb, M, N, K, es2, pack_a_f64, pack_b_f64, Ap, Bp); break;
        case DT_I8: gemm_i32((sp_i32 *)d, ab, bb, M, N, K, es2, pack_a_i8, pack_b_i8, Ap, Bp); break;
        default: /* fp8 */
            fp8_tls = t2 - DT_F8E4M3FN;
            gemm_f32(half_out ? (sp_f32 *)Cbuf : (sp_f32 *)d, ab, bb, M, N, K, es2, pack_a_fp8, pack_b_fp8, Ap, Bp);
            break;
        }
    round:
        if (half_out) {
            sp_u16 *o = (sp_u16 *)d;
            if (t == DT_F16)
                for (size_t i = 0; i < M * N; i++) o[i] = sp_f32_to_f16(Cbuf[i]);
            else
                for (size_t i = 0; i < M * N; i++) o[i] = sp_f32_to_bf16(Cbuf[i]);
        }
    }
    return 0;
}
