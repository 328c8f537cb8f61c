/* Decode, validation and the dispatch loop.
 *
 * A binary is decoded once, when it is loaded: every instruction is checked (opcode, dtypes, the
 * arena extent of every operand, label/constant/descriptor/string indexes) and resolved to a
 * SpyDInsn holding the typed loop to call, so the loop below is a switch over a handful of
 * instruction kinds with no further checks. Because operand offsets and element counts are
 * immediates, every LX access is validated here, statically; only device memory is checked while
 * running (dma.c).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp.h"
#include "interp.h"
#include "print.h"

/* ---- kernels ----------------------------------------------------------------------------------- */
SpyKernel *spy_kernel_new(void) { return calloc(1, sizeof(SpyKernel)); }

void spy_kernel_free(SpyKernel *k) {
    if (!k) return;
    free(k->name);
    free(k->code);
    free(k->consts);
    free(k->descs);
    for (uint32_t i = 0; i < k->n_strings; i++) free(k->strings[i]);
    free(k->strings);
    for (uint32_t i = 0; i < k->n_locs; i++) {
        free(k->locs[i].file);
        free(k->locs[i].text);
    }
    free(k->locs);
    free(k->insn_loc);
    for (uint32_t i = 0; i < k->n_args; i++) free(k->args[i].name);
    free(k->args);
    free(k);
}

static int is_int(int dt) { return dt >= DT_I1 && dt <= DT_I64; }
static int is_arith_float(int dt) { return dt >= DT_F16 && dt <= DT_F64; }

typedef struct {
    const SpyKernel *k;
    uint32_t i;
    const spyre_insn *in;
    char *err;
    size_t errlen;
} Ctx;

static int fail(Ctx *c, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "instruction %u (%s.%s): %s", c->i, spyre_opcode_names[c->in->op],
             spyre_dtype_names[c->in->t], msg);
    return -1;
}

/* value operand `off` covering nbytes */
static int need_v(Ctx *c, const char *what, uint32_t off, unsigned __int128 nbytes) {
    if (off == SPYRE_NONE) return fail(c, "operand %s is required", what);
    if ((unsigned __int128)off + nbytes > c->k->arena_bytes)
        return fail(c, "operand %s at arena offset %u (%llu bytes) is outside the arena of %zu bytes", what, off,
                    (unsigned long long)(nbytes > UINT64_MAX ? UINT64_MAX : (uint64_t)nbytes), c->k->arena_bytes);
    return 0;
}
static int need_opt(Ctx *c, const char *what, uint32_t off, unsigned __int128 nbytes) {
    return off == SPYRE_NONE ? 0 : need_v(c, what, off, nbytes);
}
static int need_s(Ctx *c, const char *what, uint32_t off) { return need_v(c, what, off, SPYRE_SREG_BYTES); }
/* view register `v` read or written over nbytes: some instruction sets it, and each one that does
 * provides at least nbytes (device memory or its fallback tile) */
static int need_view(Ctx *c, const char *what, uint32_t v, unsigned __int128 nbytes) {
    if (v >= c->k->n_views || !c->k->view_set[v])
        return fail(c, "operand %s: view register v%u is set by no ld or view instruction", what, v);
    if (nbytes > c->k->view_bytes[v])
        return fail(c, "operand %s: %llu bytes through view register v%u, which covers %llu", what,
                    (unsigned long long)(nbytes > UINT64_MAX ? UINT64_MAX : (uint64_t)nbytes), v,
                    (unsigned long long)c->k->view_bytes[v]);
    return 0;
}
/* the operand in field f (0 = a .. 3 = d) of an opcode that takes view registers */
static int need_vf(Ctx *c, const char *what, int f, uint32_t off, unsigned __int128 nbytes) {
    if (!((c->in->flags >> (SPYRE_VIEW_SHIFT + f)) & 1)) return need_v(c, what, off, nbytes);
    if (off < SPYRE_MAX_VIEWS && c->k->view_rows[off] && c->in->op != OP_DOT &&
        !(c->in->op == OP_RED && (O_RED_OUTER(c->in) == 1 || O_RED_INNER(c->in) == 1)))
        return fail(c, "operand %s: view register v%u may hold strided rows (ld rows), which only a dot or a red "
                    "over a 2-D source reads", what, off);
    return need_view(c, what, off, nbytes);
}
static int need_label(Ctx *c, uint32_t target) {
    if (target > c->k->n_insns) return fail(c, "label %u is outside the program (%u instructions)", target, c->k->n_insns);
    return 0;
}
static int need_str(Ctx *c, uint32_t s) {
    if (s >= c->k->n_strings) return fail(c, "string index %u out of range (%u strings)", s, c->k->n_strings);
    return 0;
}
static int need_desc(Ctx *c, uint32_t d, unsigned __int128 *total) {
    if (d >= c->k->n_descs) return fail(c, "descriptor index %u out of range (%u descriptors)", d, c->k->n_descs);
    const spyre_desc *D = &c->k->descs[d];
    unsigned __int128 t = 1;
    for (int r = 0; r < D->rank; r++) {
        t *= (unsigned __int128)(uint64_t)D->shape[r];
        if (t > ((unsigned __int128)1 << 40)) t = (unsigned __int128)1 << 40; /* saturate: fails extent checks */
    }
    *total = t;
    return 0;
}

/* ---- elementwise instructions: one typed loop each ------------------------------------------- */
/* The loop families, by the kind the table gives (the number of tile sources); v: bit k set when
 * source k is broadcast. Which family within the kind is the opcode's, and its flags pick the loop. */
static int elementwise_un(Ctx *c, SpyDInsn *D) {
    const uint32_t w = D->flags;
    if (D->op == OP_MATH1) {
        if (F_MATH1_FN(w) >= MATH1_COUNT) return fail(c, "unknown math1 function %u", F_MATH1_FN(w));
        D->fn = (void *)spy_k_math1((int)F_MATH1_FN(w), D->t);
    } else if (D->op == OP_CVT) {
        const int mode = (int)F_CVT_MODE(w);
        if (mode >= CVT_COUNT) return fail(c, "unknown conversion mode %d", mode);
        D->fn = (void *)spy_k_cvt_direct(mode, D->t, D->t2);
        if (D->fn) return 0;
        /* no direct loop for the pair: through a 64-bit intermediate */
        spy_rd_fn rd;
        spy_wr_fn wr;
        if (spy_k_cvt_generic(mode, D->t, D->t2, &rd, &wr) < 0)
            return fail(c, "cannot convert %s to %s with mode %d", spyre_dtype_names[D->t2], spyre_dtype_names[D->t],
                        mode);
        D->kind = K_CVT2;
        D->fn = (void *)rd;
        D->fn2 = (void *)wr;
    } else {
        D->fn = (void *)spy_k_unary(D->op, D->t);
    }
    return 0;
}

