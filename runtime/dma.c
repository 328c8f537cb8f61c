/* The DMA engine: ld/st (strided N-d through descriptors), gather/scatter, atomics, and tcopy
 * (the LX-to-LX strided copy, which shares the N-d walk).
 *
 * Every access to device memory is checked before any byte moves: against the allocation of the
 * pointer argument its addresses derive from (the instruction's base argument, resolved once per
 * launch), or, when the compiler could not tell the argument, against the device's allocation table.
 * The span of touched bytes (over unmasked elements) is checked once; only when that fails are
 * elements checked one by one, in index order, to name the first bad one. Masked-off elements are
 * never touched. A failure fills X->fault and returns -1 with nothing written.
 */
#include <string.h>

#include "interp.h"

/* ---- descriptors ---------------------------------------------------------------------------- */
typedef struct {
    int rank;
    uint64_t shape[SPYRE_MAX_RANK];
    uint64_t stride[SPYRE_MAX_RANK]; /* bytes (two's complement) */
} Nd;

/* Resolve dynamic strides, drop size-1 dimensions and merge dimensions that are contiguous with
 * their inner neighbour. stride_scale converts descriptor units to bytes (1 for ld/st, es for
 * tcopy). Returns the element count. */
static uint64_t nd_resolve(const spyre_desc *D, const uint8_t *A, uint64_t stride_scale, uint64_t es, Nd *o) {
    uint64_t total = 1;
    int r = 0;
    for (int k = 0; k < D->rank; k++) {
        const uint64_t n = (uint64_t)D->shape[k];
        if (n == 0) return 0;
        total *= n;
        if (n == 1) continue;
        int64_t s = D->stride[k];
        if (D->stride_slot[k] != SPYRE_NONE) s = *(const sp_i64 *)(A + D->stride_slot[k]);
        o->shape[r] = n;
        o->stride[r] = (uint64_t)s * stride_scale;
        r++;
    }
    if (r == 0) {
        o->rank = 1;
        o->shape[0] = 1;
        o->stride[0] = es;
        return total;
    }
    /* merge k into k+1 when stride[k] == stride[k+1] * shape[k+1] */
    int w = r - 1;
    Nd m;
    m.shape[w] = o->shape[r - 1];
    m.stride[w] = o->stride[r - 1];
    for (int k = r - 2; k >= 0; k--) {
        if (o->stride[k] == m.stride[w] * m.shape[w]) {
            m.shape[w] *= o->shape[k];
        } else {
            w--;
            m.shape[w] = o->shape[k];
            m.stride[w] = o->stride[k];
        }
    }
    o->rank = r - w;
    for (int k = 0; k < o->rank; k++) {
        o->shape[k] = m.shape[w + k];
        o->stride[k] = m.stride[w + k];
    }
    return total;
}

/* Walk the rows (all but the innermost dimension) in index order: off is the byte offset of the
 * row's first element, e0 its dense index. */
