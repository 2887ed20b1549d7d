/*
 * app.h - shared host code of the MirrorCL benchmark applications,
 * benches/apps/<name>.c: the applications of Table IV.5 of the SnuCL-D thesis
 * (blackscholes, binomialoption, cp, ep, matrixmul, nbody), a conjugate-gradient
 * solver (cg) and a Jacobi stencil with a ghost-row exchange (stencil; its
 * hand-written MPI + OpenCL twin is benches/micro/stencil_mpi.c).
 *
 * Every application is an ordinary single-process OpenCL 1.2 host program: it
 * takes ALL devices of the first platform, creates one context with all of them
 * and one in-order queue per device, splits its work over the devices, gives
 * every device its own buffers (attached to it with clAttachBufferToDevice when
 * the platform offers cl_mirrorcl_attach_buffer and APP_ATTACH is not 0), checks
 * the results against a CPU reference computed by the program itself, prints one
 * timing line and ends with "PASS <name>" (ct_finish of tests/c/check.h).
 *
 * Timing line (one, after the repetitions):
 *   TIME app=<name> devices=<n> size=<size> total_s=<x> host_s=<x> kernel_s=<x> transfer_s=<x>
 *   total_s     wall time of the computation phase: from the first enqueue of
 *               input writes to having all results on the host (program build,
 *               data generation and the CPU reference are outside it);
 *   transfer_s  input writes (enqueue .. clFinish of every queue) plus output
 *               reads (enqueue .. clFinish of every queue);
 *   kernel_s    from the first kernel enqueue to the completion of all kernels
 *               (clFinish of every queue), including whatever the application
 *               enqueues in between (nbody: the device-to-device exchange);
 *   host_s      total_s - kernel_s - transfer_s (argument setting, buffer
 *               preparation ...).
 *   The reported repetition is the BEST one (smallest total_s) of APP_REPS; its
 *   components come from that same repetition.  CLOCK_MONOTONIC throughout.
 *
 * PoCL (and other implementations) compile the work-group function of a kernel
 * lazily at its first launch, specialised for the launch's local size, global
 * offset and grid size class.  That is program build, not kernel time, so before
 * the timed phase every application launches each of its kernels once per device
 * with the very NDRange it will use but with arguments that make it do (almost) no
 * work: no options, no atoms, no bodies, no steps, zero-length dot products, no
 * pairs (APP_WARMUP=0 leaves this out).  The warm-up writes only outputs or
 * buffers that the timed phase rewrites before they are read.
 *
 * Environment
 *   APP_SIZE    problem size (meaning per application; suffixes K=2^10, M=2^20,
 *               G=2^30 are accepted, e.g. APP_SIZE=64K)
 *   APP_REPS    repetitions of the computation phase (default 1; best reported)
 *   APP_ATTACH  0: do not attach buffers even when clAttachBufferToDevice exists
 *   APP_WARMUP  0: no warm-up launches
 *   APP_CPU_THREADS  threads of the CPU reference (default: online CPUs)
 *   APP_CHECK   which outputs are checked against the CPU reference (after the
 *               timed phase; the TIME line does not depend on it):
 *               all     (default) every output;
 *               sample  where outputs are independent of each other
 *                       (blackscholes, binomialoption, cp, matrixmul) the CPU
 *                       reference is computed for a sample of the outputs only and
 *                       those are compared as under "all" (same tolerance, same
 *                       bit-exactness); the check line says "K of N values
 *                       (sampled)".  The sample (app_sample_init) is the same on
 *                       every run: one output in every stratum of
 *                       floor(N / 4096) consecutive outputs, at an offset within
 *                       the stratum that a hash of the stratum's number picks (so
 *                       that a fixed stride cannot alias with the output's
 *                       structure: rows, unrolled columns, float4 components),
 *                       plus the first and the last output of every device's
 *                       slice: at least 4096 outputs, or all when N < 8192.
 *                       nbody (every body depends on all) and ep (global sums)
 *                       keep the full reference and say so in one line.
 *               Any other value is a fatal error.
 */
#ifndef MIRRORCL_BENCH_APP_H
#define MIRRORCL_BENCH_APP_H

#include "../../tests/c/check.h"

