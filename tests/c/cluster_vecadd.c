/*
 * cluster_vecadd.c - a uint vector operation o[i] = a[i]*3 + (b[i] ^ i)
 * split over ALL devices of the platform (one context, one in-order queue
 * per device).  The vector is split into one contiguous slice per device;
 * the last device also takes the remainder when N is not divisible by the
 * number of devices.  Two sizes are run: N = 1<<18 and N = (1<<18) + 5.
 *   A. private buffers: every device gets its own input buffers
 *      (CL_MEM_COPY_HOST_PTR) and output buffer for its slice; the output is
 *      read back with a blocking clEnqueueReadBuffer on the device's queue.
 *   B. shared buffers: ONE input buffer per operand (COPY_HOST_PTR) and ONE
 *      output buffer; every device's kernel writes its slice of the output
 *      using a global work offset; clFinish on all queues; then one blocking
 *      read of the whole output on queue 0 AND one on the last device's
 *      queue, both compared with the reference.
 *   C. as B, but every device reads its own slice back (non-blocking read of
 *      slice d on queue d), then clWaitForEvents on all read events.
 * Every result is compared bit-exactly with a CPU reference.
 */
#include "check.h"

#define N_BASE (1u << 18)

static const char *kSrc =
    /* Private buffers: the slice starts at global index `base`. */
    "__kernel void vop_priv(__global const uint *a, __global const uint *b,\n"
    "                       __global uint *o, uint base)\n"
    "{ size_t i = get_global_id(0); o[i] = a[i] * 3u + (b[i] ^ (uint)(i + base)); }\n"
    /* Shared buffers: get_global_id includes the global work offset. */
    "__kernel void vop_shared(__global const uint *a, __global const uint *b,\n"
    "                         __global uint *o)\n"
    "{ size_t i = get_global_id(0); o[i] = a[i] * 3u + (b[i] ^ (uint)i); }\n";

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_context ctx;
static cl_kernel k_priv, k_shared;
static size_t slice_off[CT_MAX_DEVICES], slice_len[CT_MAX_DEVICES];
static uint32_t *in_a, *in_b, *ref, *out, *out2;

static void split(size_t n)
{
    size_t per = n / ndev;
    for (cl_uint d = 0; d < ndev; d++) {
        slice_off[d] = d * per;
        slice_len[d] = d + 1 == ndev ? n - d * per : per;
    }
}

/* A: private per-device buffers, blocking read per device. */
static void variant_private(size_t n)
{
    (void)n;
    cl_mem a[CT_MAX_DEVICES], b[CT_MAX_DEVICES], o[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        size_t off = slice_off[d], len = slice_len[d];
        cl_mem_flags fl = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
        CREATE(a[d] = clCreateBuffer(ctx, fl, len * 4, in_a + off, &E));
        CREATE(b[d] = clCreateBuffer(ctx, fl, len * 4, in_b + off, &E));
        CREATE(o[d] = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, len * 4, NULL, &E));
        cl_uint base = (cl_uint)off;
        MUST(clSetKernelArg(k_priv, 0, sizeof(cl_mem), &a[d]));
        MUST(clSetKernelArg(k_priv, 1, sizeof(cl_mem), &b[d]));
        MUST(clSetKernelArg(k_priv, 2, sizeof(cl_mem), &o[d]));
        MUST(clSetKernelArg(k_priv, 3, sizeof base, &base));
        size_t gws = len;
        MUST(clEnqueueNDRangeKernel(qs[d], k_priv, 1, NULL, &gws, NULL, 0, NULL, NULL));
        MUST(clFlush(qs[d]));
    }
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        MUST(clEnqueueReadBuffer(qs[d], o[d], CL_TRUE, 0, slice_len[d] * 4, out + slice_off[d], 0, NULL, NULL));
        MUST(clReleaseMemObject(a[d]));
        MUST(clReleaseMemObject(b[d]));
        MUST(clReleaseMemObject(o[d]));
    }
}

