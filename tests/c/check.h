/*
 * check.h - tiny checking framework shared by the MirrorCL C integration
 * programs.  Every program is a self-contained OpenCL 1.2 host program.
 *
 * Conventions
 *  - CHECK(expr, expected)      expr returns a cl_int; non-fatal on mismatch.
 *  - MUST(expr)                 like CHECK(expr, CL_SUCCESS) but fatal.
 *  - CHECK_CREATE(stmt, exp)    stmt passes &E as the errcode_ret of a
 *                               clCreate* call; E is checked (non-fatal).
 *  - CREATE(stmt)               like CHECK_CREATE(stmt, CL_SUCCESS), fatal.
 *  - CHECK_FAILS(call, exp)     call is a clCreate*-like expression using &E;
 *                               checks E == exp AND the returned handle is NULL.
 *  - CHECK_TRUE(cond, fmt, ...) arbitrary condition with a printf message.
 *  - CHECK_EQ(got, expected)    integer equality, printing both values.
 *  - CHECK_MEM(got, exp, n, elem, what)  bit-exact array comparison.
 * Every failure prints file:line, the call/condition and expected vs got, and
 * counts towards the exit status.  ct_finish() prints "PASS <program>" when
 * there was no failure and returns the process exit status.
 *
 * Environment (set by the Rust harness in tests/src/lib.rs)
 *  - MIRRORCL_EXPECT=1        the platform under test must be MirrorCL
 *                             (exactly one platform, named "MirrorCL") and
 *                             MirrorCL-only checks (released handles ...) run.
 *  - CTEST_EXPECT_DEVICES=n   the platform must expose exactly n devices.
 *  - CTEST_PLATFORM=text      use the first platform whose name contains text
 *                             (default: the first platform).
 */
#ifndef MIRRORCL_TESTS_CHECK_H
#define MIRRORCL_TESTS_CHECK_H

#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CT_FN static __attribute__((unused))
#define CT_MAX_DEVICES 64
#define ERR_SENTINEL ((cl_int)0x7eadbeef)

static const char *ct_prog = "?";
/* Host threads of a program check at once (cluster_threads): the count is atomic, and
 * each thread has its own errcode target (a shared one made one thread read another's
 * sentinel: "errcode_ret not written" from a call that succeeded). */
static _Atomic int ct_failures = 0;
static __attribute__((unused)) _Thread_local cl_int E = 0; /* errcode_ret target for CREATE and friends */

