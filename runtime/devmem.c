/* Device memory: per-device allocation tables (see devmem.h).
 *
 * Each device keeps its live allocations in an array sorted by base address, guarded by a
 * readers-writer lock. spyre_mem_check (called on every DMA by interpreter threads) first tries a
 * thread-local one-entry cache per device, validated by a generation counter that every free
 * bumps, so repeated checks against the same allocation take no lock at all; otherwise it does a
 * binary search under the read lock.
 *
 * Blocks of 64 KB and more are mapped from the kernel (mmap) in size classes (eight per power of two,
 * 2 MB pages from 4 MB) and, once freed, stay with the device for reuse (a caching allocator, as
 * torch.cuda's): a model's buffers come and go in the same sizes every call, and a fresh block from the
 * host costs a page fault and the kernel's zeroing per page (a 4 MB tensor: 0.5 ms, several times the op
 * writing it). An allocation takes the smallest cached block that holds its class; a larger one is split
 * and the rest stays cached (or goes back to the kernel when under 64 KB); a freed block merges with a
 * cached neighbour. Each block ends in a guard page that belongs to no allocation (block_bytes). The
 * cache keeps at most the device's peak live bytes and their guard pages (at least 16 MB, at most
 * SPYRE_MEMORY_CACHE_BYTES: default 2 GiB and half the device's capacity; 0: no cache), oldest out
 * first: varied sizes cannot fill it with dead blocks. A cached block is out of the allocation table, so
 * a kernel touching it faults as for any freed memory. empty_cache() unmaps the cached blocks and trims
 * malloc's heap (the smaller blocks'), so the memory is the system's again at once.
 */
#define _GNU_SOURCE
#include "devmem.h"

#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A live allocation; id numbers the allocations of a device from 1, so a block freed and taken again is
 * a different allocation (spyre_mem_lookup). */
typedef struct {
    uintptr_t base;
    size_t size;
    uint64_t id;
} Entry;

typedef struct {
    pthread_rwlock_t lock;
    Entry *entries; /* sorted by base; never overlapping */
    uint64_t last_id;
    size_t count, cap;
    size_t allocated; /* bytes requested by live allocations (plus reservations in flight) */
    size_t peak;
    size_t limit;     /* bytes this device may allocate (g_capacity unless set lower) */
    size_t reserved;  /* host bytes held: live blocks and cached ones */
    size_t peak_reserved;
    _Atomic uint64_t generation; /* bumped by every free; 0 is never a valid generation */
    struct CachedBlock { void *p; size_t bytes; } *cache; /* freed blocks, oldest first */
    size_t ncached, cache_cap, cached_bytes;
} DevTable;

static DevTable g_tables[SPYRE_MAX_DEVICES];
static int g_device_count = 1; /* set by devmem_init */
static size_t g_capacity = 0; /* per-device limit in bytes */
static size_t g_cache_limit = 0; /* bytes of freed blocks a device keeps for reuse */
#define CACHE_MIN_BYTES ((size_t)64 << 10) /* smaller blocks come from malloc's own free lists */
#define CACHE_FLOOR_BYTES ((size_t)16 << 20) /* the cache may always hold this much */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* An integer with an optional K/M/G/T suffix (powers of 1024; "G", "GB", "GiB" all accepted). */
static int parse_bytes(const char *s, size_t *out) {
    if (s == NULL || *s == '\0') return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s) return -1;
    while (isspace((unsigned char)*end)) end++;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: return -1;
    }
    if (shift) {
        end++;
        if (toupper((unsigned char)*end) == 'I') end++;
        if (toupper((unsigned char)*end) == 'B') end++;
        if (*end != '\0') return -1;
        if (v > (SIZE_MAX >> shift)) return -1;
        v <<= shift;
    }
    *out = (size_t)v;
    return 0;
}

#define DRAWER_CARDS 8 /* an I/O drawer of a Power11 holds 8 cards */

/* A drawer, or one card per local process of a larger torchrun job (LOCAL_WORLD_SIZE). */
static int default_device_count(void) {
    const char *s = getenv("LOCAL_WORLD_SIZE");
    long n = s != NULL ? strtol(s, NULL, 10) : 0;
    if (n < DRAWER_CARDS) n = DRAWER_CARDS;
    return n > SPYRE_MAX_DEVICES ? SPYRE_MAX_DEVICES : (int)n;
}