static int elementwise_bin(Ctx *c, SpyDInsn *D, int v) {
    const uint32_t w = D->flags;
    if (D->op == OP_CMPI || D->op == OP_CMPF) {
        D->fn = (void *)spy_k_cmp(D->op, (int)F_CMPI_PRED(w), D->t, v);
    } else if (D->op == OP_MATH2) {
        if (F_MATH2_FN(w) >= MATH2_COUNT) return fail(c, "unknown math2 function %u", F_MATH2_FN(w));
        D->fn = (void *)spy_k_math2((int)F_MATH2_FN(w), D->t, v);
    } else {
        D->fn = (void *)spy_k_binary(D->op, D->t, v);
    }
    return 0;
}

static int elementwise_tern(Ctx *c, SpyDInsn *D, int v) {
    const uint32_t w = D->flags;
    const int flag = D->op == OP_CLAMP ? (int)F_CLAMP_PROPAGATE_NAN(w) : D->op == OP_BINCHAIN ? (int)F_BINCHAIN_OPS(w) : 0;
    if (D->op == OP_BINCHAIN && flag >= BINCHAIN_COUNT)
        return fail(c, "ops flag %d names no pair of operations (0-%d)", flag, BINCHAIN_COUNT - 1);
    D->fn = (void *)spy_k_ternary(D->op, D->t, v, flag);
    return 0;
}

/* Element sizes and per-element steps of the sources from the operand table, then the typed loop,
 * chosen by which sources are broadcast. */
static int decode_elementwise(Ctx *c, SpyDInsn *D) {
    const spyre_opcode_info *info = &spyre_opcodes[D->op];
    int nsrc = 0, v = 0; /* bit k of v: source k is broadcast */
    for (int i = 0; i < info->n_operands; i++) {
        const spyre_operand *o = &info->operands[i];
        if (o->access == ACC_W) D->des = (uint8_t)spy_elem_bytes(D, o->size);
        if (o->access != ACC_R || o->kind != OK_V) continue;
        const uint8_t es = (uint8_t)spy_elem_bytes(D, o->size);
        const int bc = o->bc_shift >= 0 && ((D->flags >> o->bc_shift) & 1);
        if (nsrc == 0) D->ses = es;
        D->sstep[nsrc] = bc ? 0 : es;
        v |= bc << nsrc;
        nsrc++;
    }
    if (v == (1 << nsrc) - 1) D->bcall = 1, v = 0; /* every source broadcast: one element, then a fill */
    const int r = D->kind == K_UN ? elementwise_un(c, D) : D->kind == K_BIN ? elementwise_bin(c, D, v)
                                                                              : elementwise_tern(c, D, v);
    if (r < 0) return -1;
    if (!D->fn) return fail(c, "not supported for dtype %s", spyre_dtype_names[D->t]);
    return 0;
}

/* ---- every operand, by the table --------------------------------------------------------------- */
/* Every operand's index or arena extent, by the opcode's operand table (isa.Role, isa_gen.h).
 * *desc_total: the element count of its descriptor, if it takes one. */
static int check_operands(Ctx *c, const SpyDInsn *D, unsigned __int128 *desc_total) {
    const spyre_opcode_info *info = &spyre_opcodes[D->op];
    unsigned __int128 total = 0; /* the descriptor's elements: it sizes the other operands */
    if (info->desc_field >= 0 && need_desc(c, spy_field(D, info->desc_field), &total) < 0) return -1;
    *desc_total = total;
    for (int i = 0; i < info->n_operands; i++) {
        const spyre_operand *o = &info->operands[i];
        const uint32_t v = spy_field(D, o->field);
        const unsigned __int128 bytes = spy_operand_bytes(D, o, total);
        switch (o->kind) {
        case OK_K:
            if (v >= c->k->n_consts) return fail(c, "constant index %u out of range (%u constants)", v, c->k->n_consts);
            break;
        case OK_L:
            if (need_label(c, v) < 0) return -1;
            break;
        case OK_STR:
            if (need_str(c, v) < 0) return -1;
            break;
        case OK_S:
            if (need_s(c, o->name, v) < 0) return -1;
            break;
        case OK_VOPT:
            if (v == SPYRE_NONE) break;
            /* fall through */
        case OK_V:
            if (o->size == SZ_SPAN) break;             /* tcopy's source: checked with its strides */
            if (D->op == OP_PRINT && !D->n) break;     /* a print of no value names no tile */
            if ((info->view_mask >> o->field) & 1) {
                if (need_vf(c, o->name, o->field, v, bytes) < 0) return -1;
            } else if (need_v(c, o->name, v, bytes) < 0) {
                return -1;
            }
            break;
        case OK_WOPT:
        case OK_W:
            if (v == SPYRE_NONE && o->kind == OK_WOPT) break;
            if (D->op == OP_LD) break; /* its bytes are what find_views sized the register by */
            if (need_view(c, o->name, v, bytes) < 0) return -1;
            break;
        }
    }
    return 0;
}

/* ---- the rules the operand table does not express ------------------------------------------------ */
/* The rules on view operands say more than their extents would: they are checked before them. */
static int rule_views(Ctx *c, const SpyDInsn *D) {
    if (D->op == OP_DOT && D->views && F_DOT_BATCH(D->flags) > 1)
        return fail(c, "a batched dot takes no view register operands");
    if (D->op == OP_ST && D->views && O_ST_VIEW(c->in) != SPYRE_NONE)
        return fail(c, "a st reading through a view register takes no view operand");
    return 0;
}

static int rule_no_offset_vectors(Ctx *c, const spyre_desc *Dd, const char *msg) {
    for (int r = 0; r < Dd->rank; r++)
        if (Dd->vec_slot[r] != SPYRE_NONE) return fail(c, "%s", msg);
    return 0;
}

static int rule_branch(Ctx *c, SpyDInsn *D) {
    if (!is_int(D->t) && !is_arith_float(D->t)) return fail(c, "branch condition must be an integer or float scalar");
    D->cond_float = is_arith_float(D->t);
    return 0;
}

static int rule_bmask(Ctx *c, SpyDInsn *D, unsigned __int128 total) {
    if (D->t != DT_I1) return fail(c, "bmask makes an i1 tile");
    D->n = (uint32_t)total; /* fits: dst's extent was checked */
    return rule_no_offset_vectors(c, D->p, "bmask takes no offset vectors");
}

/* bsel: n must be the descriptor's count. Any overlap of dst with a source other than dst == a (a
 * tile made just for this where, done in place) is computed aside: the bounds decide what is read where. */
static int rule_bsel(Ctx *c, SpyDInsn *D, unsigned __int128 total) {
    if (rule_no_offset_vectors(c, D->p, "bsel takes no offset vectors") < 0) return -1;
    if (total != D->n) return fail(c, "n is %u but the descriptor has %llu elements", D->n, (unsigned long long)total);
    const uint64_t n = D->n, es = D->es;
    for (int i = 0; i < 2; i++) {
        const int bc = i ? F_BSEL_BC3(D->flags) : F_BSEL_BC2(D->flags);
        const uint64_t lo = i ? D->d : D->c, hi = lo + (bc ? es : n * es);
        if (i == 0 && !bc && lo == D->a) continue;
        if (lo < (uint64_t)D->a + n * es && D->a < hi) D->via_tmp = 1;
    }
    return 0;
}

