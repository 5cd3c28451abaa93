/* The word-count cache of engine/tokens.py, looked up in C.
 *
 * ``BPECounter`` counts a text as the sum of the counts of its space-separated parts when every part
 * was seen before (engine/tokens.py explains why that sum is exact). In Python that costs a
 * ``str.split`` and a dict lookup per part, about 4 us for 400 bytes; here the parts are hashed in
 * place, without making a string of each, which makes the common case about ten times cheaper.
 *
 * This module only answers; it never decides what is safe to cache. The Python side adds parts it
 * has counted and checked (first parts ending in a non-space, later parts with non-space edges),
 * and takes over whenever this module cannot give the whole answer. Only ASCII text is looked up
 * (a compact ASCII str holds its characters as bytes); anything else is the Python path's.
 *
 * Built as an optional extension: without a C compiler ctxledger installs and counts the same,
 * only slower (tests/test_tokens_fast.py checks both paths give tiktoken's counts).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_WORDS 65536  /* per table; the table restarts when full, like the Python dicts */
#define MAX_WORD_LEN 64  /* longer parts are never cached */

typedef struct {
    uint64_t hash;
    uint32_t offset; /* into the arena */
    uint16_t len;
    uint16_t used;
    int32_t count;
} Slot;

typedef struct {
    Slot *slots;
    size_t capacity; /* a power of two, at least twice the number of entries */
    size_t size;
    char *arena; /* the cached parts' characters, back to back */
    size_t arena_len, arena_capacity;
} Table;

static inline uint64_t
fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void
table_clear(Table *t)
{
    PyMem_Free(t->slots);
    PyMem_Free(t->arena);
    memset(t, 0, sizeof(*t));
}

static inline int
table_get(const Table *t, const char *s, size_t n, int32_t *count)
{
    if (t->size == 0 || n > MAX_WORD_LEN)
        return 0;
    uint64_t h = fnv1a(s, n);
    size_t mask = t->capacity - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const Slot *e = &t->slots[i];
        if (!e->used)
            return 0;
        if (e->hash == h && e->len == n && memcmp(t->arena + e->offset, s, n) == 0) {
            *count = e->count;
            return 1;
        }
    }
}

static void
slot_place(Slot *slots, size_t capacity, Slot entry)
{
    size_t mask = capacity - 1;
    size_t i = (size_t)entry.hash & mask;
    while (slots[i].used)
        i = (i + 1) & mask;
    slots[i] = entry;
}

static int
table_grow(Table *t)
{
    size_t capacity = t->capacity ? t->capacity * 2 : 256;
    Slot *slots = PyMem_Calloc(capacity, sizeof(Slot));
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < t->capacity; i++)
        if (t->slots[i].used)
            slot_place(slots, capacity, t->slots[i]);
    PyMem_Free(t->slots);
    t->slots = slots;
    t->capacity = capacity;
    return 0;
}

static int
table_put(Table *t, const char *s, size_t n, int32_t count)
{
    int32_t existing;
    if (n > MAX_WORD_LEN || table_get(t, s, n, &existing))
        return 0;
    if (t->size >= MAX_WORDS)
        table_clear(t);
    if ((t->size + 1) * 2 > t->capacity && table_grow(t) < 0)
        return -1;
    if (t->arena_len + n > t->arena_capacity) {
        size_t capacity = t->arena_capacity ? t->arena_capacity * 2 : 4096;
        while (capacity < t->arena_len + n)
            capacity *= 2;
        char *arena = PyMem_Realloc(t->arena, capacity);
        if (arena == NULL)
            return -1;
        t->arena = arena;
        t->arena_capacity = capacity;
    }
    memcpy(t->arena + t->arena_len, s, n);
    Slot entry = {fnv1a(s, n), (uint32_t)t->arena_len, (uint16_t)n, 1, count};
    t->arena_len += n;
    slot_place(t->slots, t->capacity, entry);
    t->size++;
    return 0;
}

typedef struct {
    PyObject_HEAD
    Table first;  /* count(part) of a text's first part */
    Table spaced; /* count(" " + part) of the parts after a space */
    long long space; /* count(" "): a text ending in one space after a word */
} WordTable;

static int
WordTable_init(WordTable *self, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"space", NULL};
    long long space;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "L", keywords, &space))
        return -1;
    self->space = space;
    return 0;
}

