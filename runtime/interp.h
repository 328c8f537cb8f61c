/* The Spyre interpreter: loaded kernels, cores, launches. Shared by interp.c (decode, dispatch),
 * loops.c (typed loops), dot.c (PE array), dma.c (device memory), launch.c (threads) and
 * interp_py.c (the Python API). No Python in here except where noted. */
#ifndef SPYRE_INTERP_H
#define SPYRE_INTERP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "devmem.h"
#include "isa_gen.h"
#include "perf.h"

/* SPYRE_LX_BYTES_MAX, SPYRE_SREGS_MAX and SPYRE_MAX_CORES come from isa.py (isa_gen.h) */
#define SPYRE_ARENA_MAX ((size_t)SPYRE_SREGS_MAX * SPYRE_SREG_BYTES + SPYRE_LX_BYTES_MAX)

/* Element access into the arena and device memory: any alignment. */
typedef uint8_t sp_u8;
typedef int8_t sp_i8;
typedef uint16_t sp_u16 __attribute__((aligned(1)));
typedef int16_t sp_i16 __attribute__((aligned(1)));
typedef uint32_t sp_u32 __attribute__((aligned(1)));
typedef int32_t sp_i32 __attribute__((aligned(1)));
typedef uint64_t sp_u64 __attribute__((aligned(1)));
typedef int64_t sp_i64 __attribute__((aligned(1)));
typedef float sp_f32 __attribute__((aligned(1)));
typedef double sp_f64 __attribute__((aligned(1)));

/* ---- kernel function types (loops.c, dot.c) ------------------------------------------------ */
typedef void (*spy_un_fn)(void *restrict d, const void *restrict a, size_t n);
typedef void (*spy_bin_fn)(void *restrict d, const void *restrict a, const void *restrict b, size_t n);
typedef void (*spy_tern_fn)(void *restrict d, const void *restrict a, const void *restrict b,
                            const void *restrict c, size_t n);
/* ld: the source's row stride in elements (0: dense), for a 2-D source: outer rows of len (inner == 1)
 * or len rows of inner (outer == 1) */
typedef void (*spy_red_fn)(void *restrict d, const void *restrict s, size_t outer, size_t len, size_t inner,
                           size_t ld);
/* generic conversion halves: src -> 64-bit intermediate (int64/uint64/double), and back */
typedef void (*spy_rd_fn)(void *restrict tmp, const void *restrict src, size_t n);
typedef void (*spy_wr_fn)(void *restrict dst, const void *restrict tmp, size_t n);
/* atomics: one element; returns the old value's bits through *old */
typedef void (*spy_atom_fn)(void *addr, const void *val, void *old);

/* Lookups return NULL when the combination is not supported (a load-time ValueError).
 * Broadcast variants: 0 = all sources vector; bit k set = source k+1 is read as element 0. */
spy_bin_fn spy_k_binary(int op, int dt, int variant);         /* variant 0..2 */
spy_bin_fn spy_k_cmp(int op, int pred, int dt, int variant);  /* OP_CMPI / OP_CMPF */
spy_un_fn spy_k_unary(int op, int dt);                        /* absi, ctpop, ctlz, cttz */
spy_un_fn spy_k_math1(int fn, int dt);
spy_bin_fn spy_k_math2(int fn, int dt, int variant);
spy_tern_fn spy_k_ternary(int op, int dt, int variant, int flag); /* select/fma/clamp; variant 0..6 */
spy_red_fn spy_k_red(int redop, int dt);
spy_un_fn spy_k_cvt_direct(int mode, int dst, int src);
int spy_k_cvt_generic(int mode, int dst, int src, spy_rd_fn *rd, spy_wr_fn *wr);
spy_atom_fn spy_k_atom(int atomop, int dt);
void spy_fill(void *dst, size_t es, size_t n); /* dst[1..n) = dst[0] */
void spy_fill_bits(void *dst, uint64_t bits, size_t es, size_t n);
void spy_iota(void *dst, int dt, int32_t start, size_t n);
void spy_cvt_generic(spy_rd_fn rd, spy_wr_fn wr, size_t des, size_t ses, void *dst, const void *src, size_t n);