#include "../../include/CL/cl_ext_mirrorcl.h"

#include <pthread.h>
#include <unistd.h>

#define APP_FN static __attribute__((unused))

typedef struct {
    const char *name;
    cl_platform_id platform;
    cl_uint ndev;
    cl_device_id devs[CT_MAX_DEVICES];
    cl_context ctx;
    cl_command_queue q[CT_MAX_DEVICES];
    clAttachBufferToDevice_fn attach; /* NULL: not offered or APP_ATTACH=0 */
    int reps;
    int warmup;
    int check_sample; /* APP_CHECK=sample */
} app_t;

typedef struct {
    double start, total, kernel, transfer;
    double mark;
} app_times_t;

APP_FN double app_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Unsigned integer from the environment with optional K/M/G (binary) suffix. */
APP_FN unsigned long long app_env_ull(const char *name, unsigned long long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end = NULL;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v) {
        fprintf(stderr, "%s=%s is not a number\n", name, v);
        ct_die("bad environment value");
    }
    switch (*end) {
    case 'k': case 'K': x <<= 10; end++; break;
    case 'm': case 'M': x <<= 20; end++; break;
    case 'g': case 'G': x <<= 30; end++; break;
    default: break;
    }
    if (*end) {
        fprintf(stderr, "%s=%s: trailing characters\n", name, v);
        ct_die("bad environment value");
    }
    return x;
}

/* APP_CHECK: 0 for "all" (default), 1 for "sample"; fatal for anything else. */
APP_FN int app_env_check(void)
{
    const char *v = getenv("APP_CHECK");
    if (!v || !*v || strcmp(v, "all") == 0)
        return 0;
    if (strcmp(v, "sample") == 0)
        return 1;
    fprintf(stderr, "APP_CHECK=%s: unknown value (all or sample)\n", v);
    ct_die("bad environment value");
    return 0;
}

/* Platform, all its devices, one context, one in-order queue per device, attach. */
APP_FN void app_init(app_t *a, const char *name)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    ct_init(name);
    a->check_sample = app_env_check();
    a->platform = ct_platform();
    a->ndev = ct_devices(a->platform, a->devs);
    a->ctx = ct_context(a->platform, a->ndev, a->devs);
    for (cl_uint d = 0; d < a->ndev; d++)
        a->q[d] = ct_queue(a->ctx, a->devs[d], 0);
    const char *att = getenv("APP_ATTACH");
    if (!(att && strcmp(att, "0") == 0))
        a->attach = (clAttachBufferToDevice_fn)clGetExtensionFunctionAddressForPlatform(
            a->platform, "clAttachBufferToDevice");
    a->reps = (int)app_env_ull("APP_REPS", 1);
    if (a->reps < 1)
        a->reps = 1;
    const char *w = getenv("APP_WARMUP");
    a->warmup = !(w && strcmp(w, "0") == 0);
    char *pname = ct_platform_str(a->platform, CL_PLATFORM_NAME);
    printf("  platform \"%s\", %u device(s), attach %s, %d repetition(s)\n", pname, a->ndev,
           a->attach ? "on" : (att && strcmp(att, "0") == 0 ? "off (APP_ATTACH=0)" : "not available"),
           a->reps);
    free(pname);
}

APP_FN void app_release(app_t *a)
{
    for (cl_uint d = 0; d < a->ndev; d++)
        MUST(clReleaseCommandQueue(a->q[d]));
    MUST(clReleaseContext(a->ctx));
}

/* A buffer that device d owns: created in the shared context, attached to d. */
APP_FN cl_mem app_buffer(app_t *a, cl_uint d, cl_mem_flags flags, size_t bytes)
{
    cl_mem m;
    CREATE(m = clCreateBuffer(a->ctx, flags, bytes, NULL, &E));
    if (a->attach)
        MUST(a->attach(m, a->devs[d]));
    return m;
}

/*
 * Splits `units` work units over ndev devices as evenly as possible (the first
 * units % ndev devices get one more); fatal when a device would get nothing.
 */
