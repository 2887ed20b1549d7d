/*
 * cluster_replica.c - a host program that would make its replicas diverge without
 * MirrorCL's help: it seeds the C library's generators from the clock and its pid,
 * draws its input with rand(), random() and drand48(), computes on every device and
 * checks the result against its own CPU reference; it prints a greeting, and appends
 * one line to the file named by REPLICA_FILE (when set).
 *
 * Under MirrorCL every rank takes rank 0's seeds, so every replica draws the same
 * input: a device of another rank computes on the same bytes as this rank's
 * reference (with different inputs the results would not match). Only rank 0's
 * output reaches the terminal and only rank 0 writes the file.
 */
#define _DEFAULT_SOURCE
#include "check.h"

#include <time.h>
#include <unistd.h>

#define N (1u << 14)

static const char *kSrc =
    "__kernel void mix_inputs(__global const uint *a, __global const float *b, __global uint *o)\n"
    "{ size_t i = get_global_id(0); o[i] = a[i] * 3u + (uint)(b[i] * 1000.0f); }\n";

int main(void)
{
    ct_init("cluster_replica");
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    srandom(seed * 7u);
    srand48((long)seed * 13);
    uint32_t *a = malloc(N * 4), *o = malloc(N * 4), *ref = malloc(N * 4);
    float *b = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++) {
        a[i] = (uint32_t)rand() ^ ((uint32_t)random() << 1);
        b[i] = (float)(int)(drand48() * 1000.0) / 1000.0f;
        ref[i] = a[i] * 3u + (uint32_t)(b[i] * 1000.0f);
    }
    printf("hello from the program: first input %08x\n", a[0]);
    fflush(stdout);

    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "mix_inputs");
    cl_mem ba, bb, bo;
    CREATE(ba = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * 4, a, &E));
    CREATE(bb = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * 4, b, &E));
    CREATE(bo = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, N * 4, NULL, &E));
    MUST(clSetKernelArg(k, 0, sizeof ba, &ba));
    MUST(clSetKernelArg(k, 1, sizeof bb, &bb));
    MUST(clSetKernelArg(k, 2, sizeof bo, &bo));
    cl_command_queue qs[CT_MAX_DEVICES];
    size_t per = N / ndev;
    for (cl_uint d = 0; d < ndev; d++) {
        qs[d] = ct_queue(ctx, devs[d], 0);
        size_t off = d * per, len = d + 1 == ndev ? N - off : per;
        MUST(clEnqueueNDRangeKernel(qs[d], k, 1, &off, &len, NULL, 0, NULL, NULL));
    }
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clFinish(qs[d]));
    MUST(clEnqueueReadBuffer(qs[ndev - 1], bo, CL_TRUE, 0, N * 4, o, 0, NULL, NULL));
    CHECK_MEM(o, ref, N, 4, "result of every device, against this replica's own input");

    const char *path = getenv("REPLICA_FILE");
    if (path && *path) {
        FILE *f = fopen(path, "a");
        CHECK_TRUE(f != NULL, "open %s for appending", path);
        if (f) {
            fprintf(f, "one line from the program: first input %08x\n", a[0]);
            fclose(f);
        }
    }
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseMemObject(ba));
    MUST(clReleaseMemObject(bb));
    MUST(clReleaseMemObject(bo));
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    free(a);
    free(b);
    free(o);
    free(ref);
    return ct_finish();
}