/* dot.c */
int spy_dot_supported(int t, int t2);
/* lda, ldb: row strides of a and b in elements (0: dense rows; unbatched only). scratch grows on demand
 * (once per core); returns -1 when out of memory */
int spy_dot(int t, int t2, void *dst, const void *a, const void *b, const void *acc, size_t M, size_t N, size_t K,
            size_t lda, size_t ldb, size_t batch, int bt, void **scratch, size_t *scratch_cap);

/* ---- a loaded kernel -------------------------------------------------------------------------- */
/* An instruction's kind (K_NOP .. K_ASSERT, K_COUNT) is its opcode's column of the ISA table
 * (isa.EXEC_KINDS, spyre_opcodes[op].exec in isa_gen.h). */
enum {
    /* execution-only kinds (SpyDInsn.xk): one-element integer and f32 ops on scalar registers, run
     * inline in the dispatch loop instead of through a typed loop (kind keeps the instruction's real kind) */
    X_SADD32 = K_COUNT + 1, X_SSUB32, X_SMUL32, X_SADD64, X_SSUB64, X_SMUL64, X_SSEXT64, X_SSLT32, X_SSLT64, X_SCOPY, X_SCONST,
    X_SADDF32, X_SSUBF32, X_SMULF32, X_SDIVF32, X_SSQRTF32
};

typedef struct {
    uint8_t kind, t, t2, es; /* es: element bytes of t */
    uint8_t xk;              /* what the dispatch loop runs: kind, or a scalar fast path (X_*) */
    uint8_t des, ses;        /* element bytes of the destination and of the (first) source */
    uint8_t bcall;           /* every source is broadcast: compute one element and fill */
    uint8_t cond_float;      /* brz/brnz on a float scalar */
    uint8_t via_tmp;         /* dst partially overlaps a source: compute aside, then copy */
    uint8_t views;           /* bit k: operand field a+k is a view register (F_VA..F_VD) */
    uint8_t dma_slot;        /* DMA instructions: this core's prefetch predictor and check hint entry */
    uint16_t arg;            /* DMA instructions: base argument + 1 (isa.BASE_ARG); 0 when not known */
    uint16_t op;
    uint32_t flags;
    uint32_t a, b, c, d, e, n;
    uint8_t sstep[3]; /* elementwise: the bytes source k advances per element (0: broadcast or absent) */
    void *fn, *fn2;
    const void *p; /* descriptor */
    uint64_t imm;
} SpyDInsn;

typedef struct {
    char *file, *text;
    long line;
} SpyLoc;

enum { ARG_PTR, ARG_INT, ARG_FLOAT, ARG_CONSTEXPR, ARG_NONE };
typedef struct {
    char *name;
    int kind, dtype;
    int64_t slot; /* -1: unused */
} SpyArg;

typedef struct SpyKernel {
    char *name;
    uint32_t n_insns, n_consts, n_descs, n_strings, n_locs, n_args;
    uint32_t n_sregs, lx_bytes;
    size_t sreg_bytes, arena_bytes;
    int has_print; /* flush the host's stdout before launching, so output stays in order */
    SpyDInsn *code; /* n_insns + 1 (an implicit halt) */
    uint64_t *consts;
    spyre_desc *descs;
    char **strings;
    SpyLoc *locs;
    int32_t *insn_loc;
    SpyArg *args;
    /* view registers: the fallback LX tile (arena offset) each starts a program at, and the fewest
     * bytes any instruction setting it provides (readers through it may not reach further) */
    uint32_t n_prologue; /* leading launch invariants (interp.c): run once per core and launch, not per program */
    uint32_t n_views;
    uint32_t view_fallback[SPYRE_MAX_VIEWS];
    uint64_t view_bytes[SPYRE_MAX_VIEWS];
    uint8_t view_set[SPYRE_MAX_VIEWS];
    uint8_t view_rows[SPYRE_MAX_VIEWS]; /* set by an ld rows: may hold strided rows */
    /* statistics */
    _Atomic uint64_t launches, programs;
    _Atomic uint64_t streamed; /* elementwise results written with streaming stores (interp.c) */
    _Atomic uint64_t counts[OP_COUNT];
} SpyKernel;