#define ND_ROWS(nd, total, ...)                                                                  \
    do {                                                                                          \
        uint64_t idx_[SPYRE_MAX_RANK] = {0};                                                      \
        uint64_t off = 0, e0 = 0;                                                                 \
        const int r_ = (nd)->rank;                                                                \
        const uint64_t n = (nd)->shape[r_ - 1], rows_ = (total) / n;                              \
        const uint64_t st = (nd)->stride[r_ - 1];                                                 \
        (void)st;                                                                                 \
        for (uint64_t row_ = 0; row_ < rows_; row_++) {                                           \
            __VA_ARGS__;                                                                          \
            e0 += n;                                                                              \
            for (int k_ = r_ - 2; k_ >= 0; k_--) {                                                \
                off += (nd)->stride[k_];                                                          \
                if (++idx_[k_] < (nd)->shape[k_]) break;                                          \
                off -= (nd)->stride[k_] * (nd)->shape[k_];                                        \
                idx_[k_] = 0;                                                                     \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* Unmasked span relative to base: [lo, hi) as signed 128-bit offsets. */
static void nd_span(const Nd *nd, uint64_t es, __int128 *lo, __int128 *hi) {
    __int128 l = 0, h = 0;
    for (int k = 0; k < nd->rank; k++) {
        const __int128 ext = (__int128)(int64_t)nd->stride[k] * (__int128)(nd->shape[k] - 1);
        if (ext < 0) l += ext;
        else h += ext;
    }
    *lo = l;
    *hi = h + es;
}

/* ---- checks ---------------------------------------------------------------------------------- */
/* The allocation the running DMA instruction's base argument points into, or NULL when the compiler did
 * not know the argument (the access may then touch any live allocation). */
static inline const SpyArgAlloc *arg_alloc(const SpyExec *X) {
    return X->dma && X->dma->arg ? &X->L->arg_alloc[X->dma->arg - 1] : NULL;
}

static int still_live(const SpyLaunch *L, const SpyArgAlloc *a) {
    SpyreAllocation now;
    return !a->id || spyre_mem_lookup(L->device, a->base, &now) == a->id;
}

/* Whether the allocation `own` found at launch is still live: a free since (from another thread: a launch
 * holds no lock against frees) may have handed the block to someone else. Costs a generation compare while
 * nothing was freed; after a free, the arguments are looked up again (once, when they are all live). */
static int arg_live(SpyExec *X, const SpyArgAlloc *own) {
    SpyCore *c = X->core;
    const SpyLaunch *L = X->L;
    const uint64_t gen = spyre_mem_generation(L->device);
    if (c->args_launch != L->id) c->args_launch = L->id, c->args_gen = L->arg_gen;
    if (gen == c->args_gen) return 1;
    int all = 1;
    for (uint32_t i = 0; i < L->k->n_args && all; i++) all = still_live(L, &L->arg_alloc[i]);
    if (all) {
        c->args_gen = gen;
        return 1;
    }
    return still_live(L, own); /* another argument was freed: only this access's own matters to it */
}

static inline int in_alloc(const SpyArgAlloc *a, uint64_t addr, uint64_t len) {
    return addr >= a->base && len <= a->size && addr - a->base <= a->size - len;
}

/* An access through a base argument: inside its allocation, which is still the one found at launch. */
static inline int in_arg(SpyExec *X, const SpyArgAlloc *a, uint64_t addr, uint64_t len) {
    return in_alloc(a, addr, len) && arg_live(X, a);
}

static int fault_at(SpyExec *X, int kind, const char *access, uint64_t addr, uint64_t len, uint64_t elem) {
    SpyFault *f = &X->fault;
    f->kind = kind;
    f->access = access;
    f->addr = addr;
    f->len = len;
    f->elem = elem;
    f->nearest.base = 0;
    f->nearest.size = 0;
    const SpyArgAlloc *own = arg_alloc(X);
    f->arg = own ? X->dma->arg : 0;
    if (own) { /* the error names the argument and its allocation, not whatever is nearby */
        f->nearest.base = own->base;
        f->nearest.size = own->size;
        if (kind == FAULT_OOB && in_alloc(own, addr, len)) f->kind = FAULT_FREED; /* in bounds, but not live */
    } else if (kind == FAULT_OOB) spyre_mem_check(X->L->device, (uintptr_t)addr, (size_t)len, &f->nearest);
    else spyre_mem_check(X->L->device, (uintptr_t)addr, 0, &f->nearest);
    return -1;
}

/* A span [base+lo, base+hi) check; 1 when it lies in the base argument's allocation, or, when the base
 * argument is not known, in any one allocation (through the running DMA instruction's hint: which slot a
 * check uses only decides how often the hint hits). */
static int span_ok(SpyExec *X, uint64_t base, __int128 lo, __int128 hi) {
    const __int128 a = (__int128)base + lo, b = (__int128)base + hi;
    if (a < 0 || b > ((__int128)1 << 64) || b < a) return 0;
    const SpyArgAlloc *own = arg_alloc(X);
    if (own) return in_arg(X, own, (uint64_t)a, (uint64_t)(b - a));
    SpyreCheckHint *h = &X->core->chk[X->dma ? X->dma->dma_slot : 0];
    return spyre_mem_check_hint(X->L->device, (uintptr_t)(uint64_t)a, (size_t)(uint64_t)(b - a), h);
}

/* Element check (after a span check failed) with a one-entry cache of the last allocation hit; against
 * the base argument's allocation alone when it is known. */
typedef struct {
    uint64_t base, end;
} Hit;
static inline int elem_ok(SpyExec *X, Hit *h, uint64_t addr, uint64_t len) {
    const SpyArgAlloc *own = arg_alloc(X);
    if (own) return in_arg(X, own, addr, len);
    if (addr >= h->base && addr + len <= h->end && addr + len >= addr) return 1;
    SpyreAllocation a = {0, 0};
    if (!spyre_mem_check(X->L->device, (uintptr_t)addr, (size_t)len, &a)) return 0;
    h->base = a.base;
    h->end = a.base + a.size;
    return 1;
}

/* Finds the first unmasked element of an N-d access that is out of bounds (after the span check
 * failed). Returns -1 with the fault filled, or 0 when every element is fine. */
static int nd_first_bad(SpyExec *X, const char *access, uint64_t base, const Nd *nd, uint64_t total,
                        const uint8_t *mask, uint64_t es) {
    Hit h = {1, 0};
    int bad = 0;
    uint64_t bad_addr = 0, bad_elem = 0;
    ND_ROWS(nd, total, {
        if (!bad) {
            for (uint64_t i = 0; i < n; i++) {
                if (mask && !(mask[e0 + i] & 1)) continue;
                const uint64_t addr = base + off + i * st;
                if (!elem_ok(X, &h, addr, es)) {
                    bad = 1;
                    bad_addr = addr;
                    bad_elem = e0 + i;
                    break;
                }
            }
        }
    });
    if (bad) return fault_at(X, FAULT_OOB, access, bad_addr, es, bad_elem);
    return 0;
}

/* Number of set i1 elements: eight bytes per popcount. */
static uint64_t mask_count(const uint8_t *restrict m, uint64_t n) {
    uint64_t c = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, m + i, 8);
        c += (uint64_t)__builtin_popcountll(w & 0x0101010101010101ull);
    }
    for (; i < n; i++) c += m[i] & 1;
    return c;
}

/* Checks an N-d access; with a mask, also reports how many elements are set (*count). */
static int nd_check(SpyExec *X, const char *access, uint64_t base, const Nd *nd, uint64_t total, const uint8_t *mask,
                    uint64_t es, uint64_t *count) {
    __int128 lo, hi;
    const uint64_t c = mask ? mask_count(mask, total) : total;
    *count = c;
    if (c == 0) return 0;
    if (c == total) {
        nd_span(nd, es, &lo, &hi);
    } else {
        /* span over the set elements: per row, only the first and last set ones matter */
        int any = 0;
        __int128 mn = 0, mx = 0;
        ND_ROWS(nd, total, {
            const uint8_t *m = mask + e0;
            uint64_t j0 = 0, j1 = n;
            while (j0 < n && !(m[j0] & 1)) j0++;
            if (j0 < n) {
                while (!(m[j1 - 1] & 1)) j1--;
                const __int128 a = (__int128)(int64_t)off + (__int128)(int64_t)st * (__int128)j0;
                const __int128 b = (__int128)(int64_t)off + (__int128)(int64_t)st * (__int128)(j1 - 1);
                const __int128 l = a < b ? a : b, h = a < b ? b : a;
                if (!any || l < mn) mn = l;
                if (!any || h > mx) mx = h;
                any = 1;
            }
        });
        lo = mn;
        hi = mx + es;
    }
    if (span_ok(X, base, lo, hi)) return 0;
    return nd_first_bad(X, access, base, nd, total, c == total ? NULL : mask, es);
}

/* ---- ld / st ---------------------------------------------------------------------------------- */
static inline void put_other(uint8_t *dst, const uint8_t *other, int bco, uint64_t e, uint64_t es) {
    if (!other) memset(dst, 0, es);
    else memcpy(dst, other + (bco ? 0 : e * es), es);
}

/* n copies of one element (a masked load's scalar `other`): zero bits as a memset, else a typed loop the
 * compiler vectorises (a memcpy per element cost more than the load it filled for) */
static void fill_elems(uint8_t *dst, const uint8_t *one, uint64_t n, uint64_t es) {
    int zero = 1;
    for (uint64_t i = 0; i < es; i++) zero &= one[i] == 0;
    if (zero) {
        memset(dst, 0, n * es);
        return;
    }
#define FILL(T)                                                  \
    do {                                                         \
        T v_;                                                    \
        memcpy(&v_, one, sizeof v_);                             \
        for (uint64_t i_ = 0; i_ < n; i_++) ((T *)dst)[i_] = v_; \
    } while (0)
    switch (es) {
    case 1: memset(dst, one[0], n); break;
    case 2: FILL(uint16_t); break;
    case 4: FILL(uint32_t); break;
    case 8: FILL(uint64_t); break;
    default:
        for (uint64_t i = 0; i < n; i++) memcpy(dst + i * es, one, es);
    }
#undef FILL
}

#define STRIDED_COPY(T, DST, DSTEP, SRC, SSTEP, N)                      \
    do {                                                                 \
        for (uint64_t i_ = 0; i_ < (N); i_++)                           \
            *(T *)((DST) + i_ * (DSTEP)) = *(const T *)((SRC) + i_ * (SSTEP)); \
    } while (0)

static void copy_elems(uint8_t *dst, uint64_t dstep, const uint8_t *src, uint64_t sstep, uint64_t n, uint64_t es) {
    if (dstep == es && sstep == es) {
        memcpy(dst, src, n * es);
        return;
    }
    switch (es) {
    case 1: STRIDED_COPY(uint8_t, dst, dstep, src, sstep, n); break;
    case 2: STRIDED_COPY(sp_u16, dst, dstep, src, sstep, n); break;
    case 4: STRIDED_COPY(sp_u32, dst, dstep, src, sstep, n); break;
    case 8: STRIDED_COPY(sp_u64, dst, dstep, src, sstep, n); break;
    }
}

/* ---- bounds: a descriptor's limits clip each dimension to [0, limit) -------------------------- */
typedef struct {
    int rank;
    uint64_t box[SPYRE_MAX_RANK];    /* elements moved per dimension */
    uint64_t dense[SPYRE_MAX_RANK];  /* element strides of the full (dense) LX tile */
    int64_t stride[SPYRE_MAX_RANK];  /* byte strides in device memory */
    const sp_i64 *vec[SPYRE_MAX_RANK]; /* per-index byte offsets instead of a stride (NULL: the stride) */
    int has_vec;
    int64_t off0; /* byte offset of element 0 (an offset vector's first entry) */
} Box;

/* An offset vector over its first n entries that is an arithmetic sequence (the usual case: `offs % M`
 * rows that do not wrap in this block) is a stride; the box then takes the fast strided paths. */
static int vec_is_strided(const sp_i64 *v, uint64_t n, int64_t *stride) {
    const int64_t step = n > 1 ? v[1] - v[0] : 0;
    for (uint64_t i = 2; i < n; i++)
        if (v[i] - v[i - 1] != step) return 0;
    *stride = step;
    return 1;
}

/* 0: no limit clips and no offset vector (use the unbounded paths), 1: a proper box (filled in), -1:
 * nothing in bounds. */
static int desc_box(const spyre_desc *D, const uint8_t *A, Box *b) {
    int clipped = 0;
    uint64_t acc = 1;
    b->rank = D->rank;
    b->has_vec = 0;
    b->off0 = 0;
    for (int k = D->rank - 1; k >= 0; k--) {
        const uint64_t n = (uint64_t)D->shape[k];
        uint64_t m = n;
        if (D->limit_slot[k] != SPYRE_NONE) {
            const int64_t lim = *(const sp_i64 *)(A + D->limit_slot[k]);
            if (lim <= 0) return n == 0 ? 0 : -1;
            if ((uint64_t)lim < n) m = (uint64_t)lim, clipped = 1;
        }
        b->box[k] = m;
        b->dense[k] = acc;
        acc *= n;
        b->stride[k] = D->stride_slot[k] != SPYRE_NONE ? *(const sp_i64 *)(A + D->stride_slot[k]) : D->stride[k];
        b->vec[k] = D->vec_slot[k] != SPYRE_NONE ? (const sp_i64 *)(A + D->vec_slot[k]) : NULL;
        if (b->vec[k] && vec_is_strided(b->vec[k], m, &b->stride[k])) { /* no wrap in this block: a stride */
            b->off0 += b->vec[k][0];
            b->vec[k] = NULL;
        }
        b->has_vec |= b->vec[k] != NULL;
        clipped |= D->vec_slot[k] != SPYRE_NONE; /* the unbounded paths read only the descriptor's strides */
    }
    return clipped;
}

/* Walk the box's rows in index order: off is the row's byte offset in device memory, e0 the dense
 * LX index of its first element; the innermost dimension has n elements at byte stride st, or at the
 * byte offsets iv[0..n) when it has an offset vector (iv non-NULL). */
#define BOX_ROWS(b, ...)                                                                          \
    do {                                                                                          \
        uint64_t idx_[SPYRE_MAX_RANK] = {0};                                                      \
        const int r_ = (b)->rank;                                                                 \
        const uint64_t n = r_ ? (b)->box[r_ - 1] : 1;                                             \
        const int64_t st = r_ ? (b)->stride[r_ - 1] : 0;                                          \
        const sp_i64 *iv = r_ ? (b)->vec[r_ - 1] : NULL;                                          \
        (void)iv;                                                                                 \
        (void)st;                                                                                 \
        for (;;) {                                                                                \
            int64_t off = (b)->off0;                                                              \
            uint64_t e0 = 0;                                                                      \
            for (int k_ = 0; k_ < r_ - 1; k_++) {                                                 \
                off += (b)->vec[k_] ? (b)->vec[k_][idx_[k_]] : (int64_t)idx_[k_] * (b)->stride[k_]; \
                e0 += idx_[k_] * (b)->dense[k_];                                                  \
            }                                                                                     \
            __VA_ARGS__;                                                                          \
            int k_ = r_ - 2;                                                                      \
            for (; k_ >= 0; k_--) {                                                               \
                if (++idx_[k_] < (b)->box[k_]) break;                                             \
                idx_[k_] = 0;                                                                     \
            }                                                                                     \
            if (k_ < 0) break;                                                                    \
        }                                                                                         \
    } while (0)

/* The box as an Nd (for the span and first-bad-element checks). */
static uint64_t box_nd(const Box *b, Nd *nd) {
    uint64_t total = 1;
    nd->rank = b->rank ? b->rank : 1;
    nd->shape[0] = 1;
    nd->stride[0] = 0;
    for (int k = 0; k < b->rank; k++) {
        nd->shape[k] = b->box[k];
        nd->stride[k] = (uint64_t)b->stride[k];
        total *= b->box[k];
    }
    return total;
}

static int box_check(SpyExec *X, const char *access, uint64_t base, const Box *b, uint64_t es) {
    Nd nd;
    const uint64_t total = box_nd(b, &nd);
    __int128 lo, hi;
    base += (uint64_t)b->off0;
    nd_span(&nd, es, &lo, &hi);
    if (span_ok(X, base, lo, hi)) return 0;
    return nd_first_bad(X, access, base, &nd, total, NULL, es);
}

/* ---- offset vectors: a dimension whose byte offsets are an i64 tile in LX ---------------------- */
/* The span of a box with offset vectors: per dimension the smallest and largest offset. */
static void vec_span(const Box *b, uint64_t es, __int128 *lo, __int128 *hi) {
    __int128 l = b->off0, h = b->off0;
    for (int k = 0; k < b->rank; k++) {
        if (b->box[k] == 0) continue;
        int64_t mn, mx;
        if (b->vec[k]) {
            mn = mx = b->vec[k][0];
            for (uint64_t i = 1; i < b->box[k]; i++) {
                const int64_t v = b->vec[k][i];
                mn = v < mn ? v : mn;
                mx = v > mx ? v : mx;
            }
        } else {
            const int64_t ext = b->stride[k] * (int64_t)(b->box[k] - 1);
            mn = ext < 0 ? ext : 0;
            mx = ext < 0 ? 0 : ext;
        }
        l += mn;
        h += mx;
    }
    *lo = l;
    *hi = h + es;
}

/* Checks every active element of a box with offset vectors (mask: dense i1 over the full tile, or
 * NULL); the span first, element by element only when the span fails. */
static int vec_check(SpyExec *X, const char *access, uint64_t base, const Box *b, uint64_t es, const uint8_t *mask) {
    __int128 lo, hi;
    vec_span(b, es, &lo, &hi);
    if (span_ok(X, base, lo, hi)) return 0;
    Hit h = {1, 0};
    int bad = 0;
    uint64_t bad_addr = 0, bad_elem = 0;
    BOX_ROWS(b, {
        for (uint64_t i = 0; i < n && !bad; i++) {
            if (mask && !(mask[e0 + i] & 1)) continue;
            const uint64_t addr = base + (uint64_t)off + (uint64_t)(iv ? iv[i] : (int64_t)i * st);
            if (!elem_ok(X, &h, addr, es)) bad = 1, bad_addr = addr, bad_elem = e0 + i;
        }
    });
    return bad ? fault_at(X, FAULT_OOB, access, bad_addr, es, bad_elem) : 0;
}

#define VEC_MOVE(T, DST, DOFF, SRC, SOFF, N, ACTIVE)                                               \
    do {                                                                                           \
        for (uint64_t i_ = 0; i_ < (N); i_++)                                                      \
            if (ACTIVE) *(T *)((DST) + (DOFF)) = *(const T *)((SRC) + (SOFF));                     \
    } while (0)

/* One row of a box with offset vectors: element i is at row + (iv ? iv[i] : i * st) in device
 * memory and at lx + i * lstep in LX (lstep 0: a broadcast source). to_lx: a load. */
static void vec_row(uint8_t *lx, uint64_t lstep, uint8_t *row, const sp_i64 *iv, int64_t st, uint64_t n, uint64_t es,
                    const uint8_t *m, int to_lx) {
    if (!iv && !m) {
        if (to_lx) copy_elems(lx, lstep, row, (uint64_t)st, n, es);
        else copy_elems(row, (uint64_t)st, lx, lstep, n, es);
        return;
    }
#define VEC_OFF (iv ? iv[i_] : (int64_t)i_ * st)
#define VEC_CASE(T)                                                                                 \
    if (to_lx) VEC_MOVE(T, lx, i_ * lstep, row, VEC_OFF, n, !m || (m[i_] & 1));                    \
    else VEC_MOVE(T, row, VEC_OFF, lx, i_ * lstep, n, !m || (m[i_] & 1));                          \
    break;
    switch (es) {
    case 1: VEC_CASE(uint8_t)
    case 2: VEC_CASE(sp_u16)
    case 4: VEC_CASE(sp_u32)
    case 8: VEC_CASE(sp_u64)
    }
#undef VEC_CASE
#undef VEC_OFF
}

static inline void prefetch_run(const char *p, uint64_t bytes) {
    if (bytes > (64u << 10)) bytes = 64u << 10;
    for (uint64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

/* ld through a box (bounds, offset vectors, or both). Elements outside the box or masked off get
 * `other`. */
static int ld_box(SpyExec *X, const SpyDInsn *I, const Box *b, uint64_t base, uint64_t total, const uint8_t *mask) {
    const uint64_t es = I->es;
    uint8_t *dst = X->A + I->a;
    const uint8_t *other = I->e != SPYRE_NONE ? X->A + I->e : NULL;
    const int bco = F_LD_BC_OTHER(I->flags);
    if ((b->has_vec || mask ? vec_check(X, "load", base, b, es, mask) : box_check(X, "load", base, b, es)) < 0)
        return -1;
    /* fill everything, then move the box over it: the out-of-bounds part is usually a thin edge */
    uint64_t inside = 1;
    for (int k = 0; k < b->rank; k++) inside *= b->box[k];
    if (inside == total && !mask) {
        /* nothing to fill: an unclipped box (offset vectors, a limit beyond the tile) */
    } else if (!other) memset(dst, 0, total * es);
    else if (!bco) memcpy(dst, other, total * es);
    else fill_elems(dst, other, total, es);
    if (b->has_vec && !mask) /* scattered contiguous rows: start every row's misses before copying any */
        BOX_ROWS(b, if (!iv && st == (int64_t)es) prefetch_run((const char *)(uintptr_t)(base + (uint64_t)off), n * es));
    BOX_ROWS(b, vec_row(dst + e0 * es, es, (uint8_t *)(uintptr_t)(base + (uint64_t)off), iv, st, n, es,
                        mask ? mask + e0 : NULL, 1));
    return 0;
}

static int st_box(SpyExec *X, const SpyDInsn *I, const Box *b, uint64_t base, const uint8_t *src, const uint8_t *mask) {
    const uint64_t es = I->es;
    const int bcs = F_ST_BC_SRC(I->flags);
    if ((b->has_vec || mask ? vec_check(X, "store", base, b, es, mask) : box_check(X, "store", base, b, es)) < 0)
        return -1;
    BOX_ROWS(b, vec_row((uint8_t *)(uintptr_t)(bcs ? src : src + e0 * es), bcs ? 0 : es, (uint8_t *)(uintptr_t)(base + (uint64_t)off), iv, st,
                        n, es, mask ? mask + e0 : NULL, 0));
    return 0;
}

/* ---- prefetching the next program's run ------------------------------------------------------- */
/* Programs on a core run in order of their ids, and a row-per-program kernel moves the same-sized run
 * at a fixed distance from the last one. When an instruction's run address advanced by the same
 * amount twice, the next run is fetched into cache while this program computes (a DMA engine's
 * double buffering; queued, and issued between instructions: spy_prefetch_drip); a prefetch never
 * faults, a wrong guess costs only bandwidth. */
#define PF_MAX_BYTES (8u << 10) /* longer runs: the CPU's own prefetcher keeps up, and ours only got in the way */
static void prefetch_next(SpyExec *X, const SpyDInsn *I, uint64_t base, uint64_t bytes, int write) {
    SpyPrefetch *e = &X->core->pf[I->dma_slot];
    if (e->insn != I) {
        e->insn = I;
        e->stride = 0;
        e->last = base;
        return;
    }
    const int64_t stride = (int64_t)(base - e->last);
    e->last = base;
    if (stride == 0 || stride != e->stride) {
        e->stride = stride;
        return;
    }
    const char *p = (const char *)(uintptr_t)(base + 2 * (uint64_t)stride);
    if (bytes > PF_MAX_BYTES) return;
    SpyCore *core = X->core;
    if ((uintptr_t)p == core->pf_done_lo && bytes <= core->pf_done_len) return; /* the same run, fetched just now */
    core->pf_done_lo = (uintptr_t)p;
    core->pf_done_len = bytes;
    while (core->pfq_n[write]) /* what is left of the last run first */
        spy_prefetch_lines(&core->pfq_p[write], &core->pfq_n[write], write);
    core->pfq_p[write] = p;
    core->pfq_n[write] = (bytes + 63) / 64;
    spy_prefetch_drip(core);
}

/* ---- view registers: copy elision ------------------------------------------------------------ */
/* The device address of an ld/st box when it is one contiguous run in one allocation, unclipped and
 * with no offset vectors; NULL otherwise (the instruction then moves bytes through LX as usual, and
 * reports any bad access itself). */
static uint8_t *direct_run(SpyExec *X, const spyre_desc *D, uint64_t base, uint64_t es) {
    if (D->rank == 1 && D->vec_slot[0] == SPYRE_NONE) { /* the usual case, without the general walk below */
        const uint64_t n = (uint64_t)D->shape[0];
        if (n == 0) return NULL;
        if (D->limit_slot[0] != SPYRE_NONE && *(const sp_i64 *)(X->A + D->limit_slot[0]) < (int64_t)n) return NULL;
        const int64_t s = D->stride_slot[0] != SPYRE_NONE ? *(const sp_i64 *)(X->A + D->stride_slot[0]) : D->stride[0];
        if (n > 1 && s != (int64_t)es) return NULL;
        return span_ok(X, base, 0, (__int128)(n * es)) ? (uint8_t *)(uintptr_t)base : NULL;
    }
    Nd nd;
    const uint64_t total = nd_resolve(D, X->A, 1, es, &nd);
    if (total == 0 || nd.rank != 1 || nd.stride[0] != es) return NULL;
    Box b;
    if (desc_box(D, X->A, &b) != 0) return NULL;
    if (!span_ok(X, base, 0, (__int128)total * es)) return NULL;
    return (uint8_t *)(uintptr_t)base;
}

static uint8_t *direct_run_prefetch(SpyExec *X, const SpyDInsn *I, uint64_t base, int write) {
    uint8_t *p = direct_run(X, (const spyre_desc *)I->p, base, I->es);
    if (p) {
        uint64_t total = 1;
        const spyre_desc *D = (const spyre_desc *)I->p;
        for (int k = 0; k < D->rank; k++) total *= (uint64_t)D->shape[k];
        prefetch_next(X, I, base, total * I->es, write);
    }
    return p;
}

/* The device address of a 2-D ld box whose rows are contiguous, whole (unclipped), apart by a fixed
 * stride that is a whole number of elements and no less than a row, inside one allocation: what a dot
 * operand reads in place (ld rows). *ld gets the row stride in bytes. NULL otherwise. */
static uint8_t *direct_rows(SpyExec *X, const spyre_desc *D, uint64_t base, uint64_t es, uint64_t *ld) {
    Box b;
    if (D->rank != 2 || desc_box(D, X->A, &b) < 0 || b.has_vec) return NULL;
    const uint64_t rows = (uint64_t)D->shape[0], cols = (uint64_t)D->shape[1];
    if (rows == 0 || cols == 0 || b.box[0] != rows || b.box[1] != cols) return NULL;
    if (cols > 1 && b.stride[1] != (int64_t)es) return NULL;
    const uint64_t rs = rows > 1 ? (uint64_t)b.stride[0] : cols * es;
    if (b.stride[0] < 0 || rs < cols * es || rs % es) return NULL;
    base += (uint64_t)b.off0;
    if (!span_ok(X, base, 0, (__int128)rs * (rows - 1) + (__int128)(cols * es))) return NULL;
    *ld = rs;
    return (uint8_t *)(uintptr_t)base;
}

void spy_dma_view(SpyExec *X, const SpyDInsn *I) {
    X->dma = I;
    uint8_t *p = direct_run_prefetch(X, I, *(const sp_u64 *)(X->A + I->b), 1);
    X->view[I->a] = p ? p : X->A + I->d;
    X->view_ld[I->a] = 0;
}

int spy_dma_ld(SpyExec *X, const SpyDInsn *I) {
    X->dma = I;
    uint8_t *A = X->A;
    const uint64_t es = I->es;
    uint8_t *dst = A + I->a;
    const uint64_t base = *(const sp_u64 *)(A + I->b);
    if (I->n != SPYRE_NONE) { /* a view register: no copy when the box is one run of device memory */
        uint8_t *p = NULL;
        uint64_t ld = 0;
        if (I->d == SPYRE_NONE)
            p = F_LD_ROWS(I->flags) ? direct_rows(X, (const spyre_desc *)I->p, base, es, &ld)
                                    : direct_run_prefetch(X, I, base, 0);
        X->view[I->n] = p ? p : dst;
        X->view_ld[I->n] = p ? ld : 0;
        if (p) return 0;
    }
    Nd nd;
    const uint64_t total = nd_resolve((const spyre_desc *)I->p, A, 1, es, &nd);
    if (total == 0) return 0;
    const uint8_t *mask = I->d != SPYRE_NONE ? A + I->d : NULL;
    const uint8_t *other = I->e != SPYRE_NONE ? A + I->e : NULL;
    const int bco = F_LD_BC_OTHER(I->flags);
    Box box;
    const int bounded = desc_box((const spyre_desc *)I->p, A, &box);
    if (bounded < 0) {
        for (uint64_t e = 0; e < total; e++) put_other(dst + e * es, other, bco, e, es);
        return 0;
    }
    if (mask && F_LD_BC_MASK(I->flags)) {
        if (mask[0] & 1) {
            mask = NULL;
        } else {
            for (uint64_t e = 0; e < total; e++) put_other(dst + e * es, other, bco, e, es);
            return 0;
        }
    }
    if (bounded > 0 || box.has_vec) return ld_box(X, I, &box, base, total, mask);
    uint64_t count;
    if (nd_check(X, "load", base, &nd, total, mask, es, &count) < 0) return -1;
    if (mask && count == total) mask = NULL;
    if (!mask) {
        ND_ROWS(&nd, total, copy_elems(dst + e0 * es, es, (const uint8_t *)(uintptr_t)(base + off), st, n, es));
        return 0;
    }
    ND_ROWS(&nd, total, {
        const uint8_t *src = (const uint8_t *)(uintptr_t)(base + off);
        uint64_t i = 0;
        while (i < n) {
            uint64_t j = i;
            if (mask[e0 + i] & 1) {
                while (j < n && (mask[e0 + j] & 1)) j++;
                copy_elems(dst + (e0 + i) * es, es, src + i * st, st, j - i, es);
            } else {
                while (j < n && !(mask[e0 + j] & 1)) j++;
                if (!other) memset(dst + (e0 + i) * es, 0, (j - i) * es);
                else if (!bco) memcpy(dst + (e0 + i) * es, other + (e0 + i) * es, (j - i) * es);
                else fill_elems(dst + (e0 + i) * es, other, j - i, es);
            }
            i = j;
        }
    });
    return 0;
}

int spy_dma_st(SpyExec *X, const SpyDInsn *I) {
    X->dma = I;
    uint8_t *A = X->A;
    const uint64_t es = I->es;
    const uint64_t base = *(const sp_u64 *)(A + I->a);
    if (I->e != SPYRE_NONE && X->view[I->e] != A + I->c) return 0; /* its producer wrote device memory */
    Nd nd;
    const uint64_t total = nd_resolve((const spyre_desc *)I->p, A, 1, es, &nd);
    if (total == 0) return 0;
    Box box;
    const int bounded = desc_box((const spyre_desc *)I->p, A, &box);
    if (bounded < 0) return 0;
    const uint8_t *src = I->views ? X->view[I->c] : A + I->c;
    const int bcs = F_ST_BC_SRC(I->flags);
    if (I->views && src != A + X->k->view_fallback[I->c]) {
        /* a load's device memory, stored elsewhere: when the two overlap, read it all before writing */
        __int128 lo, hi;
        nd_span(&nd, es, &lo, &hi);
        const __int128 s0 = (__int128)(uintptr_t)src, s1 = s0 + (__int128)(bcs ? 1 : total) * es;
        if (s0 < (__int128)base + hi && (__int128)base + lo < s1) {
            uint8_t *fb = A + X->k->view_fallback[I->c];
            memcpy(fb, src, (bcs ? 1 : total) * es);
            src = fb;
        }
    }
    const uint8_t *mask = I->d != SPYRE_NONE ? A + I->d : NULL;
    if (mask && F_ST_BC_MASK(I->flags)) {
        if (!(mask[0] & 1)) return 0;
        mask = NULL;
    }
    if (bounded > 0 || box.has_vec) return st_box(X, I, &box, base, src, mask);
    uint64_t count;
    if (nd_check(X, "store", base, &nd, total, mask, es, &count) < 0) return -1;
    if (mask && count == total) mask = NULL;
    if (count == 0) return 0;
    ND_ROWS(&nd, total, {
        uint8_t *d = (uint8_t *)(uintptr_t)(base + off);
        if (!mask) {
            copy_elems(d, st, bcs ? src : src + e0 * es, bcs ? 0 : es, n, es);
        } else {
            uint64_t i = 0;
            while (i < n) {
                uint64_t j = i;
                if (mask[e0 + i] & 1) {
                    while (j < n && (mask[e0 + j] & 1)) j++;
                    copy_elems(d + i * st, st, bcs ? src : src + (e0 + i) * es, bcs ? 0 : es, j - i, es);
                } else {
                    while (j < n && !(mask[e0 + j] & 1)) j++;
                }
                i = j;
            }
        }
    });
    return 0;
}

/* ---- bmask: the i1 tile of a descriptor's bounds ---------------------------------------------- */
void spy_bmask(uint8_t *dst, const uint8_t *A, const SpyDInsn *I) {
    Box b;
    const int r = desc_box((const spyre_desc *)I->p, A, &b);
    if (r == 0) {
        memset(dst, 1, I->n);
        return;
    }
    memset(dst, 0, I->n);
    if (r > 0) BOX_ROWS(&b, memset(dst + e0, 1, n));
}

/* ---- bsel: a where over a descriptor's bounds ------------------------------------------------- */
static void fill_from(uint8_t *dst, const uint8_t *src, int bc, uint64_t n, uint64_t es) {
    if (!bc) {
        memcpy(dst, src, n * es);
        return;
    }
    uint64_t bits = 0;
    memcpy(&bits, src, es);
    spy_fill_bits(dst, bits, es, n);
}

/* b into every element of the dense tile (shape of D) outside the box (NULL: outside everything) */
static void fill_outside(uint8_t *dst, const spyre_desc *D, const Box *box, const uint8_t *b, int bcb, uint64_t es) {
    const int R = D->rank;
    const uint64_t n = R ? (uint64_t)D->shape[R - 1] : 1;
    uint64_t rows = 1, idx[SPYRE_MAX_RANK] = {0};
    for (int k = 0; k < R - 1; k++) rows *= (uint64_t)D->shape[k];
    for (uint64_t row = 0; row < rows; row++) {
        int inside = box != NULL;
        for (int k = 0; k < R - 1 && inside; k++) inside = idx[k] < box->box[k];
        const uint64_t m = inside ? (R ? box->box[R - 1] : 1) : 0, e0 = row * n + m;
        if (m < n) fill_from(dst + e0 * es, bcb ? b : b + e0 * es, bcb, n - m, es);
        for (int k = R - 2; k >= 0; k--) {
            if (++idx[k] < (uint64_t)D->shape[k]) break;
            idx[k] = 0;
        }
    }
}

void spy_bsel(uint8_t *dst, const uint8_t *A, const SpyDInsn *I) {
    const uint64_t es = I->es;
    const uint8_t *a = A + I->c, *b = A + I->d;
    const int bca = F_BSEL_BC2(I->flags), bcb = F_BSEL_BC3(I->flags);
    Box box;
    const int r = desc_box((const spyre_desc *)I->p, A, &box);
    if (dst == a && !bca) { /* in place: a stays inside the box, b goes everywhere else */
        if (r != 0) fill_outside(dst, (const spyre_desc *)I->p, r < 0 ? NULL : &box, b, bcb, es);
        return;
    }
    if (r == 0) { /* nothing clipped: all of a */
        fill_from(dst, a, bca, I->n, es);
        return;
    }
    fill_from(dst, b, bcb, I->n, es);
    if (r > 0) BOX_ROWS(&box, fill_from(dst + e0 * es, bca ? a : a + e0 * es, bca, n, es));
}

/* ---- tcopy (LX -> LX, element strides; validated at load) ----------------------------------- */
size_t spy_tcopy(uint8_t *dst, uint8_t *A, const SpyDInsn *I) {
    const uint64_t es = I->es;
    const uint8_t *src = A + I->b;
    Nd nd;
    const uint64_t total = nd_resolve((const spyre_desc *)I->p, A, es, es, &nd);
    if (total == 0) return 0;
    /* the source may be read at negative offsets when strides are negative: src is the element
     * at index 0, validated at load to stay inside the arena */
    ND_ROWS(&nd, total, {
        const uint8_t *s = src + (int64_t)off;
        if (st == 0) {
            uint64_t bits = 0;
            memcpy(&bits, s, es);
            spy_fill_bits(dst + e0 * es, bits, es, n);
        } else {
            copy_elems(dst + e0 * es, es, s, st, n, es);
        }
    });
    return total * es;
}

/* ---- gather / scatter / atomics ------------------------------------------------------------- */
/* Checks the n addresses (one for all when bca) of an element list; mask may be NULL; bcm: one
 * mask element for all. Also checks alignment when align is set. */
static int list_check(SpyExec *X, const char *access, const uint8_t *addrs, int bca, const uint8_t *mask, int bcm,
                      uint64_t n, uint64_t es, int align, uint64_t *count) {
    uint64_t c = 0, mn = 0, mx = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (mask && !(mask[bcm ? 0 : i] & 1)) continue;
        const uint64_t a = ((const sp_u64 *)addrs)[bca ? 0 : i];
        if (align && (a % es) != 0) return fault_at(X, FAULT_MISALIGNED, access, a, es, i);
        if (c == 0 || a < mn) mn = a;
        if (c == 0 || a > mx) mx = a;
        c++;
    }
    *count = c;
    if (c == 0) return 0;
    if (mx + es >= mx && span_ok(X, mn, 0, (__int128)(mx + es - mn))) return 0;
    Hit h = {1, 0};
    for (uint64_t i = 0; i < n; i++) {
        if (mask && !(mask[bcm ? 0 : i] & 1)) continue;
        const uint64_t a = ((const sp_u64 *)addrs)[bca ? 0 : i];
        if (!elem_ok(X, &h, a, es)) return fault_at(X, FAULT_OOB, access, a, es, i);
    }
    return 0;
}

int spy_dma_gather(SpyExec *X, const SpyDInsn *I) {
    X->dma = I; /* the instruction whose check hint the span check uses */
    uint8_t *A = X->A;
    const uint64_t es = I->es, n = I->n;
    uint8_t *dst = A + I->a;
    const uint8_t *addrs = A + I->b;
    const uint8_t *mask = I->c != SPYRE_NONE ? A + I->c : NULL;
    const uint8_t *other = I->d != SPYRE_NONE ? A + I->d : NULL;
    const int bca = F_GATHER_BC_ADDR(I->flags), bcm = F_GATHER_BC_MASK(I->flags), bco = F_GATHER_BC_OTHER(I->flags);
    uint64_t count;
    if (list_check(X, "gather", addrs, bca, mask, bcm, n, es, 0, &count) < 0) return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (mask && !(mask[bcm ? 0 : i] & 1)) {
            put_other(dst + i * es, other, bco, i, es);
            continue;
        }
        const uint64_t a = ((const sp_u64 *)addrs)[bca ? 0 : i];
        memcpy(dst + i * es, (const void *)(uintptr_t)a, es);
    }
    return 0;
}

int spy_dma_scatter(SpyExec *X, const SpyDInsn *I) {
    X->dma = I; /* the instruction whose check hint the span check uses */
    uint8_t *A = X->A;
    const uint64_t es = I->es, n = I->n;
    const uint8_t *addrs = A + I->a;
    const uint8_t *src = A + I->b;
    const uint8_t *mask = I->c != SPYRE_NONE ? A + I->c : NULL;
    const int bca = F_SCATTER_BC_ADDR(I->flags), bcs = F_SCATTER_BC_SRC(I->flags), bcm = F_SCATTER_BC_MASK(I->flags);
    if (n == 1 && !mask) { /* one element (`tl.store(Mean + row, mean)`): one span check, one move */
        const uint64_t a = *(const sp_u64 *)addrs;
        if (span_ok(X, a, 0, es)) {
            memcpy((void *)(uintptr_t)a, src, es);
            return 0;
        }
    }
    uint64_t count;
    if (list_check(X, "scatter", addrs, bca, mask, bcm, n, es, 0, &count) < 0) return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (mask && !(mask[bcm ? 0 : i] & 1)) continue;
        const uint64_t a = ((const sp_u64 *)addrs)[bca ? 0 : i];
        memcpy((void *)(uintptr_t)a, src + (bcs ? 0 : i * es), es);
    }
    return 0;
}

