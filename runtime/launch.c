/* Cores and launches: a persistent pool of worker threads per device (one thread = one simulated
 * core, each with its arena allocated once at the largest size), dynamic scheduling of programs
 * through an atomic counter, and a waiting thread that keeps Ctrl-C working.
 *
 * A launch holds the device's launch lock (launches on one device are serialised, as on a real
 * queue) and runs with the GIL released. The calling thread is always one of the cores (a launch
 * of one program, or with one thread, runs on it alone); while it runs programs it polls for
 * signals between programs and on backward jumps, taking the GIL every 50 ms to run
 * PyErr_CheckSignals(); once out of programs it waits for the workers, waking every 50 ms to do
 * the same. A pending exception (KeyboardInterrupt) stops every core at its next backward branch
 * or the end of its program, and is re-raised once they have.
 */
#define _GNU_SOURCE
#include "runtime.h" /* Python.h first */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp.h"

#define WAIT_SLICE_NS 50000000ull

typedef struct Pool {
    pthread_mutex_t launch_lock;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    int nworkers;
    SpyCore cores[SPYRE_MAX_CORES];
    int core_ready[SPYRE_MAX_CORES];
    SpyCore caller;
    int caller_ready;
    uint64_t gen;
    SpyLaunch *job;
    int job_threads;
    int active;
    int initialized;
} Pool;

typedef struct {
    Pool *pool;
    int index;
    uint64_t gen0; /* the generation current when the worker was created */
} WorkerArg;

