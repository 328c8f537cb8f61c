/* The performance model's per-instruction costs, scoreboard and schedule (see perf.h and
 * docs/perf-model.md). Only the profiling variant of the dispatch loop calls into this file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"

/* ---- scoreboard granules -------------------------------------------------------------------- */
static inline SpyPerfGran *gran(SpyPerfProg *pp, uint64_t i) {
    SpyPerfGran *g = &pp->g[i];
    if (g->gen != pp->gen) {
        g->gen = pp->gen;
        g->ready = g->read = g->dma_prev = 0;
    }
    return g;
}

/* Runs BODY with G bound to each granule covering arena bytes [off, off + len). */
#define FOR_GRANS(pp, k, off, len, G, BODY)                                                            \
    do {                                                                                                \
        uint64_t o_ = (off), e_ = (uint64_t)(off) + (len);                                              \
        const uint64_t sb_ = (k)->sreg_bytes;                                                           \
        if (o_ < sb_) {                                                                                 \
            const uint64_t se_ = e_ < sb_ ? e_ : sb_;                                                   \
            for (uint64_t i_ = o_ / SPYRE_SREG_BYTES; i_ < (se_ + SPYRE_SREG_BYTES - 1) / SPYRE_SREG_BYTES; i_++) { \
                SpyPerfGran *G = gran(pp, i_);                                                          \
                BODY;                                                                                   \
            }                                                                                           \
            o_ = se_;                                                                                   \
        }                                                                                               \
        if (o_ < e_) {                                                                                  \
            const uint64_t a_ = (o_ - sb_) / SPY_PERF_LX_GRAN;                                          \
            const uint64_t b_ = (e_ - sb_ + SPY_PERF_LX_GRAN - 1) / SPY_PERF_LX_GRAN;                   \
            for (uint64_t i_ = a_; i_ < b_; i_++) {                                                     \
                SpyPerfGran *G = gran(pp, SPYRE_SREGS_MAX + i_);                                        \
                BODY;                                                                                   \
            }                                                                                           \
        }                                                                                               \
    } while (0)

/* ---- what one instruction costs ------------------------------------------------------------- */
#define MAX_READS 20
typedef struct {
    int unit;
    double occ;   /* cycles the unit is busy */
    double lat;   /* cycles from start to the result being ready (>= occ) */
    double seq;   /* cycles the in-order sequencer spends issuing it */
    int barrier;  /* waits for everything issued before */
    int nr;
    uint64_t r_off[MAX_READS], r_len[MAX_READS];
    uint64_t w_off, w_len;
    int dma_write; /* the write is a DMA into LX (may be double-buffered) */
} Cost;

static inline void rd(Cost *c, uint32_t off, uint64_t len) {
    if (off == SPYRE_NONE || len == 0 || c->nr == MAX_READS) return;
    c->r_off[c->nr] = off;
    c->r_len[c->nr] = len;
    c->nr++;
}
static inline void wr(Cost *c, uint32_t off, uint64_t len) {
    if (off == SPYRE_NONE) return;
    c->w_off = off;
    c->w_len = len;
}

static int is_float(int t) { return t >= DT_F16 && t <= DT_F8E4M3B15; }

/* elements per cycle of a core for a dtype of es bytes: lanes16 16-bit lanes per corelet */
static inline double lanes(const SpyPerfCfg *C, double lanes16, unsigned es) {
    return lanes16 * C->corelets * 2.0 / (es < 2 ? 2.0 : (double)es);
}
/* PE throughput of dot inputs of dtype t relative to f16: HardwareConfig's figure for its class (isa.py's
 * DType.pe_rate are the defaults), the ISA's table for the rest */
static inline double pe_rate_of(const SpyPerfCfg *C, int t) {
    if (t == DT_F32) return C->pe_rate_f32;
    if (t == DT_F64) return C->pe_rate_f64;
    if (spyre_dtype_bytes[t] == 1 && t != DT_I1) return C->pe_rate_8bit;
    if (spyre_dtype_bytes[t] == 2) return C->pe_rate_16bit;
    return spyre_dtype_pe_rate[t];
}
static inline double vcycles(const SpyPerfCfg *C, double lanes16, uint64_t n, unsigned es, double factor) {
    const double c = ceil((double)n / lanes(C, lanes16, es)) * factor;
    return c < 1 ? 1 : c;
}