/* tcopy: constant strides only; the source's strided span inside the arena; a destination overlapping
 * it is written aside first. */
static int rule_tcopy(Ctx *c, SpyDInsn *D, unsigned __int128 total) {
    const spyre_desc *Dd = D->p;
    const __int128 es = D->es;
    if (total == 0) return 0;
    __int128 lo = 0, hi = 0;
    for (int r = 0; r < Dd->rank; r++) {
        if (Dd->stride_slot[r] != SPYRE_NONE) return fail(c, "tcopy strides must be constants");
        if (Dd->limit_slot[r] != SPYRE_NONE) return fail(c, "tcopy descriptors take no bounds");
        if (Dd->vec_slot[r] != SPYRE_NONE) return fail(c, "tcopy descriptors take no offset vectors");
        const __int128 ext = (__int128)Dd->stride[r] * (__int128)(Dd->shape[r] - 1) * es;
        if (ext < 0) lo += ext;
        else hi += ext;
    }
    const uint32_t src = O_TCOPY_SRC(c->in);
    if (src == SPYRE_NONE || (__int128)src + lo < 0 || (__int128)src + hi + es > (__int128)c->k->arena_bytes)
        return fail(c, "tcopy source (offset %u, strides of descriptor %u) reaches outside the arena", src,
                    O_TCOPY_DESC(c->in));
    const __int128 dlo = O_TCOPY_DST(c->in), dhi = dlo + (__int128)(total * (unsigned __int128)es);
    if ((__int128)src + lo < dhi && dlo < (__int128)src + hi + es) D->via_tmp = 1;
    return 0;
}

/* red: the reduction's loop; in place (same offset) is safe, any other overlap is written aside
 * first. A source through a view register is device memory or a fallback tile, which the compiler
 * keeps apart from dst. */
static int rule_red(Ctx *c, SpyDInsn *D) {
    D->fn = (void *)spy_k_red((int)F_RED_OP(D->flags), D->t);
    if (!D->fn) return fail(c, "reduction %u not supported for dtype %s", F_RED_OP(D->flags), spyre_dtype_names[D->t]);
    if (D->views) return 0;
    const spyre_insn *in = c->in;
    const unsigned __int128 es = D->es, outer = O_RED_OUTER(in), len = O_RED_LEN(in), inner = O_RED_INNER(in);
    const unsigned __int128 dlo = O_RED_DST(in), dhi = dlo + outer * inner * es;
    const unsigned __int128 slo = O_RED_SRC(in), shi = slo + outer * len * inner * es;
    if (slo < dhi && dlo < shi && slo != dlo) D->via_tmp = 1;
    return 0;
}

/* ld/st: a descriptor's bounds replace the mask tile; both at once is refused */
static int rule_mask_or_bounds(Ctx *c, const SpyDInsn *D) {
    const uint32_t mask = D->kind == K_LD ? O_LD_MASK(c->in) : O_ST_MASK(c->in);
    const spyre_desc *Dd = D->p;
    if (mask == SPYRE_NONE) return 0;
    for (int r = 0; r < Dd->rank; r++)
        if (Dd->limit_slot[r] != SPYRE_NONE) return fail(c, "a descriptor with bounds takes no mask operand");
    return 0;
}

/* Each kind's rules beyond its operands' extents: dtypes, flag values, descriptors, overlaps. */
static int decode_rules(Ctx *c, SpyDInsn *D, unsigned __int128 desc_total) {
    const uint32_t w = D->flags;
    switch (D->kind) {
    case K_BRZ:
    case K_BRNZ: return rule_branch(c, D);
    case K_PID:
    case K_NPROG:
        if (O_PID_AXIS(c->in) > 2) return fail(c, "grid axis %u is not 0, 1 or 2", O_PID_AXIS(c->in));
        return 0;
    case K_CONST: D->imm = c->k->consts[O_CONST_VALUE(c->in)]; return 0;
    case K_IOTA:
        if (!is_int(D->t)) return fail(c, "iota needs an integer dtype");
        D->imm = (uint64_t)(int64_t)(int32_t)O_IOTA_START(c->in);
        return 0;
    case K_COPY: D->bcall = F_COPY_BC1(w); return 0;
    case K_BMASK: return rule_bmask(c, D, desc_total);
    case K_BSEL: return rule_bsel(c, D, desc_total);
    case K_TCOPY: return rule_tcopy(c, D, desc_total);
    case K_RED: return rule_red(c, D);
    case K_DOT:
        if (!spy_dot_supported(D->t, D->t2))
            return fail(c, "dot of %s inputs into %s is not supported", spyre_dtype_names[D->t2],
                        spyre_dtype_names[D->t]);
        return 0;
    case K_LD:
    case K_ST: return rule_mask_or_bounds(c, D);
    case K_ATOM:
        D->fn = (void *)spy_k_atom((int)F_ATOM_OP(w), D->t);
        if (!D->fn) return fail(c, "atomic op %u not supported for dtype %s", F_ATOM_OP(w), spyre_dtype_names[D->t]);
        return 0;
    case K_ACAS:
        if (!is_int(D->t) && !is_arith_float(D->t)) return fail(c, "atomic_cas needs an integer or float dtype");
        return 0;
    case K_PRINT: ((SpyKernel *)c->k)->has_print = 1; return 0;
    }
    return 0; /* nop, halt, jmp, view, gather, scatter, assert: their operands are all there is */
}

/* Decode instruction i into D: its kind, descriptor and operands from the table (isa_gen.h), then
 * the elementwise typed loop or the kind's own rules. */
static int decode_one(Ctx *c, SpyDInsn *D) {
    const spyre_insn *in = c->in;
    if (in->op >= OP_COUNT) {
        snprintf(c->err, c->errlen, "instruction %u: unknown opcode %u", c->i, in->op);
        return -1;
    }
    if (in->t >= DT_COUNT || in->t2 >= DT_COUNT) {
        snprintf(c->err, c->errlen, "instruction %u (%s): unknown dtype code %u", c->i, spyre_opcode_names[in->op],
                 in->t >= DT_COUNT ? in->t : in->t2);
        return -1;
    }
    const spyre_opcode_info *info = &spyre_opcodes[in->op];
    memset(D, 0, sizeof *D);
    D->op = in->op;
    D->kind = info->exec;
    D->t = in->t;
    D->t2 = in->t2;
    D->es = D->des = D->ses = spyre_dtype_bytes[in->t];
    D->flags = in->flags;
    D->a = in->a, D->b = in->b, D->c = in->c, D->d = in->d, D->e = in->e, D->n = in->n;
    D->views = (uint8_t)((in->flags >> SPYRE_VIEW_SHIFT) & info->view_mask);
    unsigned __int128 desc_total = 0;
    if (rule_views(c, D) < 0 || check_operands(c, D, &desc_total) < 0) return -1;
    if (info->desc_field >= 0) D->p = &c->k->descs[spy_field(D, info->desc_field)];
    if (info->n_src) return decode_elementwise(c, D);
    return decode_rules(c, D, desc_total);
}

