/*
 * cluster_attach.c - private per-device buffers attached to their devices with
 * clAttachBufferToDevice (when the platform offers cl_mirrorcl_attach_buffer),
 * updated by ITERS kernels on their own device each, then read back once.
 *
 * Under MirrorCL's queueing optimisation a rank enqueues only the commands of its
 * own devices (and every read, whose bytes every rank receives), so the commands
 * it issues to its devices stay the same however many ranks there are, and no
 * byte of an attached buffer crosses the network except for the final reads.
 * The harness checks that from MIRRORCL_STATS; this program checks the bytes.
 *
 * Environment: CLUSTER_ITERS (default 50).
 */
#include "check.h"

#include "../../include/CL/cl_ext_mirrorcl.h"

#define N 4096u

static const char *kSrc =
    "__kernel void step_x(__global uint *x, uint it, uint dev)\n"
    "{ size_t i = get_global_id(0); x[i] = x[i] * 2654435761u + it * 7u + dev + (uint)i; }\n";

int main(void)
{
    ct_init("cluster_attach");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "step_x");
    const char *env = getenv("CLUSTER_ITERS");
    cl_uint iters = env && *env ? (cl_uint)atoi(env) : 50;

    clAttachBufferToDevice_fn attach =
        (clAttachBufferToDevice_fn)clGetExtensionFunctionAddressForPlatform(platform, "clAttachBufferToDevice");
    if (ct_mirrorcl()) {
        CHECK_TRUE(attach != NULL, "MirrorCL offers clAttachBufferToDevice");
        char *ext = ct_platform_str(platform, CL_PLATFORM_EXTENSIONS);
        CHECK_TRUE(strstr(ext, CL_MIRRORCL_ATTACH_BUFFER_EXTENSION_NAME) != NULL, "extension listed: %s", ext);
        free(ext);
    }
    printf("  %u device(s), %u iterations, attach %s\n", ndev, iters, attach ? "available" : "not available");

    cl_command_queue qs[CT_MAX_DEVICES];
    cl_mem x[CT_MAX_DEVICES];
    uint32_t *init = malloc(N * 4), *ref = malloc((size_t)N * 4 * ndev), *got = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++)
        init[i] = i ^ 0x5a5a5a5au;
    for (cl_uint d = 0; d < ndev; d++) {
        qs[d] = ct_queue(ctx, devs[d], 0);
        CREATE(x[d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4, init, &E));
        if (attach)
            MUST(attach(x[d], devs[d]));
        uint32_t *r = ref + (size_t)d * N;
        memcpy(r, init, N * 4);
        for (cl_uint it = 0; it < iters; it++)
            for (uint32_t i = 0; i < N; i++)
                r[i] = r[i] * 2654435761u + it * 7u + d + i;
    }
    if (attach) {
        /* Invalid arguments get the specification's codes and change nothing. */
        CHECK(attach(NULL, devs[0]), CL_INVALID_MEM_OBJECT);
        CHECK(attach(x[0], NULL), CL_INVALID_DEVICE);
        cl_buffer_region reg = {0, 64};
        cl_mem sub;
        CREATE(sub = clCreateSubBuffer(x[0], 0, CL_BUFFER_CREATE_TYPE_REGION, &reg, &E));
        CHECK(attach(sub, devs[0]), CL_INVALID_MEM_OBJECT);
        MUST(clReleaseMemObject(sub));
    }
    size_t gws = N;
    for (cl_uint it = 0; it < iters; it++) {
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &x[d]));
            MUST(clSetKernelArg(k, 1, sizeof it, &it));
            MUST(clSetKernelArg(k, 2, sizeof d, &d));
            MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &gws, NULL, 0, NULL, NULL));
        }
    }
    for (cl_uint d = 0; d < ndev; d++) {
        memset(got, 0xEE, N * 4);
        MUST(clEnqueueReadBuffer(qs[d], x[d], CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
        char what[64];
        snprintf(what, sizeof what, "buffer of device %u", d);
        CHECK_MEM(got, ref + (size_t)d * N, N, 4, what);
    }
    /* Used from another device: still correct (the bytes move there and back). */
    if (ndev > 1) {
        cl_uint it = iters, d = 0;
        MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &x[0]));
        MUST(clSetKernelArg(k, 1, sizeof it, &it));
        MUST(clSetKernelArg(k, 2, sizeof d, &d));
        /* Events order the two queues (natively they are otherwise unordered). */
        cl_event first, second;
        MUST(clEnqueueNDRangeKernel(qs[ndev - 1], k, 1, NULL, &gws, NULL, 0, NULL, &first));
        MUST(clSetKernelArg(k, 1, sizeof it, &(cl_uint){iters + 1}));
        MUST(clEnqueueNDRangeKernel(qs[0], k, 1, NULL, &gws, NULL, 1, &first, &second));
        MUST(clEnqueueReadBuffer(qs[ndev - 1], x[0], CL_TRUE, 0, N * 4, got, 1, &second, NULL));
        MUST(clReleaseEvent(first));
        MUST(clReleaseEvent(second));
        uint32_t *r = ref;
        for (cl_uint t = iters; t < iters + 2; t++)
            for (uint32_t i = 0; i < N; i++)
                r[i] = r[i] * 2654435761u + t * 7u + 0 + i;
        CHECK_MEM(got, r, N, 4, "attached buffer used on another device, read there");
    }
    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clReleaseMemObject(x[d]));
        MUST(clReleaseCommandQueue(qs[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    free(init);
    free(ref);
    free(got);
    return ct_finish();
}
