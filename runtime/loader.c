/* The spyrebin loader: checks a binary's container (isa.BINARY_SECTIONS), reads its meta section
 * (name, arguments, register and LX sizes, strings, source locations) and its tables, and hands the
 * instructions to spy_kernel_decode (interp.c), which validates and decodes them. Errors are a
 * ValueError naming what is wrong. The Python objects around a loaded kernel are in interp_py.c. */
#define _GNU_SOURCE
#include "runtime.h" /* Python.h first */

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"

static char *dup_utf8(PyObject *s) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) return NULL;
    char *r = malloc((size_t)n + 1);
    if (!r) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(r, u, (size_t)n + 1);
    return r;
}

static int bad(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyErr_Format(PyExc_ValueError, "invalid Spyre binary: %s", msg);
    return -1;
}

static int dtype_code(const char *name) {
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(spyre_dtype_names[i], name) == 0) return i;
    return -1;
}

/* meta[key] as a non-negative integer below limit */
static int meta_uint(PyObject *meta, const char *key, uint64_t limit, uint64_t *out) {
    PyObject *v = PyDict_GetItemString(meta, key);
    if (!v || !PyLong_Check(v)) return bad("meta: '%s' must be an integer", key);
    const long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return bad("meta: '%s' is out of range", key);
    }
    if (x < 0 || (uint64_t)x > limit) return bad("meta: '%s' = %lld is not in [0, %llu]", key, x, (unsigned long long)limit);
    *out = (uint64_t)x;
    return 0;
}

