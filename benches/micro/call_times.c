/* An LD_PRELOAD library that times a program's OpenCL calls, natively or in front of
 * MirrorCL (LD_PRELOAD="call_times.so:libmirrorcl.so"): at exit it prints, for the
 * enqueues (NDRange, copy, read, write, fill), clFinish and clSetKernelArg, the calls
 * and the time inside them. Compare where a program's time goes with and without
 * MirrorCL, in the same script.
 *
 * CALL_TIMES_CPU=1 also counts the calling thread's CPU time inside them: wall time
 * minus CPU time is time the thread was off its core (preempted by a woken vendor
 * worker, or blocked in a lock or a wait). Reading a thread's CPU clock is a system
 * call (about 0.5 µs on the development VMs), so that mode slows every call down.
 *
 *   cc -O2 -shared -fPIC -o call_times.so call_times.c -ldl
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct calls {
    const char *name;
    long n;
    double wall, cpu;
};
static struct calls enqueues = {.name = "enqueues"}, finishes = {.name = "clFinish"},
                    args = {.name = "clSetKernelArg"};

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int with_cpu = -1;

/* The calling thread's CPU time, where CALL_TIMES_CPU asks for it. */
static double thread_cpu(void)
{
    if (with_cpu < 0) {
        const char *e = getenv("CALL_TIMES_CPU");
        with_cpu = e && *e == '1';
    }
    return with_cpu ? seconds(CLOCK_THREAD_CPUTIME_ID) : 0.0;
}

/* Runs CALL, counting its time in C. */
#define TIMED(c, call)                                                                   \
    do {                                                                                 \
        double cpu_ = thread_cpu(), wall_ = seconds(CLOCK_MONOTONIC);                    \
        rc = call;                                                                       \
        (c).wall += seconds(CLOCK_MONOTONIC) - wall_;                                    \
        (c).cpu += thread_cpu() - cpu_;                                                  \
        (c).n++;                                                                         \
    } while (0)

__attribute__((destructor)) static void report(void)
{
    const struct calls *all[] = {&enqueues, &finishes, &args};
    for (int i = 0; i < 3; i++) {
        fprintf(stderr, "CALLS %-15s %9ld calls %9.4f s inside", all[i]->name, all[i]->n,
                all[i]->wall);
        if (with_cpu > 0)
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
