/*
 * cluster_copies.c - copies whose source stays in use. Each device's buffer A is copied
 * into a buffer on every other device, two copies at a time, and rewritten where it
 * lives after every second copy; then a kernel on each of those devices reads A. A copy
 * takes its source where it is valid (in place on a device of the same vendor context,
 * or from the bytes another rank sent) without making it valid where the copy ran, and
 * one read of a source serves the sends of the same bytes, never of changed ones: each
 * copy must carry the version it was enqueued behind, the kernels A's newest bytes.
 * Checked bit-exactly on every rank.
 */
#include "check.h"

#define N 1000u
#define ROUNDS 2u

static const char *kSrc =
    "__kernel void fill(__global uint *a, uint seed)\n"
    "{ uint i = (uint)get_global_id(0); a[i] = seed * 2654435761u ^ i; }\n"
    "__kernel void plus_one(__global const uint *a, __global uint *c)\n"
    "{ size_t i = get_global_id(0); c[i] = a[i] + 1u; }\n";

static uint32_t value(cl_uint seed, uint32_t i) { return seed * 2654435761u ^ i; }

static cl_uint seed(cl_uint device, cl_uint round, cl_uint version)
{
    return 1000u * device + 100u * round + version + 1u;
}

static void enqueue_fill(cl_command_queue q, cl_kernel fill, cl_mem a, cl_uint s, size_t global)
{
    MUST(clSetKernelArg(fill, 0, sizeof(cl_mem), &a));
    MUST(clSetKernelArg(fill, 1, sizeof s, &s));
    MUST(clEnqueueNDRangeKernel(q, fill, 1, NULL, &global, NULL, 0, NULL, NULL));
}

int main(void)
{
    ct_init("cluster_copies");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint n = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, n, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel fill = ct_kernel(prog, "fill"), plus_one = ct_kernel(prog, "plus_one");
    cl_command_queue *qs = calloc(n, sizeof *qs);
    cl_mem *a = calloc(n, sizeof *a), *b = calloc((size_t)n * n, sizeof *b), *c = calloc((size_t)n * n, sizeof *c);
    size_t bytes = N * sizeof(uint32_t), global = N;
    for (cl_uint d = 0; d < n; d++) {
        qs[d] = ct_queue(ctx, devs[d], 0);
        CREATE(a[d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &E));
    }
    for (size_t p = 0; p < (size_t)n * n; p++) {
        CREATE(b[p] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &E));
        CREATE(c[p] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &E));
    }
    uint32_t *got = malloc(bytes), *want = malloc(bytes);
    for (cl_uint r = 0; r < ROUNDS; r++) {
        /* The version of A[d] each copy carries (k * n + d), and A[d]'s last. */
        cl_uint *version = calloc((size_t)n * n, sizeof *version), *last = calloc(n, sizeof *last);
        for (cl_uint d = 0; d < n; d++) {
            cl_uint v = 0, j = 0;
            enqueue_fill(qs[d], fill, a[d], seed(d, r, v), global);
            for (cl_uint k = 0; k < n; k++) {
                if (k == d)
                    continue;
                MUST(clEnqueueCopyBuffer(qs[k], a[d], b[k * n + d], 0, 0, bytes, 0, NULL, NULL));
                version[k * n + d] = v;
                if (j++ % 2 == 1)
                    enqueue_fill(qs[d], fill, a[d], seed(d, r, ++v), global);
            }
            last[d] = v;
        }
        for (cl_uint k = 0; k < n; k++)
            for (cl_uint d = 0; d < n; d++) {
                if (d == k)
                    continue;
                MUST(clSetKernelArg(plus_one, 0, sizeof(cl_mem), &a[d]));
                MUST(clSetKernelArg(plus_one, 1, sizeof(cl_mem), &c[k * n + d]));
                MUST(clEnqueueNDRangeKernel(qs[k], plus_one, 1, NULL, &global, NULL, 0, NULL, NULL));
            }
        for (cl_uint k = 0; k < n; k++)
            for (cl_uint d = 0; d < n; d++) {
                if (d == k)
                    continue;
                char what[96];
                for (uint32_t i = 0; i < N; i++)
                    want[i] = value(seed(d, r, version[k * n + d]), i);
                MUST(clEnqueueReadBuffer(qs[k], b[k * n + d], CL_TRUE, 0, bytes, got, 0, NULL, NULL));
                snprintf(what, sizeof what, "round %u: copy of device %u's buffer on device %u", r, d, k);
                CHECK_MEM(got, want, N, 4, what);
                for (uint32_t i = 0; i < N; i++)
                    want[i] = value(seed(d, r, last[d]), i) + 1u;
                MUST(clEnqueueReadBuffer(qs[k], c[k * n + d], CL_TRUE, 0, bytes, got, 0, NULL, NULL));
                snprintf(what, sizeof what, "round %u: kernel on device %u reading device %u's buffer", r, k, d);
                CHECK_MEM(got, want, N, 4, what);
            }
        free(version);
        free(last);
    }
    for (size_t p = 0; p < (size_t)n * n; p++) {
        MUST(clReleaseMemObject(b[p]));
        MUST(clReleaseMemObject(c[p]));
    }
    for (cl_uint d = 0; d < n; d++) {
        MUST(clReleaseMemObject(a[d]));
        MUST(clReleaseCommandQueue(qs[d]));
    }
    MUST(clReleaseKernel(fill));
    MUST(clReleaseKernel(plus_one));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    free(qs);
    free(a);
    free(b);
    free(c);
    free(got);
    free(want);
    return ct_finish();
}
