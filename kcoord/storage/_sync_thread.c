/* A thread that makes a flush round's files durable without taking the GIL.
 *
 * Issue 15: a round handed to a Python worker thread (concurrent.futures) cost ~30 us of CPU per
 * commit at 8 clients x depth 1: an executor work item, a lock and a condition, the worker
 * waiting for the GIL that the event loop holds while it serves, and call_soon_threadsafe back.
 * So small rounds synced on the loop's thread, which then served nothing for the ~0.1-0.3 ms a
 * sync takes. This thread takes a round as a list of plain operations on file descriptors
 * (fdatasync, fsync, syncfs, a page-cache hint), runs them with no Python object in reach, and
 * signals an eventfd that the event loop watches: the hop costs a futex wake and an eventfd
 * read, and the loop serves requests while the disk works.
 *
 * One round at a time per thread (the flusher keeps one thread per round it lets be in flight).
 * kcoord/storage/sync_thread.py loads it; without a C compiler the flusher uses its Python thread
 * pool instead, and tests/unit/test_sync_thread.py runs the same operations through both.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* What one operation does; the Python side names them (sync_thread.py). */
enum { OP_FDATASYNC = 0, OP_FSYNC = 1, OP_SYNCFS = 2, OP_DROP_PAGES = 3 };

typedef struct {
    int op;
    int fd;
    long long offset; /* OP_DROP_PAGES only */
    long long length;
} Op;

enum { IDLE = 0, SUBMITTED = 1, DONE = 2 };

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    int started;
    int stopping;
    int event_fd;
    int state;
    Op *ops;
    Py_ssize_t n_ops;
    Py_ssize_t cap;
    /* The round's outcome: errno of the first sync that failed (0: none) and its descriptor. */
    int error;
    int error_fd;
    long long elapsed_ns;
} SyncThread;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *run(void *arg) {
    SyncThread *t = (SyncThread *)arg;
    pthread_mutex_lock(&t->mutex);
    for (;;) {
        while (t->state != SUBMITTED && !t->stopping) pthread_cond_wait(&t->wake, &t->mutex);
        if (t->state != SUBMITTED) break; /* stopping with nothing to do */
        Op *ops = t->ops;
        Py_ssize_t n = t->n_ops;
        pthread_mutex_unlock(&t->mutex);

        long long start = now_ns();
        int error = 0, error_fd = -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            int rc = 0;
            /* Retried on EINTR, as os.fdatasync does (the thread blocks signals, but a file
             * system may still report one). */
            switch (ops[i].op) {
            case OP_FDATASYNC:
                do rc = fdatasync(ops[i].fd);
                while (rc != 0 && errno == EINTR);
                break;
            case OP_FSYNC:
                do rc = fsync(ops[i].fd);
                while (rc != 0 && errno == EINTR);
                break;
            case OP_SYNCFS:
                do rc = syncfs(ops[i].fd);
                while (rc != 0 && errno == EINTR);
                break;
            case OP_DROP_PAGES:
                /* A hint: its failure never fails the round that made the bytes durable. */
                (void)posix_fadvise(ops[i].fd, (off_t)ops[i].offset, (off_t)ops[i].length,
                                    POSIX_FADV_DONTNEED);
                break;
            }
            if (rc != 0) {
                /* As the Python path: the first failed sync ends the round, hints included (their
                 * pages would be dirty and kept anyway). */
                error = errno;
                error_fd = ops[i].fd;
                break;
            }
        }
        long long elapsed = now_ns() - start;

        pthread_mutex_lock(&t->mutex);
        t->error = error;
        t->error_fd = error_fd;
        t->elapsed_ns = elapsed;
        t->state = DONE;
        pthread_mutex_unlock(&t->mutex);
        uint64_t one = 1;
        /* An eventfd counter cannot overflow at one write per round; EINTR is retried. */
        while (write(t->event_fd, &one, sizeof one) < 0 && errno == EINTR) {
        }
        pthread_mutex_lock(&t->mutex);
    }
    pthread_mutex_unlock(&t->mutex);
    return NULL;
}

static PyObject *SyncThread_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":SyncThread", kwlist)) return NULL;
    SyncThread *t = (SyncThread *)type->tp_alloc(type, 0);
    if (t == NULL) return NULL;
    t->event_fd = -1;
    pthread_mutex_init(&t->mutex, NULL);
    pthread_cond_init(&t->wake, NULL);
    t->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->event_fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(t);
        return NULL;
    }
    /* Signals go to the interpreter's threads, never to this one: Python handles them on the
     * main thread, and a signal here would only interrupt a sync. */
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int rc = pthread_create(&t->thread, NULL, run, t);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(t);
        return NULL;
    }
    t->started = 1;
    return (PyObject *)t;
}

/* Stop the thread once the round it may be syncing has ended, and close the eventfd. */
static void stop(SyncThread *t) {
    if (t->started) {
        pthread_mutex_lock(&t->mutex);
        t->stopping = 1;
        pthread_cond_signal(&t->wake);
        pthread_mutex_unlock(&t->mutex);
        Py_BEGIN_ALLOW_THREADS
        pthread_join(t->thread, NULL);
        Py_END_ALLOW_THREADS
        t->started = 0;
    }
    if (t->event_fd >= 0) {
        close(t->event_fd);
        t->event_fd = -1;
    }
}

