/*
 * cluster_hostfail.c - a rank that cannot allocate a buffer's host copy (its address
 * space limited just before, RLIMIT_AS, on rank HOSTFAIL_RANK only) fails the blocking
 * map of that buffer on every rank alike and promptly: the owner of the buffer's device
 * sends its failure in place of the bytes, and a rank that cannot take them drops them.
 * Then the runtime stays usable on every rank. Without HOSTFAIL_RANK everything
 * succeeds (also natively).
 */
#define _GNU_SOURCE
#include "check.h"
#include <sys/resource.h>
#include <time.h>

#define SIZE ((size_t)512 << 20)

static size_t vm_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7))
            kb = (size_t)atol(line + 7);
    if (f)
        fclose(f);
    return kb << 10;
}

int main(void)
{
    ct_init("cluster_hostfail");
    const char *limited = getenv("HOSTFAIL_RANK");
    int limit_here = limited && ct_launcher_rank() == atoi(limited);
    int expect_fail = limited != NULL;
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_command_queue q = ct_queue(ctx, devs[0], 0);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SIZE, NULL, &E));
    cl_uint pat = 7;
    MUST(clEnqueueFillBuffer(q, b, &pat, 4, 0, SIZE, 0, NULL, NULL));
    MUST(clFinish(q));
    if (limit_here) {
        /* Room for everything but the host copy. */
        struct rlimit lim = {vm_bytes() + SIZE / 2, RLIM_INFINITY};
        CHECK_TRUE(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cl_int e;
    cl_uint *m = clEnqueueMapBuffer(q, b, CL_TRUE, CL_MAP_READ, 0, SIZE, 0, NULL, NULL, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("map: %s\n", cl_err_name(e));
    CHECK_EQ(e, expect_fail ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS);
    CHECK_TRUE(took < 30.0, "the map ended after %.1f s", took);
    if (m) {
        CHECK_EQ(m[SIZE / 4 - 1], 7u);
        MUST(clEnqueueUnmapMemObject(q, b, m, 0, NULL, NULL));
    }
    if (limit_here) {
        struct rlimit lim = {RLIM_INFINITY, RLIM_INFINITY};
        CHECK_TRUE(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
    }
    /* Still usable: another buffer, and the failed one once there is room. */
    cl_mem s;
    CREATE(s = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &E));
    MUST(clEnqueueFillBuffer(q, s, &pat, 4, 0, 4096, 0, NULL, NULL));
    cl_uint got[1024];
    MUST(clEnqueueReadBuffer(q, s, CL_TRUE, 0, 4096, got, 0, NULL, NULL));
    CHECK_EQ(got[1023], 7u);
    MUST(clEnqueueReadBuffer(q, b, CL_TRUE, SIZE - 4096, 4096, got, 0, NULL, NULL));
    CHECK_EQ(got[1023], 7u);
    MUST(clReleaseMemObject(s));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