CT_FN const char *cl_err_name(cl_int e)
{
    switch (e) {
#define N_(x) case x: return #x;
    N_(CL_SUCCESS) N_(CL_DEVICE_NOT_FOUND) N_(CL_DEVICE_NOT_AVAILABLE)
    N_(CL_COMPILER_NOT_AVAILABLE) N_(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    N_(CL_OUT_OF_RESOURCES) N_(CL_OUT_OF_HOST_MEMORY)
    N_(CL_PROFILING_INFO_NOT_AVAILABLE) N_(CL_MEM_COPY_OVERLAP)
    N_(CL_IMAGE_FORMAT_MISMATCH) N_(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    N_(CL_BUILD_PROGRAM_FAILURE) N_(CL_MAP_FAILURE)
    N_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    N_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    N_(CL_COMPILE_PROGRAM_FAILURE) N_(CL_LINKER_NOT_AVAILABLE)
    N_(CL_LINK_PROGRAM_FAILURE) N_(CL_DEVICE_PARTITION_FAILED)
    N_(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) N_(CL_INVALID_VALUE)
    N_(CL_INVALID_DEVICE_TYPE) N_(CL_INVALID_PLATFORM) N_(CL_INVALID_DEVICE)
    N_(CL_INVALID_CONTEXT) N_(CL_INVALID_QUEUE_PROPERTIES)
    N_(CL_INVALID_COMMAND_QUEUE) N_(CL_INVALID_HOST_PTR)
    N_(CL_INVALID_MEM_OBJECT) N_(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    N_(CL_INVALID_IMAGE_SIZE) N_(CL_INVALID_SAMPLER) N_(CL_INVALID_BINARY)
    N_(CL_INVALID_BUILD_OPTIONS) N_(CL_INVALID_PROGRAM)
    N_(CL_INVALID_PROGRAM_EXECUTABLE) N_(CL_INVALID_KERNEL_NAME)
    N_(CL_INVALID_KERNEL_DEFINITION) N_(CL_INVALID_KERNEL)
    N_(CL_INVALID_ARG_INDEX) N_(CL_INVALID_ARG_VALUE) N_(CL_INVALID_ARG_SIZE)
    N_(CL_INVALID_KERNEL_ARGS) N_(CL_INVALID_WORK_DIMENSION)
    N_(CL_INVALID_WORK_GROUP_SIZE) N_(CL_INVALID_WORK_ITEM_SIZE)
    N_(CL_INVALID_GLOBAL_OFFSET) N_(CL_INVALID_EVENT_WAIT_LIST)
    N_(CL_INVALID_EVENT) N_(CL_INVALID_OPERATION) N_(CL_INVALID_GL_OBJECT)
    N_(CL_INVALID_BUFFER_SIZE) N_(CL_INVALID_MIP_LEVEL)
    N_(CL_INVALID_GLOBAL_WORK_SIZE) N_(CL_INVALID_PROPERTY)
    N_(CL_INVALID_IMAGE_DESCRIPTOR) N_(CL_INVALID_COMPILER_OPTIONS)
    N_(CL_INVALID_LINKER_OPTIONS) N_(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef N_
    case -69: return "CL_INVALID_PIPE_SIZE";
    case -70: return "CL_INVALID_DEVICE_QUEUE";
    case -71: return "CL_INVALID_SPEC_ID";
    case -72: return "CL_MAX_SIZE_RESTRICTION_EXCEEDED";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    case ERR_SENTINEL: return "<errcode_ret not written>";
    default: return "<unknown error code>";
    }
}

CT_FN void ct_die(const char *why)
{
    fflush(stdout);
    fprintf(stderr, "FATAL: %s\n", why);
    printf("FAIL %s (fatal after %d failed checks)\n", ct_prog, ct_failures);
    fflush(stdout);
    fflush(stderr);
    exit(1);
}

CT_FN int ct_check_code(cl_int got, cl_int exp, const char *call,
                         const char *file, int line, int fatal)
{
    if (got == exp)
        return 1;
    ct_failures++;
    fflush(stdout);
    fprintf(stderr, "%s:%d: CHECK FAILED: %s\n    expected %s (%d), got %s (%d)\n",
            file, line, call, cl_err_name(exp), (int)exp, cl_err_name(got), (int)got);
    if (fatal)
        ct_die("a call required to succeed failed");
    return 0;
}

CT_FN int ct_mirrorcl(void);
CT_FN int ct_check_dev(cl_int got, cl_int exp, cl_int dev, const char *call,
                       const char *file, int line)
{
    if (got != exp && got == dev && !ct_mirrorcl()) {
        printf("  note: %s:%d: %s returned %s instead of %s (known native deviation)\n", file,
               line, call, cl_err_name(got), cl_err_name(exp));
        return 1;
    }
    return ct_check_code(got, exp, call, file, line, 0);
}

CT_FN int ct_check_true(int ok, const char *cond, const char *file, int line,
                         const char *fmt, ...)
{
    if (ok)
        return 1;
    ct_failures++;
    fflush(stdout);
    fprintf(stderr, "%s:%d: CHECK FAILED: %s\n    ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return 0;
}

CT_FN int ct_check_eq(long long got, long long exp, const char *gs, const char *es,
                       const char *file, int line)
{
    if (got == exp)
        return 1;
    ct_failures++;
    fflush(stdout);
    fprintf(stderr, "%s:%d: CHECK FAILED: %s == %s\n    expected %lld (0x%llx), got %lld (0x%llx)\n",
            file, line, gs, es, exp, (unsigned long long)exp, got, (unsigned long long)got);
    return 0;
}

/* Prints element i's expected and received bytes (elem of them), as hex and, for 4-byte
 * elements, as u32 and f32: the line under a failed bit-exact comparison. */
CT_FN void ct_print_mismatch(size_t i, const unsigned char *e, const unsigned char *g, size_t elem)
{
    fprintf(stderr, "    [%zu] expected 0x", i);
    for (size_t b = elem; b-- > 0;)
        fprintf(stderr, "%02x", e[b]);
    fprintf(stderr, ", got 0x");
    for (size_t b = elem; b-- > 0;)
        fprintf(stderr, "%02x", g[b]);
    if (elem == 4) {
        uint32_t ue, ug;
        float fe, fg;
        memcpy(&ue, e, 4);
        memcpy(&ug, g, 4);
        memcpy(&fe, e, 4);
        memcpy(&fg, g, 4);
        fprintf(stderr, " (as u32 %u vs %u, as f32 %.9g vs %.9g)", ue, ug, (double)fe, (double)fg);
    }
    fprintf(stderr, "\n");
}

/* Bit-exact comparison of two arrays of n elements of elem bytes each. */
CT_FN int ct_check_mem(const void *got, const void *exp, size_t n, size_t elem,
                        const char *what, const char *file, int line)
{
    const unsigned char *g = (const unsigned char *)got, *e = (const unsigned char *)exp;
    size_t bad = 0, first = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(g + i * elem, e + i * elem, elem) != 0) {
            if (bad == 0)
                first = i;
            if (bad < 8) {
                if (bad == 0) {
                    ct_failures++;
                    fflush(stdout);
                    fprintf(stderr, "%s:%d: CHECK FAILED: data mismatch in %s\n", file, line, what);
                }
                ct_print_mismatch(i, e + i * elem, g + i * elem, elem);
            }
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "    %zu of %zu elements differ (first at %zu)\n", bad, n, first);
        return 0;
    }
    return 1;
}

#define CHECK(expr, expected) \
    ct_check_code((cl_int)(expr), (cl_int)(expected), #expr, __FILE__, __LINE__, 0)
/*
 * CHECK_NATIVE_DEVIATES(expr, expected, deviation): strict under MirrorCL;
 * on a native platform the known (non-conformant) code `deviation` is also
 * accepted and reported as a note.  Used for documented PoCL deviations.
 */
#define CHECK_NATIVE_DEVIATES(expr, expected, deviation)                           \
    ct_check_dev((cl_int)(expr), (cl_int)(expected), (cl_int)(deviation), #expr,   \
                 __FILE__, __LINE__)
#define MUST(expr) ct_check_code((cl_int)(expr), CL_SUCCESS, #expr, __FILE__, __LINE__, 1)
#define CHECK_CREATE(stmt, expected)                                               \
    do {                                                                           \
        E = ERR_SENTINEL;                                                          \
        stmt;                                                                      \
        ct_check_code(E, (cl_int)(expected), #stmt, __FILE__, __LINE__, 0);        \
    } while (0)
#define CREATE(stmt)                                                               \
    do {                                                                           \
        E = ERR_SENTINEL;                                                          \
        stmt;                                                                      \
        ct_check_code(E, CL_SUCCESS, #stmt, __FILE__, __LINE__, 1);                \
    } while (0)
#define CHECK_FAILS(call, expected)                                                \
    do {                                                                           \
        E = ERR_SENTINEL;                                                          \
        const void *h_ = (const void *)(call);                                     \
        if (ct_check_code(E, (cl_int)(expected), #call, __FILE__, __LINE__, 0))    \
            ct_check_true(h_ == NULL, #call " returns NULL", __FILE__, __LINE__,   \
                          "returned handle %p on error", h_);                      \
    } while (0)
#define CHECK_TRUE(cond, ...) ct_check_true(!!(cond), #cond, __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_EQ(got, expected) \
    ct_check_eq((long long)(got), (long long)(expected), #got, #expected, __FILE__, __LINE__)
#define CHECK_MEM(got, exp, n, elem, what) \
    ct_check_mem((got), (exp), (n), (elem), (what), __FILE__, __LINE__)

/* ------------------------------------------------------------------------ */

CT_FN int ct_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* Running against MirrorCL (set by the harness for preload/loader/direct). */
CT_FN int ct_mirrorcl(void) { return ct_env_flag("MIRRORCL_EXPECT"); }

CT_FN void ct_init(const char *prog)
{
    ct_prog = prog;
    setvbuf(stdout, NULL, _IOLBF, 0);
    setvbuf(stderr, NULL, _IONBF, 0);
    printf("== %s (%s)\n", prog, ct_mirrorcl() ? "expecting MirrorCL" : "native platform");
}

CT_FN int ct_finish(void)
{
    fflush(stdout);
    if (ct_failures) {
        printf("FAIL %s (%d failed checks)\n", ct_prog, ct_failures);
        return 1;
    }
    printf("PASS %s\n", ct_prog);
    return 0;
}

CT_FN void ct_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Poll *flag (set by a callback on another thread) for up to ms milliseconds. */
CT_FN int ct_wait_flag(volatile int *flag, int want, long ms)
{
    for (long t = 0; t < ms; t += 5) {
        if (__atomic_load_n(flag, __ATOMIC_SEQ_CST) >= want)
            return 1;
        ct_sleep_ms(5);
    }
    return __atomic_load_n(flag, __ATOMIC_SEQ_CST) >= want;
}

/* Returns a malloc'ed string for a string-valued platform info. */
CT_FN char *ct_platform_str(cl_platform_id p, cl_platform_info param)
{
    size_t sz = 0;
    MUST(clGetPlatformInfo(p, param, 0, NULL, &sz));
    char *s = (char *)calloc(sz + 1, 1);
    MUST(clGetPlatformInfo(p, param, sz, s, NULL));
    return s;
}

CT_FN char *ct_device_str(cl_device_id d, cl_device_info param)
{
    size_t sz = 0;
    MUST(clGetDeviceInfo(d, param, 0, NULL, &sz));
    char *s = (char *)calloc(sz + 1, 1);
    MUST(clGetDeviceInfo(d, param, sz, s, NULL));
    return s;
}

CT_FN cl_uint ct_device_uint(cl_device_id d, cl_device_info param)
{
    cl_uint v = 0;
    MUST(clGetDeviceInfo(d, param, sizeof v, &v, NULL));
    return v;
}

CT_FN cl_ulong ct_device_ulong(cl_device_id d, cl_device_info param)
{
    cl_ulong v = 0;
    MUST(clGetDeviceInfo(d, param, sizeof v, &v, NULL));
    return v;
}

/*
 * The platform under test.  With MIRRORCL_EXPECT=1 there must be exactly one
 * platform and it must be called "MirrorCL"; otherwise platform 0 is used.
 */
CT_FN cl_platform_id ct_platform(void)
{
    cl_uint n = 0;
    MUST(clGetPlatformIDs(0, NULL, &n));
    if (n == 0)
        ct_die("no OpenCL platform");
    cl_platform_id *ps = (cl_platform_id *)calloc(n, sizeof *ps);
    MUST(clGetPlatformIDs(n, ps, NULL));
    /* CTEST_PLATFORM picks the first platform whose name contains it: an ICD loader may
     * list platforms that OCL_ICD_VENDORS does not name (OCL_ICD_FILENAMES). */
    const char *want = getenv("CTEST_PLATFORM");
    cl_platform_id p = ps[0];
    if (want && *want) {
        cl_uint i = 0;
        for (; i < n; i++) {
            char *pn = ct_platform_str(ps[i], CL_PLATFORM_NAME);
            int match = strstr(pn, want) != NULL;
            free(pn);
            if (match)
                break;
        }
        if (i == n) {
            fprintf(stderr, "CTEST_PLATFORM=%s: no such platform\n", want);
            ct_die("platform not found");
        }
        p = ps[i];
    }
    free(ps);
    char *name = ct_platform_str(p, CL_PLATFORM_NAME);
    if (ct_mirrorcl()) {
        CHECK_EQ(n, 1);
        CHECK_TRUE(strcmp(name, "MirrorCL") == 0, "platform 0 is named \"%s\", expected \"MirrorCL\"", name);
    }
    free(name);
    return p;
}

/* All devices of platform p (CL_DEVICE_TYPE_ALL); checks CTEST_EXPECT_DEVICES. */
CT_FN cl_uint ct_devices(cl_platform_id p, cl_device_id *devs)
{
    cl_uint n = 0;
    MUST(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, &n));
    if (n == 0)
        ct_die("no devices");
    if (n > CT_MAX_DEVICES)
        n = CT_MAX_DEVICES;
    MUST(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, devs, NULL));
    const char *want = getenv("CTEST_EXPECT_DEVICES");
    if (want && *want)
        CHECK_EQ(n, atoi(want));
    return n;
}

/* Device (index % count) of the platform, without the CTEST_EXPECT_DEVICES check: one
 * device per MPI rank in the hand-written MPI + OpenCL programs. */
CT_FN cl_device_id ct_device_at(cl_platform_id p, unsigned index)
{
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint n = 0;
    MUST(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, CT_MAX_DEVICES, devs, &n));
    if (n == 0)
        ct_die("no devices");
    if (n > CT_MAX_DEVICES)
        n = CT_MAX_DEVICES;
    return devs[index % n];
}

CT_FN cl_context ct_context(cl_platform_id p, cl_uint ndev, const cl_device_id *devs)
{
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)p, 0};
    cl_context ctx;
    CREATE(ctx = clCreateContext(props, ndev, devs, NULL, NULL, &E));
    return ctx;
}

CT_FN cl_command_queue ct_queue(cl_context ctx, cl_device_id d, cl_command_queue_properties props)
{
    cl_command_queue q;
    CREATE(q = clCreateCommandQueue(ctx, d, props, &E));
    return q;
}

/* The platform's first device, a context of its own and an in-order queue on it (the
 * single-device microbenchmarks); the context through `ctx`. */
CT_FN cl_command_queue ct_first_device_queue(cl_context *ctx)
{
    cl_platform_id platform = ct_platform();
    cl_device_id dev = ct_device_at(platform, 0);
    *ctx = ct_context(platform, 1, &dev);
    return ct_queue(*ctx, dev, 0);
}

CT_FN void ct_print_build_logs(cl_program prog)
{
    cl_uint nd = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof nd, &nd, NULL) != CL_SUCCESS || !nd)
        return;
    cl_device_id *ds = (cl_device_id *)calloc(nd, sizeof *ds);
    clGetProgramInfo(prog, CL_PROGRAM_DEVICES, nd * sizeof *ds, ds, NULL);
    for (cl_uint i = 0; i < nd; i++) {
        size_t sz = 0;
        clGetProgramBuildInfo(prog, ds[i], CL_PROGRAM_BUILD_LOG, 0, NULL, &sz);
        char *log = (char *)calloc(sz + 1, 1);
        clGetProgramBuildInfo(prog, ds[i], CL_PROGRAM_BUILD_LOG, sz, log, NULL);
        fprintf(stderr, "---- build log (device %u) ----\n%s\n", i, log);
        free(log);
    }
    free(ds);
}

/* Builds src for every device of ctx; fatal (with the build log) on failure. */
CT_FN cl_program ct_build(cl_context ctx, const char *src, const char *opts)
{
    cl_program prog;
    CREATE(prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &E));
    cl_int err = clBuildProgram(prog, 0, NULL, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
        ct_print_build_logs(prog);
        MUST(err);
    }
    return prog;
}

CT_FN cl_kernel ct_kernel(cl_program prog, const char *name)
{
    cl_kernel k;
    E = ERR_SENTINEL;
    k = clCreateKernel(prog, name, &E);
    if (E != CL_SUCCESS)
        fprintf(stderr, "clCreateKernel(\"%s\") failed\n", name);
    ct_check_code(E, CL_SUCCESS, "clCreateKernel(prog, name, &E)", __FILE__, __LINE__, 1);
    return k;
}

CT_FN const char *ct_devtype_str(cl_device_type t)
{
    static char buf[128];
    buf[0] = 0;
    if (t & CL_DEVICE_TYPE_DEFAULT) strcat(buf, "DEFAULT|");
    if (t & CL_DEVICE_TYPE_CPU) strcat(buf, "CPU|");
    if (t & CL_DEVICE_TYPE_GPU) strcat(buf, "GPU|");
    if (t & CL_DEVICE_TYPE_ACCELERATOR) strcat(buf, "ACCELERATOR|");
    if (t & CL_DEVICE_TYPE_CUSTOM) strcat(buf, "CUSTOM|");
    size_t l = strlen(buf);
    if (l)
        buf[l - 1] = 0;
    else
        strcpy(buf, "NONE");
    return buf;
}

/* Largest CL_DEVICE_MEM_BASE_ADDR_ALIGN (in bytes) over the given devices. */
CT_FN size_t ct_max_align(cl_uint ndev, const cl_device_id *devs)
{
    size_t a = 1;
    for (cl_uint i = 0; i < ndev; i++) {
        size_t b = ct_device_uint(devs[i], CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
        if (b > a)
            a = b;
    }
    return a;
}

CT_FN cl_int ct_event_status(cl_event ev)
{
    cl_int st = 12345;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL), CL_SUCCESS);
    return st;
}

/* Deterministic pseudo random numbers (xorshift32). */
/* This process's rank as the MPI launcher set it (Open MPI, Hydra, PMIx, Slurm); 0
 * when no launcher started it. */
CT_FN int ct_launcher_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                 "MV2_COMM_WORLD_RANK", "PALS_RANKID", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

static __attribute__((unused)) uint32_t ct_rng_state = 0x12345678u;
CT_FN uint32_t ct_rand(void)
{
    uint32_t x = ct_rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    ct_rng_state = x;
    return x;
}
/* A float in roughly [-1000, 1000] with arbitrary mantissa bits. */
CT_FN float ct_randf(void)
{
    return ((float)(int32_t)ct_rand()) / 2147483648.0f * 1000.0f;
}

/* Timing for the microbenchmarks: the monotonic clock in µs, and the median of n times
 * (sorts them). */
CT_FN double ct_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int ct_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

CT_FN double ct_median(double *t, size_t n)
{
    qsort(t, n, sizeof *t, ct_by_value);
    return t[n / 2];
}

#endif
