/* The performance model: what a launch would cost on a Spyre card (see docs/perf-model.md).
 *
 * When a launch asks for it, the dispatch loop runs a second variant (interp.c, run_body with
 * profiling set) that calls spy_perf_insn() before each instruction. Each program is timed on its
 * own modelled clock, starting at 0, by an in-order issue model with a scoreboard: every unit
 * (sequencer/scalar, DMA in, DMA out, PE array, vector unit, SFU) is busy for the instruction's
 * occupancy, and an instruction starts only when its unit is free, its sources are ready (read
 * after write) and its destination may be overwritten (write after read/write). With double
 * buffering a DMA into LX fills the other of two copies of its destination: it waits only until
 * what the granule held before the previous DMA into it has been consumed. Sources and
 * destinations are tracked
 * per granule of the arena: 8-byte scalar slots and 64-byte LX blocks (the LX allocator's
 * alignment). Work (bytes, MACs, elements) is counted on the way.
 *
 * The sequencer issues in order, one instruction per cycle: scalar and control instructions
 * execute on it (it waits for their operands), every other instruction goes to its unit's queue
 * and the sequencer moves on unless that queue is full (queue_depth instructions not yet started).
 * Units start their instructions in order. So a DMA for the next loop iteration can run while the
 * PE array works on this one, when the instruction stream and the buffers allow it.
 *
 * After the launch the programs are placed on the modelled cores in program order, each on the
 * core that frees first (lowest index on ties): the runtime's dynamic scheduling, run on the
 * modelled clock instead of the host's, so the result does not depend on host threads.
 */
#ifndef SPYRE_PERF_H
#define SPYRE_PERF_H

#include <stdatomic.h>
#include <stdint.h>

/* Units of a core. */
enum { PU_SCALAR, PU_DMA_IN, PU_DMA_OUT, PU_PE, PU_VECTOR, PU_SFU, PU_COUNT };
#define SPY_PERF_UNIT_NAMES {"scalar", "dma_in", "dma_out", "pe", "vector", "sfu"}

/* Work counters, summed over the launch (integers: the sum does not depend on the order). */
#define SPY_PERF_COUNTERS(X)                                                                          \
    X(insns)            /* instructions executed */                                                   \
    X(scalar_ops)       /* scalar-unit instructions (grid registers, one-element arithmetic) */       \
    X(branches)         /* jumps and conditional branches */                                          \
    X(dma_ops)          /* DMA instructions */                                                        \
    X(dma_read_bytes)   /* bytes moved from device memory, in whole sticks */                         \
    X(dma_write_bytes)  /* bytes moved to device memory, in whole sticks */                           \
    X(dma_read_useful)  /* bytes of the active elements read */                                       \
    X(dma_write_useful) /* bytes of the active elements written */                                    \
    X(dma_contig_bytes) /* useful bytes moved in contiguous rows */                                   \
    X(dma_strided_bytes) /* useful bytes moved element by element (strided or broadcast rows) */      \
    X(dma_gather_bytes) /* useful bytes moved by gather/scatter/atomics */                            \
    X(atomics)          /* atomic elements */                                                         \
    X(dots)             /* PE instructions */                                                         \
    X(macs)             /* multiply-accumulates asked for */                                          \
    X(pe_macs_padded)   /* multiply-accumulates the array performs (padded to its shape) */           \
    X(vector_elems)     /* elements through the vector unit */                                        \
    X(sfu_elems)        /* elements through the SFU */                                                \
    X(transcendental_elems) /* of which transcendental */                                             \
    X(vector_flops)     /* float operations on the vector unit and SFU */

#define SPY_PERF_ENUM(n) PC_##n,
enum { SPY_PERF_COUNTERS(SPY_PERF_ENUM) PC_COUNT };
#undef SPY_PERF_ENUM

/* Parameters, in cycles and bytes, derived from spyre_triton.perf.HardwareConfig by Python and
 * passed by name (Kernel.launch(perf=...)). */
