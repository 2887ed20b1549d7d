/*
 * cluster_crash.c - the rank named by CRASH_RANK dies (SIGKILL) in the middle of
 * the run, after enqueueing work whose result the other ranks then wait for (a
 * blocking read from a device of the dead rank). The job must end, with a message
 * naming the dead rank and a non-zero status, well within the wait deadline; it
 * must never hang.
 */
#define _DEFAULT_SOURCE
#include "check.h"

#include <signal.h>
#include <unistd.h>

#define N 4096u

static const char *kSrc = "__kernel void inc(__global uint *x) { x[get_global_id(0)] += 1u; }\n";

int main(void)
{
    ct_init("cluster_crash");
    const char *c = getenv("CRASH_RANK");
    int rank = ct_launcher_rank(), crash = c ? atoi(c) : -1;
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "inc");
    cl_command_queue q = ct_queue(ctx, devs[ndev - 1], 0);
    uint32_t *x = calloc(N, 4);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4, x, &E));
    MUST(clSetKernelArg(k, 0, sizeof b, &b));
    size_t gws = N;
    for (int i = 0; i < 10; i++)
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
    if (rank == crash) {
        printf("rank %d: dying now\n", rank);
        fflush(stdout);
        raise(SIGKILL);
    }
    MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, N * 4, x, 0, NULL, NULL));
    CHECK_EQ(x[0], 10);
    MUST(clReleaseMemObject(b));
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    free(x);
    return ct_finish();
}
