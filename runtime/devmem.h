/* Device memory: the allocation table of each simulated Spyre card.
 *
 * Device addresses are host addresses (the card's memory is host memory we own), so the CPU
 * fallback and the interpreter touch the same bytes without copying. Every allocation is
 * recorded here; a launch finds its pointer arguments' allocations here, and the interpreter checks
 * the accesses whose base argument it does not know against the whole table.
 * One table per device: several `spyre:N` devices live in one process.
 */
#ifndef SPYRE_DEVMEM_H
#define SPYRE_DEVMEM_H

#include <stddef.h>
#include <stdint.h>

#define SPYRE_MAX_DEVICES 64 /* z17 takes up to 48 cards; an unused card costs a few idle bytes */
#define SPYRE_ALLOC_ALIGN 128 /* one stick: the device's unit of layout */
/* Bytes past the end of a small allocation (under 64 KB) that no allocation holds: see devmem.c block_bytes */
#define SPYRE_GUARD_BYTES 512
#define SPYRE_MAP_GUARD_BYTES 4096 /* the guard page after a mapped block (64 KB and more) */

typedef struct {
    uintptr_t base; /* 0 when there is no allocation to name */
    size_t size;
} SpyreAllocation;

/* Number of simulated devices: SPYRE_DEVICE_COUNT, else a drawer of 8 cards or LOCAL_WORLD_SIZE (torchrun's
 * processes per host) if that is more; at most SPYRE_MAX_DEVICES. A card nobody uses costs nothing: its
 * allocation table and its cores' worker threads are made on first use. */
int spyre_device_count(void);

/* Allocate `nbytes` (0 allowed) on `device`, aligned to SPYRE_ALLOC_ALIGN. NULL when out of memory
 * or the device index is invalid. Thread-safe. */
void *spyre_alloc(int device, size_t nbytes);
/* Free a pointer returned by spyre_alloc (NULL is a no-op). Returns 0, or -1 if ptr is unknown. */
int spyre_free(int device, void *ptr);

/* 1 when [addr, addr+len) lies inside one live allocation of `device`, else 0. When it does not,
 * *nearest (if not NULL) is the allocation closest to addr (base 0 if the device has none); when
 * it does, *nearest is the containing allocation. len 0 is in bounds anywhere in [base, base+size].
 * Thread-safe and lock-free for readers in the common case (a per-thread cache of the last
 * allocation hit, invalidated by any free); called on every DMA. */
int spyre_mem_check(int device, uintptr_t addr, size_t len, SpyreAllocation *nearest);

/* The same check through a caller's one-allocation hint (a DMA instruction on one core touches the same
 * tensor program after program): a hit costs a generation compare and a range test; a miss checks the
 * table and refills the hint. A hint is only a cache: any free invalidates it. */
typedef struct {
    uint64_t generation; /* 0: empty */
    int device;          /* generations count per device: a hint holds for its own device only (each device
                          * has its own cores today, launch.c; this keeps the hint right should they be shared) */
    uintptr_t base;
    size_t size;
} SpyreCheckHint;
int spyre_mem_check_hint(int device, uintptr_t addr, size_t len, SpyreCheckHint *hint);

/* Which allocations a launch's pointer arguments point into, and whether they still do. The generation
 * changes on every free; spyre_mem_lookup gives the allocation containing addr (one past its end counts)
 * and its id, which no later allocation of the device reuses (0, and *a = {0, 0}, when none contains it).
 * A launch looks its arguments up once; while the generation is unchanged they are all still live. */
uint64_t spyre_mem_generation(int device);
uint64_t spyre_mem_lookup(int device, uintptr_t addr, SpyreAllocation *a);

/* Statistics, as torch.cuda defines them (bytes requested by live allocations). */
size_t spyre_memory_allocated(int device);
size_t spyre_max_memory_allocated(int device);
void spyre_reset_peak_memory_stats(int device);
/* Host bytes held: live allocations (rounded to sticks, or to 2 MB pages for large ones) and freed blocks
 * cached for reuse; empty_cache returns the cached blocks to the host. */
size_t spyre_memory_reserved(int device);
size_t spyre_max_memory_reserved(int device);
size_t spyre_memory_cached(int device);
void spyre_empty_cache(int device);

/* Extensions. Per-device capacity in bytes (SPYRE_DEVICE_MEMORY_BYTES, an integer with an optional
 * K/M/G/T suffix; default: the host's RAM); allocations beyond it fail with NULL. */
size_t spyre_device_memory_capacity(void);
/* Per-device limit in bytes (torch.spyre.set_per_process_memory_fraction): at most the capacity, which it is
 * until set. set_memory_limit returns -1 for an invalid device. */
size_t spyre_memory_limit(int device);
int spyre_set_memory_limit(int device, size_t bytes);
/* Number of live allocations of `device`. */
size_t spyre_allocation_count(int device);
/* The device whose live allocation contains addr (one past the end counts), or -1. */
int spyre_device_of(uintptr_t addr);

/* The same functions as a table, exported as the capsule `spyre_triton._runtime._devmem_api`
 * so that the torch device extension (C++) allocates through this table without linking to it. */
typedef struct {
    int version; /* SPYRE_DEVMEM_API_VERSION */
    int (*device_count)(void);
    void *(*alloc)(int device, size_t nbytes);
    int (*free)(int device, void *ptr);
    int (*mem_check)(int device, uintptr_t addr, size_t len, SpyreAllocation *nearest);
    size_t (*memory_allocated)(int device);
    size_t (*max_memory_allocated)(int device);
    void (*reset_peak_memory_stats)(int device);
    /* Appended after version 1's first release; present in every build of this file. */
    size_t (*memory_reserved)(int device);
    void (*empty_cache)(int device);
    int (*device_of)(uintptr_t addr);
    size_t (*device_memory_capacity)(void);
    size_t (*memory_limit)(int device);
    /* For torch.accelerator's memory statistics (the device extension's DeviceAllocator). */
    size_t (*max_memory_reserved)(int device);
    size_t (*memory_cached)(int device);
    size_t (*allocation_count)(int device);
} SpyreDevmemAPI;

#define SPYRE_DEVMEM_API_VERSION 2
#define SPYRE_DEVMEM_CAPSULE "spyre_triton._runtime._devmem_api"

#endif