static Pool g_pools[SPYRE_MAX_DEVICES];
static WorkerArg g_args[SPYRE_MAX_DEVICES][SPYRE_MAX_CORES];
static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pool_sync_init(Pool *P) {
    pthread_mutex_init(&P->launch_lock, NULL);
    pthread_mutex_init(&P->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&P->work_cv, &ca);
    pthread_cond_init(&P->done_cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* In a forked child the worker threads do not exist: forget them (their cores are kept). */
static void atfork_child(void) {
    pthread_mutex_init(&g_pools_lock, NULL);
    for (int d = 0; d < SPYRE_MAX_DEVICES; d++) {
        Pool *P = &g_pools[d];
        if (!P->initialized) continue;
        pool_sync_init(P);
        P->nworkers = 0;
        P->job = NULL;
        P->active = 0;
    }
}
static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

static Pool *get_pool(int device) {
    pthread_once(&g_atfork_once, register_atfork);
    Pool *P = &g_pools[device];
    pthread_mutex_lock(&g_pools_lock);
    if (!P->initialized) {
        pool_sync_init(P);
        P->initialized = 1;
    }
    pthread_mutex_unlock(&g_pools_lock);
    return P;
}

static void *worker_main(void *arg) {
    WorkerArg *wa = arg;
    Pool *P = wa->pool;
    const int idx = wa->index;
    pthread_mutex_lock(&P->mu);
    uint64_t seen = wa->gen0;
    for (;;) {
        while (P->gen == seen) pthread_cond_wait(&P->work_cv, &P->mu);
        seen = P->gen;
        if (idx >= P->job_threads) continue;
        SpyLaunch *L = P->job;
        pthread_mutex_unlock(&P->mu);
        spy_run_worker(L, &P->cores[idx]);
        pthread_mutex_lock(&P->mu);
        if (--P->active == 0) pthread_cond_broadcast(&P->done_cv);
    }
    return NULL;
}

/* Creates workers up to n (called with the launch lock held); returns min(n, how many exist). */
static int ensure_workers(Pool *P, int device, int n) {
    while (P->nworkers < n) {
        const int i = P->nworkers;
        if (!P->core_ready[i]) {
            if (spy_core_init(&P->cores[i]) < 0) break;
            P->core_ready[i] = 1;
        }
        g_args[device][i].pool = P;
        g_args[device][i].index = i;
        /* workers never take signals: they go to the waiting thread */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t th;
        /* the worker starts from the generation current now, so it cannot miss the next one */
        pthread_mutex_lock(&P->mu);
        g_args[device][i].gen0 = P->gen;
        const int rc = pthread_create(&th, &attr, worker_main, &g_args[device][i]);
        if (rc == 0) P->nworkers++;
        pthread_mutex_unlock(&P->mu);
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) break;
    }
    return P->nworkers < n ? P->nworkers : n;
}

/* Polled on backward jumps when the program runs on the calling thread. */
static int caller_poll(SpyLaunch *L) {
    const uint64_t t = now_ns();
    if (t - L->last_poll_ns < WAIT_SLICE_NS) return 0;
    L->last_poll_ns = t;
    PyEval_RestoreThread((PyThreadState *)L->tstate);
    const int r = PyErr_CheckSignals();
    L->tstate = PyEval_SaveThread();
    if (r < 0) {
        L->py_error = 1;
        atomic_store(&L->stop, 1);
        return 1;
    }
    return 0;
}

_Atomic int spy_counting;
static _Atomic uint64_t g_launch_counts[SPYRE_MAX_DEVICES]; /* per card: shows where a launch ran */
static _Atomic uint64_t g_busy_ns[SPYRE_MAX_DEVICES];      /* per card: host time spent running launches */

uint64_t spy_launch_count(int device) {
    return device >= 0 && device < SPYRE_MAX_DEVICES ? atomic_load(&g_launch_counts[device]) : 0;
}

uint64_t spy_busy_ns(int device) {
    return device >= 0 && device < SPYRE_MAX_DEVICES ? atomic_load(&g_busy_ns[device]) : 0;
}

int spy_launch(SpyLaunch *L, int nthreads) {
    static _Atomic uint64_t launches;
    L->id = atomic_fetch_add(&launches, 1) + 1; /* 0 never names a launch: a new core has built nothing */
    Pool *P = get_pool(L->device);
    atomic_fetch_add(&g_launch_counts[L->device], 1);
    atomic_store(&L->next, 0);
    atomic_store(&L->stop, 0);
    atomic_store(&L->faulted, 0);
    L->py_error = 0;
    PyThreadState *ts = PyEval_SaveThread();
    pthread_mutex_lock(&P->launch_lock);
    if (!P->caller_ready) {
        if (spy_core_init(&P->caller) < 0) {
            pthread_mutex_unlock(&P->launch_lock);
            PyEval_RestoreThread(ts);
            PyErr_NoMemory();
            return -1;
        }
        P->caller.poll = caller_poll; /* the calling thread's core alone polls */
        P->caller_ready = 1;
    }
    /* the calling thread is one of the cores; the pool supplies the others */
    const int workers = nthreads > 1 ? ensure_workers(P, L->device, nthreads - 1) : 0;
    /* programs per grab: about 16 grabs per core keeps the tail balanced; 32 caps what one core holds */
    const uint64_t per_core = L->nprogs / (16 * (uint64_t)(workers + 1));
    L->chunk = per_core < 1 ? 1 : per_core > 32 ? 32 : per_core;
    L->stream_insn_bytes = spy_stream_insn_bytes(L->nprogs);
    if (workers > 0) {
        pthread_mutex_lock(&P->mu);
        P->job = L;
        P->job_threads = workers;
        P->active = workers;
        P->gen++;
        pthread_cond_broadcast(&P->work_cv);
        pthread_mutex_unlock(&P->mu);
    }
    L->tstate = ts;
    const uint64_t t_start = now_ns();
    L->last_poll_ns = t_start;
    spy_run_worker(L, &P->caller);
    ts = (PyThreadState *)L->tstate;
    if (workers > 0) {
        pthread_mutex_lock(&P->mu);
        while (P->active > 0) {
            struct timespec ts_;
            clock_gettime(CLOCK_MONOTONIC, &ts_);
            uint64_t deadline = (uint64_t)ts_.tv_sec * 1000000000ull + (uint64_t)ts_.tv_nsec + WAIT_SLICE_NS;
            ts_.tv_sec = (time_t)(deadline / 1000000000ull);
            ts_.tv_nsec = (long)(deadline % 1000000000ull);
            const int rc = pthread_cond_timedwait(&P->done_cv, &P->mu, &ts_);
            if (rc == ETIMEDOUT && P->active > 0 && !L->py_error) {
                pthread_mutex_unlock(&P->mu);
                PyEval_RestoreThread(ts);
                if (PyErr_CheckSignals() < 0) {
                    L->py_error = 1;
                    atomic_store(&L->stop, 1);
                }
                ts = PyEval_SaveThread();
                pthread_mutex_lock(&P->mu);
            }
        }
        P->job = NULL;
        pthread_mutex_unlock(&P->mu);
    }
    atomic_fetch_add(&g_busy_ns[L->device], now_ns() - t_start);
    pthread_mutex_unlock(&P->launch_lock);
    PyEval_RestoreThread(ts);
    if (L->py_error) return -1;
    return atomic_load(&L->faulted) ? 1 : 0;
}

/* Default core count: the host CPUs available to this process. The affinity is asked again at most every
 * second (a syscall, once per launch, was an eighth of an empty launch's time); a taskset or a
 * cgroup change shows within that second. */
int spy_host_cpus(void) {
    static _Atomic int cached;
    static _Atomic uint64_t asked_ns;
    const uint64_t t = now_ns();
    int n = atomic_load(&cached);
    if (n > 0 && t - atomic_load(&asked_ns) < 1000000000ull) return n;
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n <= 0) n = 1;
    atomic_store(&cached, n);
    atomic_store(&asked_ns, t);
    return n;
}