APP_FN void app_split(size_t units, cl_uint ndev, cl_uint d, size_t *first, size_t *count)
{
    if (units < ndev) {
        fprintf(stderr, "%zu work units cannot be split over %u devices; increase APP_SIZE\n", units, ndev);
        ct_die("problem too small for the number of devices");
    }
    size_t base = units / ndev, extra = units % ndev;
    *first = d * base + (d < extra ? d : extra);
    *count = base + (d < extra ? 1 : 0);
}

APP_FN void app_finish_all(app_t *a)
{
    for (cl_uint d = 0; d < a->ndev; d++)
        MUST(clFinish(a->q[d]));
}

APP_FN size_t app_kernel_wg(cl_kernel k, cl_device_id dev)
{
    size_t wg = 0;
    MUST(clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL));
    return wg;
}

/* Smallest CL_KERNEL_WORK_GROUP_SIZE of kernel k over all devices. */
APP_FN size_t app_min_kernel_wg(app_t *a, cl_kernel k)
{
    size_t m = (size_t)-1;
    for (cl_uint d = 0; d < a->ndev; d++) {
        size_t w = app_kernel_wg(k, a->devs[d]);
        if (w < m)
            m = w;
    }
    return m;
}

/* ---- timing ---------------------------------------------------------------- */

APP_FN void app_t_begin(app_times_t *t)
{
    memset(t, 0, sizeof *t);
    t->start = app_now();
}
/* Marks the start of a transfer or kernel section. */
APP_FN void app_t_mark(app_times_t *t) { t->mark = app_now(); }
/* Ends the section started by app_t_mark (after app_finish_all). */
APP_FN void app_t_transfer(app_times_t *t) { t->transfer += app_now() - t->mark; }
APP_FN void app_t_kernel(app_times_t *t) { t->kernel += app_now() - t->mark; }
APP_FN void app_t_end(app_times_t *t) { t->total = app_now() - t->start; }

/* Keeps the best (smallest total) repetition in *best; rep is 0-based. */
APP_FN void app_t_keep_best(app_times_t *best, const app_times_t *t, int rep)
{
    printf("  rep %d: total %.6f s (kernel %.6f s, transfer %.6f s)\n", rep + 1, t->total, t->kernel,
           t->transfer);
    if (rep == 0 || t->total < best->total)
        *best = *t;
}

APP_FN void app_report(const app_t *a, unsigned long long size, const app_times_t *b)
{
    double host = b->total - b->kernel - b->transfer;
    if (host < 0)
        host = 0;
    printf("TIME app=%s devices=%u size=%llu total_s=%.6f host_s=%.6f kernel_s=%.6f transfer_s=%.6f\n",
           a->name, a->ndev, size, b->total, host, b->kernel, b->transfer);
}

/* ---- checking ----------------------------------------------------------- */

/*
 * The outputs that are checked (APP_CHECK, app_sample_init): output k of the
 * check is output app_sample_at(s, k) of the program, k < count.  idx == NULL:
 * every output (count == total), in order: the check of APP_CHECK=all.
 */
typedef struct {
    size_t total; /* outputs of the program */
    size_t count; /* outputs checked */
    size_t *idx;  /* ascending output indices; NULL: all */
} app_sample_t;

APP_FN size_t app_sample_at(const app_sample_t *s, size_t k) { return s->idx ? s->idx[k] : k; }

/*
 * APP_CHECK_FLOAT: float comparison with a relative tolerance: element i passes when
 *   |got[i] - ref[i]| <= rtol * max(|ref[i]|, mag ? mag[i] : 0, floor)
 * (mag: a per-element magnitude, e.g. the sum of the absolute values of the
 * terms that make up ref[i]; floor: an absolute scale below which values count as
 * that scale).  NaN or Inf in got always fails.  Prints the worst ratio.
 *
 * APP_CHECK_FLOAT_SAMPLE: the same for the outputs of sample s: got is the whole
 * output (s->total elements), ref and mag have one element per checked output
 * (s->count); messages name outputs by their index in got.
 */
#define APP_CHECK_FLOAT(got, ref, mag, floor, n, rtol, what) \
    app_check_float_at((got), (ref), (mag), (floor), (n), NULL, (rtol), (what), __FILE__, __LINE__)
#define APP_CHECK_FLOAT_SAMPLE(got, ref, mag, floor, s, rtol, what) \
    app_check_float_at((got), (ref), (mag), (floor), (s)->count, (s), (rtol), (what), __FILE__, __LINE__)
