/*
 * numdiff.comparators._sums: the difference sums of two float tensors in one pass.
 *
 * sums(a, b, need_l1) -> (sum(a*a), sum((a-b)**2), sum(|a-b|), n)
 *
 * a and b are C-contiguous buffers of float32 ("f") or float64 ("d") values aligned to their
 * element size (a misaligned load is undefined behaviour in C), each side either dtype, with the
 * same number of elements (checked here: a buffer's length is never trusted to match the
 * other's). Every element is converted to float64 (exact), subtracted and squared in float64, as
 * the reference's metrics do after converting both tensors to float64; only the order of the
 * additions differs (blocks of BLOCK elements, each summed in four-lane vectors, then the block
 * sums added with Neumaier's compensation), so the sums equal a float64 reference up to ~1e-15
 * relative on ordinary data (at most about BLOCK/4 roundings per lane: ~3e-14 at worst, as
 * numpy's einsum). Nothing is rounded in any other way: no -ffast-math, no FMA (the AVX path is
 * compiled with "avx" only, and setup.py passes -ffp-contract=off so that no compiler fuses a
 * multiply and an add where the target has FMA), NaN and inf propagate into the sums and the
 * caller decides what a non-finite sum means.
 *
 * The GIL is released while summing, so a worker thread can sum while the caller's thread runs
 * the reference graph. Python's numpy path (numdiff.comparators.numerics) computes the same
 * sums when this module is not built; tests/comparators/test_native_sums.py checks that both
 * agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define NUMDIFF_X86_AVX 1
#include <immintrin.h>
#endif

#define BLOCK 1024

typedef struct {
    double sum, comp; /* Neumaier's running sum and compensation */
} acc_t;

static inline void acc_add(acc_t *acc, double x) {
    double t = acc->sum + x;
    if (fabs(acc->sum) >= fabs(x)) {
        acc->comp += (acc->sum - t) + x;
    } else {
        acc->comp += (x - t) + acc->sum;
    }
    acc->sum = t;
}

/* An infinite sum stays infinite (its compensation is NaN: inf - inf). */
static inline double acc_value(const acc_t *acc) { return isfinite(acc->sum) ? acc->sum + acc->comp : acc->sum; }

typedef struct {
    double signal, noise, l1;
} block_t;

/* One block, any dtypes, portable C: four independent accumulators per sum. */
#define DEFINE_SCALAR_BLOCK(NAME, TA, TB)                                                   \
    static void NAME(const void *va, const void *vb, size_t n, int need_l1, block_t *out) { \
        const TA *a = (const TA *)va;                                                       \
        const TB *b = (const TB *)vb;                                                       \
        double s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0}, l[4] = {0, 0, 0, 0};               \
        size_t i = 0;                                                                       \
        for (; i + 4 <= n; i += 4) {                                                        \
            for (int k = 0; k < 4; k++) {                                                   \
                double x = (double)a[i + k], d = x - (double)b[i + k];                      \
                s[k] += x * x;                                                              \
                q[k] += d * d;                                                              \
                if (need_l1) l[k] += fabs(d);                                               \
            }                                                                               \
        }                                                                                   \
        for (; i < n; i++) {                                                                \
            double x = (double)a[i], d = x - (double)b[i];                                  \
            s[0] += x * x;                                                                  \
            q[0] += d * d;                                                                  \
            if (need_l1) l[0] += fabs(d);                                                   \
        }                                                                                   \
        out->signal = (s[0] + s[1]) + (s[2] + s[3]);                                        \
        out->noise = (q[0] + q[1]) + (q[2] + q[3]);                                         \
        out->l1 = (l[0] + l[1]) + (l[2] + l[3]);                                            \
    }

DEFINE_SCALAR_BLOCK(block_ff, float, float)
DEFINE_SCALAR_BLOCK(block_fd, float, double)
DEFINE_SCALAR_BLOCK(block_df, double, float)
DEFINE_SCALAR_BLOCK(block_dd, double, double)

#ifdef NUMDIFF_X86_AVX
/* The float32 pair, the common case, with AVX: 8 elements per step. */
__attribute__((target("avx"))) static void block_ff_avx(const void *va, const void *vb, size_t n, int need_l1,
                                                        block_t *out) {
    const float *a = (const float *)va, *b = (const float *)vb;
    const __m256d sign = _mm256_set1_pd(-0.0);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0, l0 = s0, l1 = s0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d x0 = _mm256_cvtps_pd(_mm_loadu_ps(a + i));
        __m256d x1 = _mm256_cvtps_pd(_mm_loadu_ps(a + i + 4));
        __m256d d0 = _mm256_sub_pd(x0, _mm256_cvtps_pd(_mm_loadu_ps(b + i)));
        __m256d d1 = _mm256_sub_pd(x1, _mm256_cvtps_pd(_mm_loadu_ps(b + i + 4)));
        s0 = _mm256_add_pd(s0, _mm256_mul_pd(x0, x0));
        s1 = _mm256_add_pd(s1, _mm256_mul_pd(x1, x1));
        q0 = _mm256_add_pd(q0, _mm256_mul_pd(d0, d0));
        q1 = _mm256_add_pd(q1, _mm256_mul_pd(d1, d1));
        if (need_l1) {
            l0 = _mm256_add_pd(l0, _mm256_andnot_pd(sign, d0));
            l1 = _mm256_add_pd(l1, _mm256_andnot_pd(sign, d1));
        }
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
    double signal = (t[0] + t[1]) + (t[2] + t[3]);
    _mm256_storeu_pd(t, _mm256_add_pd(q0, q1));
    double noise = (t[0] + t[1]) + (t[2] + t[3]);
    _mm256_storeu_pd(t, _mm256_add_pd(l0, l1));
    double l1sum = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; i++) {
        double x = (double)a[i], d = x - (double)b[i];
        signal += x * x;
        noise += d * d;
        if (need_l1) l1sum += fabs(d);
    }
    out->signal = signal;
    out->noise = noise;
    out->l1 = l1sum;
}
#endif

