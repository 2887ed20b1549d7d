/* An LD_PRELOAD library in front of a program's OpenCL calls. Every clEnqueue* call below
 * first busy-waits ENQUEUE_DELAY_NS nanoseconds on the calling thread, then calls the
 * real entry point. It prices a per-command cost: run natively with it, a program shows what
 * a runtime that adds that much work to each enqueue would cost it, with the vendor's
 * own threads and wake-ups as they are (benches/run-cg-budget.sh).
 *
 * Instead of (or besides) the delay, each enqueue can first do work of one kind, to
 * price the kinds a runtime's cost is made of:
 *   ENQUEUE_WORK=N     N instructions of independent integer arithmetic (in steps of
 *                      seven, no memory traffic);
 *   ENQUEUE_ATOMICS=N  N atomic read-modify-writes of one private cache line (an Arc
 *                      count or an uncontended lock);
 *   ENQUEUE_LINES=N    N bytes written at pseudo-random cache lines of a 16 MiB block
 *                      (objects spread over the heap, missing the core's caches).
 *
 * CALL_TIMES=1 times the program's calls instead (or besides), natively or in front of
 * MirrorCL (LD_PRELOAD="enqueue_delay.so:libmirrorcl.so"): at exit it prints, for the
 * enqueues, clFinish and clSetKernelArg, the calls and the time inside them. With
 * CALL_TIMES=cpu also the calling thread's CPU time inside them: wall time minus CPU time
 * is time the thread was off its core (preempted by a woken vendor worker, or blocked in
 * a lock or a wait). Reading a thread's CPU clock is a system call (about 0.5 µs on the
 * development VMs), so that mode slows every call down and counts the readings too.
 *
 *   cc -O2 -shared -fPIC -o enqueue_delay.so enqueue_delay.c -ldl
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long delay_ns = -1;

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static long env_long(const char *name)
{
    const char *e = getenv(name);
    return e ? atol(e) : 0;
}

static long work_steps = -1, atomics, lines;
static unsigned char *block;
static _Alignas(64) long counter;
static volatile unsigned long sink;

static void work(void)
{
    if (work_steps < 0) {
        atomics = env_long("ENQUEUE_ATOMICS");
        lines = env_long("ENQUEUE_LINES");
        block = lines > 0 ? calloc(1 << 24, 1) : NULL;
        work_steps = env_long("ENQUEUE_WORK");
    }
    /* Four independent chains: the core runs them side by side, as it does ordinary
     * code. Seven instructions a step with the loop's own. */
    unsigned long a = sink, b = a >> 1, c = a << 1, d = ~a;
    for (long i = 0; i < work_steps / 7; i++) {
        a += (unsigned long)i;
        b ^= (unsigned long)i;
        c += b;
        d ^= a;
        __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
    }
    sink = a + b + c + d;
    for (long i = 0; i < atomics; i++)
        __atomic_fetch_add(&counter, 1, __ATOMIC_ACQ_REL);
    static unsigned long r = 88172645463325252ul;
    for (long i = 0; block && i < lines; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        block[(r & ((1ul << 24) - 1)) & ~63ul] += 1;
    }
}

static void delay(void)
{
    work();
    if (delay_ns < 0)
        delay_ns = env_long("ENQUEUE_DELAY_NS");
    if (delay_ns <= 0)
        return;
    long until = now_ns() + delay_ns;
    while (now_ns() < until)
        ;
}

/* Calls of one kind and the time inside them (CALL_TIMES). */
struct calls {
    const char *name;
    long n;
    double wall, cpu;
};
static struct calls enqueues = {.name = "enqueues"}, finishes = {.name = "clFinish"},
                    args = {.name = "clSetKernelArg"};

/* 0: no timing; 1: wall time; 2: and thread CPU time. */
static int timing = -1;

static int times_calls(void)
{
    if (timing < 0) {
        const char *e = getenv("CALL_TIMES");
        timing = !e || !*e || !strcmp(e, "0") ? 0 : !strcmp(e, "cpu") ? 2 : 1;
    }
    return timing;
}

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double thread_cpu(void)
{
    return timing == 2 ? seconds(CLOCK_THREAD_CPUTIME_ID) : 0.0;
}

