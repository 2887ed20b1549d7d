/*
 * cluster_threads.c - one host thread per device, the pattern of multi-GPU samples
 * (AMD's BinomialOptionMultiGPU). Results are checked bit-exactly against the CPU on
 * every rank.
 *   THREADS_MODE=turns       (default) each thread is joined before the next starts.
 *   THREADS_MODE=concurrent  all threads at once (a barrier starts them together). Each
 *                            thread creates its own queue, kernel and buffers and, ROUNDS
 *                            times, does what the AMD sample's threads do: maps its input
 *                            for writing, fills it, unmaps it, runs the kernel, maps the
 *                            result for reading without blocking and polls the map's
 *                            event with clGetEventInfo until it completes, checks it and
 *                            unmaps it, and waits for the kernel's event with
 *                            clWaitForEvents. The kernel also writes the thread's slice
 *                            of one shared output buffer through a sub-buffer; the main
 *                            thread reads the whole of it after joining the threads.
 *   THREADS_PER_DEVICE=k     (concurrent) k threads per device, sharing its issuer and
 *                            its transfers (default 1).
 *   THREADS_MODE=nested      as concurrent, but the device threads are created by a thread
 *                            the main thread created: MirrorCL names only the main
 *                            thread's threads, so in a cluster these must take turns, and
 *                            MirrorCL ends the job at the first interleaved call, naming
 *                            the rule, instead of hanging.
 *   THREADS_MODE=race        two threads write the same bytes of one buffer from queues of
 *                            different devices with nothing ordering them: a race in
 *                            OpenCL. In a cluster MirrorCL must end the job naming both
 *                            calls rather than let the ranks diverge.
 */
#include "check.h"
#include <pthread.h>

#define N 4096u
#define ROUNDS 20u

static const char *kSrc =
    "__kernel void advance(__global uint *x, uint k, __global uint *out)\n"
    "{ size_t i = get_global_id(0); uint v = x[i] * 3u + k + (uint)i; x[i] = v;\n"
    "  out[i] = v ^ 0x5a5a5a5au; }\n"
    "__kernel void stamp(__global uint *x, uint k)\n"
    "{ size_t i = get_global_id(0); x[i] = k * 1000u + (uint)i; }\n";

static cl_context ctx;
static cl_program prog;
static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static pthread_barrier_t start;
static cl_mem shared_out;
static int concurrent;

typedef struct {
    cl_uint d;
    int ok;
    uint32_t last[N]; /* the thread's final values, which the kernel's output mirrors */
} work_t;

/* The value of element i after the rounds, from its start. */
static uint32_t reference(uint32_t start_value, cl_uint d, uint32_t i)
{
    uint32_t v = start_value;
    for (cl_uint r = 0; r < ROUNDS; r++)
        v = v * 3u + (d * 100u + r) + i;
    return v;
}

static uint32_t start_value(cl_uint d, uint32_t i) { return i * 2654435761u ^ d; }

/* Joined one after the other: blocking writes and reads. */
static void *thread_in_turn(void *p)
{
    work_t *w = (work_t *)p;
    cl_command_queue q = ct_queue(ctx, devs[w->d], 0);
    cl_kernel k = ct_kernel(prog, "advance");
    static __thread uint32_t host[N], ref[N];
    for (uint32_t i = 0; i < N; i++) {
        host[i] = start_value(w->d, i);
        ref[i] = reference(host[i], w->d, i);
    }
    cl_mem b, out;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    CREATE(out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    size_t gws = N;
    for (cl_uint r = 0; r < ROUNDS; r++) {
        cl_uint kk = w->d * 100u + r;
        MUST(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, N * 4, host, 0, NULL, NULL));
        MUST(clSetKernelArg(k, 0, sizeof b, &b));
        MUST(clSetKernelArg(k, 1, sizeof kk, &kk));
        MUST(clSetKernelArg(k, 2, sizeof out, &out));
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, N * 4, host, 0, NULL, NULL));
    }
    w->ok = CHECK_MEM(host, ref, N, 4, "a thread's buffer after its rounds");
    MUST(clReleaseMemObject(out));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseKernel(k));
    MUST(clReleaseCommandQueue(q));
    return NULL;
}