static int load_meta(SpyKernel *k, const char *data, size_t size) {
    PyObject *json = PyImport_ImportModule("json");
    if (!json) return -1;
    PyObject *meta = PyObject_CallMethod(json, "loads", "y#", data, (Py_ssize_t)size);
    Py_DECREF(json);
    if (!meta) {
        PyErr_Clear();
        return bad("the meta section is not valid JSON");
    }
    int rc = -1;
    if (!PyDict_Check(meta)) {
        bad("meta is not a JSON object");
        goto out;
    }
    PyObject *name = PyDict_GetItemString(meta, "name");
    if (!name || !PyUnicode_Check(name)) {
        bad("meta: 'name' must be a string");
        goto out;
    }
    if (!(k->name = dup_utf8(name))) goto out;
    uint64_t n_sregs, lx;
    if (meta_uint(meta, "n_sregs", SPYRE_SREGS_MAX, &n_sregs) < 0) goto out;
    if (meta_uint(meta, "lx_bytes", SPYRE_LX_BYTES_MAX, &lx) < 0) goto out;
    k->n_sregs = (uint32_t)n_sregs;
    k->lx_bytes = (uint32_t)lx;
    k->sreg_bytes = (size_t)n_sregs * SPYRE_SREG_BYTES;
    k->arena_bytes = k->sreg_bytes + lx;

    PyObject *strings = PyDict_GetItemString(meta, "strings");
    if (!strings || !PyList_Check(strings)) {
        bad("meta: 'strings' must be a list");
        goto out;
    }
    k->n_strings = (uint32_t)PyList_GET_SIZE(strings);
    k->strings = calloc(k->n_strings ? k->n_strings : 1, sizeof(char *));
    if (!k->strings) {
        PyErr_NoMemory();
        goto out;
    }
    for (uint32_t i = 0; i < k->n_strings; i++) {
        PyObject *s = PyList_GET_ITEM(strings, i);
        if (!PyUnicode_Check(s)) {
            k->n_strings = i;
            bad("meta: string %u is not a string", i);
            goto out;
        }
        if (!(k->strings[i] = dup_utf8(s))) {
            k->n_strings = i;
            goto out;
        }
    }

    PyObject *locs = PyDict_GetItemString(meta, "locs");
    if (!locs || !PyList_Check(locs)) {
        bad("meta: 'locs' must be a list");
        goto out;
    }
    const uint32_t nl = (uint32_t)PyList_GET_SIZE(locs);
    k->locs = calloc(nl ? nl : 1, sizeof(SpyLoc));
    if (!k->locs) {
        PyErr_NoMemory();
        goto out;
    }
    for (uint32_t i = 0; i < nl; i++) {
        PyObject *l = PyList_GET_ITEM(locs, i);
        if (!PyList_Check(l) || PyList_GET_SIZE(l) != 3 || !PyUnicode_Check(PyList_GET_ITEM(l, 0)) ||
            !PyLong_Check(PyList_GET_ITEM(l, 1)) || !PyUnicode_Check(PyList_GET_ITEM(l, 2))) {
            bad("meta: location %u is not [file, line, text]", i);
            goto out;
        }
        k->n_locs = i + 1;
        if (!(k->locs[i].file = dup_utf8(PyList_GET_ITEM(l, 0)))) goto out;
        if (!(k->locs[i].text = dup_utf8(PyList_GET_ITEM(l, 2)))) goto out;
        k->locs[i].line = PyLong_AsLong(PyList_GET_ITEM(l, 1));
        if (k->locs[i].line == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            bad("meta: location %u has a bad line number", i);
            goto out;
        }
    }

    PyObject *args = PyDict_GetItemString(meta, "args");
    if (!args || !PyList_Check(args)) {
        bad("meta: 'args' must be a list");
        goto out;
    }
    const uint32_t na = (uint32_t)PyList_GET_SIZE(args);
    k->args = calloc(na ? na : 1, sizeof(SpyArg));
    if (!k->args) {
        PyErr_NoMemory();
        goto out;
    }
    for (uint32_t i = 0; i < na; i++) {
        PyObject *a = PyList_GET_ITEM(args, i);
        if (!PyList_Check(a) || PyList_GET_SIZE(a) != 4 || !PyUnicode_Check(PyList_GET_ITEM(a, 0)) ||
            !PyUnicode_Check(PyList_GET_ITEM(a, 1)) || !PyUnicode_Check(PyList_GET_ITEM(a, 2)) ||
            !PyLong_Check(PyList_GET_ITEM(a, 3))) {
            bad("meta: argument %u is not [name, kind, dtype, slot]", i);
            goto out;
        }
        SpyArg *g = &k->args[i];
        k->n_args = i + 1;
        if (!(g->name = dup_utf8(PyList_GET_ITEM(a, 0)))) goto out;
        const char *kind = PyUnicode_AsUTF8(PyList_GET_ITEM(a, 1));
        const char *dt = PyUnicode_AsUTF8(PyList_GET_ITEM(a, 2));
        if (!kind || !dt) goto out;
        if (!strcmp(kind, "ptr")) g->kind = ARG_PTR;
        else if (!strcmp(kind, "int")) g->kind = ARG_INT;
        else if (!strcmp(kind, "float")) g->kind = ARG_FLOAT;
        else if (!strcmp(kind, "constexpr")) g->kind = ARG_CONSTEXPR;
        else if (!strcmp(kind, "none")) g->kind = ARG_NONE;
        else {
            bad("argument '%s': unknown kind '%s'", g->name, kind);
            goto out;
        }
        g->dtype = dtype_code(dt);
        if (g->kind == ARG_INT && (g->dtype < DT_I1 || g->dtype > DT_I64)) {
            bad("argument '%s': int argument of dtype '%s'", g->name, dt);
            goto out;
        }
        if (g->kind == ARG_FLOAT && (g->dtype < DT_F16 || g->dtype > DT_F64)) {
            bad("argument '%s': float argument of dtype '%s'", g->name, dt);
            goto out;
        }
        g->slot = PyLong_AsLongLong(PyList_GET_ITEM(a, 3));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            g->slot = -2;
        }
        if (g->kind == ARG_CONSTEXPR || g->kind == ARG_NONE) g->slot = -1;
        if (g->slot < -1 || (g->slot >= 0 && (uint64_t)g->slot + SPYRE_SREG_BYTES > k->arena_bytes)) {
            bad("argument '%s': slot %lld is outside the arena of %zu bytes", g->name, (long long)g->slot,
                k->arena_bytes);
            goto out;
        }
    }
    rc = 0;
