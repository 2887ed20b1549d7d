/*
 * cluster_big.c - a transfer larger than 2 GiB between the FIRST and the LAST
 * device (with one device everything runs on it).
 * Size: 2 GiB + 64 MiB by default, or CLUSTER_BIG_BYTES (rounded down to a
 * multiple of 4 KiB; at least 16 KiB, at most 16 GiB so that uint indices and
 * counters suffice).  If a device's CL_DEVICE_MAX_MEM_ALLOC_SIZE or
 * CL_DEVICE_GLOBAL_MEM_SIZE is too small, a "SKIP" line is printed and the
 * program passes.
 *   1. Buffer A (no host pointer) is filled on device 0 by a kernel writing
 *      pat(i) = (uint)i * 2654435761u ^ (uint)(i >> 7) (i a size_t index; the
 *      range is launched in pieces of at most 2^28 work-items, each piece's
 *      start passed as a ulong kernel argument).
 *   2. A kernel on the LAST device reads all of A and counts mismatches
 *      (atomic_inc), the lowest mismatching index (atomic_min) and the number
 *      of work-items that ran (one atomic_add of the local size per
 *      work-group); the counters are read back on the last device's queue.
 *   3. Three 4 KiB slices of A (the first, one straddling the 2 GiB byte
 *      offset, the last) are read with clEnqueueReadBuffer on the LAST
 *      device's queue and checked on the host; then, unless CLUSTER_BIG_MAP=0,
 *      the whole buffer is mapped for reading on that queue and sampled.
 *   4. Unless CLUSTER_BIG_COPY=0 or memory is short: clEnqueueCopyBuffer of the
 *      whole of A into a second buffer B, enqueued on the LAST device's queue;
 *      B is verified by the kernel on device 0 and its slices read on queue 0.
 * The program allocates no host copy of the whole buffer itself (the map
 * shows the implementation's).
 */
#include "check.h"

#define SLICE 4096u
#define MAX_ITEMS_PER_LAUNCH (1ull << 28)

static const char *kSrc =
    "uint pat(ulong i) { return (uint)i * 2654435761u ^ (uint)(i >> 7); }\n"
    "__kernel void fill(__global uint *a, ulong base)\n"
    "{ size_t i = (size_t)base + get_global_id(0); a[i] = pat(i); }\n"
    "__kernel void verify(__global const uint *a, __global uint *res, ulong base)\n"
    "{\n"
    "    size_t i = (size_t)base + get_global_id(0);\n"
    "    if (a[i] != pat(i)) {\n"
    "        atomic_inc(&res[0]);\n"
    "        atomic_min(&res[1], (uint)i);\n"
    "    }\n"
    "    if (get_local_id(0) == 0)\n"
    "        atomic_add(&res[2], (uint)get_local_size(0));\n"
    "}\n";

static uint32_t pat(uint64_t i) { return (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 7); }

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_context ctx;

/*
 * Enqueues k over [0, n) in pieces; the start of each piece is passed as the
 * kernel argument `base` (index base_arg), not as a global work offset: the
 * NVIDIA driver rejects offset + size > 2^31 with CL_OUT_OF_RESOURCES.
 * Returns the event of the last piece.
 */
static cl_event launch(cl_uint d, cl_kernel k, cl_uint base_arg, uint64_t n, cl_uint nwait, const cl_event *wait)
{
    cl_event ev = NULL;
    for (uint64_t off = 0; off < n; off += MAX_ITEMS_PER_LAUNCH) {
        cl_ulong base = off;
        size_t gws = (size_t)(n - off < MAX_ITEMS_PER_LAUNCH ? n - off : MAX_ITEMS_PER_LAUNCH);
        if (ev)
            MUST(clReleaseEvent(ev));
        MUST(clSetKernelArg(k, base_arg, sizeof base, &base));
        MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &gws, NULL, off == 0 ? nwait : 0,
                                    off == 0 && nwait ? wait : NULL, &ev));
    }
    MUST(clFlush(qs[d]));
    return ev;
}