static void
WordTable_dealloc(WordTable *self)
{
    table_clear(&self->first);
    table_clear(&self->spaced);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The characters of an ASCII str, or NULL (not a str, or not ASCII). */
static inline const char *
ascii_chars(PyObject *text, Py_ssize_t *len)
{
    if (!PyUnicode_Check(text))
        return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (!PyUnicode_IS_READY(text)) /* a legacy string from a deprecated API: the Python path's */
        return NULL;
#endif
    if (!PyUnicode_IS_ASCII(text))
        return NULL;
    *len = PyUnicode_GET_LENGTH(text);
    return (const char *)PyUnicode_DATA(text);
}

static PyObject *
WordTable_lookup(WordTable *self, PyObject *text)
{
    Py_ssize_t len;
    const char *s = ascii_chars(text, &len);
    if (s == NULL)
        Py_RETURN_NONE;
    const char *end = s + len;
    const char *space = memchr(s, ' ', (size_t)len);
    const char *head_end = space ? space : end;
    long long total = 0;
    int32_t count;
    if (space != NULL) {
        for (const char *part = space + 1;;) {
            const char *next = memchr(part, ' ', (size_t)(end - part));
            const char *part_end = next ? next : end;
            if (part_end == part) {
                if (next != NULL)
                    Py_RETURN_NONE; /* two spaces in a row: not a sum of parts */
                total += self->space; /* one space at the very end */
                break;
            }
            if (!table_get(&self->spaced, part, (size_t)(part_end - part), &count))
                Py_RETURN_NONE;
            total += count;
            if (next == NULL)
                break;
            part = next + 1;
        }
    }
    if (table_get(&self->first, s, (size_t)(head_end - s), &count))
        return PyLong_FromLongLong(total + count);
    /* only the first part is new (a line number, a timestamp): the caller counts that part alone */
    PyObject *head = PyUnicode_Substring(text, 0, head_end - s);
    if (head == NULL)
        return NULL;
    return Py_BuildValue("(LN)", total, head);
}

static PyObject *
add_to(Table *t, PyObject *args)
{
    PyObject *word;
    long long count;
    if (!PyArg_ParseTuple(args, "UL", &word, &count))
        return NULL;
    Py_ssize_t len;
    const char *s = ascii_chars(word, &len);
    if (s != NULL && count >= 0 && count <= INT32_MAX && table_put(t, s, (size_t)len, (int32_t)count) < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *
WordTable_add_first(WordTable *self, PyObject *args)
{
    return add_to(&self->first, args);
}

static PyObject *
WordTable_add_spaced(WordTable *self, PyObject *args)
{
    return add_to(&self->spaced, args);
}

static PyObject *
WordTable_clear(WordTable *self, PyObject *Py_UNUSED(ignored))
{
    table_clear(&self->first);
    table_clear(&self->spaced);
    Py_RETURN_NONE;
}

static PyObject *
WordTable_sizes(WordTable *self, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("(nn)", (Py_ssize_t)self->first.size, (Py_ssize_t)self->spaced.size);
}

static PyMethodDef WordTable_methods[] = {
    {"lookup", (PyCFunction)WordTable_lookup, METH_O,
     "lookup(text) -> int | (int, str) | None\n\n"
     "The count of an ASCII text whose parts are all cached; (the other parts' sum, first part) when\n"
     "only the first part is new; None when the caller must count it another way."},
    {"add_first", (PyCFunction)WordTable_add_first, METH_VARARGS, "add_first(part, count): cache count(part)."},
    {"add_spaced", (PyCFunction)WordTable_add_spaced, METH_VARARGS,
     "add_spaced(part, count): cache count(' ' + part)."},
    {"clear", (PyCFunction)WordTable_clear, METH_NOARGS, "Forget every cached part."},
    {"sizes", (PyCFunction)WordTable_sizes, METH_NOARGS, "(first parts, spaced parts) cached."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WordTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine._wordcount.WordTable",
    .tp_doc = "Cached token counts of space-separated parts (ASCII), looked up without splitting.",
    .tp_basicsize = sizeof(WordTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)WordTable_init,
    .tp_dealloc = (destructor)WordTable_dealloc,
    .tp_methods = WordTable_methods,
};

static struct PyModuleDef wordcount_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "engine._wordcount",
    .m_doc = "The word-count cache of engine.tokens, looked up in C.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__wordcount(void)
{
    if (PyType_Ready(&WordTableType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&wordcount_module);
    if (module == NULL)
        return NULL;
    Py_INCREF(&WordTableType);
    if (PyModule_AddObject(module, "WordTable", (PyObject *)&WordTableType) < 0) {
        Py_DECREF(&WordTableType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
