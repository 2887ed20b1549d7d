/*
 * cluster_diverge.c - a deliberately divergent program: its input depends on the
 * MPI rank it runs as (read from the launcher's environment), so the replicas of it
 * feed MirrorCL different bytes at the third clEnqueueWriteBuffer. With
 * MIRRORCL_VERIFY=1 every rank must stop at the next synchronisation point with a
 * report naming that call and the ranks that disagree. Without it, the program
 * computes on inconsistent data (and may pass or fail its own check).
 *
 * DIVERGE=size: the buffer's size depends on the rank, so the replicas plan messages
 * of other sizes; DIVERGE=wait: rank 1 makes an extra clWaitForEvents where the others
 * poll the event's status. Both must be caught without MIRRORCL_VERIFY, at the first
 * message or collective after them, every rank that sees it naming the first call that
 * differs, before any wrong bytes are used.
 *
 * DIVERGE=arg: before the writes, a by-value kernel argument differs too (harmless where
 * the kernel runs on another rank's device); MIRRORCL_VERIFY must still name the write.
 */
#include "check.h"

#define N 1024u

int main(void)
{
    ct_init("cluster_diverge");
    uint32_t rank = (uint32_t)ct_launcher_rank();
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_command_queue q = ct_queue(ctx, devs[ndev - 1], 0);
    uint32_t *data = malloc(N * 8), *got = malloc(N * 8);
    const char *mode = getenv("DIVERGE");
    mode = mode ? mode : "";
    size_t size = N * 4 + (strcmp(mode, "size") == 0 ? rank * 64u : 0u);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &E));
    if (strcmp(mode, "arg") == 0) {
        cl_program prog = ct_build(ctx, "__kernel void k(__global uint *o, uint v) { o[0] = v; }\n", NULL);
        cl_kernel k = ct_kernel(prog, "k");
        cl_uint v = rank;
        MUST(clSetKernelArg(k, 0, sizeof b, &b));
        MUST(clSetKernelArg(k, 1, sizeof v, &v));
        MUST(clReleaseKernel(k));
        MUST(clReleaseProgram(prog));
    }
    if (strcmp(mode, "size") == 0) {
        memset(data, 1, size);
        MUST(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, size, data, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, size, got, 0, NULL, NULL));
        printf("size: read back %zu bytes\n", size);
    }
    if (strcmp(mode, "wait") == 0) {
        cl_event ev;
        MUST(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, N * 4, data, 0, NULL, &ev));
        if (rank == 1)
            MUST(clWaitForEvents(1, &ev));
        cl_int st = ct_event_status(ev);
        printf("wait: polled %d\n", st);
        MUST(clFinish(q));
        MUST(clReleaseEvent(ev));
    }
    for (int w = 0; w < 4; w++) {
        for (uint32_t i = 0; i < N; i++)
            data[i] = i * 3u + (uint32_t)w + (w == 2 ? rank * 1000u : 0u);
        MUST(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, N * 4, data, 0, NULL, NULL));
    }
    MUST(clFinish(q));
    MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
    CHECK_MEM(got, data, N, 4, "last write read back");
    MUST(clReleaseMemObject(b));
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseContext(ctx));
    free(data);
    free(got);
    return ct_finish();
}