static void devmem_init(void) {
    g_device_count = default_device_count();
    const char *s = getenv("SPYRE_DEVICE_COUNT");
    if (s != NULL && *s != '\0') {
        char *end = NULL;
        long n = strtol(s, &end, 10);
        if (end != s) {
            if (n < 0) n = 0;
            if (n > SPYRE_MAX_DEVICES) n = SPYRE_MAX_DEVICES;
            g_device_count = (int)n;
        }
    }
    size_t cap = 0;
    if (parse_bytes(getenv("SPYRE_DEVICE_MEMORY_BYTES"), &cap) != 0 || cap == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        cap = (pages > 0 && psize > 0) ? (size_t)pages * (size_t)psize : (size_t)128 << 30;
    }
    g_capacity = cap;
    size_t limit = (size_t)2 << 30;
    if (parse_bytes(getenv("SPYRE_MEMORY_CACHE_BYTES"), &limit) != 0) limit = (size_t)2 << 30;
    g_cache_limit = limit < cap / 2 ? limit : cap / 2;
    for (int d = 0; d < SPYRE_MAX_DEVICES; d++) {
        pthread_rwlock_init(&g_tables[d].lock, NULL);
        g_tables[d].limit = cap;
        atomic_init(&g_tables[d].generation, 1);
    }
}

static _Atomic int g_ready; /* set once devmem_init has run: the checks on every DMA skip pthread_once's call */
static void devmem_init_once(void) {
    devmem_init();
    atomic_store_explicit(&g_ready, 1, memory_order_release);
}
static inline void ensure_init(void) {
    if (!atomic_load_explicit(&g_ready, memory_order_acquire)) pthread_once(&g_once, devmem_init_once);
}

static inline DevTable *table(int device) {
    ensure_init();
    if (device < 0 || device >= g_device_count) return NULL;
    return &g_tables[device];
}

int spyre_device_count(void) {
    ensure_init();
    return g_device_count;
}

size_t spyre_device_memory_capacity(void) {
    ensure_init();
    return g_capacity;
}

/* Index of the last entry with base <= addr, or -1. */
static ptrdiff_t find_floor(const DevTable *t, uintptr_t addr) {
    size_t lo = 0, hi = t->count; /* answer in [lo, hi) is the first entry with base > addr */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->entries[mid].base <= addr) lo = mid + 1;
        else hi = mid;
    }
    return (ptrdiff_t)lo - 1;
}

static inline int contains(uintptr_t base, size_t size, uintptr_t addr, size_t len) {
    return addr >= base && len <= size && addr - base <= size - len;
}

static inline size_t round_up(size_t n) {
    if (n == 0) return SPYRE_ALLOC_ALIGN;
    return (n + SPYRE_ALLOC_ALIGN - 1) & ~(size_t)(SPYRE_ALLOC_ALIGN - 1);
}

/* Large allocations sit on 2 MB pages where the host allows it (transparent huge pages in "madvise"
 * mode): a row-per-program kernel touches a new 4 KB page per row and stream, and their TLB misses
 * were a good part of a cold run. */
#define HUGE_PAGE (2u << 20)
static int on_huge_pages(size_t held) { return held >= 2 * (size_t)HUGE_PAGE; }

/* The host bytes behind an allocation of `held` bytes (its size class): what is reserved, and what
 * a block taken from the cache is cut to. Under 64 KB: malloc's, to the stick. From 64 KB: eight
 * classes per power of two (at most 1/8 more than asked; page multiples); from 4 MB: 2 MB pages. */