/* An elementwise result written over a source it only partly coincides with (shifted, or with
 * another element size) would clobber inputs not yet read: such instructions compute into a
 * scratch buffer and copy. Exact in-place use (same offset and element size) needs no copy. */
static void mark_overlap(SpyDInsn *D) {
    if (D->bcall || D->n == 0) return;
    if (D->views & 1) return; /* a destination through a view register: checked when it runs */
    const spyre_opcode_info *info = &spyre_opcodes[D->op];
    if (!info->n_src) return; /* not elementwise: each kind's rule decided */
    const uint64_t dlo = D->a, dhi = dlo + (uint64_t)D->n * D->des;
    for (int i = 0; i < info->n_operands; i++) {
        const spyre_operand *o = &info->operands[i];
        if (o->access != ACC_R || o->kind != OK_V) continue;
        if (o->bc_shift >= 0 && ((D->flags >> o->bc_shift) & 1)) continue; /* one element, read first */
        if ((D->views >> o->field) & 1) continue;                          /* device memory or a fallback tile */
        const uint64_t es = spy_elem_bytes(D, o->size), lo = spy_field(D, o->field), hi = lo + (uint64_t)D->n * es;
        if (lo < dhi && dlo < hi && !(lo == dlo && es == D->des)) D->via_tmp = 1;
    }
}

/* The instructions that set view registers (ld with a view operand, view): each register's fallback
 * tile (the first setter's) and the fewest bytes any setter covers. Operands are checked later. */
static int find_views(SpyKernel *k, const uint8_t *insns, size_t n_insns, char *err, size_t errlen) {
    k->n_views = 0;
    for (size_t i = 0; i < n_insns; i++) {
        spyre_insn in;
        memcpy(&in, insns + i * sizeof(spyre_insn), sizeof in);
        uint32_t v, fallback, desc;
        if (in.op == OP_LD && O_LD_VIEW(&in) != SPYRE_NONE) v = O_LD_VIEW(&in), fallback = in.a, desc = O_LD_DESC(&in);
        else if (in.op == OP_VIEW) v = O_VIEW_VIEW(&in), fallback = O_VIEW_FALLBACK(&in), desc = O_VIEW_DESC(&in);
        else continue;
        if (v >= SPYRE_MAX_VIEWS || in.t >= DT_COUNT) {
            snprintf(err, errlen, "instruction %zu (%s): view register v%u is not below %d", i,
                     spyre_opcode_names[in.op], v, SPYRE_MAX_VIEWS);
            return -1;
        }
        if (desc >= k->n_descs) continue; /* reported when the instruction is decoded */
        uint64_t bytes = spyre_dtype_bytes[in.t];
        for (int r = 0; r < k->descs[desc].rank; r++) {
            const uint64_t ext = (uint64_t)k->descs[desc].shape[r];
            bytes = ext && bytes > UINT64_MAX / ext ? UINT64_MAX : bytes * ext;
        }
        if (in.op == OP_LD && F_LD_ROWS(in.flags)) k->view_rows[v] = 1;
        if (!k->view_set[v]) k->view_fallback[v] = fallback;
        if (!k->view_set[v] || bytes < k->view_bytes[v]) k->view_bytes[v] = bytes;
        k->view_set[v] = 1;
        if (v + 1 > k->n_views) k->n_views = v + 1;
    }
    return 0;
}

/* Address arithmetic and loop counters are one-element integer ops on scalar registers, and a row's
 * statistics (`mean = sum / N`, `var + eps`) one-element f32 ones: dispatching them through a typed
 * loop costs more than the op. Those whose operands are all (8-byte, owned) register slots run inline
 * instead; writing a whole slot is safe there, a reader of any width sees the same low bytes. */
static int is_slot(const SpyKernel *k, uint32_t off) { return off % SPYRE_SREG_BYTES == 0 && off < k->sreg_bytes; }
static uint8_t scalar_fast_path(const SpyKernel *k, const SpyDInsn *D) {
    if (D->n != 1 || D->views || D->via_tmp || !is_slot(k, D->a)) return D->kind;
    const int w64 = D->t == DT_I64, w32 = D->t == DT_I32;
    switch (D->kind) {
    case K_CONST: return D->t == DT_F16 ? D->kind : X_SCONST; /* f16 bits depend on the numerics mode */
    case K_COPY: return is_slot(k, D->b) ? X_SCOPY : D->kind;
    case K_UN:
        if (D->op == OP_CVT && F_CVT_MODE(D->flags) == CVT_SEXT && w64 && D->t2 == DT_I32 && is_slot(k, D->b))
            return X_SSEXT64;
        if (D->op == OP_MATH1 && F_MATH1_FN(D->flags) == MATH1_SQRT && D->t == DT_F32 && is_slot(k, D->b))
            return X_SSQRTF32; /* the typed loop's vm_sqrtf is the correctly rounded sqrt too */
        return D->kind;
    case K_BIN:
        if (!is_slot(k, D->b) || !is_slot(k, D->c)) return D->kind;
        if (D->t == DT_F32) switch (D->op) {
            case OP_ADD: return X_SADDF32;
            case OP_SUB: return X_SSUBF32;
            case OP_MUL: return X_SMULF32;
            case OP_DIVF: return X_SDIVF32;
            }
        if (!(w32 || w64)) return D->kind;
        switch (D->op) {
        case OP_ADD: return w64 ? X_SADD64 : X_SADD32;
        case OP_SUB: return w64 ? X_SSUB64 : X_SSUB32;
        case OP_MUL: return w64 ? X_SMUL64 : X_SMUL32;
        case OP_CMPI: return F_CMPI_PRED(D->flags) == ICMP_SLT ? (w64 ? X_SSLT64 : X_SSLT32) : D->kind;
        }
        return D->kind;
    }
    return D->kind;
}

/* The inline scalar operations (xk kinds, see scalar_fast_path) on register file A: one definition
 * for the dispatch loop and for the launch-invariant run below */
