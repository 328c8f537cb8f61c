/* Host threads allocating, checking, freeing and emptying the cache of one device at once: the
 * allocation table's locks and the lock-free check cache under ThreadSanitizer (./run.sh sanitize tsan).
 * Exits non-zero if a live allocation fails its own bounds check or the books do not balance. */
#include "devmem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define SLOTS 8
#define ROUNDS 3000

static void *churn(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *live[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    for (int k = 0; k < ROUNDS; k++) {
        const int j = rand_r(&seed) % SLOTS;
        if (live[j]) {
            if (!spyre_mem_check(0, (uintptr_t)live[j], size[j], NULL)) return "a live block failed its check";
            spyre_free(0, live[j]);
        }
        size[j] = (size_t)1 << (rand_r(&seed) % 23); /* 1 B .. 4 MiB */
        if ((live[j] = spyre_alloc(0, size[j])) == NULL) return "out of memory";
        memset(live[j], k, size[j] < 4096 ? size[j] : 4096);
        if (k % 500 == 0) spyre_empty_cache(0);
    }
    for (int j = 0; j < SLOTS; j++) spyre_free(0, live[j]);
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *err;
        pthread_join(t[i], &err);
        if (err) fprintf(stderr, "thread %d: %s\n", i, (const char *)err), bad = 1;
    }
    spyre_empty_cache(0);
    if (spyre_memory_allocated(0) != 0 || spyre_memory_reserved(0) != 0) {
        fprintf(stderr, "after all frees: %zu allocated, %zu reserved\n", spyre_memory_allocated(0),
                spyre_memory_reserved(0));
        bad = 1;
    }
    printf("%d threads x %d allocations: %s\n", THREADS, ROUNDS, bad ? "FAILED" : "ok");
    return bad;
}