/* ---- DMA amounts -------------------------------------------------------------------------------- */
typedef struct {
    uint64_t elems, useful, moved;
    int strided;    /* not one contiguous run per row */
    int transposed; /* the dimension contiguous in memory is not LX's innermost: a restickify */
} DmaAmt;

static inline uint64_t sticks_of(uint64_t lo, uint64_t span, uint64_t stick) {
    return (lo + span - 1) / stick - lo / stick + 1;
}

/* Bytes an ld/st through descriptor D moves: the sticks its (bounded) box touches. The box is
 * walked in memory order (dimensions sorted by stride, contiguous ones merged), so a transposed
 * tile costs the sticks it covers, not a stick per element; a dimension of stride 0 re-reads the
 * same elements, which the engine fetches once. Each run of the smallest-stride dimension costs
 * the sticks from its real address (alignment counts). */
static void desc_amount(const uint8_t *A, const spyre_desc *D, uint64_t base, uint64_t es, const uint8_t *mask,
                        int bc_mask, uint64_t stick, DmaAmt *o) {
    memset(o, 0, sizeof *o);
    uint64_t box[SPYRE_MAX_RANK];
    uint64_t st[SPYRE_MAX_RANK]; /* |stride| in bytes */
    uint64_t total = 1, full = 1, fetched = 1;
    int r = 0, lx_inner = -1;
    for (int k = 0; k < D->rank; k++) {
        const uint64_t n = (uint64_t)D->shape[k];
        if (n == 0) return;
        full *= n;
        uint64_t m = n;
        if (D->limit_slot[k] != SPYRE_NONE) {
            const int64_t lim = *(const sp_i64 *)(A + D->limit_slot[k]);
            if (lim <= 0) return;
            if ((uint64_t)lim < n) m = (uint64_t)lim;
        }
        total *= m;
        int64_t s = D->stride_slot[k] != SPYRE_NONE ? *(const sp_i64 *)(A + D->stride_slot[k]) : D->stride[k];
        if (D->vec_slot[k] != SPYRE_NONE) { /* an offset vector: a stride if it is one, else rows apart */
            const sp_i64 *v = (const sp_i64 *)(A + D->vec_slot[k]);
            s = m > 1 ? v[1] - v[0] : 0;
            for (uint64_t i = 2; i < m; i++)
                if (v[i] - v[i - 1] != s) {
                    s = (int64_t)1 << 40; /* irregular: no two indices share a run */
                    break;
                }
            base += (uint64_t)v[0];
        }
        if (m == 1 || s == 0) continue;
        if (s < 0) base += (uint64_t)(s * (int64_t)(m - 1)); /* the lowest address: walk upwards from it */
        box[r] = m;
        st[r] = (uint64_t)(s < 0 ? -s : s);
        fetched *= m;
        lx_inner = r;
        r++;
    }
    uint64_t active = total;
    if (mask) {
        if (bc_mask) {
            if (!(mask[0] & 1)) return;
        } else {
            active = 0;
            for (uint64_t i = 0; i < full; i++) active += mask[i] & 1;
            if (!active) return;
        }
    }
    if (r == 0) {
        box[0] = 1;
        st[0] = es;
        lx_inner = 0;
        r = 1;
    }
    /* memory order: largest stride outermost (a stable insertion sort of at most 6) */
    int order[SPYRE_MAX_RANK];
    for (int k = 0; k < r; k++) order[k] = k;
    for (int i = 1; i < r; i++)
        for (int j = i; j > 0 && st[order[j - 1]] < st[order[j]]; j--) {
            const int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    o->transposed = order[r - 1] != lx_inner && st[order[r - 1]] < st[lx_inner];
    /* merge a dimension into its inner neighbour when they are contiguous in memory */
    uint64_t mb[SPYRE_MAX_RANK], ms[SPYRE_MAX_RANK];
    int w = r - 1;
    mb[w] = box[order[r - 1]];
    ms[w] = st[order[r - 1]];
    for (int k = r - 2; k >= 0; k--) {
        const int d = order[k];
        if (st[d] == ms[w] * mb[w]) {
            mb[w] *= box[d];
        } else {
            w--;
            mb[w] = box[d];
            ms[w] = st[d];
        }
    }
    const int rank = r - w;
    const uint64_t *bx = mb + w, *sx = ms + w;
    const uint64_t n = bx[rank - 1], s = sx[rank - 1];
    const uint64_t rows = fetched / n;
    o->strided = s != es || o->transposed;
    uint64_t span = 0;
    int each = 0; /* every element in a stick of its own */
    if (s == es) span = n * es;
    else if (s < stick) span = (n - 1) * s + es;
    else each = 1;
    int aligned_rows = 1; /* every run starts at the same offset within a stick */
    for (int k = 0; k < rank - 1; k++)
        if (sx[k] % stick) aligned_rows = 0;
    uint64_t sticks = 0;
    if (each) {
        sticks = fetched; /* an element of at most 8 bytes at an element-aligned address: one stick */
    } else if (aligned_rows) {
        sticks = rows * sticks_of(base, span, stick);
    } else {
        uint64_t idx[SPYRE_MAX_RANK] = {0};
        uint64_t off = 0;
        for (uint64_t row = 0; row < rows; row++) {
            sticks += sticks_of(base + off, span, stick);
            for (int k = rank - 2; k >= 0; k--) {
                off += sx[k];
                if (++idx[k] < bx[k]) break;
                off -= sx[k] * bx[k];
                idx[k] = 0;
            }
        }
    }
    uint64_t moved = sticks * stick;
    if (active < total) moved = (uint64_t)ceil((double)moved * (double)active / (double)total / (double)stick) * stick;
    o->elems = active;
    o->useful = active * es;
    o->moved = moved;
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Distinct sticks a list of addresses touches: the engine coalesces the list, fetching each stick
 * once per instruction. In address order this is a count of changes; otherwise the sticks are
 * sorted. */
static void list_amount(const uint8_t *addrs, int bca, const uint8_t *mask, int bcm, uint64_t n, uint64_t es,
                        uint64_t stick, uint64_t *active, uint64_t *sticks) {
    uint64_t act = 0, st = 0, prev = UINT64_MAX;
    int ordered = 1;
    for (uint64_t i = 0; i < n; i++) {
        if (mask && !(mask[bcm ? 0 : i] & 1)) continue;
        const uint64_t a = ((const sp_u64 *)addrs)[bca ? 0 : i];
        const uint64_t s0 = a / stick, s1 = (a + es - 1) / stick;
        if (prev != UINT64_MAX && s0 < prev) ordered = 0;
        if (s0 != prev) st++;
        if (s1 != s0) st++;
        prev = s1;
        act++;
    }
    *active = act;
    *sticks = st;
    if (ordered || act < 2) return;
    uint64_t *v = malloc(2 * act * sizeof *v);
    if (!v) return; /* keep the upper bound */
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (mask && !(mask[bcm ? 0 : i] & 1)) continue;
        const uint64_t a = ((const sp_u64 *)addrs)[bca ? 0 : i];
        v[m++] = a / stick;
        if ((a + es - 1) / stick != a / stick) v[m++] = (a + es - 1) / stick;
    }
    qsort(v, m, sizeof *v, cmp_u64);
    st = 0;
    for (uint64_t i = 0; i < m; i++)
        if (i == 0 || v[i] != v[i - 1]) st++;
    free(v);
    *sticks = st;
}

/* bmask and bsel read the descriptor's limit registers */
static void rd_limits(Cost *c, const spyre_desc *D) {
    for (int r = 0; r < D->rank; r++)
        if (D->limit_slot[r] != SPYRE_NONE) rd(c, D->limit_slot[r], 8);
}

/* The registers a descriptor's ld/st reads: strides, bounds and offset vectors */
static void rd_desc_regs(Cost *c, const spyre_desc *D) {
    for (int r = 0; r < D->rank; r++) {
        if (D->stride_slot[r] != SPYRE_NONE) rd(c, D->stride_slot[r], 8);
        if (D->limit_slot[r] != SPYRE_NONE) rd(c, D->limit_slot[r], 8);
        if (D->vec_slot[r] != SPYRE_NONE) rd(c, D->vec_slot[r], 8 * (uint64_t)D->shape[r]);
    }
}

static uint64_t desc_elems(const spyre_desc *D) {
    uint64_t total = 1;
    for (int r = 0; r < D->rank; r++) total *= (uint64_t)D->shape[r];
    return total;
}

/* What the instruction reads and writes in the arena, from the opcode's operand table (isa.Role).
 * View register operands name no arena bytes (I's view operands are already their fallback tiles),
 * and tcopy's strided source is added by its cost class. */
static void operand_traffic(const SpyDInsn *I, Cost *c) {
    const spyre_opcode_info *info = &spyre_opcodes[I->op];
    const spyre_desc *D = (const spyre_desc *)I->p;
    const uint64_t total = D ? desc_elems(D) : 0;
    for (int i = 0; i < info->n_operands; i++) {
        const spyre_operand *o = &info->operands[i];
        if (o->kind == OK_D) {
            if (o->size == SZ_DESC_REGS) rd_desc_regs(c, D);
            else if (o->size == SZ_DESC_BOUNDS) rd_limits(c, D);
            continue;
        }
        if (o->kind == OK_W || o->kind == OK_WOPT || o->size == SZ_SPAN || o->size == SZ_NONE) continue;
        const uint64_t bytes = (uint64_t)spy_operand_bytes(I, o, total);
        if (o->access == ACC_R) rd(c, spy_field(I, o->field), bytes);
        else if (o->access == ACC_W) wr(c, spy_field(I, o->field), bytes);
    }
}

/* The modelled unit of an instruction: its ISA unit (isa.UNITS); the DMA engine's two directions are
 * separate units (into LX: ld, gather; out of it: st, scatter, atomics) */
static int unit_of(const SpyDInsn *I) {
    switch (spyre_opcode_unit[I->op]) {
    case UNIT_VECTOR: return PU_VECTOR;
    case UNIT_SFU: return PU_SFU;
    case UNIT_PE: return PU_PE;
    case UNIT_DMA: return I->kind == K_LD || I->kind == K_GATHER ? PU_DMA_IN : PU_DMA_OUT;
    }
    return PU_SCALAR; /* the sequencer: control and scalar */
}

/* Cycles per SFU lane of a function of cost class cls (isa.SFU_COST_CLASSES) */
static double sfu_pass_cycles(const SpyPerfCfg *C, int cls) {
    switch (cls) {
    case SFU_RECIPROCAL: return C->sfu_reciprocal_cost;
    case SFU_TRANSCENDENTAL: return C->transcendental_cost;
    case SFU_COMPOUND: return C->sfu_compound_cost;
    case SFU_SPECIAL: return C->sfu_special_cost;
    default: return 1;
    }
}

/* ---- the model of one instruction ----------------------------------------------------------------- */
static void cost_of(SpyExec *X, SpyPerfProg *pp, const SpyDInsn *I, Cost *c) {
    const SpyPerfCfg *C = &pp->PL->cfg;
    const SpyKernel *k = X->k;
    SpyDInsn V;
    if (I->views) { /* the hardware moves the tile through LX: model the view's fallback tile */
        V = *I;
        if (V.views & 1) V.a = k->view_fallback[V.a];
        if (V.views & 2) V.b = k->view_fallback[V.b];
        if (V.views & 4) V.c = k->view_fallback[V.c];
        if (V.views & 8) V.d = k->view_fallback[V.d];
        I = &V;
    }
    const spyre_opcode_info *info = &spyre_opcodes[I->op];
    const uint8_t *A = X->A;
    uint64_t *cnt = pp->cnt;
    const uint32_t w = I->flags;
    const uint64_t n = I->n, es = I->es;
    const double stick = C->stick_bytes;
    c->unit = PU_SCALAR;
    c->seq = C->issue_cycles;
    c->occ = c->lat = 1;
    if (info->cost == COST_NONE) { /* sequencer bookkeeping, or the interpreter's copy elision (view) */
        c->barrier = I->op == OP_BARRIER;
        return;
    }
    operand_traffic(I, c);
    c->unit = unit_of(I);
    /* vector work on elements of the widest dtype it touches */
    const unsigned wes = I->des > I->ses ? I->des : I->ses;
    const uint64_t flops = is_float(I->t) ? info->flops * n : 0;
    switch (info->cost) {
    case COST_BRANCH:
        c->seq = c->occ = c->lat = C->branch_cycles;
        cnt[PC_branches]++;
        return;
    case COST_SCALAR: /* pid and nprog count as scalar operations; print and assert are debugging */
        if (I->op == OP_PID || I->op == OP_NPROG) cnt[PC_scalar_ops]++;
        return;
    case COST_VECTOR:
    case COST_DIVIDE:
        if (I->a < k->sreg_bytes && n <= 1) { /* a one-element result in a scalar register: the scalar unit */
            c->unit = PU_SCALAR;
            cnt[PC_scalar_ops]++;
            if (info->cost == COST_DIVIDE && C->divide_cost > 1) c->occ = C->divide_cost;
            c->lat = c->occ;
            return;
        }
        c->occ = vcycles(C, C->vector_lanes, n, wes, info->cost == COST_DIVIDE ? C->divide_cost : 1);
        cnt[PC_vector_flops] += flops;
        cnt[PC_vector_elems] += n;
        c->lat = c->occ + C->vector_latency;
        return;
    case COST_TILE:
        c->occ = vcycles(C, C->vector_lanes, n, (unsigned)es, 1);
        cnt[PC_vector_elems] += n;
        c->lat = c->occ + C->vector_latency;
        return;
    case COST_PERMUTE: {
        const spyre_desc *D = (const spyre_desc *)I->p;
        const uint64_t total = desc_elems(D);
        int64_t lo = 0, hi = 0;
        for (int r = 0; r < D->rank; r++) {
            const int64_t ext = D->stride[r] * (D->shape[r] - 1) * (int64_t)es;
            if (ext < 0) lo += ext;
            else hi += ext;
        }
        if (total) rd(c, (uint32_t)((int64_t)I->b + lo), (uint64_t)(hi - lo) + es);
        /* a permuting copy moves element by element: permute_cost (2) times a stick-wise one */
        int inner_unit = 1;
        for (int r = D->rank - 1; r >= 0; r--) {
            if (D->shape[r] == 1) continue;
            inner_unit = D->stride[r] == 1 || D->stride[r] == 0;
            break;
        }
        c->occ = vcycles(C, C->vector_lanes, total, (unsigned)es, inner_unit ? 1 : C->permute_cost);
        cnt[PC_vector_elems] += total;
        c->lat = c->occ + C->vector_latency;
        return;
    }
    case COST_SFU: {
        const int cls = I->op == OP_MATH1 ? spyre_math1_cost_class[F_MATH1_FN(w)] : spyre_math2_cost_class[F_MATH2_FN(w)];
        const int cheap = cls == SFU_CHEAP;
        c->occ = vcycles(C, C->sfu_lanes, n, wes, sfu_pass_cycles(C, cls));
        cnt[PC_sfu_elems] += n;
        if (!cheap) cnt[PC_transcendental_elems] += n;
        cnt[PC_vector_flops] += info->flops * n;
        c->lat = c->occ + C->vector_latency;
        return;
    }
    case COST_REDUCE: {
        const uint64_t total = (uint64_t)I->c * I->d * I->e;
        /* a pass over the input, then a tree over the lanes: log2(len) more pipeline trips */
        c->occ = vcycles(C, C->vector_lanes, total, (unsigned)es, 1);
        c->lat = c->occ + C->vector_latency * (1 + ceil(log2((double)(I->d > 1 ? I->d : 1))));
        cnt[PC_vector_elems] += total;
        if (is_float(I->t)) cnt[PC_vector_flops] += info->flops * total;
        return;
    }
    case COST_PE: {
        const uint64_t M = I->e >> 16, N = I->e & 0xFFFF, K = I->n;
        const uint64_t B = F_DOT_BATCH(w) ? F_DOT_BATCH(w) : 1;
        const double R = C->pe_rows, Cc = C->pe_cols, S = C->pe_simd;
        const double mp = ceil((double)M / R), np = ceil((double)N / Cc), kp = ceil((double)K / S);
        const double passes = (double)B * mp; /* passes of pe_rows rows of A through the array */
        const double per_corelet = ceil(passes / C->corelets) * np * kp / pe_rate_of(C, I->t2);
        c->occ = c->lat = (per_corelet + C->pe_fill_drain) / C->pe_sustained;
        cnt[PC_dots]++;
        cnt[PC_macs] += B * M * N * K;
        cnt[PC_pe_macs_padded] += (uint64_t)(passes * R * np * Cc * kp * S);
        return;
    }
    case COST_DMA: {
        const int ld = I->kind == K_LD;
        const spyre_desc *D = (const spyre_desc *)I->p;
        const uint64_t base = *(const sp_u64 *)(A + (ld ? I->b : I->a));
        const uint8_t *mask = I->d != SPYRE_NONE ? A + I->d : NULL;
        const int bcm = ld ? F_LD_BC_MASK(w) : F_ST_BC_MASK(w);
        c->dma_write = ld;
        DmaAmt m;
        desc_amount(A, D, base, es, mask, bcm, (uint64_t)stick, &m);
        const double bpc = ld ? C->read_bytes_per_cycle : C->write_bytes_per_cycle;
        c->occ = (double)m.moved / bpc * (m.transposed ? C->transpose_cost : 1.0);
        if (c->occ < 1) c->occ = 1;
        c->lat = c->occ + C->dma_latency;
        cnt[PC_dma_ops]++;
        cnt[ld ? PC_dma_read_bytes : PC_dma_write_bytes] += m.moved;
        cnt[ld ? PC_dma_read_useful : PC_dma_write_useful] += m.useful;
        cnt[m.strided ? PC_dma_strided_bytes : PC_dma_contig_bytes] += m.useful;
        return;
    }
    case COST_GATHER: {
        const int g = I->kind == K_GATHER;
        const uint32_t addr = g ? I->b : I->a, moff = I->c;
        const int bca = g ? F_GATHER_BC_ADDR(w) : F_SCATTER_BC_ADDR(w);
        const int bcm = g ? F_GATHER_BC_MASK(w) : F_SCATTER_BC_MASK(w);
        c->dma_write = g;
        uint64_t act, sticks;
        list_amount(A + addr, bca, moff != SPYRE_NONE ? A + moff : NULL, bcm, n, es, (uint64_t)stick, &act, &sticks);
        const double bpc = g ? C->read_bytes_per_cycle : C->write_bytes_per_cycle;
        c->occ = (double)sticks * stick / bpc + (double)act * C->gather_cycles;
        if (c->occ < 1) c->occ = 1;
        c->lat = c->occ + C->dma_latency;
        cnt[PC_dma_ops]++;
        cnt[g ? PC_dma_read_bytes : PC_dma_write_bytes] += sticks * (uint64_t)stick;
        cnt[g ? PC_dma_read_useful : PC_dma_write_useful] += act * es;
        cnt[PC_dma_gather_bytes] += act * es;
        return;
    }
    case COST_ATOMIC: {
        const int cas = I->kind == K_ACAS;
        const int bca = cas ? F_ACAS_BC_ADDR(w) : F_ATOM_BC_ADDR(w);
        const uint32_t moff = cas ? SPYRE_NONE : I->d;
        const int bcm = cas ? 0 : F_ATOM_BC_MASK(w);
        uint64_t act, sticks;
        list_amount(A + I->b, bca, moff != SPYRE_NONE ? A + moff : NULL, bcm, n, es, (uint64_t)stick, &act, &sticks);
        /* each element is a read-modify-write at the memory controller: a stick each way */
        c->occ = (double)act * C->atomic_cycles + (double)act * stick / C->write_bytes_per_cycle;
        if (c->occ < 1) c->occ = 1;
        c->lat = c->occ + 2 * C->dma_latency; /* the old value comes back */
        cnt[PC_dma_ops]++;
        cnt[PC_atomics] += act;
        cnt[PC_dma_read_bytes] += act * (uint64_t)stick;
        cnt[PC_dma_write_bytes] += act * (uint64_t)stick;
        cnt[PC_dma_read_useful] += act * es;
        cnt[PC_dma_write_useful] += act * es;
        cnt[PC_dma_gather_bytes] += act * es;
        return;
    }
    }
}

/* Add the busy interval [s, e) to a union. `settled`: no interval added later starts before it
 * (instructions dispatch in order), so spans ending by then can no longer grow. */
static void spans_add(SpyPerfSpans *S, double s, double e, double settled) {
    if (e <= s) return;
    uint32_t j = 0;
    for (uint32_t i = 0; i < S->n; i++) {
        if (S->e[i] <= settled) {
            S->done += S->e[i] - S->s[i];
        } else if (S->e[i] < s || S->s[i] > e) {
            S->s[j] = S->s[i], S->e[j] = S->e[i], j++;
        } else { /* touches [s, e): merge */
            if (S->s[i] < s) s = S->s[i];
            if (S->e[i] > e) e = S->e[i];
        }
    }
    S->n = j;
    if (S->n == SPY_PERF_SPANS) { /* 64 disjoint spans in flight: settle the earliest-ending one now */
        uint32_t m = 0;
        for (uint32_t i = 1; i < S->n; i++)
            if (S->e[i] < S->e[m]) m = i;
        S->done += S->e[m] - S->s[m];
        S->s[m] = S->s[S->n - 1], S->e[m] = S->e[S->n - 1], S->n--;
    }
    S->s[S->n] = s, S->e[S->n] = e, S->n++;
}

static double spans_total(const SpyPerfSpans *S) {
    double t = S->done;
    for (uint32_t i = 0; i < S->n; i++) t += S->e[i] - S->s[i];
    return t;
}

void spy_perf_insn(SpyExec *X, const SpyDInsn *I, uint32_t pc) {
    if (I->kind == K_HALT) return;
    SpyPerfProg *pp = X->pp;
    const SpyKernel *k = X->k;
    Cost c;
    c.nr = 0;
    c.w_len = 0;
    c.w_off = 0;
    c.dma_write = 0;
    c.barrier = 0;
    pp->cnt[PC_insns]++;
    cost_of(X, pp, I, &c);

    /* scalar and control instructions execute on the sequencer; the others wait in their unit's
     * queue, and the sequencer waits only when that queue is full */
    const int queued = c.unit != PU_SCALAR;
    double dispatch = pp->issue;
    double *qslot = NULL;
    if (queued) {
        qslot = &pp->qstart[c.unit][pp->qn[c.unit] % pp->qdepth];
        if (*qslot > dispatch) dispatch = *qslot;
    }
    double start = dispatch;
    if (pp->unit_free[c.unit] > start) start = pp->unit_free[c.unit];
    if (c.barrier && pp->end > start) start = pp->end;
    for (int i = 0; i < c.nr; i++)
        FOR_GRANS(pp, k, c.r_off[i], c.r_len[i], G, if (G->ready > start) start = G->ready);
    const int dbuf = c.dma_write && pp->PL->cfg.double_buffer != 0;
    if (c.w_len)
        FOR_GRANS(pp, k, c.w_off, c.w_len, G, {
            const double free_at = dbuf ? G->dma_prev : (G->read > G->ready ? G->read : G->ready);
            if (free_at > start) start = free_at;
        });
    const double busy_end = start + c.occ, done = start + c.lat;
    pp->unit_free[c.unit] = busy_end;
    pp->busy[c.unit] += c.occ;
    if (c.unit != PU_SCALAR) {
        spans_add(c.unit == PU_DMA_IN || c.unit == PU_DMA_OUT ? &pp->dma : &pp->compute, start, busy_end, dispatch);
        spans_add(&pp->either, start, busy_end, dispatch);
    }
    /* a tile is read while the unit works on it; a scalar operand is latched when the instruction
     * leaves the sequencer (or when it becomes ready, if later) */
    for (int i = 0; i < c.nr; i++) {
        if (c.r_off[i] < k->sreg_bytes) {
            FOR_GRANS(pp, k, c.r_off[i], c.r_len[i], G, {
                const double t = G->ready > dispatch ? G->ready : dispatch;
                if (G->read < t) G->read = t;
            });
        } else {
            FOR_GRANS(pp, k, c.r_off[i], c.r_len[i], G, if (G->read < busy_end) G->read = busy_end);
        }
    }
    if (c.w_len)
        FOR_GRANS(pp, k, c.w_off, c.w_len, G, {
            if (c.dma_write) G->dma_prev = G->read > G->ready ? G->read : G->ready;
            G->read = 0;
            G->ready = done;
        });
    if (queued) {
        *qslot = start;
        pp->qn[c.unit]++;
        pp->issue = dispatch + c.seq;
    } else {
        pp->issue = start + c.seq;
    }
    if (done > pp->end) pp->end = done;
    if (pp->ev && pp->nev < pp->evcap) {
        SpyPerfEvent *e = &pp->ev[pp->nev++];
        e->pc = pc;
        e->unit = (uint32_t)c.unit;
        e->start = start;
        e->busy_end = busy_end;
        e->done = done;
    }
}

int spy_perf_prog_begin(SpyExec *X, SpyPerfProg *pp, uint64_t p) {
    SpyCore *core = X->core;
    if (!core->pgran) {
        core->pgran = calloc(SPY_PERF_GRANS, sizeof(SpyPerfGran));
        if (!core->pgran) return -1;
        core->pgen = 0;
    }
    if (++core->pgen == 0) { /* wrapped: forget every stamp */
        memset(core->pgran, 0, SPY_PERF_GRANS * sizeof(SpyPerfGran));
        core->pgen = 1;
    }
    const SpyPerfLaunch *PL = X->L->perf;
    memset(pp, 0, sizeof *pp);
    pp->PL = PL;
    pp->g = core->pgran;
    pp->gen = core->pgen;
    const double q = PL->cfg.queue_depth;
    pp->qdepth = q < 1 ? 1 : q > SPY_PERF_QMAX ? SPY_PERF_QMAX : (uint32_t)q;
    if (p < PL->trace_programs) {
        pp->ev = PL->events + p * PL->trace_events;
        pp->evcap = PL->trace_events;
    }
    X->pp = pp;
    return 0;
}

void spy_perf_prog_end(SpyExec *X, uint64_t p) {
    SpyPerfProg *pp = X->pp;
    SpyPerfLaunch *PL = X->L->perf;
    SpyPerfProgRes *r = &PL->progs[p];
    r->cycles = pp->end > pp->issue ? pp->end : pp->issue;
    for (int u = 0; u < PU_COUNT; u++) r->busy[u] = (float)pp->busy[u];
    const double dma = spans_total(&pp->dma), compute = spans_total(&pp->compute);
    const double overlap = dma + compute - spans_total(&pp->either);
    r->extra[PX_READ_BYTES] = (float)pp->cnt[PC_dma_read_bytes];
    r->extra[PX_WRITE_BYTES] = (float)pp->cnt[PC_dma_write_bytes];
    r->extra[PX_DMA_CYCLES] = (float)dma;
    r->extra[PX_COMPUTE_CYCLES] = (float)compute;
    r->extra[PX_OVERLAP_CYCLES] = (float)(overlap > 0 ? overlap : 0);
    for (int i = 0; i < PC_COUNT; i++)
        if (pp->cnt[i]) atomic_fetch_add_explicit(&PL->counters[i], pp->cnt[i], memory_order_relaxed);
    if (pp->ev) PL->nevents[p] = pp->nev;
}

void spy_perf_schedule(const SpyPerfLaunch *PL, int ncores, uint16_t *core_of, double *start, double *core_cycles,
                       double *core_busy, double *core_extra) {
    for (int c = 0; c < ncores; c++) {
        core_cycles[c] = 0;
        for (int u = 0; u < PU_COUNT; u++) core_busy[c * PU_COUNT + u] = 0;
        for (int x = 0; x < PX_COUNT; x++) core_extra[c * PX_COUNT + x] = 0;
    }
    for (uint64_t p = 0; p < PL->nprogs; p++) {
        int best = 0;
        for (int c = 1; c < ncores; c++)
            if (core_cycles[c] < core_cycles[best]) best = c;
        core_of[p] = (uint16_t)best;
        start[p] = core_cycles[best];
        core_cycles[best] += PL->progs[p].cycles;
        for (int u = 0; u < PU_COUNT; u++) core_busy[best * PU_COUNT + u] += PL->progs[p].busy[u];
        for (int x = 0; x < PX_COUNT; x++) core_extra[best * PX_COUNT + x] += PL->progs[p].extra[x];
    }
}
