/*
 * cluster_output.c - a program that writes to its standard output and error, and (with
 * OWN_STDERR=path) points its own standard error at that file with dup2 before its first
 * OpenCL call, as test runners that capture output do (pytest's capture) and programs
 * that keep a log do.
 *
 * Under MirrorCL, what it prints follows MIRRORCL_OUTPUT (root: rank 0's only; all:
 * every rank's, prefixed once), also when it is started through a wrapper that execs it
 * (`mpirun ... env ./cluster_output`, `stdbuf -oL`) and for its child processes
 * (`system`); MirrorCL's own reports (here a
 * configuration error, provoked with MIRRORCL_CONFIG=/nonexistent, or with
 * OUTPUT_DIVERGE=1 and MIRRORCL_VERIFY=1 the divergence of rank-dependent data) reach
 * the rank's original standard error, not the program's file.
 */
#define _DEFAULT_SOURCE
#include "check.h"

#include <fcntl.h>
#include <unistd.h>

int main(void)
{
    ct_init("cluster_output");
    fprintf(stderr, "a line on standard error\n");
    /* A child process inherits the rank's descriptors (and LD_PRELOAD): its line must
     * be handled once, as the program's are. */
    fflush(stdout);
    CHECK_TRUE(system("echo a line from a child process") == 0, "system");
    const char *own = getenv("OWN_STDERR");
    if (own) {
        /* open(), not fopen(): MirrorCL sends other ranks' fopen writes to /dev/null. */
        int fd = open(own, O_WRONLY | O_CREAT | O_APPEND, 0644);
        CHECK_TRUE(fd >= 0, "open %s", own);
        CHECK_TRUE(dup2(fd, 2) == 2, "dup2 onto standard error");
        close(fd);
        fprintf(stderr, "a line on the program's own standard error\n");
    }

    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_command_queue q = ct_queue(ctx, devs[ndev - 1], 0);
    /* OUTPUT_DIVERGE: rank-dependent data, for MIRRORCL_VERIFY's report. */
    cl_int v = getenv("OUTPUT_DIVERGE") ? (cl_int)getpid() : 42, back = 0;
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof v, NULL, &E));
    MUST(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL));
    MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof back, &back, 0, NULL, NULL));
    CHECK_EQ(back, v);
    clReleaseMemObject(b);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return ct_finish();
}