/* ---- operands (the generated table spyre_opcodes, isa.Role) ---------------------------------- */
/* The operand field f (0..5 = a..n) of a decoded instruction. */
static inline uint32_t spy_field(const SpyDInsn *D, int f) {
    switch (f) {
    case 0: return D->a;
    case 1: return D->b;
    case 2: return D->c;
    case 3: return D->d;
    case 4: return D->e;
    }
    return D->n;
}
/* Bytes of one element of an operand of size rule `size` */
static inline uint64_t spy_elem_bytes(const SpyDInsn *D, int size) {
    switch (size) {
    case SZ_N_I1: case SZ_DESC_I1: return 1;
    case SZ_N_ADDR: return 8;
    case SZ_N_T2: case SZ_DOT_A: case SZ_DOT_B: return spyre_dtype_bytes[D->t2];
    }
    return D->es;
}
/* The bytes operand o of D covers (isa.SIZES); desc_total: its descriptor's element count. Tile
 * sizes only: descriptor registers and tcopy's strided span are walked by their users. */
static inline unsigned __int128 spy_operand_bytes(const SpyDInsn *D, const spyre_operand *o,
                                                  unsigned __int128 desc_total) {
    const int one = o->bc_shift >= 0 && ((D->flags >> o->bc_shift) & 1);
    const unsigned __int128 n = one ? 1 : D->n, total = one ? 1 : desc_total, es = spy_elem_bytes(D, o->size);
    const unsigned __int128 M = D->e >> 16, N = D->e & 0xFFFF, K = D->n;
    const unsigned __int128 B = F_DOT_BATCH(D->flags) ? F_DOT_BATCH(D->flags) : 1;
    switch (o->size) {
    case SZ_SREG: return SPYRE_SREG_BYTES;
    case SZ_N_T: case SZ_N_T2: case SZ_N_I1: case SZ_N_ADDR: return n * es;
    case SZ_DESC_T: case SZ_DESC_I1: return total * es;
    case SZ_RED_OUT: return (unsigned __int128)D->c * D->e * es;
    case SZ_RED_IN: return (unsigned __int128)D->c * D->d * D->e * es;
    case SZ_DOT_A: return B * M * K * es;
    case SZ_DOT_B: return B * K * N * es;
    case SZ_DOT_C: return B * M * N * es;
    }
    return 0;
}

/* ---- faults ---------------------------------------------------------------------------------- */
/* FAULT_FREED: the allocation of the access's base argument was freed while the launch ran */
enum { FAULT_NONE, FAULT_OOB, FAULT_MISALIGNED, FAULT_ASSERT, FAULT_NOMEM, FAULT_FREED };

typedef struct {
    int kind;
    const char *access; /* "load", "store", "gather", "scatter", "atomic", "atomic cas" */
    uint64_t addr, len;
    SpyreAllocation nearest; /* the base argument's allocation when `arg` is set */
    uint32_t arg;            /* base argument + 1 of the faulting access, 0 when not known */
    uint32_t pc;
    uint32_t pid[3];
    uint32_t str; /* assertion message index */
    uint64_t elem;
} SpyFault;

/* ---- cores and launches ---------------------------------------------------------------------- */
struct SpyLaunch;
/* The DMA engine's stride predictor, per core: an instruction moving one contiguous run whose address
 * advanced by the same amount twice in a row (one program per row) has the next run prefetched. */
#define SPY_PF_SLOTS 64
typedef struct {
    const void *insn;
    uint64_t last;
    int64_t stride;
} SpyPrefetch;