#define SPY_PERF_PARAMS(X)                                                                            \
    X(read_bytes_per_cycle)   /* a core's share of device-memory read bandwidth */                    \
    X(write_bytes_per_cycle)  /* a core's share of device-memory write bandwidth */                   \
    X(dma_latency)            /* cycles from the last byte issued to the data being in LX */          \
    X(stick_bytes)            /* DMA granule */                                                       \
    X(gather_cycles)          /* per element of a gather/scatter (address generation) */              \
    X(transpose_cost)         /* DMA time factor when LX's innermost dimension is strided in memory */ \
    X(atomic_cycles)          /* per atomic element (read-modify-write at the memory controller) */   \
    X(corelets)               /* per core: PE arrays, vector units and SFUs work in parallel */       \
    X(pe_rows) X(pe_cols) X(pe_simd) /* PE array: rows x cols PEs, each simd MACs per cycle */        \
    X(pe_fill_drain)          /* cycles to fill and drain the array, once per dot */                  \
    X(pe_sustained)           /* fraction of peak the array sustains */                               \
    X(pe_rate_8bit) X(pe_rate_16bit) X(pe_rate_f32) X(pe_rate_f64) /* PE rate of dot inputs vs f16 */   \
    X(permute_cost)           /* vector time factor of a tcopy whose innermost source stride is not 1 */ \
    X(vector_lanes)           /* 16-bit elements per cycle per corelet */                             \
    X(sfu_lanes)              /* 16-bit elements per cycle per corelet */                             \
    X(transcendental_cost)    /* cycles per SFU lane: one exp/log/trig pass (isa.SFU_COST_CLASSES) */  \
    X(sfu_reciprocal_cost)    /* ... one reciprocal or root pass */                                   \
    X(sfu_compound_cost)      /* ... two passes (pow, atan2, cbrt) */                                 \
    X(sfu_special_cost)       /* ... a series or iteration (gamma, Bessel, inverse erf) */            \
    X(divide_cost)            /* cycles per lane for divisions and remainders */                      \
    X(vector_latency)         /* pipeline latency of the vector unit and SFU */                       \
    X(issue_cycles)           /* the in-order sequencer issues one instruction per this many */      \
    X(queue_depth)            /* instructions a unit's queue holds before the sequencer waits */      \
    X(branch_cycles)          /* a jump or branch on the sequencer */                                 \
    X(double_buffer)          /* 1: a DMA into LX may write a second copy of its tile */             \
    X(trace_programs)         /* programs 0..this-1 record per-instruction events */                  \
    X(trace_events)           /* at most this many events per traced program */                      \
    X(num_cores)              /* modelled cores the programs are scheduled on */

typedef struct {
#define SPY_PERF_FIELD(n) double n;
    SPY_PERF_PARAMS(SPY_PERF_FIELD)
#undef SPY_PERF_FIELD
} SpyPerfCfg;

/* What a program's DMA and compute units did together, for the metrics card (per core after
 * scheduling): DMA bytes each way, the cycles some DMA unit was busy, the cycles some compute unit
 * (PE array, vector unit, SFU) was busy, and the cycles both were. */
enum { PX_READ_BYTES, PX_WRITE_BYTES, PX_DMA_CYCLES, PX_COMPUTE_CYCLES, PX_OVERLAP_CYCLES, PX_COUNT };
#define SPY_PERF_EXTRA_NAMES {"read_bytes", "write_bytes", "dma_cycles", "compute_cycles", "overlap_cycles"}

/* One program's result. */
typedef struct {
    double cycles;
    float busy[PU_COUNT];
    float extra[PX_COUNT];
} SpyPerfProgRes;

/* One instruction's timing (traced programs only), relative to the program's start. */
typedef struct {
    uint32_t pc;
    uint32_t unit;
    double start, busy_end, done;
} SpyPerfEvent;

typedef struct SpyPerfLaunch {
    SpyPerfCfg cfg;
    uint64_t nprogs;
    SpyPerfProgRes *progs;
    _Atomic uint64_t counters[PC_COUNT];
    uint64_t trace_programs;
    uint32_t trace_events;
    SpyPerfEvent *events; /* trace_programs x trace_events */
    uint32_t *nevents;    /* per traced program */
} SpyPerfLaunch;

/* Scoreboard entry of one arena granule. */
typedef struct {
    double ready;   /* the last write is complete */
    double read;    /* reads of the current contents are done */
    double dma_prev; /* what the granule held before its last DMA write was consumed by then */
    uint32_t gen;
} SpyPerfGran;

#define SPY_PERF_QMAX 64

/* The length of a union of busy intervals, measured as they arrive (perf.c spans_add): spans that
 * can still grow are kept, the others are settled into `done`. */
#define SPY_PERF_SPANS 64
typedef struct {
    double s[SPY_PERF_SPANS], e[SPY_PERF_SPANS];
    uint32_t n;
    double done;
} SpyPerfSpans;

/* A running program's model state (on the host thread that runs it). */
typedef struct SpyPerfProg {
    const SpyPerfLaunch *PL;
    double issue, end;
    double unit_free[PU_COUNT], busy[PU_COUNT];
    double qstart[PU_COUNT][SPY_PERF_QMAX]; /* start times of each unit's last instructions */
    uint32_t qn[PU_COUNT], qdepth;
    uint64_t cnt[PC_COUNT];
    SpyPerfGran *g; /* the core's granules: SPYRE_SREGS_MAX scalar slots, then LX blocks */
    uint32_t gen;
    SpyPerfEvent *ev;
    uint32_t nev, evcap;
    SpyPerfSpans dma, compute, either; /* busy intervals of the DMA units, the compute units, and both */
} SpyPerfProg;

#define SPY_PERF_LX_GRAN 64u

#endif
