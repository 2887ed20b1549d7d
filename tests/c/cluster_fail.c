/*
 * cluster_fail.c - a command that fails inside the vendor must fail on every rank.
 * The first command of the program, a kernel on the LAST device, is made to fail on
 * the rank that runs it (under MirrorCL with MIRRORCL_INJECT_FAILURE=1:-5, the vendor
 * call returns CL_OUT_OF_RESOURCES; set FAIL_EXPECTED=1 then). Every rank must see:
 * clWaitForEvents on it returns CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST and its
 * status is CL_OUT_OF_RESOURCES; a blocking read that waits for it returns
 * CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST. So must commands on another device
 * (another rank's, in a cluster) that wait for it: a blocking read and a blocking map
 * there, and a copy of its buffer there (its wait and its status). Then the runtime stays usable: the
 * kernel runs again and its result is read back, checked on every rank.
 * Without FAIL_EXPECTED everything must succeed (the native run).
 */
#include "check.h"

#define N (1u << 20) /* a 4 MiB read: several pieces between ranks */

static const char *kSrc = "__kernel void fill(__global uint *o, uint v) { o[get_global_id(0)] = v + (uint)get_global_id(0); }\n";

int main(void)
{
    ct_init("cluster_fail");
    int expect_fail = ct_env_flag("FAIL_EXPECTED");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "fill");
    cl_command_queue q = ct_queue(ctx, devs[ndev - 1], 0);
    uint32_t *got = malloc(N * 4);
    cl_mem o;
    CREATE(o = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    cl_uint v = 7;
    MUST(clSetKernelArg(k, 0, sizeof o, &o));
    MUST(clSetKernelArg(k, 1, sizeof v, &v));
    size_t gws = N;
    cl_event kev;
    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, &kev)); /* command #1 */
    cl_int w = clWaitForEvents(1, &kev);
    cl_int st = ct_event_status(kev);
    printf("kernel: wait %s, status %s\n", cl_err_name(w), cl_err_name(st));
    CHECK_EQ(w, expect_fail ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS);
    CHECK_EQ(st, expect_fail ? CL_OUT_OF_RESOURCES : CL_COMPLETE);
    cl_int r = clEnqueueReadBuffer(q, o, CL_TRUE, 0, N * 4, got, 1, &kev, NULL);
    printf("read after it: %s\n", cl_err_name(r));
    CHECK_EQ(r, expect_fail ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS);
    if (ndev > 1) {
        cl_command_queue q0 = ct_queue(ctx, devs[0], 0);
        cl_mem p;
        CREATE(p = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
        cl_event cev;
        MUST(clEnqueueCopyBuffer(q0, o, p, 0, 0, N * 4, 1, &kev, &cev));
        w = clWaitForEvents(1, &cev);
        st = ct_event_status(cev);
        printf("copy to device 0: wait %s, status %s\n", cl_err_name(w), cl_err_name(st));
        CHECK_EQ(w, expect_fail ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS);
        CHECK_TRUE(expect_fail ? st < 0 : st == CL_COMPLETE, "copy status %d", st);
        r = clEnqueueReadBuffer(q0, p, CL_TRUE, 0, N * 4, got, 1, &kev, NULL);
        printf("read on device 0 after it: %s\n", cl_err_name(r));
        CHECK_EQ(r, expect_fail ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS);
        cl_int me;
        void *m = clEnqueueMapBuffer(q0, p, CL_TRUE, CL_MAP_READ, 0, 64, 1, &kev, NULL, &me);
        printf("map on device 0 after it: %s\n", cl_err_name(me));
        CHECK_EQ(me, expect_fail ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS);
        if (m)
            MUST(clEnqueueUnmapMemObject(q0, p, m, 0, NULL, NULL));
        MUST(clFinish(q0));
        MUST(clReleaseEvent(cev));
        MUST(clReleaseMemObject(p));
        MUST(clReleaseCommandQueue(q0));
    }
    MUST(clReleaseEvent(kev));

    /* Still usable. */
    v = 11;
    MUST(clSetKernelArg(k, 1, sizeof v, &v));
    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
    memset(got, 0xEE, N * 4);
    MUST(clEnqueueReadBuffer(q, o, CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
    uint32_t *ref = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++)
        ref[i] = 11u + i;
    CHECK_MEM(got, ref, N, 4, "result after the failure");
    free(ref);
    MUST(clReleaseMemObject(o));
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    free(got);
    return ct_finish();
}