typedef struct {
    uint8_t *arena; /* SPYRE_ARENA_MAX bytes, 64-aligned */
    SpyPrefetch pf[SPY_PF_SLOTS];
    SpyreCheckHint chk[SPY_PF_SLOTS]; /* allocation-check hints, by the DMA instruction (SpyExec.dma) */
    uintptr_t pf_done_lo; /* the run prefetched last (several loads of one row predict the same run) */
    uint64_t pf_done_len;
    const char *pfq_p[2]; /* prefetches still to issue, [0] reads and [1] writes: spy_prefetch_drip */
    uint64_t pfq_n[2];    /* lines left of each */
    uint64_t args_launch, args_gen; /* the launch and table generation this core last found its arguments live at */
    uint8_t *sregs0; /* this launch's registers at program start: arguments, constants, launch invariants */
    uint64_t sregs0_launch; /* the launch (SpyLaunch.id) sregs0 was built for */
    void *scratch;  /* dot packing buffers, grown on demand */
    size_t scratch_cap;
    uint8_t *tmp;   /* SPYRE_ARENA_MAX bytes, allocated on first use: results of overlapping ops */
    char *pbuf; /* print output of the running program */
    size_t plen, pcap;
    uint64_t counts[OP_COUNT + 1]; /* [OP_COUNT]: the implicit halt after the last instruction */
    uint64_t streamed;             /* this launch's streamed results, merged into the kernel's at its end */
    SpyPerfGran *pgran; /* performance model scoreboard, allocated on the first profiled launch */
    uint32_t pgen;
    /* Set on the calling thread's core only: polled on backward jumps to take the GIL and check
     * signals. A worker core must never call it (it would take the GIL with the caller's state). */
    int (*poll)(struct SpyLaunch *);
} SpyCore;

typedef struct {
    uint64_t slot;
    uint64_t bits;
} SpyArgVal;

/* The allocation a pointer argument points into, found once per launch: id 0 (and base 0) for none. */
typedef struct {
    uintptr_t base;
    size_t size;
    uint64_t id; /* devmem's allocation id: a block freed and taken again is another allocation */
} SpyArgAlloc;

typedef struct SpyLaunch {
    uint64_t id; /* unique per launch in the process (set by spy_launch) */
    const SpyKernel *k;
    int device;
    uint32_t grid[3];
    uint64_t nprogs;
    const SpyArgVal *argv;
    uint32_t nargv;
    /* per kernel argument (k->n_args): the allocation a pointer argument points into, resolved once at
     * launch (none: nothing through it is in bounds); what accesses with a base argument are checked
     * against (dma.c). arg_gen: the allocation table's generation before they were resolved. */
    const SpyArgAlloc *arg_alloc;
    uint64_t arg_gen;
    int counting;
    _Atomic uint64_t next;
    uint64_t chunk; /* programs a core takes per grab of `next`: fewer contended atomics on small programs */
    uint64_t stream_insn_bytes; /* elementwise results this large in device memory use streaming stores */
    _Atomic int stop;
    _Atomic int faulted;
    SpyFault fault; /* written once, by the core that wins `faulted` */
    void *tstate; /* the calling thread's, while it runs programs without the GIL (core->poll) */
    uint64_t last_poll_ns;
    int py_error; /* a Python exception (KeyboardInterrupt) is pending */
    SpyPerfLaunch *perf; /* NULL: no performance model (the plain dispatch loop) */
} SpyLaunch;

typedef struct {
    uint8_t *A;
    SpyLaunch *L;
    SpyCore *core;
    const SpyKernel *k;
    uint32_t pid[3];
    uint32_t pc;
    SpyFault fault;
    SpyPerfProg *pp; /* the performance model's state when the launch is profiled */
    uint8_t *view[SPYRE_MAX_VIEWS]; /* view registers: device memory or a fallback tile in the arena */
    uint64_t view_ld[SPYRE_MAX_VIEWS]; /* their row strides in bytes (ld rows): 0 for dense rows */
    const SpyDInsn *dma; /* the DMA instruction running: picks its allocation-check hint (dma.c span_ok) */
} SpyExec;

/* interp.c */
int spy_core_init(SpyCore *c);
void spy_core_free(SpyCore *c);
/* Runs programs from L->next until done or stopped; merges counts. */
void spy_run_worker(SpyLaunch *L, SpyCore *core);
void spy_print_flush(SpyCore *core);
/* Streaming stores (interp.c): the launch size in bytes of results from which they are used (0: never),
 * and the per-instruction size that means for a launch of nprogs programs. */
