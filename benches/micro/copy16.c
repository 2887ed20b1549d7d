/*
 * copy16.c - one 16-byte clEnqueueCopyBuffer between the devices of two ranks, waited
 * for with clFinish, repeated: the case docs/benchmarks.md ("Where the time of a
 * cross-rank copy goes") takes apart with MIRRORCL_TRACE. Run under MirrorCL on 2 ranks
 * of one device each: device 0 (rank 0) holds src, written by a kernel every
 * iteration and finished; then the timed part, the copy into dst on device 1 (rank 1)
 * on device 1's queue and clFinish of that queue. Rank 0 prints the median of the
 * timed parts; every rank checks dst against the last pattern.
 *
 *   cc -O2 -std=c11 -I tests/c benches/micro/copy16.c -lOpenCL -lm -o copy16
 *   MIRRORCL_TRACE=/tmp/copy16 mirrorcl run -n 2 -- ./copy16 && mirrorcl trace /tmp/copy16
 *
 * Environment: CLUSTER_ITERS (default 50).
 */
#include "../../tests/c/check.h"


static const char *kSrc =
    "__kernel void fill(__global uint *s, uint it)\n"
    "{ size_t i = get_global_id(0); s[i] = it * 0x9e3779b9u ^ (uint)i; }\n";

int main(void)
{
    ct_init("copy16");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint n = ct_devices(platform, devs);
    if (n < 2)
        ct_die("copy16 needs two devices (two ranks of one device each)");
    cl_context ctx = ct_context(platform, 2, devs);
    cl_command_queue q0 = ct_queue(ctx, devs[0], 0), q1 = ct_queue(ctx, devs[1], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "fill");
    cl_int E;
    cl_mem src, dst;
    CREATE(src = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16, NULL, &E));
    CREATE(dst = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16, NULL, &E));
    const char *env = getenv("CLUSTER_ITERS");
    cl_uint iters = env && *env ? (cl_uint)atoi(env) : 50;
    if (iters < 1)
        iters = 1;
    double *took = calloc(iters, sizeof *took);
    size_t four = 4;
    MUST(clSetKernelArg(k, 0, sizeof src, &src));
    for (cl_uint it = 0; it < iters; it++) {
        MUST(clSetKernelArg(k, 1, sizeof it, &it));
        MUST(clEnqueueNDRangeKernel(q0, k, 1, NULL, &four, NULL, 0, NULL, NULL));
        MUST(clFinish(q0));
        double t0 = ct_now_us();
        MUST(clEnqueueCopyBuffer(q1, src, dst, 0, 0, 16, 0, NULL, NULL));
        MUST(clFinish(q1));
        took[it] = ct_now_us() - t0;
    }
    uint32_t got[4], want[4];
    MUST(clEnqueueReadBuffer(q1, dst, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
    for (uint32_t i = 0; i < 4; i++)
        want[i] = (iters - 1) * 0x9e3779b9u ^ i;
    CHECK_MEM(got, want, 4, sizeof(uint32_t), "dst after the last copy");
    printf("  %u copies of 16 B from device 0 to device 1 + clFinish: median %.1f us\n", iters,
           ct_median(took, iters));
    free(took);
    clReleaseMemObject(src);
    clReleaseMemObject(dst);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q0);
    clReleaseCommandQueue(q1);
    clReleaseContext(ctx);
    return ct_finish();
}