static size_t host_bytes(size_t held) {
    if (held < CACHE_MIN_BYTES) return held;
#ifdef MADV_HUGEPAGE
    if (on_huge_pages(held)) return (held + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
#endif
    const size_t step = ((size_t)1 << (63 - __builtin_clzll((unsigned long long)held))) / 8;
    return (held + step - 1) / step * step;
}

static int is_mapped(size_t bytes) { return bytes >= CACHE_MIN_BYTES; }

/* The host bytes behind an allocation of nbytes. Every block also holds a guard gap after its last stick
 * that belongs to no allocation: malloc packs small blocks back to back (a stick or two apart), and the
 * cache cuts mapped blocks back to back from one mapping. An access the compiler could not tie to one
 * pointer argument, which is only checked against the allocation table, then faults in the gap instead of
 * landing in the next tensor. A mapped block's gap is one page past its size class: a tensor of a class's
 * exact size (4 MB) keeps its class, and a page nothing touches costs address space, not memory. */
_Static_assert(SPYRE_MAP_GUARD_BYTES >= SPYRE_GUARD_BYTES, "mapped blocks keep at least the guard gap");
static size_t block_bytes(size_t nbytes) {
    const size_t held = round_up(nbytes);
    return held < CACHE_MIN_BYTES ? host_bytes(held + SPYRE_GUARD_BYTES) : host_bytes(held) + SPYRE_MAP_GUARD_BYTES;
}

/* A mapped block of `bytes`, on 2 MB pages when large (the excess of the aligning mapping is unmapped). */
static void *map_block(size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (on_huge_pages(bytes)) {
        char *p = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        const size_t head = (HUGE_PAGE - (uintptr_t)p % HUGE_PAGE) % HUGE_PAGE;
        if (head) munmap(p, head);
        if (HUGE_PAGE - head) munmap(p + head + bytes, HUGE_PAGE - head);
        madvise(p + head, bytes, MADV_HUGEPAGE); /* a hint; ignore failure */
        return p + head;
    }
#endif
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void *alloc_host(size_t bytes) {
    return is_mapped(bytes) ? map_block(bytes) : aligned_alloc(SPYRE_ALLOC_ALIGN, bytes);
}

static void free_host(void *p, size_t bytes) {
    if (is_mapped(bytes)) munmap(p, bytes);
    else free(p);
}

/* The cached block to serve `bytes` from: the smallest that holds it (the most recently freed of equal
 * ones: likelier in the CPU's caches), taken out of the cache; NULL if none. A larger block is split:
 * its tail stays cached, or goes to *unmap (the caller unmaps it once the lock is released) when too
 * small to cache. Called with the write lock held. */
static void *cache_take(DevTable *t, size_t bytes, struct CachedBlock *unmap) {
    size_t best = t->ncached;
    for (size_t i = t->ncached; i-- > 0;)
        if (t->cache[i].bytes >= bytes && (best == t->ncached || t->cache[i].bytes < t->cache[best].bytes)) {
            best = i;
            if (t->cache[i].bytes == bytes) break;
        }
    if (best == t->ncached) return NULL;
    struct CachedBlock b = t->cache[best];
    t->cached_bytes -= b.bytes;
    const size_t rest = b.bytes - bytes;
    if (rest >= CACHE_MIN_BYTES) { /* the tail takes the block's place in the cache */
        t->cache[best] = (struct CachedBlock){(char *)b.p + bytes, rest};
        t->cached_bytes += rest;
    } else {
        memmove(&t->cache[best], &t->cache[best + 1], (t->ncached - best - 1) * sizeof *t->cache);
        t->ncached--;
        if (rest) *unmap = (struct CachedBlock){(char *)b.p + bytes, rest};
        t->reserved -= rest;
    }
    return b.p;
}

/* Caches a freed mapped block, merged with the cached blocks it adjoins; 0 if there is no room to
 * list it. Called with the write lock held. */
static int cache_put(DevTable *t, void *p, size_t bytes) {
    struct CachedBlock b = {p, bytes};
    for (size_t i = 0; i < t->ncached;) {
        struct CachedBlock c = t->cache[i];
        if ((char *)c.p + c.bytes == (char *)b.p || (char *)b.p + b.bytes == (char *)c.p) {
            b = (struct CachedBlock){c.p < b.p ? c.p : b.p, c.bytes + b.bytes};
            t->cached_bytes -= c.bytes;
            memmove(&t->cache[i], &t->cache[i + 1], (t->ncached - i - 1) * sizeof *t->cache);
            t->ncached--;
        } else {
            i++;
        }
    }
    if (t->ncached == t->cache_cap) {
        size_t ncap = t->cache_cap ? t->cache_cap * 2 : 16;
        struct CachedBlock *nc = realloc(t->cache, ncap * sizeof *nc);
        if (nc == NULL) return 0;
        t->cache = nc, t->cache_cap = ncap;
    }
    t->cache[t->ncached++] = b;
    t->cached_bytes += b.bytes;
    return 1;
}

/* The bytes the cache may keep: the device's peak of live bytes and their guard pages (a page per block
 * of 64 KB or more: at most a sixteenth), within the floor and the limit. */
static size_t cache_keep(const DevTable *t) {
    const size_t peak = t->peak + t->peak / (CACHE_MIN_BYTES / SPYRE_MAP_GUARD_BYTES);
    const size_t want = peak > CACHE_FLOOR_BYTES ? peak : CACHE_FLOOR_BYTES;
    return want < g_cache_limit ? want : g_cache_limit;
}

/* Takes the oldest cached blocks out until at most `keep` bytes stay cached; their pointers go to *out
 * (freed by the caller once the lock is released). Called with the write lock held. */
static size_t cache_trim(DevTable *t, size_t keep, struct CachedBlock **out) {
    size_t n = 0;
    while (n < t->ncached && t->cached_bytes > keep) t->cached_bytes -= t->cache[n++].bytes;
    if (n == 0) return 0;
    struct CachedBlock *ps = malloc(n * sizeof *ps);
    if (ps == NULL) { /* no room to list them: keep them all cached */
        for (size_t i = 0; i < n; i++) t->cached_bytes += t->cache[i].bytes;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        ps[i] = t->cache[i];
        t->reserved -= t->cache[i].bytes;
    }
    memmove(&t->cache[0], &t->cache[n], (t->ncached - n) * sizeof *t->cache);
    t->ncached -= n;
    *out = ps;
    return n;
}

static void free_all(struct CachedBlock *ps, size_t n) {
    for (size_t i = 0; i < n; i++) free_host(ps[i].p, ps[i].bytes);
    free(ps);
}

void *spyre_alloc(int device, size_t nbytes) {
    DevTable *t = table(device);
    if (t == NULL) return NULL;
    if (nbytes > SIZE_MAX - 2 * (size_t)HUGE_PAGE) return NULL;
    const size_t bytes = block_bytes(nbytes);

    /* Reserve the bytes against the device's capacity first, so no huge host allocation is
     * attempted for a request that must fail. A cached block of the right size is taken at once. */
    pthread_rwlock_wrlock(&t->lock);
    if (nbytes > t->limit || t->allocated > t->limit - nbytes) {
        pthread_rwlock_unlock(&t->lock);
        return NULL;
    }
    t->allocated += nbytes;
    struct CachedBlock tail = {NULL, 0};
    void *p = is_mapped(bytes) ? cache_take(t, bytes, &tail) : NULL;
    struct CachedBlock *evicted = NULL;
    size_t nevicted = 0;
    if (p == NULL) { /* the cache gives way to live memory: reserved stays within the capacity */
        t->reserved += bytes; /* counted now, so that concurrent allocations see it */
        if (t->reserved > g_capacity) { /* evict the excess, or every cached block if that is less */
            const size_t excess = t->reserved - g_capacity;
            nevicted = cache_trim(t, excess < t->cached_bytes ? t->cached_bytes - excess : 0, &evicted);
        }
    }
    const int fresh = p == NULL;
    pthread_rwlock_unlock(&t->lock);
    if (nevicted) free_all(evicted, nevicted);
    if (tail.p) munmap(tail.p, tail.bytes);

    if (fresh) {
        p = alloc_host(bytes);
        if (p == NULL) { /* the host is short of memory: give back every cached block and try once more */
            spyre_empty_cache(device);
            p = alloc_host(bytes);
        }
    }

    pthread_rwlock_wrlock(&t->lock);
    if (p != NULL && t->count == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        Entry *ne = realloc(t->entries, ncap * sizeof *ne);
        if (ne == NULL) {
            free_host(p, bytes);
            p = NULL;
        } else {
            t->entries = ne;
            t->cap = ncap;
        }
    }
    if (p == NULL) {
        t->allocated -= nbytes;
        t->reserved -= bytes;
        pthread_rwlock_unlock(&t->lock);
        return NULL;
    }
    uintptr_t base = (uintptr_t)p;
    size_t pos = (size_t)(find_floor(t, base) + 1);
    memmove(&t->entries[pos + 1], &t->entries[pos], (t->count - pos) * sizeof *t->entries);
    t->entries[pos].base = base;
    t->entries[pos].size = nbytes;
    t->entries[pos].id = ++t->last_id;
    t->count++;
    if (t->allocated > t->peak) t->peak = t->allocated;
    if (t->reserved > t->peak_reserved) t->peak_reserved = t->reserved;
    pthread_rwlock_unlock(&t->lock);
    return p;
}

int spyre_free(int device, void *ptr) {
    if (ptr == NULL) return 0;
    DevTable *t = table(device);
    if (t == NULL) return -1;
    uintptr_t base = (uintptr_t)ptr;
    pthread_rwlock_wrlock(&t->lock);
    ptrdiff_t i = find_floor(t, base);
    if (i < 0 || t->entries[i].base != base) {
        pthread_rwlock_unlock(&t->lock);
        return -1;
    }
    size_t size = t->entries[i].size;
    memmove(&t->entries[i], &t->entries[i + 1], (t->count - (size_t)i - 1) * sizeof *t->entries);
    t->count--;
    t->allocated -= size;
    atomic_fetch_add_explicit(&t->generation, 1, memory_order_release); /* checks against it fail from now */
    const size_t bytes = block_bytes(size);
    const int cached = is_mapped(bytes) && bytes <= cache_keep(t) && cache_put(t, ptr, bytes);
    struct CachedBlock *evicted = NULL;
    const size_t nevicted = cached ? cache_trim(t, cache_keep(t), &evicted) : 0;
    if (!cached) t->reserved -= bytes;
    pthread_rwlock_unlock(&t->lock);
    if (nevicted) free_all(evicted, nevicted);
    if (!cached) free_host(ptr, bytes);
    return 0;
}

/* A few cached allocations per device per thread: the last ones checks succeeded against (a kernel
 * touches a handful of tensors in turn: x, w, b, y, mean, rstd). All entries belong to one table generation. */
#define CHECK_WAYS 8
typedef struct {
    uint64_t generation; /* 0: empty */
    uintptr_t base[CHECK_WAYS];
    size_t size[CHECK_WAYS];
    unsigned next; /* the entry to replace */
} CheckCache;
static _Thread_local CheckCache tl_cache[SPYRE_MAX_DEVICES];

int spyre_mem_check_hint(int device, uintptr_t addr, size_t len, SpyreCheckHint *h) {
    DevTable *t = table(device);
    if (t == NULL) return 0;
    /* the generation is read before the table is: a free in between leaves the hint stale, never wrong */
    const uint64_t gen = atomic_load_explicit(&t->generation, memory_order_acquire);
    if (h->generation == gen && h->device == device && contains(h->base, h->size, addr, len)) return 1;
    SpyreAllocation a;
    if (!spyre_mem_check(device, addr, len, &a)) return 0;
    h->generation = gen;
    h->device = device;
    h->base = a.base;
    h->size = a.size;
    return 1;
}

int spyre_mem_check(int device, uintptr_t addr, size_t len, SpyreAllocation *nearest) {
    DevTable *t = table(device);
    if (t == NULL) {
        if (nearest) nearest->base = 0, nearest->size = 0;
        return 0;
    }
    CheckCache *c = &tl_cache[device];
    if (c->generation != 0 && c->generation == atomic_load_explicit(&t->generation, memory_order_acquire)) {
        for (int w = 0; w < CHECK_WAYS; w++)
            if (c->size[w] && contains(c->base[w], c->size[w], addr, len)) {
                if (nearest) nearest->base = c->base[w], nearest->size = c->size[w];
                return 1;
            }
    }

    int ok = 0;
    SpyreAllocation best = {0, 0};
    pthread_rwlock_rdlock(&t->lock);
    uint64_t gen = atomic_load_explicit(&t->generation, memory_order_relaxed);
    ptrdiff_t i = find_floor(t, addr);
    if (i >= 0 && contains(t->entries[i].base, t->entries[i].size, addr, len)) {
        ok = 1;
        best.base = t->entries[i].base;
        best.size = t->entries[i].size;
    } else if (t->count > 0) {
        /* Nearest: distance from addr to [base, base+size) of the floor entry or the next one. */
        size_t dist = SIZE_MAX;
        if (i >= 0) {
            const Entry *e = &t->entries[i];
            dist = addr < e->base + e->size ? 0 : addr - (e->base + e->size);
            best.base = e->base;
            best.size = e->size;
        }
        if ((size_t)(i + 1) < t->count) {
            const Entry *e = &t->entries[i + 1];
            if (e->base - addr < dist) best.base = e->base, best.size = e->size;
        }
    }
    pthread_rwlock_unlock(&t->lock);
    if (ok) {
        if (c->generation != gen) { /* the table changed: forget every entry */
            memset(c, 0, sizeof *c);
            c->generation = gen;
        }
        c->base[c->next] = best.base;
        c->size[c->next] = best.size;
        c->next = (c->next + 1) % CHECK_WAYS;
    }
    if (nearest) *nearest = best;
    return ok;
}

uint64_t spyre_mem_generation(int device) {
    DevTable *t = table(device);
    return t ? atomic_load_explicit(&t->generation, memory_order_acquire) : 0;
}

uint64_t spyre_mem_lookup(int device, uintptr_t addr, SpyreAllocation *a) {
    a->base = 0;
    a->size = 0;
    DevTable *t = table(device);
    if (t == NULL) return 0;
    uint64_t id = 0;
    pthread_rwlock_rdlock(&t->lock);
    const ptrdiff_t i = find_floor(t, addr);
    if (i >= 0 && contains(t->entries[i].base, t->entries[i].size, addr, 0)) {
        a->base = t->entries[i].base;
        a->size = t->entries[i].size;
        id = t->entries[i].id;
    }
    pthread_rwlock_unlock(&t->lock);
    return id;
}

int spyre_device_of(uintptr_t addr) {
    int n = spyre_device_count();
    for (int d = 0; d < n; d++)
        if (spyre_mem_check(d, addr, 0, NULL)) return d;
    return -1;
}

#define STAT_GETTER(name, field)                          \
    size_t name(int device) {                             \
        DevTable *t = table(device);                      \
        if (t == NULL) return 0;                          \
        pthread_rwlock_rdlock(&t->lock);                  \
        size_t v = t->field;                              \
        pthread_rwlock_unlock(&t->lock);                  \
        return v;                                         \
    }
STAT_GETTER(spyre_memory_allocated, allocated)
STAT_GETTER(spyre_max_memory_allocated, peak)
STAT_GETTER(spyre_memory_reserved, reserved)
STAT_GETTER(spyre_allocation_count, count)

STAT_GETTER(spyre_max_memory_reserved, peak_reserved)
STAT_GETTER(spyre_memory_limit, limit)
STAT_GETTER(spyre_memory_cached, cached_bytes)

void spyre_reset_peak_memory_stats(int device) {
    DevTable *t = table(device);
    if (t == NULL) return;
    pthread_rwlock_wrlock(&t->lock);
    t->peak = t->allocated;
    t->peak_reserved = t->reserved;
    pthread_rwlock_unlock(&t->lock);
}

void spyre_empty_cache(int device) {
    DevTable *t = table(device);
    if (t == NULL) return;
    struct CachedBlock *blocks = NULL;
    pthread_rwlock_wrlock(&t->lock);
    const size_t n = cache_trim(t, 0, &blocks);
    pthread_rwlock_unlock(&t->lock);
    if (n) free_all(blocks, n);
    malloc_trim(0); /* the smaller blocks' pages, free in malloc's heap, back to the system */
}

int spyre_set_memory_limit(int device, size_t bytes) {
    DevTable *t = table(device);
    if (t == NULL) return -1;
    pthread_rwlock_wrlock(&t->lock);
    t->limit = bytes < g_capacity ? bytes : g_capacity; /* live allocations above it stay; new ones fail */
    pthread_rwlock_unlock(&t->lock);
    return 0;
}
