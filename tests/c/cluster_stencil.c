/*
 * cluster_stencil.c - a 1D integer stencil over a global domain of NG uints
 * split into one chunk per device (the last device takes the remainder):
 *     y[i] = (x[i-1] + 2*x[i] + x[i+1]) ^ (x[i] >> 7)      (uint, wraps)
 * with x = 0 outside the global domain.  Every device owns two buffers of
 * chunk+2 uints (ping-pong; element 0 and chunk+1 are ghost cells).  Before
 * every iteration the ghost cells are exchanged between neighbouring devices
 * with 4-byte clEnqueueCopyBuffer commands from the neighbour's buffer into
 * this device's ghost cell, enqueued on the RECEIVING device's queue.
 *   A. ordering by events: a ghost copy waits on the event of the neighbour's
 *      kernel of the previous iteration (which wrote the source); the
 *      in-order queues do the rest (the kernel that overwrites a buffer runs
 *      after the neighbours' copies that read it, transitively).
 *   B. ordering by clFinish on all queues after the exchange phase and after
 *      the compute phase of every iteration.
 * After ITERS iterations every device's whole buffer (ghost cells included)
 * is read back and compared bit-exactly with a CPU reference.
 */
#include "check.h"

#include "../../include/CL/cl_ext_mirrorcl.h"

/* clAttachBufferToDevice when CLUSTER_ATTACH=1 and the platform offers it. */
static clAttachBufferToDevice_fn attach;

#define NG (64u * 1024u)
#define ITERS 20u

static const char *kSrc =
    "__kernel void stencil(__global const uint *x, __global uint *y)\n"
    "{\n"
    "    size_t i = get_global_id(0) + 1;\n"
    "    uint c = x[i];\n"
    "    y[i] = (x[i - 1] + 2u * c + x[i + 1]) ^ (c >> 7);\n"
    "}\n";

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_context ctx;
static cl_kernel k_st;
static size_t off[CT_MAX_DEVICES], len[CT_MAX_DEVICES];
static uint32_t init[NG];

static void ref_step(const uint32_t *x, uint32_t *y)
{
    for (size_t i = 0; i < NG; i++) {
        uint32_t l = i ? x[i - 1] : 0, r = i + 1 < NG ? x[i + 1] : 0, c = x[i];
        y[i] = (l + 2u * c + r) ^ (c >> 7);
    }
}