#define S64(off) (*(sp_u64 *)(A + (off)))
#define S32(off) (*(sp_u32 *)(A + (off)))
#define F32(off) (*(sp_f32 *)(A + (off)))
/* the typed loops' NaN rule (loops.c, NAN1): with NaN operands the result is the first one, quieted */
static inline float nan1_f32(float x, float y) { return x != x ? x : y; }
#define SCALAR_INLINE_OPS(X)                                                  \
    X(X_SADD64, S64(I->a) = S64(I->b) + S64(I->c))                            \
    X(X_SSUB64, S64(I->a) = S64(I->b) - S64(I->c))                            \
    X(X_SMUL64, S64(I->a) = S64(I->b) * S64(I->c))                            \
    X(X_SADD32, S32(I->a) = S32(I->b) + S32(I->c))                            \
    X(X_SSUB32, S32(I->a) = S32(I->b) - S32(I->c))                            \
    X(X_SMUL32, S32(I->a) = S32(I->b) * S32(I->c))                            \
    X(X_SSEXT64, S64(I->a) = (uint64_t)(int64_t)(int32_t)S32(I->b))           \
    X(X_SSLT32, A[I->a] = (int32_t)S32(I->b) < (int32_t)S32(I->c))            \
    X(X_SSLT64, A[I->a] = (int64_t)S64(I->b) < (int64_t)S64(I->c))            \
    X(X_SCOPY, S64(I->a) = S64(I->b))                                         \
    X(X_SCONST, S64(I->a) = I->imm)                                           \
    X(X_SADDF32, F32(I->a) = F32(I->b) + nan1_f32(F32(I->b), F32(I->c)))      \
    X(X_SSUBF32, F32(I->a) = F32(I->b) - F32(I->c))                           \
    X(X_SMULF32, F32(I->a) = F32(I->b) * nan1_f32(F32(I->b), F32(I->c)))      \
    X(X_SDIVF32, F32(I->a) = F32(I->b) / F32(I->c))                           \
    X(X_SSQRTF32, F32(I->a) = __builtin_sqrtf(F32(I->b)))

/* ---- launch invariants ------------------------------------------------------------------------- */
/* Every program of a launch starts from the same registers (arguments, constants), so an instruction
 * that reads and writes only registers, one element, computes the same value in all of them: the
 * leading run of such instructions (the constants, then what the compiler hoisted out of the program:
 * `N` sign-extended, `1 / N`) runs once per core and launch, and programs start after it. Elementwise
 * operations never fault (integer division by zero is defined), so running them early is safe. */
static int launch_invariant(const SpyKernel *k, const SpyDInsn *D) {
    if (D->xk > K_COUNT) return 1; /* the inline scalar ops: registers only, by construction */
    if (D->n != 1 || D->views || D->via_tmp || !is_slot(k, D->a) || !is_slot(k, D->b)) return 0;
    switch (D->kind) {
    case K_UN:
    case K_CVT2: return 1;
    case K_BIN: return is_slot(k, D->c);
    case K_TERN: return is_slot(k, D->c) && is_slot(k, D->d);
    }
    return 0;
}

static void run_invariant(uint8_t *A, const SpyDInsn *I) {
    switch (I->xk) {
#define INVARIANT_CASE(kind, stmt) \
    case kind: stmt; break;
        SCALAR_INLINE_OPS(INVARIANT_CASE)
#undef INVARIANT_CASE
    case K_UN: ((spy_un_fn)I->fn)(A + I->a, A + I->b, 1); break;
    case K_BIN: ((spy_bin_fn)I->fn)(A + I->a, A + I->b, A + I->c, 1); break;
    case K_TERN: ((spy_tern_fn)I->fn)(A + I->a, A + I->b, A + I->c, A + I->d, 1); break;
    case K_CVT2: spy_cvt_generic((spy_rd_fn)I->fn, (spy_wr_fn)I->fn2, I->des, I->ses, A + I->a, A + I->b, 1); break;
    }
}

/* The base argument of a DMA instruction (isa.BASE_ARG): a pointer argument of the kernel, or 0. */
static int decode_base_arg(Ctx *c, SpyDInsn *D) {
    const uint32_t arg = F_BASE_ARG(D->flags);
    if (arg > c->k->n_args || (arg && c->k->args[arg - 1].kind != ARG_PTR))
        return fail(c, "base argument %u is not a pointer argument of the kernel (it has %u arguments)", arg,
                    c->k->n_args);
    D->arg = (uint16_t)arg;
    return 0;
}

int spy_kernel_decode(SpyKernel *k, const uint8_t *insns, size_t n_insns, char *err, size_t errlen) {
    /* descriptors first: ranks and register strides */
    for (uint32_t d = 0; d < k->n_descs; d++) {
        const spyre_desc *D = &k->descs[d];
        if (D->rank < 0 || D->rank > SPYRE_MAX_RANK) {
            snprintf(err, errlen, "descriptor %u: rank %d is not in [0, %d]", d, D->rank, SPYRE_MAX_RANK);
            return -1;
        }
        for (int r = 0; r < D->rank; r++) {
            if (D->shape[r] < 0) {
                snprintf(err, errlen, "descriptor %u: negative extent %" PRId64, d, D->shape[r]);
                return -1;
            }
            if (D->stride_slot[r] != SPYRE_NONE && (uint64_t)D->stride_slot[r] + 8 > k->arena_bytes) {
                snprintf(err, errlen, "descriptor %u: stride register at arena offset %u is outside the arena", d,
                         D->stride_slot[r]);
                return -1;
            }
            if (D->vec_slot[r] != SPYRE_NONE &&
                (uint64_t)D->vec_slot[r] + 8 * (uint64_t)D->shape[r] > k->arena_bytes) {
                snprintf(err, errlen, "descriptor %u: offset vector at arena offset %u (%" PRId64
                         " entries) is outside the arena", d, D->vec_slot[r], D->shape[r]);
                return -1;
            }
            if (D->vec_slot[r] != SPYRE_NONE && D->vec_slot[r] % 8) {
                snprintf(err, errlen, "descriptor %u: offset vector at arena offset %u is not 8-byte aligned", d,
                         D->vec_slot[r]);
                return -1;
            }
            if (D->limit_slot[r] != SPYRE_NONE && (uint64_t)D->limit_slot[r] + 8 > k->arena_bytes) {
                snprintf(err, errlen, "descriptor %u: limit register at arena offset %u is outside the arena", d,
                         D->limit_slot[r]);
                return -1;
            }
        }
    }
    k->n_insns = (uint32_t)n_insns;
    if (find_views(k, insns, n_insns, err, errlen) < 0) return -1;
    k->code = calloc(n_insns + 1, sizeof(SpyDInsn));
    if (!k->code) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint32_t n_dma = 0;
    for (size_t i = 0; i < n_insns; i++) {
        spyre_insn in;
        memcpy(&in, insns + i * sizeof(spyre_insn), sizeof in);
        Ctx c = {k, (uint32_t)i, &in, err, errlen};
        SpyDInsn *D = &k->code[i];
        if (decode_one(&c, D) < 0) return -1;
        mark_overlap(D);
        D->xk = scalar_fast_path(k, D);
        /* numbered in program order, so that a kernel's first SPY_PF_SLOTS DMA instructions each have
         * their own entry (by address, two instructions 64 apart shared one: layer norm's two loads of a
         * row reset each other's stride predictor and check hint in every program) */
        const int dma = spyre_opcode_unit[D->op] == UNIT_DMA;
        if (dma) D->dma_slot = (uint8_t)(n_dma++ % SPY_PF_SLOTS);
        if (dma && decode_base_arg(&c, D) < 0) return -1;
    }
    k->code[n_insns].kind = k->code[n_insns].xk = K_HALT; /* falling off the end returns */
    k->n_prologue = 0;
    while (k->n_prologue < n_insns && launch_invariant(k, &k->code[k->n_prologue])) k->n_prologue++;
    k->code[n_insns].op = OP_COUNT; /* not an instruction of the program: not counted */
    return 0;
}