typedef void (*block_fn)(const void *, const void *, size_t, int, block_t *);

static int use_avx = 0;

static block_fn pick(char fa, char fb) {
    if (fa == 'f' && fb == 'f') {
#ifdef NUMDIFF_X86_AVX
        if (use_avx) return block_ff_avx;
#endif
        return block_ff;
    }
    if (fa == 'f' && fb == 'd') return block_fd;
    if (fa == 'd' && fb == 'f') return block_df;
    return block_dd;
}

/* 'f' or 'd' for a plain native float32/float64 buffer format, else 0. */
static char float_kind(const Py_buffer *view) {
    const char *f = view->format;
    if (f == NULL) return 0;
    if (f[0] == '@' || f[0] == '=' || (f[0] == '<' && PY_LITTLE_ENDIAN) || (f[0] == '>' && !PY_LITTLE_ENDIAN)) f++;
    if (f[0] == 'f' && f[1] == '\0' && view->itemsize == 4) return 'f';
    if (f[0] == 'd' && f[1] == '\0' && view->itemsize == 8) return 'd';
    return 0;
}

static PyObject *sums(PyObject *self, PyObject *args) {
    PyObject *oa, *ob;
    Py_buffer va, vb;
    int need_l1 = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOp", &oa, &ob, &need_l1)) return NULL;
    if (PyObject_GetBuffer(oa, &va, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(ob, &vb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&va);
        return NULL;
    }
    PyObject *result = NULL;
    char fa = float_kind(&va), fb = float_kind(&vb);
    if (fa == 0 || fb == 0) {
        PyErr_SetString(PyExc_TypeError, "sums: both buffers must hold float32 or float64 values");
        goto done;
    }
    if (va.itemsize <= 0 || vb.itemsize <= 0 || va.len % va.itemsize != 0 || vb.len % vb.itemsize != 0) {
        PyErr_SetString(PyExc_ValueError, "sums: a buffer's length is not a whole number of elements");
        goto done;
    }
    Py_ssize_t n = va.len / va.itemsize;
    if (vb.len / vb.itemsize != n) {
        PyErr_Format(PyExc_ValueError, "sums: %zd elements against %zd", n, vb.len / vb.itemsize);
        goto done;
    }
    if (n > 0 && ((uintptr_t)va.buf % (uintptr_t)va.itemsize != 0 || (uintptr_t)vb.buf % (uintptr_t)vb.itemsize != 0)) {
        PyErr_SetString(PyExc_ValueError, "sums: a buffer is not aligned to its element size");
        goto done;
    }
    block_fn fn = pick(fa, fb);
    acc_t signal = {0, 0}, noise = {0, 0}, l1 = {0, 0};
    Py_BEGIN_ALLOW_THREADS
    const char *pa = (const char *)va.buf, *pb = (const char *)vb.buf;
    for (Py_ssize_t start = 0; start < n; start += BLOCK) {
        size_t m = (size_t)(n - start < BLOCK ? n - start : BLOCK);
        block_t blk;
        fn(pa + (size_t)start * (size_t)va.itemsize, pb + (size_t)start * (size_t)vb.itemsize, m, need_l1, &blk);
        acc_add(&signal, blk.signal);
        acc_add(&noise, blk.noise);
        if (need_l1) acc_add(&l1, blk.l1);
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("dddn", acc_value(&signal), acc_value(&noise), need_l1 ? acc_value(&l1) : 0.0, n);
done:
    PyBuffer_Release(&va);
    PyBuffer_Release(&vb);
    return result;
}

static PyObject *kernel(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(use_avx ? "avx" : "portable");
}

static int avx_supported(void) {
#ifdef NUMDIFF_X86_AVX
    return __builtin_cpu_supports("avx") ? 1 : 0;
#else
    return 0;
#endif
}

static PyObject *use_kernel(PyObject *self, PyObject *args) {
    const char *name;
    (void)self;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    if (strcmp(name, "portable") == 0) {
        use_avx = 0;
    } else if (strcmp(name, "avx") == 0 && avx_supported()) {
        use_avx = 1;
    } else {
        PyErr_Format(PyExc_ValueError, "use_kernel: %s is not available here (portable%s)", name,
                     avx_supported() ? ", avx" : "");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"sums", sums, METH_VARARGS,
     "sums(a, b, need_l1) -> (sum(a*a), sum((a-b)**2), sum(|a-b|), n) of two C-contiguous, aligned "
     "float32/float64 buffers of the same element count, in float64 (sum(|a-b|) is 0.0 unless need_l1)."},
    {"kernel", kernel, METH_NOARGS, "kernel() -> the loop in use for float32 pairs: 'avx' or 'portable'."},
    {"use_kernel", use_kernel, METH_VARARGS,
     "use_kernel(name) -> None: use the 'portable' or 'avx' loop for float32 pairs (tests compare both)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "numdiff.comparators._sums",
                                    "The difference sums of two float tensors in one pass (see _sums.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__sums(void) {
#ifdef NUMDIFF_X86_AVX
    __builtin_cpu_init();
#endif
    use_avx = avx_supported();
    PyObject *m = PyModule_Create(&module);
#ifndef NUMDIFF_SUMS_SOURCE_SHA256
#define NUMDIFF_SUMS_SOURCE_SHA256 "unknown" /* built without setup.py */
#endif
    if (m != NULL && PyModule_AddStringConstant(m, "source_sha256", NUMDIFF_SUMS_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