static void run(int by_events, uint32_t *final_ref, const uint32_t *ghost_ref)
{
    cl_mem buf[2][CT_MAX_DEVICES];
    cl_event kev[CT_MAX_DEVICES]; /* kernel events of the previous iteration */
    uint32_t *tmp = calloc(NG + 2, 4);
    for (cl_uint d = 0; d < ndev; d++) {
        /* Ghost cells start at 0; the exchange of iteration 0 fills the inner ones. */
        memset(tmp, 0, (NG + 2) * 4);
        memcpy(tmp + 1, init + off[d], len[d] * 4);
        CREATE(buf[0][d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, (len[d] + 2) * 4, tmp, &E));
        memset(tmp, 0, (NG + 2) * 4);
        CREATE(buf[1][d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, (len[d] + 2) * 4, tmp, &E));
        if (attach) {
            MUST(attach(buf[0][d], devs[d]));
            MUST(attach(buf[1][d], devs[d]));
        }
        kev[d] = NULL;
    }
    for (cl_uint it = 0; it < ITERS; it++) {
        cl_mem *cur = buf[it % 2], *nxt = buf[(it + 1) % 2];
        /* Exchange: copy the neighbours' edge elements into our ghost cells. */
        for (cl_uint d = 0; d < ndev; d++) {
            if (d > 0) {
                cl_uint s = d - 1;
                MUST(clEnqueueCopyBuffer(qs[d], cur[s], cur[d], len[s] * 4, 0, 4,
                                         by_events && kev[s] ? 1 : 0, by_events && kev[s] ? &kev[s] : NULL, NULL));
            }
            if (d + 1 < ndev) {
                cl_uint s = d + 1;
                MUST(clEnqueueCopyBuffer(qs[d], cur[s], cur[d], 4, (len[d] + 1) * 4, 4,
                                         by_events && kev[s] ? 1 : 0, by_events && kev[s] ? &kev[s] : NULL, NULL));
            }
            MUST(clFlush(qs[d]));
        }
        if (!by_events)
            for (cl_uint d = 0; d < ndev; d++)
                MUST(clFinish(qs[d]));
        /* Compute: cur -> nxt on every device. */
        cl_event nev[CT_MAX_DEVICES];
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clSetKernelArg(k_st, 0, sizeof(cl_mem), &cur[d]));
            MUST(clSetKernelArg(k_st, 1, sizeof(cl_mem), &nxt[d]));
            size_t gws = len[d];
            MUST(clEnqueueNDRangeKernel(qs[d], k_st, 1, NULL, &gws, NULL, 0, NULL, by_events ? &nev[d] : NULL));
            MUST(clFlush(qs[d]));
        }
        if (by_events) {
            for (cl_uint d = 0; d < ndev; d++) {
                if (kev[d])
                    MUST(clReleaseEvent(kev[d]));
                kev[d] = nev[d];
            }
        } else {
            for (cl_uint d = 0; d < ndev; d++)
                MUST(clFinish(qs[d]));
        }
    }
    /* Read every device's whole final buffer (ghost cells included) on its queue. */
    cl_mem *fin = buf[ITERS % 2];
    int bad = 0;
    for (cl_uint d = 0; d < ndev; d++) {
        memset(tmp, 0xEE, (NG + 2) * 4);
        MUST(clEnqueueReadBuffer(qs[d], fin[d], CL_TRUE, 0, (len[d] + 2) * 4, tmp, 0, NULL, NULL));
        char what[128];
        snprintf(what, sizeof what, "%s: chunk of device %u [%zu, %zu)", by_events ? "A events" : "B clFinish",
                 d, off[d], off[d] + len[d]);
        if (!CHECK_MEM(tmp + 1, final_ref + off[d], len[d], 4, what))
            bad++;
        /* Ghost cells of the final buffer: filled at iteration ITERS-2 (0 at the domain edges). */
        uint32_t gl = d > 0 ? ghost_ref[off[d] - 1] : 0;
        uint32_t gr = d + 1 < ndev ? ghost_ref[off[d] + len[d]] : 0;
        if (!CHECK_EQ(tmp[0], gl) || !CHECK_EQ(tmp[len[d] + 1], gr))
            bad++;
    }
    printf("  %-40s %s\n", by_events ? "A exchange ordered by events" : "B exchange ordered by clFinish",
           bad ? "MISMATCH" : "ok");
    for (cl_uint d = 0; d < ndev; d++) {
        if (kev[d])
            MUST(clReleaseEvent(kev[d]));
        MUST(clReleaseMemObject(buf[0][d]));
        MUST(clReleaseMemObject(buf[1][d]));
    }
    free(tmp);
}

int main(void)
{
    ct_init("cluster_stencil");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    if (ct_env_flag("CLUSTER_ATTACH")) {
        attach = (clAttachBufferToDevice_fn)clGetExtensionFunctionAddressForPlatform(platform,
                                                                                     "clAttachBufferToDevice");
        if (ct_mirrorcl())
            CHECK_TRUE(attach != NULL, "MirrorCL offers clAttachBufferToDevice");
        printf("  every device's buffers attached to it: %s\n", attach ? "yes" : "not available");
    }
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    k_st = ct_kernel(prog, "stencil");

    size_t per = NG / ndev;
    for (cl_uint d = 0; d < ndev; d++) {
        off[d] = d * per;
        len[d] = d + 1 == ndev ? NG - d * per : per;
    }
    printf("  %u device(s), %u elements, %u iterations, chunk %zu (last %zu)\n", ndev, NG, ITERS, len[0],
           len[ndev - 1]);

    ct_rng_state = 0x57E4C11u;
    for (size_t i = 0; i < NG; i++)
        init[i] = ct_rand();
    /* CPU reference: final state and the state the last ghost exchange saw. */
    uint32_t *x = malloc(NG * 4), *y = malloc(NG * 4), *ghost = malloc(NG * 4);
    memcpy(x, init, NG * 4);
    memcpy(ghost, init, NG * 4);
    for (cl_uint it = 0; it < ITERS; it++) {
        if (it == ITERS - 2)
            memcpy(ghost, x, NG * 4);
        ref_step(x, y);
        uint32_t *t = x;
        x = y;
        y = t;
    }

    run(1, x, ghost);
    run(0, x, ghost);

    free(x);
    free(y);
    free(ghost);
    MUST(clReleaseKernel(k_st));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