/* rc = CALL, its time counted in C where CALL_TIMES asks. */
#define TIMED(c, call)                                                                   \
    do {                                                                                 \
        if (!times_calls()) {                                                            \
            rc = call;                                                                   \
            break;                                                                       \
        }                                                                                \
        double cpu_ = thread_cpu(), wall_ = seconds(CLOCK_MONOTONIC);                    \
        rc = call;                                                                       \
        (c).wall += seconds(CLOCK_MONOTONIC) - wall_;                                    \
        (c).cpu += thread_cpu() - cpu_;                                                  \
        (c).n++;                                                                         \
    } while (0)

__attribute__((destructor)) static void report(void)
{
    if (timing <= 0)
        return;
    const struct calls *all[] = {&enqueues, &finishes, &args};
    for (int i = 0; i < 3; i++) {
        fprintf(stderr, "CALLS %-15s %9ld calls %9.4f s inside", all[i]->name, all[i]->n,
                all[i]->wall);
        if (timing == 2)
            fprintf(stderr, ", %9.4f s of CPU", all[i]->cpu);
        fprintf(stderr, "\n");
    }
}

/* The real entry point NAME of type TYPE, looked up once. */
#define REAL(type, name)                                                                 \
    static type real;                                                                    \
    if (!real)                                                                           \
        real = (type)dlsym(RTLD_NEXT, name);

typedef cl_int (*ndrange_fn)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                             const size_t *, cl_uint, const cl_event *, cl_event *);
cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *offset,
                              const size_t *global, const size_t *local, cl_uint n,
                              const cl_event *waits, cl_event *ev)
{
    REAL(ndrange_fn, "clEnqueueNDRangeKernel");
    delay();
    cl_int rc;
    TIMED(enqueues, real(q, k, dims, offset, global, local, n, waits, ev));
    return rc;
}

typedef cl_int (*copy_fn)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                          const cl_event *, cl_event *);
cl_int clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t src_offset,
                           size_t dst_offset, size_t size, cl_uint n, const cl_event *waits,
                           cl_event *ev)
{
    REAL(copy_fn, "clEnqueueCopyBuffer");
    delay();
    cl_int rc;
    TIMED(enqueues, real(q, src, dst, src_offset, dst_offset, size, n, waits, ev));
    return rc;
}

typedef cl_int (*read_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                          const cl_event *, cl_event *);
cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem b, cl_bool blocking, size_t offset,
                           size_t size, void *ptr, cl_uint n, const cl_event *waits, cl_event *ev)
{
    REAL(read_fn, "clEnqueueReadBuffer");
    delay();
    cl_int rc;
    TIMED(enqueues, real(q, b, blocking, offset, size, ptr, n, waits, ev));
    return rc;
}

typedef cl_int (*write_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *,
                           cl_uint, const cl_event *, cl_event *);
cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem b, cl_bool blocking, size_t offset,
                            size_t size, const void *ptr, cl_uint n, const cl_event *waits,
                            cl_event *ev)
{
    REAL(write_fn, "clEnqueueWriteBuffer");
    delay();
    cl_int rc;
    TIMED(enqueues, real(q, b, blocking, offset, size, ptr, n, waits, ev));
    return rc;
}

typedef cl_int (*fill_fn)(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t, cl_uint,
                          const cl_event *, cl_event *);
cl_int clEnqueueFillBuffer(cl_command_queue q, cl_mem b, const void *pattern, size_t pattern_size,
                           size_t offset, size_t size, cl_uint n, const cl_event *waits,
                           cl_event *ev)
{
    REAL(fill_fn, "clEnqueueFillBuffer");
    delay();
    cl_int rc;
    TIMED(enqueues, real(q, b, pattern, pattern_size, offset, size, n, waits, ev));
    return rc;
}

typedef cl_int (*finish_fn)(cl_command_queue);
cl_int clFinish(cl_command_queue q)
{
    REAL(finish_fn, "clFinish");
    cl_int rc;
    TIMED(finishes, real(q));
    return rc;
}

typedef cl_int (*arg_fn)(cl_kernel, cl_uint, size_t, const void *);
cl_int clSetKernelArg(cl_kernel k, cl_uint i, size_t size, const void *value)
{
    REAL(arg_fn, "clSetKernelArg");
    cl_int rc;
    TIMED(args, real(k, i, size, value));
    return rc;
}
