/* The word-count cache of engine/tokens.py, looked up in C.
 *
 * ``BPECounter`` counts a text as the sum of the counts of its space-separated parts (engine/tokens.py
 * explains why that sum is exact). In Python that costs a ``str.split`` and a dict lookup per part,
 * about 4 us for 400 bytes; here the parts are hashed in place, without making a string of each.
 *
 * A part not cached yet is split further, into runs of digits and of other characters (see
 * part_count for why no token crosses such a boundary), so a new line number, timestamp or version
 * string costs a few lookups of runs seen before instead of a tokenizer call. A run seen the first
 * time is counted with the Python callable the table was made with (the exact BPE core) and kept.
 *
 * Only ASCII text is looked up (a compact ASCII str holds its characters as bytes), and a part with
 * whitespace other than the separating spaces (tab, newline, ...) is never split: for those the
 * lookup answers None and the Python path counts, which also teaches this table whole parts.
 *
 * Built as an optional extension: without a C compiler ctxledger installs and counts the same,
 * only slower (tests/test_tokens_fast.py and tests/test_wordcount_native.py check both paths give
 * tiktoken's counts).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Parts are read eight characters at a time as little-endian integers (see scan_part). Elsewhere
   the build fails, and, the extension being optional, ctxledger counts in Python instead. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "engine._wordcount needs a little-endian target and GCC or Clang"
#endif

#define MAX_WORDS 65536  /* per table; the table restarts when full, like the Python dicts */
#define MAX_WORD_LEN 64  /* longer parts are never cached */

/* A part's identity: its hash, its first (up to) eight characters and its length. Comparing the
   first two settles almost every lookup without touching the stored characters. */
typedef struct {
    uint64_t hash;
    uint64_t head; /* the first min(len, 8) characters, little-endian, zero-padded */
    size_t len;
} Key;

typedef struct {
    uint64_t hash;
    uint64_t head;
    uint32_t offset; /* of the characters after the eighth, in the arena */
    uint16_t len;
    uint16_t used;
    int32_t count;
} Slot;

typedef struct {
    Slot *slots;
    size_t capacity; /* a power of two, at least twice the number of entries */
    size_t size;
    char *arena; /* the cached parts' characters beyond the eighth, back to back */
    size_t arena_len, arena_capacity;
} Table;

#define K1 0x9E3779B97F4A7C15ULL
#define K2 0xC2B2AE3D27D4EB4FULL
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static inline uint64_t
load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* one unaligned load */
    return v;
}

/* The lowest byte of v that is a space, as a mask with its high bit set (0: none). Bytes above
   the lowest match may be flagged wrongly; only the lowest is used. */
static inline uint64_t
space_bytes(uint64_t v)
{
    uint64_t x = v ^ (ONES * (uint64_t)' ');
    return (x - ONES) & ~x & HIGHS;
}

static inline uint64_t
mix_chunk(uint64_t h, uint64_t chunk)
{
    h = (h ^ chunk) * K1;
    return h ^ (h >> 31);
}

static inline uint64_t
finish(uint64_t h, uint64_t tail, size_t len)
{
    h = (h ^ tail ^ ((uint64_t)len << 56)) * K1;
    h ^= h >> 33;
    h *= K2;
    return h ^ (h >> 29);
}

/* The bytes p[0..n) (n < 8) as a little-endian integer. */
static inline uint64_t
load_tail(const char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)(unsigned char)p[i] << (8 * i);
    return v;
}

/* The key of p[0..n). */
static inline Key
make_key(const char *p, size_t n)
{
    uint64_t h = 0, head = 0;
    size_t i = 0;
    for (; n - i >= 8; i += 8) {
        uint64_t chunk = load8(p + i);
        if (i == 0)
            head = chunk;
        h = mix_chunk(h, chunk);
    }
    uint64_t tail = load_tail(p + i, n - i);
    if (i == 0)
        head = tail;
    return (Key){finish(h, tail, n), head, n};
}

/* The part starting at p: it ends at the next space or at end. Sets its key, returns its end.
   Computes the same key as make_key, eight characters at a time while eight remain. */
