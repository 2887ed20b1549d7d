/*
 * cluster_timeout.c - a wait that can never complete.
 * A user event U is created and never set; a kernel writing a buffer is
 * enqueued on the LAST device with U in its wait list; then a blocking
 * clEnqueueReadBuffer of that buffer on the last device's queue.  The read
 * can never return: the program is meant to be killed by MirrorCL's wait
 * deadline (MIRRORCL_WAIT_TIMEOUT) with a diagnostic.  "waiting" is printed
 * (and flushed) just before the blocking read.  If the read ever returns
 * (successfully or with an error), "UNEXPECTED: read returned ..." is printed
 * and the exit status is 3.  This program never prints PASS.
 */
#include "check.h"

#define N 1024u

static const char *kSrc =
    "__kernel void setv(__global uint *b)\n"
    "{ size_t i = get_global_id(0); b[i] = (uint)i + 1u; }\n";

int main(void)
{
    ct_init("cluster_timeout");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_command_queue qs[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "setv");
    const cl_uint last = ndev - 1;
    printf("  %u device(s), kernel on device %u waits on a user event that is never set\n", ndev, last);

    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    MUST(clSetKernelArg(k, 0, sizeof b, &b));
    cl_event user;
    CREATE(user = clCreateUserEvent(ctx, &E));
    size_t gws = N;
    MUST(clEnqueueNDRangeKernel(qs[last], k, 1, NULL, &gws, NULL, 1, &user, NULL));
    MUST(clFlush(qs[last]));

    static uint32_t got[N];
    printf("waiting\n");
    fflush(stdout);
    cl_int err = clEnqueueReadBuffer(qs[last], b, CL_TRUE, 0, N * 4, got, 0, NULL, NULL);
    printf("UNEXPECTED: read returned %s (%d)\n", cl_err_name(err), (int)err);
    fflush(stdout);
    return 3;
}