/* ---- the dispatch loop -------------------------------------------------------------------------- */
static inline int cond_nonzero(const uint8_t *p, const SpyDInsn *I) {
    if (I->cond_float) {
        switch (I->t) {
        case DT_F32: return *(const sp_f32 *)p != 0;
        case DT_F64: return *(const sp_f64 *)p != 0;
        default: return (*(const sp_u16 *)p & 0x7FFF) != 0;
        }
    }
    switch (I->es) {
    case 1: return I->t == DT_I1 ? (*p & 1) : *p != 0;
    case 2: return *(const sp_u16 *)p != 0;
    case 4: return *(const sp_u32 *)p != 0;
    default: return *(const sp_u64 *)p != 0;
    }
}

static inline uint8_t *core_tmp(SpyCore *c) {
    if (!c->tmp) c->tmp = malloc(SPYRE_ARENA_MAX + 64);
    return c->tmp;
}

/* Operands through view registers (elementwise instructions only): point them at what the registers
 * hold. Returns 1 when the destination partly overlaps a source (device memory can: a kernel may
 * write a shifted copy of what it reads), so the result is computed aside; exact in-place use is
 * fine, as in LX. */
static int resolve_views(const SpyExec *X, const SpyDInsn *I, uint8_t **out, const uint8_t **s1, const uint8_t **s2,
                         const uint8_t **s3) {
    const uint8_t v = I->views;
    if (v & 1) *out = X->view[I->a];
    if (v & 2) *s1 = X->view[I->b];
    if (v & 4) *s2 = X->view[I->c];
    if (v & 8) *s3 = X->view[I->d];
    if (I->bcall) return 0;
    const uintptr_t dlo = (uintptr_t)*out, dhi = dlo + (uintptr_t)I->n * I->des;
    const uint8_t *src[3] = {*s1, *s2, *s3};
    for (int i = 0; i < 3; i++) {
        const size_t es = I->sstep[i]; /* 0: broadcast or no such source (decode_elementwise) */
        if (!es) continue;
        const uintptr_t lo = (uintptr_t)src[i], hi = lo + (uintptr_t)I->n * es;
        if (lo < dhi && dlo < hi && !(lo == dlo && es == I->des)) return 1;
    }
    return I->via_tmp;
}

/* ---- streaming stores -------------------------------------------------------------------------- */
/* A launch whose elementwise results in device memory add up to more than the host's last-level cache
 * can hold gains nothing from caching them: each line would be read for ownership, overwritten and
 * evicted before anyone reads it. Such a result goes out with non-temporal stores, as a DMA engine
 * writes, past the caches (a vector add of 64 MB operands: a quarter less memory traffic). It is
 * computed a sub-tile at a time into a buffer that stays in L1 and copied out from there; the
 * sub-tile is small so that the loads of the next one overlap the stores of the last (a whole tile
 * computed aside, then copied, lost more than the stores saved). */
#define STREAM_SUB_BYTES 256 /* 256-1024 measured; 2048 lost most of the gain */
#define STREAM_MIN_INSN_BYTES 4096 /* smaller results per instruction: the sub-tiling is not worth it */

_Atomic uint64_t spy_stream_bytes = UINT64_MAX; /* UINT64_MAX: not yet read from the host */

uint64_t spy_stream_threshold(void) {
    uint64_t t = atomic_load_explicit(&spy_stream_bytes, memory_order_relaxed);
    if (t != UINT64_MAX) return t;
    const char *env = getenv("SPYRE_STREAM_STORES"); /* 0: never (for comparisons) */
    if (env && env[0] == '0' && env[1] == 0) {
        atomic_store(&spy_stream_bytes, 0);
        return 0;
    }
    /* sysfs first: in a VM, sysconf(_SC_LEVEL3_CACHE_SIZE) can report the host's (320 MB for 32 MB seen) */
    long long llc = -1;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        char unit = 0;
        if (fscanf(f, "%lld%c", &llc, &unit) >= 1) llc *= unit == 'K' ? 1024 : unit == 'M' ? 1048576 : 1;
        fclose(f);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (llc <= 0) llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    t = llc >= (1LL << 20) ? (uint64_t)llc : (32ull << 20); /* unknown: a common server LLC */
    atomic_store(&spy_stream_bytes, t);
    return t;
}

/* The per-instruction result size from which a launch of nprogs programs streams (UINT64_MAX: never) */
uint64_t spy_stream_insn_bytes(uint64_t nprogs) {
    const uint64_t t = spy_stream_threshold();
    if (t == 0 || nprogs == 0) return UINT64_MAX;
    const uint64_t per = t / nprogs;
    return per < STREAM_MIN_INSN_BYTES ? STREAM_MIN_INSN_BYTES : per;
}

#if defined(__x86_64__)
#include <emmintrin.h>
static void stream_copy(uint8_t *restrict d, const uint8_t *restrict s, size_t n) {
    const size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head >= n) {
        memcpy(d, s, n);
        return;
    }
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 16; d += 16, s += 16, n -= 16) _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    memcpy(d, s, n);
}
static void stream_fence(void) { _mm_sfence(); } /* the streamed lines are visible before what follows */
#else
static void stream_copy(uint8_t *restrict d, const uint8_t *restrict s, size_t n) { memcpy(d, s, n); }
static void stream_fence(void) {}
#endif

/* An elementwise instruction whose result is a view of device memory, in sub-tiles through an L1
 * buffer (see above). Sources advance by their element sizes unless broadcast; an exactly in-place
 * result is fine, as each sub-tile is read before it is written. */
static void stream_elementwise(SpyCore *core, const SpyDInsn *I, uint8_t *out, const uint8_t *s1, const uint8_t *s2,
                               const uint8_t *s3) {
    _Alignas(64) uint8_t buf[STREAM_SUB_BYTES];
    const size_t e1 = I->sstep[0], e2 = I->sstep[1], e3 = I->sstep[2];
    const size_t sub = STREAM_SUB_BYTES / I->des;
    for (size_t j = 0; j < I->n; j += sub) {
        const size_t m = I->n - j < sub ? I->n - j : sub;
        const uint8_t *a = s1 + j * e1, *b = s2 + j * e2, *c = s3 + j * e3;
        switch (I->kind) {
        case K_UN: ((spy_un_fn)I->fn)(buf, a, m); break;
        case K_BIN: ((spy_bin_fn)I->fn)(buf, a, b, m); break;
        case K_TERN: ((spy_tern_fn)I->fn)(buf, a, b, c, m); break;
        default: spy_cvt_generic((spy_rd_fn)I->fn, (spy_wr_fn)I->fn2, I->des, I->ses, buf, a, m); break;
        }
        stream_copy(out + j * I->des, buf, m * I->des);
    }
    stream_fence();
    core->streamed++;
}

#define POLL_EVERY 4096

