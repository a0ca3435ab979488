/* The entries of a coordinator snapshot file (kcoord/runtime/snapshot.py), in C.
 *
 * encode_snapshot in Python took ~5 ms for 10 k keys, on a worker thread that shares the GIL
 * with the event loop: at 8 x 16 commits of 10 partitions the loop's inline syncs ran past 3 ms
 * while a snapshot was encoded. This writes the same bytes in one pass over the shard's latest
 * records. Optional: without a C compiler snapshot.py encodes in Python, and
 * tests/unit/test_snapshot_codec.py checks that both write the same bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t offset;
    int64_t producer_id;
    int64_t epoch;
    Py_ssize_t seq; /* the entry's place before sorting: equal offsets keep it, as list.sort does */
    PyObject *key;  /* borrowed: bytes */
    PyObject *value; /* borrowed: bytes, or None for a tombstone */
} Entry;

/* Entries gathered between two chances for other threads to take the GIL. */
#define YIELD_EVERY 4096

static int by_offset(const void *a, const void *b) {
    const Entry *x = (const Entry *)a, *y = (const Entry *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

static unsigned char *put_be(unsigned char *p, uint64_t v, int width) {
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
    return p + width;
}

/* An int field that must fit `width` bytes as a signed big-endian value. */
static int as_int(PyObject *obj, int width, int64_t *out) {
    if (!PyLong_Check(obj)) { /* an __index__ would run Python code while items are borrowed */
        PyErr_SetString(PyExc_TypeError, "snapshot_entries: an offset, producer id or epoch is an int");
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (width < 8) {
        long long bound = 1LL << (8 * width - 1);
        if (v < -bound || v >= bound) {
            PyErr_Format(PyExc_OverflowError, "snapshot_entries: %lld does not fit %d bytes", v, width);
            return -1;
        }
    }
    *out = (int64_t)v;
    return 0;
}

static int check_key_value(PyObject *key, PyObject *value) {
    if (!PyBytes_Check(key) || (value != Py_None && !PyBytes_Check(value))) {
        PyErr_SetString(PyExc_TypeError, "snapshot_entries: a key is bytes, a value bytes or None");
        return -1;
    }
    return 0;
}

/* snapshot_entries(latest, pending, plain_producer) -> (bytes, count)
 * The entries of a snapshot in log order, as snapshot.encode_snapshot writes them after its
 * header: latest is {key: (offset, value)} (plain records, written with producer id
 * plain_producer and epoch 0), pending a list of (offset, producer id, epoch, key, value). */
static PyObject *snapshot_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "snapshot_entries takes 3 arguments, not %zd", nargs);
        return NULL;
    }
    PyObject *latest = args[0], *pending = args[1];
    if (!PyDict_Check(latest) || !PyList_Check(pending)) {
        PyErr_SetString(PyExc_TypeError, "snapshot_entries(latest: dict, pending: list, plain_producer: int)");
        return NULL;
    }
    int64_t plain_producer;
    if (as_int(args[2], 8, &plain_producer) < 0) return NULL;
    Py_ssize_t n_latest = PyDict_GET_SIZE(latest), n_pending = PyList_GET_SIZE(pending);
    Py_ssize_t n = n_latest + n_pending;
    Entry *entries = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Entry));
    if (entries == NULL) return PyErr_NoMemory();
    Py_ssize_t i = 0, pos = 0;
    Py_ssize_t size = 0;
    PyObject *key, *item;
    /* The dict and the list are the caller's private copies (CoordinatorShard.capture), and
     * nothing here runs Python code on them (PyLong_AsLongLong on an int does not): the borrowed
     * references stay valid, also while other threads run, which they may every YIELD_EVERY
     * entries (a shard of 500 k keys would otherwise hold the GIL for ~10 ms here). */
    while (PyDict_Next(latest, &pos, &key, &item)) {
        if (i > 0 && i % YIELD_EVERY == 0) {
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
        }
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "snapshot_entries: latest maps a key to (offset, value)");
            goto error;
        }
        Entry *e = &entries[i];
        e->key = key;
        e->value = PyTuple_GET_ITEM(item, 1);
        if (check_key_value(e->key, e->value) < 0 || as_int(PyTuple_GET_ITEM(item, 0), 8, &e->offset) < 0) goto error;
        e->producer_id = plain_producer;
        e->epoch = 0;
        e->seq = i++;
    }
    for (Py_ssize_t j = 0; j < n_pending; j++) {
        PyObject *t = PyList_GET_ITEM(pending, j);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) {
            PyErr_SetString(PyExc_TypeError, "snapshot_entries: a pending entry is a 5-tuple");
            goto error;
        }
        Entry *e = &entries[i];
        e->key = PyTuple_GET_ITEM(t, 3);
        e->value = PyTuple_GET_ITEM(t, 4);
        if (check_key_value(e->key, e->value) < 0 || as_int(PyTuple_GET_ITEM(t, 0), 8, &e->offset) < 0 ||
            as_int(PyTuple_GET_ITEM(t, 1), 8, &e->producer_id) < 0 || as_int(PyTuple_GET_ITEM(t, 2), 2, &e->epoch) < 0)
            goto error;
        e->seq = i++;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        /* offset, producer id, epoch, key length, key, value length, value */
        Py_ssize_t klen = PyBytes_GET_SIZE(entries[j].key);
        Py_ssize_t vlen = entries[j].value != Py_None ? PyBytes_GET_SIZE(entries[j].value) : 0;
        if (klen > INT32_MAX || vlen > INT32_MAX || 26 + klen + vlen > PY_SSIZE_T_MAX - size) {
            PyErr_SetString(PyExc_OverflowError, "snapshot_entries: a key or value over 2 GiB, or too many");
            goto error;
        }
        size += 26 + klen + vlen;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) goto error;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    /* The sort and the copy read only immutable bytes the copies keep alive, and write only the
     * new object: the event loop runs meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    qsort(entries, (size_t)n, sizeof(Entry), by_offset);
    for (Py_ssize_t j = 0; j < n; j++) {
        const Entry *e = &entries[j];
        Py_ssize_t klen = PyBytes_GET_SIZE(e->key);
        p = put_be(p, (uint64_t)e->offset, 8);
        p = put_be(p, (uint64_t)e->producer_id, 8);
        p = put_be(p, (uint64_t)e->epoch, 2);
        p = put_be(p, (uint64_t)klen, 4);
        memcpy(p, PyBytes_AS_STRING(e->key), (size_t)klen);
        p += klen;
        if (e->value == Py_None) {
            p = put_be(p, (uint64_t)(uint32_t)-1, 4);
        } else {
            Py_ssize_t vlen = PyBytes_GET_SIZE(e->value);
            p = put_be(p, (uint64_t)vlen, 4);
            memcpy(p, PyBytes_AS_STRING(e->value), (size_t)vlen);
            p += vlen;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(entries);
    PyObject *result = Py_BuildValue("(Nn)", out, n);
    return result;
error:
    PyMem_Free(entries);
    return NULL;
}

static PyMethodDef methods[] = {
    {"snapshot_entries", (PyCFunction)(void (*)(void))snapshot_entries, METH_FASTCALL,
     "snapshot_entries(latest, pending, plain_producer) -> (bytes, count)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_snapshot_codec",
    "A coordinator snapshot's entries in C (optional; snapshot.encode_snapshot mirrors it).", -1, methods,
};

PyMODINIT_FUNC PyInit__snapshot_codec(void) { return PyModule_Create(&module); }
