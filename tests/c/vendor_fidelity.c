/*
 * vendor_fidelity.c - what the vendor accepts natively, MirrorCL must accept:
 *
 * 1. A kernel declaring reqd_work_group_size: launched with that local size it
 *    runs; with a NULL local size OpenCL 1.2 (and PoCL 3.1) refuse it.
 * 2. A trivial kernel with no arguments, built with no options: the build
 *    must succeed (MirrorCL used to append -cl-kernel-arg-info, with which
 *    NVIDIA fails this build).
 * 3. A launch with a local size above CL_KERNEL_WORK_GROUP_SIZE but within
 *    CL_DEVICE_MAX_WORK_GROUP_SIZE (NVIDIA reports 256 for a kernel and
 *    launches 1024): the outcome is printed as "outcome:" lines, which
 *    tests/gpu/run-fidelity-on-gpu.sh compares between the native platform
 *    and MirrorCL; a launch that is accepted must compute the right result.
 *
 * 4. The application's random streams (rand, random, drand48) continue where the
 *    application left them whatever the vendor draws or seeds meanwhile (NVIDIA
 *    seeds during builds), on every rank: natively NVIDIA moves them, which
 *    is printed, not checked.
 *
 * Every result is checked bit-exactly against a CPU reference, per device.
 */
/* srandom, random, srand48, drand48 */
#define _XOPEN_SOURCE 700
#include "check.h"

#define N 1024u

static const char *kSrc =
    "__kernel __attribute__((reqd_work_group_size(4, 1, 1)))\n"
    "void fixed(__global uint *out)\n"
    "{ out[get_global_id(0)] = (uint)get_local_size(0) * 1000u + (uint)get_local_id(0); }\n"
    "__kernel void triv(void) { }\n"
    "__kernel void square(__global uint *b)\n"
    "{ size_t i = get_global_id(0); b[i] = (uint)(i * i) + 7u; }\n";

int main(void)
{
    ct_init("vendor_fidelity");
    /* What the application's streams give after these seeds, before any OpenCL call. */
    srand(12345u);
    srandom(777u);
    srand48(4242L);
    int rand_first = rand(), rand_second = rand();
    long random_first = random();
    double drand_first = drand48();
    srand(12345u);
    srandom(777u);
    srand48(4242L);
    if (rand() != rand_first)
        ct_die("srand(12345) does not restart rand()");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel fixed = ct_kernel(prog, "fixed"), square = ct_kernel(prog, "square");
    uint32_t *got = malloc(N * 4), *ref = malloc(N * 4);

    printf("-- reqd_work_group_size: the required local size, and NULL (OpenCL 1.2 refuses it)\n");
    for (cl_uint d = 0; d < ndev; d++) {
        cl_command_queue q = ct_queue(ctx, devs[d], 0);
        cl_mem out;
        CREATE(out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
        MUST(clSetKernelArg(fixed, 0, sizeof out, &out));
        size_t gws = N, four = 4;
        CHECK(clEnqueueNDRangeKernel(q, fixed, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
        MUST(clEnqueueNDRangeKernel(q, fixed, 1, NULL, &gws, &four, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(q, out, CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
        for (cl_uint i = 0; i < N; i++)
            ref[i] = 4000u + (i % 4u);
        CHECK_MEM(got, ref, N, 4, "reqd_work_group_size(4)");
        printf("  device %u: work-groups of 4\n", d);
        MUST(clReleaseMemObject(out));
        MUST(clReleaseCommandQueue(q));
    }

    printf("-- a kernel without arguments, built with no options\n");
    {
        cl_program p;
        const char *src = "__kernel void triv(void) { }\n";
        CREATE(p = clCreateProgramWithSource(ctx, 1, &src, NULL, &E));
        cl_int rc = clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
        if (rc != CL_SUCCESS)
            ct_print_build_logs(p);
        CHECK(rc, CL_SUCCESS);
        cl_kernel k;
        CREATE(k = clCreateKernel(p, "triv", &E));
        cl_command_queue q = ct_queue(ctx, devs[0], 0);
        MUST(clEnqueueTask(q, k, 0, NULL, NULL));
        MUST(clFinish(q));
        MUST(clReleaseCommandQueue(q));
        MUST(clReleaseKernel(k));
        MUST(clReleaseProgram(p));
        printf("  built and launched\n");
    }

    printf("-- local size above CL_KERNEL_WORK_GROUP_SIZE, within the device's maximum\n");
    for (cl_uint d = 0; d < ndev; d++) {
        size_t kwg = 0, dmax = 0, items[3] = {0, 0, 0};
        MUST(clGetKernelWorkGroupInfo(square, devs[d], CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dmax, &dmax, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL));
        size_t local = dmax < items[0] ? dmax : items[0];
        if (local <= kwg) {
            printf("outcome: device %u: kernel limit %zu is the device's, nothing above it\n", d, kwg);
            continue;
        }
        cl_command_queue q = ct_queue(ctx, devs[d], 0);
        cl_mem b;
        size_t gws = local * 2;
        CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, gws * 4, NULL, &E));
        MUST(clSetKernelArg(square, 0, sizeof b, &b));
        cl_event ev = NULL;
        cl_int rc = clEnqueueNDRangeKernel(q, square, 1, NULL, &gws, &local, 0, NULL, &ev);
        cl_int status = CL_COMPLETE;
        if (rc == CL_SUCCESS) {
            clWaitForEvents(1, &ev);
            status = ct_event_status(ev);
            MUST(clReleaseEvent(ev));
        }
        const char *result = "not run";
        if (rc == CL_SUCCESS && status == CL_COMPLETE) {
            uint32_t *g = malloc(gws * 4), *r = malloc(gws * 4);
            MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, gws * 4, g, 0, NULL, NULL));
            for (size_t i = 0; i < gws; i++)
                r[i] = (uint32_t)(i * i) + 7u;
            result = CHECK_MEM(g, r, gws, 4, "launch above the kernel's work-group size") ? "right" : "wrong";
            free(g);
            free(r);
        }
        printf("outcome: device %u: local %zu over kernel limit %zu: enqueue %s, status %s, result %s\n",
               d, local, kwg, cl_err_name(rc), status == CL_COMPLETE ? "CL_COMPLETE" : cl_err_name(status), result);
        MUST(clReleaseMemObject(b));
        MUST(clReleaseCommandQueue(q));
    }

    printf("-- the application's random streams after building programs\n");
    {
        /* Builds (and a failing one) between the application's draws. */
        cl_program p;
        const char *src = "__kernel void k2(__global int *a) { a[get_global_id(0)] += 2; }\n";
        CREATE(p = clCreateProgramWithSource(ctx, 1, &src, NULL, &E));
        MUST(clBuildProgram(p, 0, NULL, "-cl-mad-enable", NULL, NULL));
        MUST(clReleaseProgram(p));
        int r2 = rand();
        long rl = random();
        double rd = drand48();
        int same = r2 == rand_second && rl == random_first && rd == drand_first;
        printf("  rand %s, random %s, drand48 %s\n", r2 == rand_second ? "continues" : "moved",
               rl == random_first ? "continues" : "moved", rd == drand_first ? "continues" : "moved");
        if (ct_mirrorcl())
            CHECK_TRUE(same, "the vendor moved the application's random streams");
    }

    free(got);
    free(ref);
    MUST(clReleaseKernel(fixed));
    MUST(clReleaseKernel(square));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