/* Another core's fault (or Ctrl-C) stops this one at its next backward branch: a program without
 * loops runs to its end anyway, so the check stays out of the path of every other instruction. */
static inline int backward_stop(SpyLaunch *L, const SpyCore *core, uint32_t *polls) {
    if (atomic_load_explicit(&L->stop, memory_order_relaxed)) return 1;
    return core->poll && ++*polls % POLL_EVERY == 0 && core->poll(L);
}

/* The loop is compiled three ways from this one body: plain, counting instructions, and with the
 * performance model (perf.c) called before each instruction. The launch picks the variant once, so
 * a launch without the model runs exactly the plain loop. */
static inline __attribute__((always_inline)) int run_body(SpyExec *X, const int counting, const int profiling) {
    const SpyDInsn *const code = X->k->code;
    uint8_t *const A = X->A;
    SpyLaunch *const L = X->L;
    uint64_t *const counts = X->core->counts;
    uint32_t pc = X->pc, polls = 0;
    for (;;) {
        const SpyDInsn *I = code + pc;
        if (counting) counts[I->op]++;
        if (profiling) spy_perf_insn(X, I, pc);
        switch (I->xk) {
        case K_NOP: pc++; break;
        case K_HALT: return 0;
#define INLINE_CASE(kind, stmt) \
    case kind: stmt; pc++; break;
            SCALAR_INLINE_OPS(INLINE_CASE)
#undef INLINE_CASE
        case K_JMP:
            if (I->a <= pc && backward_stop(L, X->core, &polls)) return 1;
            pc = I->a;
            break;
        case K_BRZ:
        case K_BRNZ: {
            const int nz = cond_nonzero(A + I->a, I);
            if (nz == (I->kind == K_BRNZ)) {
                if (I->b <= pc && backward_stop(L, X->core, &polls)) return 1;
                pc = I->b;
            } else {
                pc++;
            }
            break;
        }
        case K_PID: {
            const uint64_t v = X->pid[I->b];
            memcpy(A + I->a, &v, 8);
            pc++;
            break;
        }
        case K_NPROG: {
            const uint64_t v = L->grid[I->b];
            memcpy(A + I->a, &v, 8);
            pc++;
            break;
        }
        case K_CONST: /* programs carry f16 constants as binary16 bits; in DLFloat16 mode f16 is DLFloat16 */
            spy_fill_bits(A + I->a, I->t == DT_F16 && SP_DL16() ? sp_f16_to_dl16((uint16_t)I->imm) : I->imm, I->es,
                          I->n);
            pc++;
            break;
        case K_IOTA: spy_iota(A + I->a, I->t, (int32_t)I->imm, I->n); pc++; break;
        case K_BMASK: spy_bmask(A + I->a, A, I); pc++; break;
        case K_COPY:
            if (I->bcall) {
                if (I->n) {
                    memmove(A + I->a, A + I->b, I->es);
                    spy_fill(A + I->a, I->es, I->n);
                }
            } else {
                memmove(A + I->a, A + I->b, (size_t)I->n * I->es);
            }
            pc++;
            break;
        case K_TCOPY:
        case K_BSEL:
        case K_RED: {
            spy_prefetch_drip(X->core);
            uint8_t *out = A + I->a;
            if (I->via_tmp && !(out = core_tmp(X->core))) {
                X->fault.kind = FAULT_NOMEM;
                X->pc = pc;
                return -1;
            }
            size_t nbytes;
            if (I->kind == K_TCOPY) {
                nbytes = spy_tcopy(out, A, I);
            } else if (I->kind == K_BSEL) {
                spy_bsel(out, A, I);
                nbytes = (size_t)I->n * I->es;
            } else {
                ((spy_red_fn)I->fn)(out, I->views ? X->view[I->b] : A + I->b, I->c, I->d, I->e,
                                    I->views ? X->view_ld[I->b] / I->es : 0);
                nbytes = (size_t)I->c * I->e * I->es;
            }
            if (I->via_tmp) memcpy(A + I->a, out, nbytes);
            pc++;
            break;
        }
#define ELEMENTWISE(CALL)                                                              \
    if (I->n) {                                                                        \
        uint8_t *out = A + I->a;                                                       \
        const uint8_t *s1 = A + I->b, *s2 = A + I->c, *s3 = A + I->d;                  \
        int tmp = I->via_tmp;                                                          \
        if (I->views) tmp = resolve_views(X, I, &out, &s1, &s2, &s3);                  \
        uint8_t *const final = out;                                                    \
        if (tmp && !(out = core_tmp(X->core))) {                                       \
            X->fault.kind = FAULT_NOMEM;                                               \
            X->pc = pc;                                                                \
            return -1;                                                                 \
        }                                                                              \
        const size_t n_ = I->bcall ? 1 : I->n;                                         \
        if ((I->views & 1) && !tmp && (size_t)I->n * I->des >= L->stream_insn_bytes && \
            !I->bcall && (uintptr_t)out - (uintptr_t)A >= SPYRE_ARENA_MAX) {           \
            stream_elementwise(X->core, I, out, s1, s2, s3); /* device memory */          \
            pc++;                                                                      \
            break;                                                                     \
        }                                                                              \
        spy_prefetch_drip(X->core);                                                    \
        CALL;                                                                          \
        if (I->bcall) spy_fill(out, I->des, I->n);                                     \
        if (tmp) memcpy(final, out, (size_t)I->n * I->des);                            \
    }                                                                                  \
    pc++;                                                                              \
    break;
        case K_UN: ELEMENTWISE(((spy_un_fn)I->fn)(out, s1, n_))
        case K_BIN: ELEMENTWISE(((spy_bin_fn)I->fn)(out, s1, s2, n_))
        case K_TERN: ELEMENTWISE(((spy_tern_fn)I->fn)(out, s1, s2, s3, n_))
        case K_CVT2:
            ELEMENTWISE(spy_cvt_generic((spy_rd_fn)I->fn, (spy_wr_fn)I->fn2, I->des, I->ses, out, s1, n_))
#undef ELEMENTWISE
        case K_DOT: {
            /* operands through view registers: device memory rows at the stride the ld found, or dense */
            const uint8_t *da = A + I->b, *db = A + I->c;
            size_t lda = 0, ldb = 0;
            if (I->views & 2) da = X->view[I->b], lda = X->view_ld[I->b] / spyre_dtype_bytes[I->t2];
            if (I->views & 4) db = X->view[I->c], ldb = X->view_ld[I->c] / spyre_dtype_bytes[I->t2];
            if (spy_dot(I->t, I->t2, A + I->a, da, db, I->d == SPYRE_NONE ? NULL : A + I->d, I->e >> 16, I->e & 0xFFFF,
                        I->n, lda, ldb, F_DOT_BATCH(I->flags), F_DOT_BT(I->flags), &X->core->scratch,
                        &X->core->scratch_cap) < 0) {
                X->fault.kind = FAULT_NOMEM;
                X->pc = pc;
                return -1;
            }
            pc++;
            break;
        }
#define DMA(KIND, FN)                  \
    case KIND:                         \
        if (FN(X, I) < 0) {            \
            X->pc = pc;                \
            return -1;                 \
        }                              \
        pc++;                          \
        break;
            DMA(K_LD, spy_dma_ld)
            DMA(K_ST, spy_dma_st)
        case K_VIEW: spy_dma_view(X, I); pc++; break;
            DMA(K_GATHER, spy_dma_gather)
            DMA(K_SCATTER, spy_dma_scatter)
            DMA(K_ATOM, spy_dma_atom)
            DMA(K_ACAS, spy_dma_acas)
#undef DMA
        case K_PRINT: spy_do_print(X, I); pc++; break;
        case K_ASSERT: {
            const uint8_t *cnd = A + I->a;
            const int bc = F_ASSERT_BC_COND(I->flags);
            for (uint32_t i = 0; i < I->n; i++) {
                if (!(cnd[bc ? 0 : i] & 1)) {
                    X->fault.kind = FAULT_ASSERT;
                    X->fault.str = I->b;
                    X->fault.elem = i;
                    X->pc = pc;
                    return -1;
                }
            }
            pc++;
            break;
        }
        case K_COUNT: return 0;
        default: __builtin_unreachable(); /* decode produces only the kinds above */
        }
    }
}