/* All at once, as AMD's BinomialOptionMultiGPU threads work. */
static void *thread_at_once(void *p)
{
    work_t *w = (work_t *)p;
    pthread_barrier_wait(&start);
    cl_command_queue q = ct_queue(ctx, devs[w->d % ndev], 0);
    cl_kernel k = ct_kernel(prog, "advance");
    cl_mem b, slice;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, N * 4, NULL, &E));
    cl_buffer_region region = {w->d * N * 4, N * 4};
    CREATE(slice = clCreateSubBuffer(shared_out, CL_MEM_WRITE_ONLY,
                                     CL_BUFFER_CREATE_TYPE_REGION, &region, &E));
    static __thread uint32_t cur[N];
    for (uint32_t i = 0; i < N; i++)
        cur[i] = start_value(w->d, i);
    size_t gws = N;
    int ok = 1;
    for (cl_uint r = 0; r < ROUNDS; r++) {
        cl_uint kk = w->d * 100u + r;
        uint32_t *in = (uint32_t *)clEnqueueMapBuffer(q, b, CL_TRUE, CL_MAP_WRITE, 0, N * 4, 0,
                                                      NULL, NULL, &E);
        MUST(E);
        memcpy(in, cur, N * 4);
        MUST(clEnqueueUnmapMemObject(q, b, in, 0, NULL, NULL));
        MUST(clSetKernelArg(k, 0, sizeof b, &b));
        MUST(clSetKernelArg(k, 1, sizeof kk, &kk));
        MUST(clSetKernelArg(k, 2, sizeof slice, &slice));
        cl_event ran, mapped;
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, &ran));
        uint32_t *res = (uint32_t *)clEnqueueMapBuffer(q, b, CL_FALSE, CL_MAP_READ, 0, N * 4, 1,
                                                       &ran, &mapped, &E);
        MUST(E);
        MUST(clFlush(q));
        cl_int status = CL_QUEUED;
        while (status != CL_COMPLETE && status >= 0)
            MUST(clGetEventInfo(mapped, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status,
                                &status, NULL));
        CHECK_EQ(status, CL_COMPLETE);
        for (uint32_t i = 0; i < N; i++)
            cur[i] = cur[i] * 3u + kk + i;
        if (memcmp(res, cur, N * 4) != 0)
            ok = CHECK_MEM(res, cur, N, 4, "a thread's mapped result") && ok;
        MUST(clEnqueueUnmapMemObject(q, b, res, 0, NULL, NULL));
        /* Done already; every rank learns the kernel's status from its owner. */
        MUST(clWaitForEvents(1, &ran));
        MUST(clReleaseEvent(ran));
        MUST(clReleaseEvent(mapped));
    }
    MUST(clFinish(q));
    memcpy(w->last, cur, sizeof cur);
    w->ok = ok;
    MUST(clReleaseMemObject(slice));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseKernel(k));
    MUST(clReleaseCommandQueue(q));
    return NULL;
}

/* Two threads stamp the same buffer from different devices, unordered. */
static cl_mem raced;
static void *thread_racing(void *p)
{
    work_t *w = (work_t *)p;
    cl_command_queue q = ct_queue(ctx, devs[w->d % ndev], 0);
    cl_kernel k = ct_kernel(prog, "stamp");
    pthread_barrier_wait(&start);
    size_t gws = N;
    cl_uint kk = w->d;
    MUST(clSetKernelArg(k, 0, sizeof raced, &raced));
    MUST(clSetKernelArg(k, 1, sizeof kk, &kk));
    for (cl_uint r = 0; r < ROUNDS; r++)
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
    /* Both threads' kernels are enqueued before either waits or ends: a thread that
     * waited for its commands, or ended, before the other enqueued would order them on
     * that rank (MirrorCL's rule), and on a rank where the other thread's commands are
     * bookkeeping (done at once) that happened often enough to hide the race. */
    pthread_barrier_wait(&start);
    MUST(clFinish(q));
    w->ok = 1;
    MUST(clReleaseKernel(k));
    MUST(clReleaseCommandQueue(q));
    return NULL;
}