int spy_dma_atom(SpyExec *X, const SpyDInsn *I) {
    X->dma = I; /* the instruction whose check hint the span check uses */
    uint8_t *A = X->A;
    const uint64_t es = I->es, n = I->n;
    uint8_t *dst = I->a != SPYRE_NONE ? A + I->a : NULL;
    const uint8_t *addrs = A + I->b;
    const uint8_t *val = A + I->c;
    const uint8_t *mask = I->d != SPYRE_NONE ? A + I->d : NULL;
    const int bca = F_ATOM_BC_ADDR(I->flags), bcv = F_ATOM_BC_VAL(I->flags), bcm = F_ATOM_BC_MASK(I->flags);
    const spy_atom_fn fn = (spy_atom_fn)I->fn;
    uint64_t count;
    if (list_check(X, "atomic", addrs, bca, mask, bcm, n, es, 1, &count) < 0) return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t old = 0;
        if (!mask || (mask[bcm ? 0 : i] & 1)) {
            const uint64_t a = ((const sp_u64 *)addrs)[bca ? 0 : i];
            fn((void *)(uintptr_t)a, val + (bcv ? 0 : i * es), &old);
        }
        if (dst) memcpy(dst + i * es, &old, es);
    }
    return 0;
}

int spy_dma_acas(SpyExec *X, const SpyDInsn *I) {
    X->dma = I; /* the instruction whose check hint the span check uses */
    uint8_t *A = X->A;
    const uint64_t es = I->es, n = I->n;
    uint8_t *dst = A + I->a;
    const uint8_t *addrs = A + I->b;
    const uint8_t *cmp = A + I->c, *val = A + I->d;
    const int bca = F_ACAS_BC_ADDR(I->flags), bcc = F_ACAS_BC_CMP(I->flags), bcv = F_ACAS_BC_VAL(I->flags);
    uint64_t count;
    if (list_check(X, "atomic_cas", addrs, bca, NULL, 0, n, es, 1, &count) < 0) return -1;
    for (uint64_t i = 0; i < n; i++) {
        void *p = (void *)(uintptr_t)((const sp_u64 *)addrs)[bca ? 0 : i];
        const uint8_t *c = cmp + (bcc ? 0 : i * es), *v = val + (bcv ? 0 : i * es);
        switch (es) {
#define CAS_CASE(N, T)                                                                               \
    case N: {                                                                                        \
        T e, w;                                                                                      \
        memcpy(&e, c, N);                                                                            \
        memcpy(&w, v, N);                                                                            \
        __atomic_compare_exchange_n((T *)p, &e, w, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
        memcpy(dst + i * es, &e, N);                                                                 \
        break;                                                                                       \
    }
            CAS_CASE(1, uint8_t)
            CAS_CASE(2, uint16_t)
            CAS_CASE(4, uint32_t)
            CAS_CASE(8, uint64_t)
#undef CAS_CASE
        }
    }
    return 0;
}
