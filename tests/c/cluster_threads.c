/*
 * cluster_threads.c - one host thread per device, the pattern of multi-GPU samples
 * (AMD's BinomialOptionMultiGPU): each thread writes its own buffer, runs a kernel
 * on it and reads it back, ROUNDS times, on its own queue; results are checked
 * bit-exactly against the CPU.
 *   THREADS_MODE=turns       (default) each thread is joined before the next starts:
 *                            one host thread at a time, which a cluster runs;
 *   THREADS_MODE=concurrent  all threads run at once (a barrier starts them together):
 *                            correct in one process; in a cluster MirrorCL must end the
 *                            job at the first interleaved call, naming the rule, instead
 *                            of hanging (issue 16).
 */
#include "check.h"
#include <pthread.h>

#define N 4096u
#define ROUNDS 20u

static const char *kSrc =
    "__kernel void advance(__global uint *x, uint k)\n"
    "{ size_t i = get_global_id(0); x[i] = x[i] * 3u + k + (uint)i; }\n";

static cl_context ctx;
static cl_program prog;
static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static pthread_barrier_t start;
static int concurrent;

typedef struct {
    cl_uint d;
    int ok;
} work_t;

static void *device_thread(void *p)
{
    work_t *w = (work_t *)p;
    cl_command_queue q = ct_queue(ctx, devs[w->d], 0);
    cl_kernel k = ct_kernel(prog, "advance");
    uint32_t host[N], ref[N];
    for (uint32_t i = 0; i < N; i++)
        ref[i] = host[i] = i * 2654435761u ^ w->d;
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    if (concurrent)
        pthread_barrier_wait(&start);
    size_t gws = N;
    for (cl_uint r = 0; r < ROUNDS; r++) {
        cl_uint kk = w->d * 100u + r;
        MUST(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, N * 4, host, 0, NULL, NULL));
        MUST(clSetKernelArg(k, 0, sizeof b, &b));
        MUST(clSetKernelArg(k, 1, sizeof kk, &kk));
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, N * 4, host, 0, NULL, NULL));
        for (uint32_t i = 0; i < N; i++)
            ref[i] = ref[i] * 3u + kk + i;
    }
    w->ok = CHECK_MEM(host, ref, N, 4, "a thread's buffer after its rounds");
    MUST(clReleaseMemObject(b));
    MUST(clReleaseKernel(k));
    MUST(clReleaseCommandQueue(q));
    return NULL;
}

int main(void)
{
    ct_init("cluster_threads");
    const char *mode = getenv("THREADS_MODE");
    concurrent = mode && strcmp(mode, "concurrent") == 0;
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    prog = ct_build(ctx, kSrc, NULL);
    printf("  %u device(s), one host thread each, %s\n", ndev,
           concurrent ? "all at once" : "one after another (joined)");
    pthread_t th[CT_MAX_DEVICES];
    work_t w[CT_MAX_DEVICES];
    if (concurrent)
        pthread_barrier_init(&start, NULL, ndev);
    for (cl_uint d = 0; d < ndev; d++) {
        w[d].d = d;
        w[d].ok = 0;
        CHECK_TRUE(pthread_create(&th[d], NULL, device_thread, &w[d]) == 0, "thread %u started", d);
        if (!concurrent)
            pthread_join(th[d], NULL);
    }
    if (concurrent)
        for (cl_uint d = 0; d < ndev; d++)
            pthread_join(th[d], NULL);
    for (cl_uint d = 0; d < ndev; d++)
        printf("  device %u thread: %s\n", d, w[d].ok ? "ok" : "MISMATCH");
    if (concurrent)
        pthread_barrier_destroy(&start);
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