static inline const char *
scan_part(const char *p, const char *end, Key *key)
{
    uint64_t h = 0, head = 0, tail = 0;
    const char *q = p;
    for (;;) {
        if (end - q >= 8) {
            uint64_t v = load8(q);
            uint64_t spaces = space_bytes(v);
            if (spaces == 0) {
                if (q == p)
                    head = v;
                h = mix_chunk(h, v);
                q += 8;
                continue;
            }
            int k = __builtin_ctzll(spaces) / 8; /* characters before the space */
            tail = k ? v & (~0ULL >> (64 - 8 * k)) : 0;
            q += k;
        } else {
            const char *stop = memchr(q, ' ', (size_t)(end - q));
            if (stop == NULL)
                stop = end;
            tail = load_tail(q, (size_t)(stop - q));
            q = stop;
        }
        break;
    }
    size_t n = (size_t)(q - p);
    if (n < 8)
        head = tail;
    *key = (Key){finish(h, tail, n), head, n};
    return q;
}

static void
table_clear(Table *t)
{
    PyMem_Free(t->slots);
    PyMem_Free(t->arena);
    memset(t, 0, sizeof(*t));
}

static inline int
table_get(const Table *t, const char *s, const Key *key, int32_t *count)
{
    if (t->size == 0 || key->len > MAX_WORD_LEN)
        return 0;
    size_t mask = t->capacity - 1;
    for (size_t i = (size_t)key->hash & mask;; i = (i + 1) & mask) {
        const Slot *e = &t->slots[i];
        if (!e->used)
            return 0;
        if (e->hash == key->hash && e->head == key->head && e->len == key->len
            && (key->len <= 8 || memcmp(t->arena + e->offset, s + 8, key->len - 8) == 0)) {
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
    Key key = make_key(s, n);
    if (n > MAX_WORD_LEN || table_get(t, s, &key, &existing))
        return 0;
    if (t->size >= MAX_WORDS)
        table_clear(t);
    if ((t->size + 1) * 2 > t->capacity && table_grow(t) < 0)
        return -1;
    size_t rest = n > 8 ? n - 8 : 0;
    if (t->arena_len + rest > t->arena_capacity) {
        size_t capacity = t->arena_capacity ? t->arena_capacity * 2 : 4096;
        while (capacity < t->arena_len + rest)
            capacity *= 2;
        char *arena = PyMem_Realloc(t->arena, capacity);
        if (arena == NULL)
            return -1;
        t->arena = arena;
        t->arena_capacity = capacity;
    }
    if (rest)
        memcpy(t->arena + t->arena_len, s + 8, rest);
    Slot entry = {key.hash, key.head, (uint32_t)t->arena_len, (uint16_t)n, 1, count};
    t->arena_len += rest;
    slot_place(t->slots, t->capacity, entry);
    t->size++;
    return 0;
}

typedef struct {
    PyObject_HEAD
    Table first;  /* count(run): a run of a part's digits (three at most) or other characters */
    Table spaced; /* count(" " + part) of the parts after a space */
    long long space; /* count(" "): a text ending in one space after a word */
    PyObject *count; /* the exact count of one (ASCII) string: for a run seen the first time */
} WordTable;

static int
WordTable_init(WordTable *self, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"space", "count", NULL};
    long long space;
    PyObject *count;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LO", keywords, &space, &count))
        return -1;
    if (!PyCallable_Check(count)) {
        PyErr_SetString(PyExc_TypeError, "count must be callable");
        return -1;
    }
    self->space = space;
    Py_INCREF(count);
    Py_XSETREF(self->count, count);
    return 0;
}

static int
WordTable_traverse(WordTable *self, visitproc visit, void *arg)
{
    Py_VISIT(self->count);
    return 0;
}

static int
WordTable_tp_clear(WordTable *self)
{
    Py_CLEAR(self->count);
    return 0;
}

static void
WordTable_dealloc(WordTable *self)
{
    PyObject_GC_UnTrack(self);
    WordTable_tp_clear(self);
    table_clear(&self->first);
    table_clear(&self->spaced);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Python's str.isspace() for an ASCII character: \t \n \v \f \r, \x1c-\x1f and the space. */
static inline int
ascii_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
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

#define MAX_CALLS 8 /* new runs counted one by one per text; beyond, the caller counts the text whole */

static inline int
ascii_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* count(prefix + run) with prefix "" or " ": from table t, else from the count callable (and kept).
   1: *out is set; 0: better counted whole by the caller; -1: an error is set. */
static int
run_count(WordTable *self, Table *t, const char *p, size_t n, int spaced, int *calls, long long *out)
{
    int32_t cached;
    Key key = make_key(p, n);
    if (table_get(t, p, &key, &cached)) {
        *out = cached;
        return 1;
    }
    if (++*calls > MAX_CALLS)
        return 0;
    if (self->count == NULL) { /* made with WordTable.__new__ alone */
        PyErr_SetString(PyExc_TypeError, "WordTable was not initialised with a count callable");
        return -1;
    }
    PyObject *run = PyUnicode_New((Py_ssize_t)n + spaced, 127);
    if (run == NULL)
        return -1;
    char *chars = (char *)PyUnicode_DATA(run);
    if (spaced)
        chars[0] = ' ';
    memcpy(chars + spaced, p, n);
    PyObject *counted = PyObject_CallOneArg(self->count, run);
    Py_DECREF(run);
    if (counted == NULL)
        return -1;
    long long n_tokens = PyLong_AsLongLong(counted);
    Py_DECREF(counted);
    if (n_tokens == -1 && PyErr_Occurred())
        return -1;
    if (n_tokens < 0 || n_tokens > INT32_MAX)
        return 0;
    /* table_put looks the run up again: the callable may have run code that changed the table */
    if (table_put(t, p, n, (int32_t)n_tokens) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    *out = n_tokens;
    return 1;
}

/* count(prefix + part) for a part without whitespace, prefix "" (a text's first part) or " ".
 *
 * Summed over the part's runs of digits and of other characters: in both encodings' split patterns
 * only the \p{N}{1,3} alternative matches a digit and no alternative before or after it can take one
 * (the letter alternatives' optional first character excludes \p{N}), and without whitespace no
 * lookahead looks past a run, so no piece crosses a digit boundary. A run of digits is itself split
 * into pieces of three from the left. A space before a digit is a piece of its own (\s+ takes it:
 * nothing else matches a space followed by a digit). */
static int
part_count(WordTable *self, const char *p, const char *end, int spaced, int *calls, long long *out)
{
    long long total = 0, n;
    for (const char *run = p; run < end;) {
        int digits = ascii_digit(*run);
        const char *run_end = run;
        while (run_end < end && ascii_digit(*run_end) == digits) {
            if (ascii_space(*run_end))
                return 0;
            run_end++;
        }
        int found;
        if (digits) {
            if (spaced && run == p)
                total += self->space;
            for (const char *group = run; group < run_end; group += 3) {
                size_t size = run_end - group < 3 ? (size_t)(run_end - group) : 3;
                found = run_count(self, &self->first, group, size, 0, calls, &n);
                if (found <= 0)
                    return found;
                total += n;
            }
        } else {
            if (spaced && run == p)
                found = run_count(self, &self->spaced, run, (size_t)(run_end - run), 1, calls, &n);
            else
                found = run_count(self, &self->first, run, (size_t)(run_end - run), 0, calls, &n);
            if (found <= 0)
                return found;
            total += n;
        }
        run = run_end;
    }
    *out = total;
    return 1;
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
    long long total = 0, n;
    int32_t cached;
    int calls = 0, found;
    if (space != NULL) {
        for (const char *part = space + 1;;) {
            Key key;
            const char *part_end = scan_part(part, end, &key);
            if (key.len == 0) {
                if (part_end < end)
                    Py_RETURN_NONE; /* two spaces in a row: not a sum of parts */
                total += self->space; /* one space at the very end */
                break;
            }
            if (table_get(&self->spaced, part, &key, &cached)) {
                total += cached;
            } else {
                found = part_count(self, part, part_end, 1, &calls, &n);
                if (found < 0)
                    return NULL;
                if (found == 0)
                    Py_RETURN_NONE;
                total += n;
            }
            if (part_end == end)
                break;
            part = part_end + 1;
        }
    }
    found = part_count(self, s, head_end, 0, &calls, &n);
    if (found < 0)
        return NULL;
    if (found == 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(total + n);
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
     "lookup(text) -> int | None\n\n"
     "The count of an ASCII text as the sum of its parts' counts, cached ones looked up, new ones\n"
     "counted run by run with the count callable and kept; None when the caller must count it whole."},
    {"add_spaced", (PyCFunction)WordTable_add_spaced, METH_VARARGS,
     "add_spaced(part, count): cache count(' ' + part)."},
    {"clear", (PyCFunction)WordTable_clear, METH_NOARGS, "Forget every cached part."},
    {"sizes", (PyCFunction)WordTable_sizes, METH_NOARGS, "(runs, spaced parts) cached."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WordTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine._wordcount.WordTable",
    .tp_doc = "Cached token counts of space-separated parts (ASCII), looked up without splitting.",
    .tp_basicsize = sizeof(WordTable),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)WordTable_traverse,
    .tp_clear = (inquiry)WordTable_tp_clear,
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