/* Verifies buf with the kernel on device d (after `after`), then reads three slices on queue d. */
static int verify_on(cl_uint d, cl_kernel kv, cl_mem buf, uint64_t bytes, cl_event after, const char *what)
{
    uint64_t n = bytes / 4;
    cl_uint res_init[3] = {0, 0xFFFFFFFFu, 0}, res[3] = {1, 1, 1};
    cl_mem b_res;
    CREATE(b_res = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof res_init, res_init, &E));
    MUST(clSetKernelArg(kv, 0, sizeof buf, &buf));
    MUST(clSetKernelArg(kv, 1, sizeof b_res, &b_res));
    cl_event vev = launch(d, kv, 2, n, 1, &after);
    MUST(clEnqueueReadBuffer(qs[d], b_res, CL_TRUE, 0, sizeof res, res, 1, &vev, NULL));
    MUST(clReleaseEvent(vev));
    MUST(clReleaseMemObject(b_res));
    int ok = 1;
    char msg[160];
    snprintf(msg, sizeof msg, "%s: mismatches counted by the kernel on device %u", what, d);
    ok &= CHECK_TRUE(res[0] == 0, "%s: %u (lowest index %u)", msg, res[0], res[1]);
    ok &= CHECK_EQ(res[2], (uint32_t)n);

    /* Slices: first, straddling the 2 GiB byte offset (or the middle), last. */
    uint64_t two_gib = 1ull << 31;
    uint64_t offs[3] = {0, bytes >= two_gib + SLICE ? two_gib - SLICE / 2 : (bytes / 2) & ~(uint64_t)4095,
                        bytes - SLICE};
    static uint32_t got[SLICE / 4], ref[SLICE / 4];
    for (int s = 0; s < 3; s++) {
        memset(got, 0xEE, sizeof got);
        MUST(clEnqueueReadBuffer(qs[d], buf, CL_TRUE, (size_t)offs[s], SLICE, got, 0, NULL, NULL));
        for (uint32_t j = 0; j < SLICE / 4; j++)
            ref[j] = pat(offs[s] / 4 + j);
        snprintf(msg, sizeof msg, "%s: 4 KiB slice at byte offset %llu read on queue %u", what,
                 (unsigned long long)offs[s], d);
        ok &= CHECK_MEM(got, ref, SLICE / 4, 4, msg);
    }

    /* The whole buffer mapped for reading on queue d: under MirrorCL the bytes come to
     * every rank's host copy (a transfer of the whole buffer to every rank). Checked at
     * every 4093rd element and at the last one. */
    const char *map_env = getenv("CLUSTER_BIG_MAP");
    if (!map_env || atoi(map_env) != 0) {
        cl_int err = CL_SUCCESS;
        uint32_t *m = clEnqueueMapBuffer(qs[d], buf, CL_TRUE, CL_MAP_READ, 0, (size_t)bytes, 0, NULL, NULL, &err);
        ok &= CHECK_EQ(err, CL_SUCCESS);
        if (m) {
            uint64_t bad = 0, first_bad = 0;
            for (uint64_t i = 0; i < n; i += (i + 4093 < n ? 4093 : (n - 1 - i ? n - 1 - i : 1))) {
                if (m[i] != pat(i) && !bad++)
                    first_bad = i;
            }
            snprintf(msg, sizeof msg, "%s: whole buffer mapped on queue %u", what, d);
            ok &= CHECK_TRUE(bad == 0, "%s: %llu sampled mismatches, first at element %llu", msg,
                             (unsigned long long)bad, (unsigned long long)first_bad);
            MUST(clEnqueueUnmapMemObject(qs[d], buf, m, 0, NULL, NULL));
            MUST(clFinish(qs[d]));
        }
    }
    printf("  %-62s %s\n", what, ok ? "ok" : "MISMATCH");
    return ok;
}

int main(void)
{
    ct_init("cluster_big");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);

    uint64_t bytes = (2ull << 30) + (64ull << 20);
    const char *env = getenv("CLUSTER_BIG_BYTES");
    if (env && *env)
        bytes = strtoull(env, NULL, 0);
    bytes &= ~(uint64_t)4095;
    if (bytes < 4 * SLICE || bytes > (16ull << 30) - 4096) {
        CHECK_TRUE(0, "CLUSTER_BIG_BYTES=%s is out of range [16 KiB, 16 GiB)", env ? env : "");
        return ct_finish();
    }
    int want_copy = !(getenv("CLUSTER_BIG_COPY") && strcmp(getenv("CLUSTER_BIG_COPY"), "0") == 0);
    const cl_uint first = 0, last = ndev - 1;
    printf("  %u device(s), %llu bytes (%.3f GiB) from device %u to device %u\n", ndev, (unsigned long long)bytes,
           (double)bytes / (double)(1ull << 30), first, last);

    /* Memory limits of the two devices involved. */
    int skip = 0;
    uint64_t min_global = ~(uint64_t)0;
    cl_uint inv[2] = {first, last};
    for (int j = 0; j < (first == last ? 1 : 2); j++) {
        cl_uint d = inv[j];
        uint64_t maxalloc = ct_device_ulong(devs[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE);
        uint64_t global = ct_device_ulong(devs[d], CL_DEVICE_GLOBAL_MEM_SIZE);
        cl_uint bits = ct_device_uint(devs[d], CL_DEVICE_ADDRESS_BITS);
        printf("  device %u: max alloc %llu, global memory %llu, address bits %u\n", d,
               (unsigned long long)maxalloc, (unsigned long long)global, bits);
        if (maxalloc < bytes || global < bytes || (bits < 64 && bytes > (1ull << 31)))
            skip = 1;
        if (global < min_global)
            min_global = global;
    }
    if (skip) {
        printf("SKIP cluster_big: a device cannot hold a buffer of %llu bytes "
               "(set CLUSTER_BIG_BYTES to a smaller size)\n", (unsigned long long)bytes);
        return ct_finish();
    }
    int do_copy = want_copy && min_global >= 2 * bytes;
    if (want_copy && !do_copy)
        printf("  copy phase skipped: global memory %llu < 2 * %llu\n", (unsigned long long)min_global,
               (unsigned long long)bytes);

    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel kf = ct_kernel(prog, "fill"), kv = ct_kernel(prog, "verify");

    cl_mem a;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &E));
    MUST(clSetKernelArg(kf, 0, sizeof a, &a));
    cl_event fev = launch(first, kf, 1, bytes / 4, 0, NULL);
    verify_on(last, kv, a, bytes, fev, "A filled on the first device, checked on the last");
    MUST(clReleaseEvent(fev));

    if (do_copy) {
        cl_mem b;
        CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &E));
        cl_event cev;
        MUST(clEnqueueCopyBuffer(qs[last], a, b, 0, 0, (size_t)bytes, 0, NULL, &cev));
        MUST(clFlush(qs[last]));
        verify_on(first, kv, b, bytes, cev, "B = copy of A on the last device, checked on the first");
        MUST(clReleaseEvent(cev));
        MUST(clReleaseMemObject(b));
    }

    MUST(clReleaseMemObject(a));
    MUST(clReleaseKernel(kf));
    MUST(clReleaseKernel(kv));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
