/* The print instruction (tt.print): each program formats its lines into its core's buffer, which
 * spy_print_flush writes to stdout under a lock when the program ends. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp.h"
#include "print.h"

static int is_int(int dt) { return dt >= DT_I1 && dt <= DT_I64; }

static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;

void spy_print_flush(SpyCore *core) {
    if (!core->plen) return;
    pthread_mutex_lock(&g_print_lock);
    size_t off = 0;
    while (off < core->plen) {
        const ssize_t w = write(1, core->pbuf + off, core->plen - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    pthread_mutex_unlock(&g_print_lock);
    core->plen = 0;
}

static void pb_printf(SpyCore *core, const char *fmt, ...) {
    for (int attempt = 0; attempt < 2; attempt++) {
        const size_t room = core->pcap - core->plen;
        va_list ap;
        va_start(ap, fmt);
        const int m = vsnprintf(core->pbuf ? core->pbuf + core->plen : NULL, core->pbuf ? room : 0, fmt, ap);
        va_end(ap);
        if (m < 0) return;
        if ((size_t)m < room) {
            core->plen += (size_t)m;
            return;
        }
        size_t cap = core->pcap ? core->pcap : 4096;
        while (cap - core->plen <= (size_t)m) cap *= 2;
        char *nb = realloc(core->pbuf, cap);
        if (!nb) return; /* drop the line */
        core->pbuf = nb;
        core->pcap = cap;
    }
}

static double elem_as_double(const uint8_t *p, int t) {
    switch (t) {
    case DT_F16: return SP_DL16() ? sp_dl16_to_f32(*(const sp_u16 *)p) : sp_f16_to_f32(*(const sp_u16 *)p);
    case DT_BF16: return sp_bf16_to_f32(*(const sp_u16 *)p);
    case DT_F32: return *(const sp_f32 *)p;
    case DT_F64: return *(const sp_f64 *)p;
    default: return sp_fp8_table[t - SPYRE_FP8_FIRST][*p];
    }
}

/* The string operand: an optional layout header, then the text printed after the index. */
typedef struct {
    int rank;                         /* -1: no header, index the n elements flat (rank 1) */
    uint64_t dims[SPYRE_PRINT_MAX_RANK];
    uint64_t repeat;                  /* lines per element: the GPU threads that print a scalar */
    const char *text;
} PrintFmt;

static void parse_fmt(const char *s, uint32_t n, PrintFmt *f) {
    f->rank = -1;
    f->repeat = 1;
    f->text = s;
    if (s[0] != SPYRE_PRINT_HDR) return;
    const char *p = s + 1;
    int rank = 0;
    uint64_t dims[SPYRE_PRINT_MAX_RANK], repeat = 1, total = 1;
    while (*p >= '0' && *p <= '9') {
        char *end;
        const uint64_t d = strtoull(p, &end, 10);
        if (rank == SPYRE_PRINT_MAX_RANK) return; /* malformed: print the string as it is */
        dims[rank++] = d;
        total *= d;
        p = end;
        if (*p == ',') p++;
    }
    if (*p == 'x') {
        char *end;
        repeat = strtoull(p + 1, &end, 10);
        p = end;
    }
    if (*p != SPYRE_PRINT_HDR) return;
    f->text = p + 1;
    f->repeat = repeat < 1 ? 1 : repeat > SPYRE_PRINT_MAX_REPEAT ? SPYRE_PRINT_MAX_REPEAT : repeat;
    if (rank > 0 && total == n) { /* a shape that does not cover the n elements is indexed flat */
        f->rank = rank;
        memcpy(f->dims, dims, sizeof(uint64_t) * (size_t)rank);
    }
}

static int digits(uint64_t dim) { /* ceil(log10(dim)): Triton's index width for a dimension of size dim */
    int w = 0;
    for (uint64_t p = 1; p < dim; p *= 10) w++;
    return w;
}

void spy_do_print(SpyExec *X, const SpyDInsn *I) {
    SpyCore *core = X->core;
    PrintFmt f;
    parse_fmt(X->k->strings[I->a], I->n, &f);
    const uint32_t *pid = X->pid;
    if (I->n == 0) {
        for (uint64_t r = 0; r < f.repeat; r++) pb_printf(core, "pid (%u, %u, %u)%s\n", pid[0], pid[1], pid[2], f.text);
        return;
    }
    const int scalar = F_PRINT_SCALAR(I->flags);
    int rank = f.rank;
    uint64_t dims[SPYRE_PRINT_MAX_RANK];
    int width[SPYRE_PRINT_MAX_RANK];
    if (rank < 0) {
        rank = 1;
        dims[0] = I->n;
    } else {
        memcpy(dims, f.dims, sizeof(uint64_t) * (size_t)rank);
    }
    for (int d = 0; d < rank; d++) width[d] = digits(dims[d]);
    const uint8_t *src = X->A + I->b;
    const int t = I->t, es = I->es, hex = F_PRINT_HEX(I->flags), sgn = F_PRINT_SIGNED(I->flags);
    uint64_t idx[SPYRE_PRINT_MAX_RANK] = {0}; /* the multi-index of element i, row-major */
    for (uint32_t i = 0; i < I->n; i++) {
        const uint8_t *p = src + (size_t)i * es;
        char val[64];
        if (hex) {
            uint64_t bits = 0;
            memcpy(&bits, p, es);
            if (t == DT_I1) bits &= 1;
            snprintf(val, sizeof val, "0x%0*" PRIx64, t == DT_I1 ? 0 : es * 2, bits);
        } else if (is_int(t)) {
            uint64_t u = 0;
            memcpy(&u, p, es);
            int64_t s;
            switch (t) {
            case DT_I1: u &= 1; s = -(int64_t)u; break;
            case DT_I8: s = (int8_t)u; u &= 0xFF; break;
            case DT_I16: s = (int16_t)u; u &= 0xFFFF; break;
            case DT_I32: s = (int32_t)u; u &= 0xFFFFFFFFu; break;
            default: s = (int64_t)u; break;
            }
            if (sgn) snprintf(val, sizeof val, "%" PRId64, s);
            else snprintf(val, sizeof val, "%" PRIu64, u);
        } else {
            snprintf(val, sizeof val, "%f", elem_as_double(p, t));
        }
        if (scalar) {
            for (uint64_t r = 0; r < f.repeat; r++)
                pb_printf(core, "pid (%u, %u, %u) idx ()%s%s\n", pid[0], pid[1], pid[2], f.text, val);
            continue;
        }
        char ix[SPYRE_PRINT_MAX_RANK * 24];
        size_t len = 0;
        for (int d = 0; d < rank; d++)
            len += (size_t)snprintf(ix + len, sizeof ix - len, "%s%*" PRIu64, d ? ", " : "", width[d], idx[d]);
        for (uint64_t r = 0; r < f.repeat; r++)
            pb_printf(core, "pid (%u, %u, %u) idx (%s)%s%s\n", pid[0], pid[1], pid[2], ix, f.text, val);
        for (int d = rank - 1; d >= 0; d--) { /* next multi-index */
            if (++idx[d] < dims[d]) break;
            idx[d] = 0;
        }
    }
}