static pthread_t th[CT_MAX_DEVICES];
static work_t w[CT_MAX_DEVICES];

/* Creates and joins the device threads (nested mode: on behalf of the main thread). */
static void *start_threads(void *p)
{
    cl_uint n = *(cl_uint *)p;
    for (cl_uint d = 0; d < n; d++) {
        w[d].d = d;
        w[d].ok = 0;
        CHECK_TRUE(pthread_create(&th[d], NULL, thread_at_once, &w[d]) == 0, "thread %u started", d);
    }
    for (cl_uint d = 0; d < n; d++)
        pthread_join(th[d], NULL);
    return NULL;
}

int main(void)
{
    ct_init("cluster_threads");
    const char *mode = getenv("THREADS_MODE");
    int nested = mode && strcmp(mode, "nested") == 0;
    concurrent = nested || (mode && strcmp(mode, "concurrent") == 0);
    int race = mode && strcmp(mode, "race") == 0;
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    prog = ct_build(ctx, kSrc, NULL);
    const char *per = getenv("THREADS_PER_DEVICE");
    cl_uint per_device = per && concurrent ? (cl_uint)atoi(per) : 1;
    if (per_device < 1 || ndev * per_device > CT_MAX_DEVICES)
        per_device = 1;
    cl_uint nthreads = race ? 2 : ndev * per_device;
    printf("  %u device(s), %u host thread(s), %s\n", ndev, nthreads,
           race ? "racing on one buffer" : concurrent ? "all at once" : "one after another");
    if (concurrent) {
        /* Written by the threads' kernels through sub-buffers, one slice each. */
        CREATE(shared_out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)nthreads * N * 4, NULL, &E));
    }
    if (race)
        CREATE(raced = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    if (concurrent || race)
        pthread_barrier_init(&start, NULL, nthreads);
    void *(*body)(void *) = race ? thread_racing : concurrent ? thread_at_once : thread_in_turn;
    if (nested) {
        pthread_t manager;
        CHECK_TRUE(pthread_create(&manager, NULL, start_threads, &nthreads) == 0, "manager started");
        pthread_join(manager, NULL);
    }
    for (cl_uint d = 0; d < nthreads && !nested; d++) {
        w[d].d = d;
        w[d].ok = 0;
        CHECK_TRUE(pthread_create(&th[d], NULL, body, &w[d]) == 0, "thread %u started", d);
        if (!concurrent && !race)
            pthread_join(th[d], NULL);
    }
    if ((concurrent && !nested) || race)
        for (cl_uint d = 0; d < nthreads; d++)
            pthread_join(th[d], NULL);
    for (cl_uint d = 0; d < nthreads; d++)
        printf("  thread %u (device %u): %s\n", d, d % ndev, w[d].ok ? "ok" : "MISMATCH");
    if (concurrent) {
        cl_command_queue q = ct_queue(ctx, devs[0], 0);
        size_t bytes = (size_t)nthreads * N * 4;
        uint32_t *all = malloc(bytes), *want = malloc(bytes);
        MUST(clEnqueueReadBuffer(q, shared_out, CL_TRUE, 0, bytes, all, 0, NULL, NULL));
        for (cl_uint d = 0; d < nthreads; d++)
            for (uint32_t i = 0; i < N; i++)
                want[d * N + i] = w[d].last[i] ^ 0x5a5a5a5au;
        CHECK_MEM(all, want, (size_t)nthreads * N, 4, "the shared output, one slice per thread");
        free(all);
        free(want);
        MUST(clReleaseCommandQueue(q));
        MUST(clReleaseMemObject(shared_out));
    }
    if (race) {
        uint32_t got[N];
        cl_command_queue q = ct_queue(ctx, devs[0], 0);
        MUST(clEnqueueReadBuffer(q, raced, CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
        /* Either thread's stamp, whole (each thread's last kernel wrote all of it). */
        CHECK_TRUE(got[0] == 0 || got[0] == 1000u, "the raced buffer holds a stamp (%u)", got[0]);
        MUST(clReleaseCommandQueue(q));
        MUST(clReleaseMemObject(raced));
    }
    if (concurrent || race)
        pthread_barrier_destroy(&start);
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