out:
    Py_DECREF(meta);
    return rc;
}

int spy_kernel_load(SpyKernel *k, const uint8_t *raw, size_t len) {
    if (len < 12 + SEC_COUNT * 8) return bad("%zu bytes is too short for the header", len);
    if (memcmp(raw, SPYRE_BINARY_MAGIC, 4) != 0) return bad("bad magic (not a Spyre binary)");
    uint32_t version, count;
    memcpy(&version, raw + 4, 4);
    memcpy(&count, raw + 8, 4);
    if (version != SPYRE_ISA_VERSION) return bad("ISA version %u; this runtime reads version %d", version, SPYRE_ISA_VERSION);
    if (count != SEC_COUNT) return bad("%u sections, expected %d", count, SEC_COUNT);
    const uint8_t *sec[SEC_COUNT];
    size_t size[SEC_COUNT];
    for (int i = 0; i < SEC_COUNT; i++) {
        uint32_t off, sz;
        memcpy(&off, raw + 12 + 8 * i, 4);
        memcpy(&sz, raw + 16 + 8 * i, 4);
        if ((uint64_t)off + sz > len) return bad("section '%s' (offset %u, %u bytes) runs past the end", spyre_section_names[i], off, sz);
        sec[i] = raw + off;
        size[i] = sz;
    }
    if (size[SEC_INSNS] % sizeof(spyre_insn)) return bad("instruction section size %zu is not a multiple of 32", size[SEC_INSNS]);
    if (size[SEC_CONSTS] % 8) return bad("constant section size %zu is not a multiple of 8", size[SEC_CONSTS]);
    if (size[SEC_DESCS] % sizeof(spyre_desc)) return bad("descriptor section size %zu is not a multiple of %zu", size[SEC_DESCS], sizeof(spyre_desc));
    const size_t n_insns = size[SEC_INSNS] / sizeof(spyre_insn);
    if (n_insns >= UINT32_MAX) return bad("too many instructions");
    if (size[SEC_LOCS] != 4 * n_insns) return bad("location section has %zu bytes for %zu instructions", size[SEC_LOCS], n_insns);
    if (load_meta(k, (const char *)sec[SEC_META], size[SEC_META]) < 0) return -1;
    k->n_consts = (uint32_t)(size[SEC_CONSTS] / 8);
    k->n_descs = (uint32_t)(size[SEC_DESCS] / sizeof(spyre_desc));
    k->consts = malloc(size[SEC_CONSTS] ? size[SEC_CONSTS] : 1);
    k->descs = malloc(size[SEC_DESCS] ? size[SEC_DESCS] : 1);
    k->insn_loc = malloc(size[SEC_LOCS] ? size[SEC_LOCS] : 1);
    if (!k->consts || !k->descs || !k->insn_loc) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(k->consts, sec[SEC_CONSTS], size[SEC_CONSTS]);
    memcpy(k->descs, sec[SEC_DESCS], size[SEC_DESCS]);
    memcpy(k->insn_loc, sec[SEC_LOCS], size[SEC_LOCS]);
    for (size_t i = 0; i < n_insns; i++)
        if (k->insn_loc[i] < -1 || k->insn_loc[i] >= (int32_t)k->n_locs)
            return bad("instruction %zu: location index %d out of range (%u locations)", i, k->insn_loc[i], k->n_locs);
    char err[512];
    if (spy_kernel_decode(k, sec[SEC_INSNS], n_insns, err, sizeof err) < 0) {
        PyErr_Format(PyExc_ValueError, "invalid Spyre binary for kernel '%s': %s", k->name, err);
        return -1;
    }
    return 0;
}
