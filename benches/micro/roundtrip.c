/*
 * roundtrip.c - the one-rank round trips that the per-command goals are set on, alone
 * in a process, so that the native platform and MirrorCL can be run one after the other
 * and MirrorCL traced (mirrorcl-overhead times both in one process, which a trace would
 * mix up): a kernel of one work-item + clFinish, a 16-byte blocking write, a 16-byte
 * blocking read, and a burst of kernel enqueues + clFinish. Prints the median of each
 * in µs (the burst per command); checks the bytes read back after every write.
 *
 *   cc -O2 -std=c11 -I tests/c benches/micro/roundtrip.c -lOpenCL -lm -o roundtrip
 *   CTEST_PLATFORM=NVIDIA ./roundtrip                                  # native
 *   LD_PRELOAD=libmirrorcl.so MIRRORCL_PLATFORMS=NVIDIA ./roundtrip    # MirrorCL
 *
 * Environment: RT_ITERS (default 2000), RT_BURST (default 1000).
 */
#include "../../tests/c/check.h"


static const char *kSrc = "__kernel void bump(__global uint *s) { s[get_global_id(0)] += 1u; }\n";

int main(void)
{
    ct_init("roundtrip");
    const char *it = getenv("RT_ITERS"), *bs = getenv("RT_BURST");
    int iters = it ? atoi(it) : 2000, burst = bs ? atoi(bs) : 1000;
    if (iters < 1 || burst < 1)
        ct_die("RT_ITERS and RT_BURST must be positive");
    cl_context ctx;
    cl_command_queue q = ct_first_device_queue(&ctx);
    cl_kernel k = ct_kernel(ct_build(ctx, kSrc, NULL), "bump");
    cl_mem buf;
    CREATE(buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16, NULL, &E));
    MUST(clSetKernelArg(k, 0, sizeof buf, &buf));
    double *t = malloc(sizeof(double) * (size_t)iters);
    size_t one = 1;
    uint32_t w[4], r[4];
    const char *names[3] = {"kernel_finish_us", "write16_us", "read16_us"};
    double result[4];
    for (int fig = 0; fig < 3; fig++) {
        for (int i = -iters / 10; i < iters; i++) {
            for (int j = 0; j < 4; j++)
                w[j] = (uint32_t)(i * 4 + j + fig * 77);
            double t0 = ct_now_us();
            if (fig == 0) {
                MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL));
                MUST(clFinish(q));
            } else if (fig == 1) {
                MUST(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, 16, w, 0, NULL, NULL));
            } else {
                MUST(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, 16, r, 0, NULL, NULL));
            }
            double t1 = ct_now_us();
            if (i >= 0)
                t[i] = t1 - t0;
            if (fig == 1) {
                MUST(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, 16, r, 0, NULL, NULL));
                CHECK_MEM(r, w, 4, sizeof *w, "16 bytes read back after a blocking write");
            }
        }
        result[fig] = ct_median(t, (size_t)iters);
    }
    /* The buffer holds w of the last read's iteration; every bump adds one to word 0. */
    MUST(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, 16, w, 0, NULL, NULL));
    int bursts = 10;
    double *b = malloc(sizeof(double) * (size_t)bursts);
    for (int i = 0; i < bursts; i++) {
        double t0 = ct_now_us();
        for (int j = 0; j < burst; j++)
            MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL));
        MUST(clFinish(q));
        b[i] = (ct_now_us() - t0) / burst;
    }
    result[3] = ct_median(b, (size_t)bursts);
    MUST(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, 16, r, 0, NULL, NULL));
    CHECK_EQ(r[0], w[0] + (uint32_t)(bursts * burst));
    for (int fig = 0; fig < 3; fig++)
        printf("%s=%.2f ", names[fig], result[fig]);
    printf("burst_us=%.2f\n", result[3]);
    free(t);
    free(b);
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return ct_finish();
}