APP_FN int app_check_float_at(const float *got, const float *ref, const float *mag, double floor, size_t n,
                              const app_sample_t *s, double rtol, const char *what, const char *file, int line)
{
    int sampled = s && s->idx;
    size_t bad = 0, first = 0, worst_i = 0;
    double worst = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = sampled ? s->idx[k] : k;
        double g = got[i], r = ref[k];
        double scale = fabs(r);
        if (mag && mag[k] > scale)
            scale = mag[k];
        if (floor > scale)
            scale = floor;
        double err = fabs(g - r);
        double ratio = scale > 0 ? err / scale : (err > 0 ? INFINITY : 0);
        if (!isfinite(g))
            ratio = INFINITY;
        if (!(ratio <= rtol)) {
            if (bad == 0) {
                first = i;
                ct_failures++;
                fflush(stdout);
                fprintf(stderr, "%s:%d: CHECK FAILED: %s differs from the CPU reference (relative tolerance %g)\n",
                        file, line, what, rtol);
            }
            if (bad < 8)
                fprintf(stderr, "    [%zu] expected %.9g, got %.9g (scale %.3g, error/scale %.3g)\n", i, r, g, scale,
                        ratio);
            bad++;
        }
        if (ratio > worst || !(ratio == ratio)) {
            worst = ratio;
            worst_i = i;
        }
    }
    if (bad) {
        if (sampled)
            fprintf(stderr, "    %zu of %zu sampled elements (of %zu) differ (first at %zu)\n", bad, n, s->total,
                    first);
        else
            fprintf(stderr, "    %zu of %zu elements differ (first at %zu)\n", bad, n, first);
        return 0;
    }
    if (sampled)
        printf("  check %s: %zu of %zu values (sampled), worst error/scale %.3g at [%zu] (tolerance %g)\n", what, n,
               s->total, worst, worst_i, rtol);
    else
        printf("  check %s: %zu values, worst error/scale %.3g at [%zu] (tolerance %g)\n", what, n, worst, worst_i,
               rtol);
    return 1;
}

/*
 * APP_CHECK_MEM_SAMPLE: bit-exact comparison of the outputs of sample s: got is the
 * whole output (s->total elements of elem bytes), ref has one element per checked
 * output.  Without a sample (idx NULL) it is CHECK_MEM(got, ref, total, ...).
 */
#define APP_CHECK_MEM_SAMPLE(got, ref, elem, s, what) \
    app_check_mem_sample_at((got), (ref), (elem), (s), (what), __FILE__, __LINE__)
APP_FN int app_check_mem_sample_at(const void *got, const void *ref, size_t elem, const app_sample_t *s,
                                   const char *what, const char *file, int line)
{
    if (!s->idx)
        return ct_check_mem(got, ref, s->total, elem, what, file, line);
    const unsigned char *g = (const unsigned char *)got, *e = (const unsigned char *)ref;
    size_t bad = 0, first = 0;
    for (size_t k = 0; k < s->count; k++) {
        size_t i = s->idx[k];
        if (memcmp(g + i * elem, e + k * elem, elem) == 0)
            continue;
        if (bad == 0) {
            first = i;
            ct_failures++;
            fflush(stdout);
            fprintf(stderr, "%s:%d: CHECK FAILED: data mismatch in %s\n", file, line, what);
        }
        if (bad < 8)
            ct_print_mismatch(i, e + k * elem, g + i * elem, elem);
        bad++;
    }
    if (bad) {
        fprintf(stderr, "    %zu of %zu sampled elements (of %zu) differ (first at %zu)\n", bad, s->count, s->total,
                first);
        return 0;
    }
    return 1;
}

/* ---- CPU reference in parallel ------------------------------------------ */

typedef void (*app_range_fn)(void *ctx, size_t begin, size_t end);
typedef struct {
    app_range_fn fn;
    void *ctx;
    size_t begin, end;
} app_par_t;

static void *app_par_main(void *p)
{
    app_par_t *w = (app_par_t *)p;
    if (w->begin < w->end)
        w->fn(w->ctx, w->begin, w->end);
    return NULL;
}

