/*
 * cluster_alltoall.c - the microbenchmark of the SnuCL-D thesis (IV.7.2) as a
 * checked program: every device i holds a 16-byte buffer src[i] (rewritten by a
 * kernel on device i every iteration) and a buffer dst[i] of 16 bytes per device;
 * every iteration every device's src is copied into every device's dst with
 * clEnqueueCopyBuffer (n^2 copies, each on the destination device's queue, after
 * the kernel that wrote its source; the next kernel on a device waits for every copy
 * of its source: plain OpenCL event ordering across queues). With
 * cl_mirrorcl_attach_buffer, src[i] and dst[i] are attached to device i.
 * At the end every dst must hold every device's last pattern; then each device
 * copies its own piece alone, three times, checked each time.
 *
 * Environment: CLUSTER_ITERS (default 20), CLUSTER_LOCAL_ROUNDS (default 3). Prints the
 * time of the iterations.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "check.h"

#include "../../include/CL/cl_ext_mirrorcl.h"

#include <sys/resource.h>
#include <time.h>

static const char *kSrc =
    "__kernel void fill(__global uint *s, uint dev, uint it)\n"
    "{ size_t i = get_global_id(0); s[i] = dev * 0x01000193u ^ it * 0x9e3779b9u ^ (uint)i; }\n";

static uint32_t pattern(cl_uint dev, cl_uint it, uint32_t i) { return dev * 0x01000193u ^ it * 0x9e3779b9u ^ i; }

int main(void)
{
    ct_init("cluster_alltoall");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint n = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, n, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "fill");
    const char *env = getenv("CLUSTER_ITERS");
    cl_uint iters = env && *env ? (cl_uint)atoi(env) : 20;
    clAttachBufferToDevice_fn attach =
        (clAttachBufferToDevice_fn)clGetExtensionFunctionAddressForPlatform(platform, "clAttachBufferToDevice");

    cl_command_queue qs[CT_MAX_DEVICES];
    cl_mem src[CT_MAX_DEVICES], dst[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < n; d++) {
        qs[d] = ct_queue(ctx, devs[d], 0);
        CREATE(src[d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16, NULL, &E));
        CREATE(dst[d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16 * (size_t)n, NULL, &E));
        if (attach) {
            MUST(attach(src[d], devs[d]));
            MUST(attach(dst[d], devs[d]));
        }
    }
    size_t four = 4;
    cl_event kev[CT_MAX_DEVICES];
    cl_event *cev = calloc((size_t)n * n, sizeof(cl_event)); /* cev[j * n + i]: copy i -> j */
    /* Warm-up, untimed (as in alltoall_mpi.c): vendors finish building a kernel at its
     * first launch. Iteration 0 rewrites src before anything reads it. */
    for (cl_uint d = 0; d < n; d++) {
        cl_uint zero = 0;
        MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &src[d]));
        MUST(clSetKernelArg(k, 1, sizeof d, &d));
        MUST(clSetKernelArg(k, 2, sizeof zero, &zero));
        MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &four, NULL, 0, NULL, NULL));
    }
    for (cl_uint d = 0; d < n; d++)
        MUST(clFinish(qs[d]));
    struct timespec t0, t1, enq, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    for (cl_uint it = 0; it < iters; it++) {
        for (cl_uint d = 0; d < n; d++) {
            /* The kernel rewrites src[d]: after every copy of the last iteration read it. */
            cl_event wait[CT_MAX_DEVICES];
            cl_uint nw = 0;
            for (cl_uint j = 0; it > 0 && j < n; j++)
                wait[nw++] = cev[j * n + d];
            MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &src[d]));
            MUST(clSetKernelArg(k, 1, sizeof d, &d));
            MUST(clSetKernelArg(k, 2, sizeof it, &it));
            MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &four, NULL, nw, nw ? wait : NULL, &kev[d]));
        }
        for (cl_uint j = 0; j < n; j++)
            for (cl_uint i = 0; i < n; i++) {
                if (it > 0)
                    MUST(clReleaseEvent(cev[j * n + i]));
                MUST(clEnqueueCopyBuffer(qs[j], src[i], dst[j], 0, 16 * (size_t)i, 16, 1, &kev[i],
                                         &cev[j * n + i]));
            }
        for (cl_uint d = 0; d < n; d++)
            MUST(clReleaseEvent(kev[d]));
    }
    /* Whether the enqueuing thread sets the pace: its time and CPU time for the loop. */
    clock_gettime(CLOCK_MONOTONIC, &enq);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    getrusage(RUSAGE_THREAD, &r1);
    for (cl_uint d = 0; d < n; d++)
        MUST(clFinish(qs[d]));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("  %u device(s), %u iterations of %u copies: %.6f s (attach %s)\n", n, iters, n * n, secs,
           attach ? "used" : "not available");
    double enq_s = (double)(enq.tv_sec - t0.tv_sec) + (double)(enq.tv_nsec - t0.tv_nsec) * 1e-9;
    double cpu_s = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (iters > 0) {
        printf("  enqueueing: %.1f us per iteration, %.1f of them on this thread's CPU\n",
               enq_s * 1e6 / iters, cpu_s * 1e6 / iters);
        /* In the kernel (system calls, page faults), and how often the thread gave up
         * its core (waits) or lost it. */
        double sys_us = (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
                        (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
        printf("  enqueueing thread: %.1f us of system time per iteration, %.2f voluntary and "
               "%.2f involuntary context switches per iteration\n",
               sys_us / iters, (double)(r1.ru_nvcsw - r0.ru_nvcsw) / iters,
               (double)(r1.ru_nivcsw - r0.ru_nivcsw) / iters);
    }

    uint32_t *got = malloc(16 * (size_t)n), *ref = malloc(16 * (size_t)n);
    for (cl_uint i = 0; i < n; i++)
        for (uint32_t w = 0; w < 4; w++)
            ref[i * 4 + w] = pattern(i, iters - 1, w);
    for (cl_uint j = 0; j < n; j++) {
        memset(got, 0xEE, 16 * (size_t)n);
        MUST(clEnqueueReadBuffer(qs[j], dst[j], CL_TRUE, 0, 16 * (size_t)n, got, 0, NULL, NULL));
        char what[64];
        snprintf(what, sizeof what, "dst of device %u", j);
        CHECK_MEM(got, ref, 4 * (size_t)n, 4, what);
    }
    /* Then each device copies only its own piece, three times: a device that sent its
     * source every iteration may read it ahead for sends that no longer come
     * (read_for_predicted_sends), and must still copy the right bytes. */
    const char *lenv = getenv("CLUSTER_LOCAL_ROUNDS");
    cl_uint local_rounds = lenv && *lenv ? (cl_uint)atoi(lenv) : 3;
    for (cl_uint r = 0; iters > 0 && r < local_rounds; r++) {
        cl_uint it = iters + r;
        for (cl_uint d = 0; d < n; d++) {
            MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &src[d]));
            MUST(clSetKernelArg(k, 1, sizeof d, &d));
            MUST(clSetKernelArg(k, 2, sizeof it, &it));
            MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &four, NULL, 0, NULL, NULL));
            MUST(clEnqueueCopyBuffer(qs[d], src[d], dst[d], 0, 16 * (size_t)d, 16, 0, NULL, NULL));
        }
        for (cl_uint d = 0; d < n; d++) {
            uint32_t own[4], want[4];
            for (uint32_t w = 0; w < 4; w++)
                want[w] = pattern(d, it, w);
            MUST(clEnqueueReadBuffer(qs[d], dst[d], CL_TRUE, 16 * (size_t)d, 16, own, 0, NULL, NULL));
            char what[64];
            snprintf(what, sizeof what, "own piece of device %u, local round %u", d, r);
            CHECK_MEM(own, want, 4, 4, what);
        }
    }
    for (cl_uint d = 0; d < n; d++) {
        MUST(clReleaseMemObject(src[d]));
        MUST(clReleaseMemObject(dst[d]));
        MUST(clReleaseCommandQueue(qs[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    for (size_t e = 0; iters > 0 && e < (size_t)n * n; e++)
        MUST(clReleaseEvent(cev[e]));
    free(cev);
    free(got);
    free(ref);
    return ct_finish();
}