extern _Atomic uint64_t spy_stream_bytes;
uint64_t spy_stream_threshold(void);
uint64_t spy_stream_insn_bytes(uint64_t nprogs);
/* Validate and decode; on error writes a message into err and returns NULL. */
SpyKernel *spy_kernel_new(void);
void spy_kernel_free(SpyKernel *k);
int spy_kernel_decode(SpyKernel *k, const uint8_t *insns, size_t n_insns, char *err, size_t errlen);

/* perf.c */
#define SPY_PERF_GRANS (SPYRE_SREGS_MAX + SPYRE_LX_BYTES_MAX / SPY_PERF_LX_GRAN)
int spy_perf_prog_begin(SpyExec *X, SpyPerfProg *pp, uint64_t p); /* -1: out of memory */
void spy_perf_insn(SpyExec *X, const SpyDInsn *I, uint32_t pc);
void spy_perf_prog_end(SpyExec *X, uint64_t p);
/* places programs on cores; core_of/start: nprogs entries; core_cycles: ncores; core_busy: ncores x PU_COUNT;
 * core_extra: ncores x PX_COUNT */
void spy_perf_schedule(const SpyPerfLaunch *PL, int ncores, uint16_t *core_of, double *start, double *core_cycles,
                       double *core_busy,
                       double *core_extra);

/* The next programs' runs the DMA engine predicted (dma.c, prefetch_next) are fetched a few lines
 * before each compute instruction, so that the fetches overlap the program's work. Issued all at
 * once (64 lines for a 4 KB row), they overflowed the CPU's miss buffers: layer norm over 4096 rows
 * of 4 KB streamed from memory, 701 -> 523 ns a row. */
#define PF_DRIP_LINES 8 /* 4-12 measured alike; 16 and 32 lost a third of the gain */
static inline void spy_prefetch_lines(const char **p, uint64_t *left, const int write) {
    const uint64_t n = *left < PF_DRIP_LINES ? *left : PF_DRIP_LINES;
    for (uint64_t i = 0; i < n; i++) {
        if (write) __builtin_prefetch(*p + 64 * i, 1, 2);
        else __builtin_prefetch(*p + 64 * i, 0, 2);
    }
    *p += 64 * n, *left -= n;
}
static inline void spy_prefetch_drip(SpyCore *c) {
    if (c->pfq_n[0]) spy_prefetch_lines(&c->pfq_p[0], &c->pfq_n[0], 0);
    if (c->pfq_n[1]) spy_prefetch_lines(&c->pfq_p[1], &c->pfq_n[1], 1);
}

/* dma.c: return 0, or -1 with X->fault filled */
int spy_dma_ld(SpyExec *X, const SpyDInsn *I);
int spy_dma_st(SpyExec *X, const SpyDInsn *I);
void spy_dma_view(SpyExec *X, const SpyDInsn *I);
int spy_dma_gather(SpyExec *X, const SpyDInsn *I);
int spy_dma_scatter(SpyExec *X, const SpyDInsn *I);
int spy_dma_atom(SpyExec *X, const SpyDInsn *I);
int spy_dma_acas(SpyExec *X, const SpyDInsn *I);
/* writes the dense result to dst (A + I->a, or a scratch buffer); returns its bytes */
size_t spy_tcopy(uint8_t *dst, uint8_t *A, const SpyDInsn *I);
void spy_bmask(uint8_t *dst, const uint8_t *A, const SpyDInsn *I);
void spy_bsel(uint8_t *dst, const uint8_t *A, const SpyDInsn *I);

/* launch.c (called with the GIL held; releases it while cores run).
 * Returns 0, 1 when a fault stopped the launch (L->fault), or -1 with a Python exception set. */
int spy_launch(SpyLaunch *L, int num_threads);
/* Launches run on `device` so far (spyre_triton._runtime.launch_count). */
uint64_t spy_launch_count(int device);
/* Host nanoseconds spent running launches on `device` so far (torch.spyre.utilization). */
uint64_t spy_busy_ns(int device);
extern _Atomic int spy_counting;

#endif