/* Calls fn(ctx, b, e) on disjoint ranges covering [0, n) from several threads. */
APP_FN void app_parallel_for(size_t n, app_range_fn fn, void *ctx)
{
    long nt = (long)app_env_ull("APP_CPU_THREADS", 0);
    if (nt <= 0)
        nt = sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1)
        nt = 1;
    if (nt > 64)
        nt = 64;
    if ((size_t)nt > n)
        nt = n ? (long)n : 1;
    pthread_t th[64];
    app_par_t w[64];
    for (long t = 0; t < nt; t++) {
        w[t].fn = fn;
        w[t].ctx = ctx;
        w[t].begin = n * (size_t)t / (size_t)nt;
        w[t].end = n * (size_t)(t + 1) / (size_t)nt;
        if (t > 0 && pthread_create(&th[t], NULL, app_par_main, &w[t]) != 0)
            ct_die("pthread_create failed");
    }
    app_par_main(&w[0]);
    for (long t = 1; t < nt; t++)
        pthread_join(th[t], NULL);
}

/* Deterministic input data: splitmix64 of (seed, index), independent of threads. */
APP_FN uint64_t app_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* A float in [0, 1) from (seed, index). */
APP_FN float app_unif(uint64_t seed, uint64_t i)
{
    return (float)(app_mix64(seed * 0x100000001b3ull + i) >> 40) * (1.0f / 16777216.0f);
}

APP_FN void *app_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        ct_die("out of host memory");
    return p;
}

/* ---- APP_CHECK=sample ------------------------------------------------------ */

#define APP_SAMPLE_MIN 4096

APP_FN int app_cmp_size(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return a < b ? -1 : a > b;
}

/*
 * The outputs to check of a program with `total` independent outputs, the devices'
 * slices being [sfirst[d], sfirst[d] + scount[d]) (in outputs), d < nslice.
 * APP_CHECK=all, or fewer than 2 * APP_SAMPLE_MIN outputs: all (idx NULL).
 * APP_CHECK=sample: one output in each stratum [j * stride, (j + 1) * stride) with
 * stride = floor(total / APP_SAMPLE_MIN), so at least APP_SAMPLE_MIN of them, at the
 * offset app_mix64(j) mod the stratum's length (deterministic, but no fixed stride
 * that could always fall on the same column, unrolled lane or float4 component),
 * plus the first and the last output of every slice; ascending, no duplicates.
 * Free with app_sample_free.
 */
APP_FN void app_sample_init(app_sample_t *s, const app_t *a, size_t total, cl_uint nslice, const size_t *sfirst,
                            const size_t *scount)
{
    s->total = total;
    s->count = total;
    s->idx = NULL;
    size_t stride = total / APP_SAMPLE_MIN;
    if (!a->check_sample || stride < 2)
        return;
    size_t strata = (total + stride - 1) / stride;
    size_t cap = strata + 2 * (size_t)nslice, m = 0;
    s->idx = (size_t *)app_malloc(cap * sizeof(size_t));
    for (size_t j = 0; j < strata; j++) {
        size_t b = j * stride, len = total - b < stride ? total - b : stride;
        s->idx[m++] = b + (size_t)(app_mix64(0x5a3c0ffeeull + j) % len);
    }
    for (cl_uint d = 0; d < nslice; d++)
        if (scount[d]) {
            s->idx[m++] = sfirst[d];
            s->idx[m++] = sfirst[d] + scount[d] - 1;
        }
    qsort(s->idx, m, sizeof(size_t), app_cmp_size);
    size_t u = 0;
    for (size_t k = 0; k < m; k++)
        if (u == 0 || s->idx[k] != s->idx[u - 1])
            s->idx[u++] = s->idx[k];
    s->count = u;
}

APP_FN void app_sample_free(app_sample_t *s)
{
    free(s->idx);
    s->idx = NULL;
}

/* nbody, ep: the one line that says APP_CHECK=sample changes nothing (and why). */
APP_FN void app_sample_not_applicable(const app_t *a, const char *why)
{
    if (a->check_sample)
        printf("  check: APP_CHECK=sample has no effect on %s (%s): all outputs checked\n", a->name, why);
}

#endif