/* Shared inputs + shared output; every device computes its slice with a global offset. */
static void run_shared(size_t n, cl_mem *pa, cl_mem *pb, cl_mem *po)
{
    cl_mem_flags fl = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
    CREATE(*pa = clCreateBuffer(ctx, fl, n * 4, in_a, &E));
    CREATE(*pb = clCreateBuffer(ctx, fl, n * 4, in_b, &E));
    CREATE(*po = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &E));
    MUST(clSetKernelArg(k_shared, 0, sizeof(cl_mem), pa));
    MUST(clSetKernelArg(k_shared, 1, sizeof(cl_mem), pb));
    MUST(clSetKernelArg(k_shared, 2, sizeof(cl_mem), po));
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        size_t goff = slice_off[d], gws = slice_len[d];
        MUST(clEnqueueNDRangeKernel(qs[d], k_shared, 1, &goff, &gws, NULL, 0, NULL, NULL));
        MUST(clFlush(qs[d]));
    }
}

/* B: whole-buffer reads on queue 0 and on the last queue after clFinish. */
static void variant_shared_whole(size_t n)
{
    cl_mem a, b, o;
    run_shared(n, &a, &b, &o);
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clFinish(qs[d]));
    MUST(clEnqueueReadBuffer(qs[0], o, CL_TRUE, 0, n * 4, out, 0, NULL, NULL));
    MUST(clEnqueueReadBuffer(qs[ndev - 1], o, CL_TRUE, 0, n * 4, out2, 0, NULL, NULL));
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(o));
}

/* C: per-slice non-blocking reads on each device's queue, then wait for all. */
static void variant_shared_slices(size_t n)
{
    cl_mem a, b, o;
    run_shared(n, &a, &b, &o);
    cl_event rd[CT_MAX_DEVICES];
    cl_uint nrd = 0;
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        MUST(clEnqueueReadBuffer(qs[d], o, CL_FALSE, slice_off[d] * 4, slice_len[d] * 4,
                                 out + slice_off[d], 0, NULL, &rd[nrd++]));
        MUST(clFlush(qs[d]));
    }
    MUST(clWaitForEvents(nrd, rd));
    for (cl_uint i = 0; i < nrd; i++) {
        CHECK_EQ(ct_event_status(rd[i]), CL_COMPLETE);
        MUST(clReleaseEvent(rd[i]));
    }
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(o));
}

int main(void)
{
    ct_init("cluster_vecadd");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    k_priv = ct_kernel(prog, "vop_priv");
    k_shared = ct_kernel(prog, "vop_shared");
    printf("  %u device(s)\n", ndev);

    size_t nmax = N_BASE + 5;
    in_a = malloc(nmax * 4);
    in_b = malloc(nmax * 4);
    ref = malloc(nmax * 4);
    out = malloc(nmax * 4);
    out2 = malloc(nmax * 4);
    if (!in_a || !in_b || !ref || !out || !out2)
        ct_die("out of host memory");

    static const size_t sizes[2] = {N_BASE, N_BASE + 5};
    for (int s = 0; s < 2; s++) {
        size_t n = sizes[s];
        ct_rng_state = 0xA5A5F00Du + (uint32_t)s;
        for (size_t i = 0; i < n; i++) {
            in_a[i] = ct_rand();
            in_b[i] = ct_rand();
            ref[i] = in_a[i] * 3u + (in_b[i] ^ (uint32_t)i);
        }
        split(n);
        char what[160];

        memset(out, 0xEE, n * 4);
        variant_private(n);
        snprintf(what, sizeof what, "A private buffers, n=%zu", n);
        printf("  %-50s %s\n", what, CHECK_MEM(out, ref, n, 4, what) ? "ok" : "MISMATCH");

        memset(out, 0xEE, n * 4);
        memset(out2, 0xEE, n * 4);
        variant_shared_whole(n);
        snprintf(what, sizeof what, "B shared buffer, read on queue 0, n=%zu", n);
        printf("  %-50s %s\n", what, CHECK_MEM(out, ref, n, 4, what) ? "ok" : "MISMATCH");
        snprintf(what, sizeof what, "B shared buffer, read on last queue, n=%zu", n);
        printf("  %-50s %s\n", what, CHECK_MEM(out2, ref, n, 4, what) ? "ok" : "MISMATCH");

        memset(out, 0xEE, n * 4);
        variant_shared_slices(n);
        snprintf(what, sizeof what, "C shared buffer, per-slice reads, n=%zu", n);
        printf("  %-50s %s\n", what, CHECK_MEM(out, ref, n, 4, what) ? "ok" : "MISMATCH");
    }

    MUST(clReleaseKernel(k_priv));
    MUST(clReleaseKernel(k_shared));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    free(in_a);
    free(in_b);
    free(ref);
    free(out);
    free(out2);
    return ct_finish();
}