static void SyncThread_dealloc(SyncThread *t) {
    stop(t);
    pthread_mutex_destroy(&t->mutex);
    pthread_cond_destroy(&t->wake);
    PyMem_Free(t->ops);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *SyncThread_submit(SyncThread *t, PyObject *ops) {
    if (!PyList_Check(ops)) {
        PyErr_SetString(PyExc_TypeError, "submit() takes a list of (op, fd, offset, length)");
        return NULL;
    }
    if (!t->started) {
        PyErr_SetString(PyExc_RuntimeError, "the sync thread is closed");
        return NULL;
    }
    /* Only this (the event loop's) thread leaves IDLE; the sync thread reads ops only while
     * SUBMITTED, so they are filled in before the state says so. */
    pthread_mutex_lock(&t->mutex);
    int state = t->state;
    pthread_mutex_unlock(&t->mutex);
    if (state != IDLE) {
        PyErr_SetString(PyExc_RuntimeError, "the sync thread has a round in flight");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(ops);
    if (n > t->cap) {
        Op *grown = PyMem_Realloc(t->ops, (size_t)n * sizeof(Op));
        if (grown == NULL) return PyErr_NoMemory();
        t->ops = grown;
        t->cap = n;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(ops, i);
        Op *op = &t->ops[i];
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "an operation is a tuple (op, fd, offset, length)");
            return NULL;
        }
        if (!PyArg_ParseTuple(item, "iiLL;an operation is (op, fd, offset, length)", &op->op,
                              &op->fd, &op->offset, &op->length))
            return NULL;
        if (op->op < OP_FDATASYNC || op->op > OP_DROP_PAGES) {
            PyErr_Format(PyExc_ValueError, "unknown sync operation %d", op->op);
            return NULL;
        }
    }
    pthread_mutex_lock(&t->mutex);
    t->n_ops = n;
    t->state = SUBMITTED;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->mutex);
    Py_RETURN_NONE;
}

static PyObject *SyncThread_result(SyncThread *t, PyObject *Py_UNUSED(ignored)) {
    uint64_t count;
    if (read(t->event_fd, &count, sizeof count) < 0 && errno != EAGAIN && errno != EINTR)
        return PyErr_SetFromErrno(PyExc_OSError);
    pthread_mutex_lock(&t->mutex);
    int done = t->state == DONE;
    int error = t->error, error_fd = t->error_fd;
    long long elapsed = t->elapsed_ns;
    if (done) t->state = IDLE;
    pthread_mutex_unlock(&t->mutex);
    if (!done) Py_RETURN_NONE;
    return Py_BuildValue("(iiL)", error, error_fd, elapsed);
}

static PyObject *SyncThread_fileno(SyncThread *t, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLong(t->event_fd);
}

static PyObject *SyncThread_close(SyncThread *t, PyObject *Py_UNUSED(ignored)) {
    stop(t);
    Py_RETURN_NONE;
}

static PyMethodDef SyncThread_methods[] = {
    {"submit", (PyCFunction)SyncThread_submit, METH_O,
     "submit(ops): start syncing one round, a list of (op, fd, offset, length); the eventfd "
     "(fileno()) becomes readable when it ends."},
    {"result", (PyCFunction)SyncThread_result, METH_NOARGS,
     "result(): (errno, fd, elapsed_ns) of the round that ended (errno 0: durable), or None "
     "while it runs; reads the eventfd and makes the thread ready for the next round."},
    {"fileno", (PyCFunction)SyncThread_fileno, METH_NOARGS,
     "The eventfd signalled when a round ends (-1 once closed)."},
    {"close", (PyCFunction)SyncThread_close, METH_NOARGS,
     "Wait for a round in flight to end, then stop the thread and close the eventfd."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SyncThreadType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kcoord.storage._sync_thread.SyncThread",
    .tp_basicsize = sizeof(SyncThread),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A thread that syncs one flush round at a time, outside the GIL.",
    .tp_new = SyncThread_new,
    .tp_dealloc = (destructor)SyncThread_dealloc,
    .tp_methods = SyncThread_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sync_thread",
    "A flush round's syncs on a thread that never takes the GIL (kcoord/storage/sync_thread.py).",
    -1, NULL,
};

PyMODINIT_FUNC PyInit__sync_thread(void) {
    if (PyType_Ready(&SyncThreadType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&SyncThreadType);
    if (PyModule_AddObject(m, "SyncThread", (PyObject *)&SyncThreadType) < 0) {
        Py_DECREF(&SyncThreadType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "FDATASYNC", OP_FDATASYNC) < 0 ||
        PyModule_AddIntConstant(m, "FSYNC", OP_FSYNC) < 0 ||
        PyModule_AddIntConstant(m, "SYNCFS", OP_SYNCFS) < 0 ||
        PyModule_AddIntConstant(m, "DROP_PAGES", OP_DROP_PAGES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