/* cache-line aligned, so code added elsewhere does not move the hot loop within its lines */
#define RUN_FN static __attribute__((noinline, aligned(64))) int
RUN_FN run_plain(SpyExec *X) { return run_body(X, 0, 0); }
RUN_FN run_counting(SpyExec *X) { return run_body(X, 1, 0); }
RUN_FN run_profiling(SpyExec *X) { return run_body(X, 0, 1); }
RUN_FN run_profiling_counting(SpyExec *X) { return run_body(X, 1, 1); }
#undef RUN_FN

/* ---- cores ------------------------------------------------------------------------------------- */
int spy_core_init(SpyCore *c) {
    memset(c, 0, sizeof *c);
    /* + 64: the three-source loops read element 0 of each source even when n is 0 */
    if (posix_memalign((void **)&c->arena, 64, SPYRE_ARENA_MAX + 64) != 0) {
        c->arena = NULL;
        return -1;
    }
    return 0;
}

void spy_core_free(SpyCore *c) {
    free(c->arena);
    free(c->scratch);
    free(c->tmp);
    free(c->pbuf);
    free(c->pgran);
    free(c->sregs0);
    memset(c, 0, sizeof *c);
}

/* The registers every program of this launch starts from, built once per core: zeros, the arguments,
 * and the prologue's constants. */
static int core_sregs0(SpyLaunch *L, SpyCore *core) {
    const SpyKernel *k = L->k;
    if (core->sregs0_launch == L->id) return 0;
    if (!core->sregs0 && !(core->sregs0 = malloc((size_t)SPYRE_SREGS_MAX * SPYRE_SREG_BYTES))) return -1;
    memset(core->sregs0, 0, k->sreg_bytes);
    for (uint32_t i = 0; i < L->nargv; i++) memcpy(core->sregs0 + L->argv[i].slot, &L->argv[i].bits, 8);
    for (uint32_t i = 0; i < k->n_prologue; i++) run_invariant(core->sregs0, &k->code[i]);
    core->sregs0_launch = L->id;
    return 0;
}

static int run_program(SpyLaunch *L, SpyCore *core, uint64_t p) {
    const SpyKernel *k = L->k;
    SpyExec X;
    X.A = core->arena;
    X.L = L;
    X.core = core;
    X.k = k;
    if (L->grid[1] == 1 && L->grid[2] == 1) {
        X.pid[0] = (uint32_t)p;
        X.pid[1] = X.pid[2] = 0;
    } else {
        X.pid[0] = (uint32_t)(p % L->grid[0]);
        X.pid[1] = (uint32_t)((p / L->grid[0]) % L->grid[1]);
        X.pid[2] = (uint32_t)(p / ((uint64_t)L->grid[0] * L->grid[1]));
    }
    X.pp = NULL;
    memset(&X.fault, 0, sizeof X.fault);
    X.dma = NULL;
    /* plain runs start after the prologue from the prepared registers; counting and the performance
     * model run every instruction */
    if (!L->perf && !L->counting && core_sregs0(L, core) == 0) {
        memcpy(X.A, core->sregs0, k->sreg_bytes);
        X.pc = k->n_prologue;
    } else {
        memset(X.A, 0, k->sreg_bytes);
        for (uint32_t i = 0; i < L->nargv; i++) memcpy(X.A + L->argv[i].slot, &L->argv[i].bits, 8);
        X.pc = 0;
    }
    for (uint32_t v = 0; v < k->n_views; v++) X.view[v] = X.A + k->view_fallback[v], X.view_ld[v] = 0;
    int r;
    if (!L->perf) {
        r = L->counting ? run_counting(&X) : run_plain(&X);
    } else {
        SpyPerfProg pp;
        if (spy_perf_prog_begin(&X, &pp, p) < 0) {
            X.fault.kind = FAULT_NOMEM;
            r = -1;
        } else {
            r = L->counting ? run_profiling_counting(&X) : run_profiling(&X);
            if (r == 0) spy_perf_prog_end(&X, p);
        }
        X.pp = NULL;
    }
    spy_print_flush(core);
    if (r < 0) {
        if (!atomic_exchange(&L->faulted, 1)) {
            L->fault = X.fault;
            L->fault.pc = X.pc;
            memcpy(L->fault.pid, X.pid, sizeof X.pid);
        }
        atomic_store(&L->stop, 1);
    }
    return r;
}

void spy_run_worker(SpyLaunch *L, SpyCore *core) {
    uint64_t done = 0;
    core->pfq_n[0] = core->pfq_n[1] = 0; /* nothing queued from another launch */
    const uint64_t chunk = L->chunk ? L->chunk : 1;
    for (int r = 0; r == 0;) {
        if (atomic_load_explicit(&L->stop, memory_order_relaxed)) break;
        if (core->poll && core->poll(L)) break; /* on the calling thread: Ctrl-C between programs too */
        const uint64_t p0 = atomic_fetch_add(&L->next, chunk);
        if (p0 >= L->nprogs) break;
        const uint64_t p1 = p0 + chunk < L->nprogs ? p0 + chunk : L->nprogs;
        for (uint64_t p = p0; p < p1 && r == 0; p++) {
            r = run_program(L, core, p);
            done++;
            if (atomic_load_explicit(&L->stop, memory_order_relaxed)) r = 1;
        }
    }
    SpyKernel *k = (SpyKernel *)L->k;
    atomic_fetch_add(&k->programs, done);
    if (core->streamed) {
        atomic_fetch_add(&k->streamed, core->streamed);
        core->streamed = 0;
    }
    if (L->counting) {
        for (int op = 0; op < OP_COUNT; op++) {
            if (core->counts[op]) {
                atomic_fetch_add(&k->counts[op], core->counts[op]);
                core->counts[op] = 0;
            }
        }
    }
}
