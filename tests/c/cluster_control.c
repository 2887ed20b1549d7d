/*
 * cluster_control.c - host control flow that depends on values computed by
 * devices and read back.
 *   1. The LAST device counts (atomic_inc on a global counter) the elements
 *      of an input array satisfying a predicate; the host reads the count
 *      with a blocking clEnqueueReadBuffer.  Device ndev/2 sums a small array
 *      with one work-item into out[0]; read back the same way.
 *   2. The count is used as a loop count: that many small kernels update a
 *      buffer on device 0, which is then read back and checked.
 *   3. The sum is used as an allocation size: a buffer of sum+1 uints is
 *      created, filled by a kernel on device 1 % ndev (the pattern depends on
 *      the count too), mapped for reading (blocking clEnqueueMapBuffer) on the
 *      queue of device 2 % ndev, checked, and unmapped.
 *   4. The counter and the sum are mapped (blocking, CL_MAP_READ) on the LAST
 *      device's queue and the host branches on them: the branch picks the
 *      device, the kernel argument and the size of the next step.
 *   5. A data-dependent while loop: a Collatz sequence advanced by one kernel
 *      per step on device step % ndev and read back after every step on the
 *      next device's queue until it reaches 1.
 *   6. The host polls the status of a long kernel on every device and builds a
 *      program (a collective) only while the kernel is not complete.
 * Everything is compared with a CPU reference.
 */
#include "check.h"

#define M 4096u      /* elements of the predicate input */
#define S 64u        /* elements summed by one work-item */
#define LOOPBUF 1024u
#define MAX_LOOP 1000u

static const char *kSrc =
    "__kernel void count_pred(__global const uint *x, __global uint *cnt)\n"
    "{ size_t i = get_global_id(0); if ((x[i] & 127u) == 5u) atomic_inc(cnt); }\n"
    "__kernel void sum1(__global const uint *x, uint n, __global uint *out)\n"
    "{ uint s = 0; for (uint i = 0; i < n; i++) s += x[i]; out[0] = s; }\n"
    "__kernel void loop_step(__global uint *b, uint it)\n"
    "{ size_t i = get_global_id(0); b[i] = b[i] * 3u + it + (uint)i; }\n"
    "__kernel void fill(__global uint *b, uint salt)\n"
    "{ size_t i = get_global_id(0); b[i] = (uint)i * 0x9E3779B9u + salt; }\n"
    "__kernel void collatz(__global uint *v)\n"
    "{ uint x = v[0]; v[0] = (x & 1u) ? 3u * x + 1u : x / 2u; v[1] += 1u; }\n"
    "__kernel void spin(__global uint *o, uint n)\n"
    "{ uint x = (uint)get_global_id(0);\n"
    "  for (uint i = 0; i < n; i++) x = x * 1664525u + 1013904223u;\n"
    "  o[get_global_id(0)] = x; }\n";

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_context ctx;
static cl_program prog;

static uint32_t fill_ref(uint32_t i, uint32_t salt) { return i * 0x9E3779B9u + salt; }

static void run1(cl_uint d, cl_kernel k, size_t gws, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
    MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &gws, NULL, nwait, nwait ? wait : NULL, ev));
    MUST(clFlush(qs[d]));
}

int main(void)
{
    ct_init("cluster_control");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k_count = ct_kernel(prog, "count_pred"), k_sum = ct_kernel(prog, "sum1");
    cl_kernel k_step = ct_kernel(prog, "loop_step"), k_fill = ct_kernel(prog, "fill");
    cl_kernel k_collatz = ct_kernel(prog, "collatz");
    const cl_uint last = ndev - 1, mid = ndev / 2, fill_dev = 1 % ndev, map_dev = 2 % ndev;
    printf("  %u device(s): count on %u, sum on %u, loop on 0, fill on %u, map on %u\n", ndev, last, mid,
           fill_dev, map_dev);

    /* ---- 1. values computed on the last and the middle device ---------------- */
    static uint32_t in[M], small[S];
    ct_rng_state = 0xC0A7201u;
    uint32_t count_ref = 0, sum_ref = 0;
    for (cl_uint i = 0; i < M; i++) {
        in[i] = ct_rand();
        count_ref += (in[i] & 127u) == 5u;
    }
    for (cl_uint i = 0; i < S; i++) {
        small[i] = ct_rand() & 1023u;
        sum_ref += small[i];
    }
    cl_uint zero2[2] = {0, 0};
    cl_mem b_in, b_cnt, b_small, b_sum;
    CREATE(b_in = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, in, &E));
    CREATE(b_cnt = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 4, zero2, &E));
    CREATE(b_small = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof small, small, &E));
    CREATE(b_sum = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4, NULL, &E));
    MUST(clSetKernelArg(k_count, 0, sizeof b_in, &b_in));
    MUST(clSetKernelArg(k_count, 1, sizeof b_cnt, &b_cnt));
    run1(last, k_count, M, 0, NULL, NULL);
    cl_uint n_small = S;
    MUST(clSetKernelArg(k_sum, 0, sizeof b_small, &b_small));
    MUST(clSetKernelArg(k_sum, 1, sizeof n_small, &n_small));
    MUST(clSetKernelArg(k_sum, 2, sizeof b_sum, &b_sum));
    run1(mid, k_sum, 1, 0, NULL, NULL);
    cl_uint count = 0xDEADBEEFu, sum = 0xDEADBEEFu;
    MUST(clEnqueueReadBuffer(qs[last], b_cnt, CL_TRUE, 0, 4, &count, 0, NULL, NULL));
    MUST(clEnqueueReadBuffer(qs[mid], b_sum, CL_TRUE, 0, 4, &sum, 0, NULL, NULL));
    CHECK_EQ(count, count_ref);
    CHECK_EQ(sum, sum_ref);
    printf("  count %u (device %u), sum %u (device %u)\n", count, last, sum, mid);

    /* ---- 2. the count as a loop count ---------------------------------------- */
    cl_uint loops = count;
    if (loops > MAX_LOOP) {
        CHECK_TRUE(0, "count %u is too large to be used as a loop count", loops);
        loops = MAX_LOOP;
    }
    static uint32_t lb_init[LOOPBUF], lb_ref[LOOPBUF], lb_got[LOOPBUF];
    for (cl_uint i = 0; i < LOOPBUF; i++)
        lb_init[i] = lb_ref[i] = ct_rand();
    for (uint32_t it = 0; it < count_ref; it++)
        for (uint32_t i = 0; i < LOOPBUF; i++)
            lb_ref[i] = lb_ref[i] * 3u + it + i;
    cl_mem b_loop;
    CREATE(b_loop = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof lb_init, lb_init, &E));
    MUST(clSetKernelArg(k_step, 0, sizeof b_loop, &b_loop));
    for (cl_uint it = 0; it < loops; it++) {
        MUST(clSetKernelArg(k_step, 1, sizeof it, &it));
        run1(0, k_step, LOOPBUF, 0, NULL, NULL);
    }
    MUST(clEnqueueReadBuffer(qs[0], b_loop, CL_TRUE, 0, sizeof lb_got, lb_got, 0, NULL, NULL));
    printf("  %-55s %s\n", "loop of <count> kernels on device 0",
           CHECK_MEM(lb_got, lb_ref, LOOPBUF, 4, "buffer after <count> step kernels") ? "ok" : "MISMATCH");

    /* ---- 3. the sum as an allocation size ------------------------------------ */
    size_t n_alloc = (size_t)sum + 1;
    if (n_alloc > (1u << 24)) {
        CHECK_TRUE(0, "sum %u is too large to be used as an allocation size", sum);
        n_alloc = 1u << 24;
    }
    cl_mem b_alloc;
    CREATE(b_alloc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n_alloc * 4, NULL, &E));
    size_t got_size = 0;
    MUST(clGetMemObjectInfo(b_alloc, CL_MEM_SIZE, sizeof got_size, &got_size, NULL));
    CHECK_EQ(got_size, ((size_t)sum_ref + 1) * 4);
    MUST(clSetKernelArg(k_fill, 0, sizeof b_alloc, &b_alloc));
    MUST(clSetKernelArg(k_fill, 1, sizeof count, &count));
    cl_event fev, uev;
    run1(fill_dev, k_fill, n_alloc, 0, NULL, &fev);
    uint32_t *mp = (uint32_t *)clEnqueueMapBuffer(qs[map_dev], b_alloc, CL_TRUE, CL_MAP_READ, 0, n_alloc * 4, 1,
                                                  &fev, NULL, &E);
    ct_check_code(E, CL_SUCCESS, "clEnqueueMapBuffer(b_alloc)", __FILE__, __LINE__, 1);
    size_t bad = 0;
    for (size_t i = 0; i < n_alloc; i++)
        if (mp[i] != fill_ref((uint32_t)i, count_ref)) {
            if (bad < 8)
                fprintf(stderr, "    mapped[%zu] = 0x%08x, expected 0x%08x\n", i, mp[i],
                        fill_ref((uint32_t)i, count_ref));
            bad++;
        }
    CHECK_TRUE(bad == 0, "%zu of %zu mapped elements differ", bad, n_alloc);
    MUST(clEnqueueUnmapMemObject(qs[map_dev], b_alloc, mp, 0, NULL, &uev));
    MUST(clWaitForEvents(1, &uev));
    MUST(clReleaseEvent(uev));
    MUST(clReleaseEvent(fev));
    printf("  %-55s %s\n", "buffer of <sum>+1 uints filled, mapped on another device", bad ? "MISMATCH" : "ok");

    /* ---- 4. branch on values mapped on the last device's queue ---------------- */
    cl_uint *mc = (cl_uint *)clEnqueueMapBuffer(qs[last], b_cnt, CL_TRUE, CL_MAP_READ, 0, 4, 0, NULL, NULL, &E);
    ct_check_code(E, CL_SUCCESS, "clEnqueueMapBuffer(b_cnt)", __FILE__, __LINE__, 1);
    cl_uint *ms = (cl_uint *)clEnqueueMapBuffer(qs[last], b_sum, CL_TRUE, CL_MAP_READ, 0, 4, 0, NULL, NULL, &E);
    ct_check_code(E, CL_SUCCESS, "clEnqueueMapBuffer(b_sum)", __FILE__, __LINE__, 1);
    cl_uint mcount = *mc, msum = *ms;
    CHECK_EQ(mcount, count_ref);
    CHECK_EQ(msum, sum_ref);
    MUST(clEnqueueUnmapMemObject(qs[last], b_cnt, mc, 0, NULL, NULL));
    MUST(clEnqueueUnmapMemObject(qs[last], b_sum, ms, 0, NULL, NULL));
    MUST(clFinish(qs[last]));
    /* The branch: which device, which salt and how many elements. */
    cl_uint bdev, salt;
    size_t bn;
    if (mcount % 2 == 0) {
        bdev = 0;
        salt = msum;
        bn = 1000;
    } else if (msum % 2 == 0) {
        bdev = mid;
        salt = msum * 3u;
        bn = 2000;
    } else {
        bdev = last;
        salt = ~msum;
        bn = 3000;
    }
    uint32_t rsalt;
    size_t rn;
    if (count_ref % 2 == 0) {
        rsalt = sum_ref;
        rn = 1000;
    } else if (sum_ref % 2 == 0) {
        rsalt = sum_ref * 3u;
        rn = 2000;
    } else {
        rsalt = ~sum_ref;
        rn = 3000;
    }
    CHECK_EQ(bn, rn);
    printf("  branch taken: %zu elements on device %u\n", bn, bdev);
    static uint32_t br_got[3000], br_ref[3000];
    for (size_t i = 0; i < rn; i++)
        br_ref[i] = fill_ref((uint32_t)i, rsalt);
    cl_mem b_br;
    CREATE(b_br = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bn * 4, NULL, &E));
    MUST(clSetKernelArg(k_fill, 0, sizeof b_br, &b_br));
    MUST(clSetKernelArg(k_fill, 1, sizeof salt, &salt));
    run1(bdev, k_fill, bn, 0, NULL, NULL);
    MUST(clEnqueueReadBuffer(qs[bdev], b_br, CL_TRUE, 0, bn * 4, br_got, 0, NULL, NULL));
    printf("  %-55s %s\n", "branch on values mapped on the last device",
           CHECK_MEM(br_got, br_ref, rn < bn ? rn : bn, 4, "result of the branch") ? "ok" : "MISMATCH");

    /* ---- 5. a data-dependent while loop over all devices --------------------- */
    uint32_t v_ref = 27, steps_ref = 0;
    while (v_ref != 1) {
        v_ref = (v_ref & 1) ? 3 * v_ref + 1 : v_ref / 2;
        steps_ref++;
    }
    cl_uint cz[2] = {27, 0};
    cl_mem b_cz;
    CREATE(b_cz = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof cz, cz, &E));
    MUST(clSetKernelArg(k_collatz, 0, sizeof b_cz, &b_cz));
    cl_uint steps = 0;
    while (cz[0] != 1 && steps < MAX_LOOP) {
        cl_event kev;
        run1(steps % ndev, k_collatz, 1, 0, NULL, &kev);
        MUST(clEnqueueReadBuffer(qs[(steps + 1) % ndev], b_cz, CL_TRUE, 0, sizeof cz, cz, 1, &kev, NULL));
        MUST(clReleaseEvent(kev));
        steps++;
        CHECK_EQ(cz[1], steps);
    }
    CHECK_EQ(steps, steps_ref);
    CHECK_EQ(cz[0], 1);
    printf("  %-55s %s\n", "Collatz(27) loop driven by read-back values",
           steps == steps_ref && cz[0] == 1 ? "ok" : "MISMATCH");

    /* ---- 6. a branch on a polled event status ---------------------------------- */
    /* A command still running on its owner may already be complete in another rank's
       bookkeeping: every rank must be told the owner's status, or only some ranks take
       the branch that builds a program (a collective) and the job stops. */
    cl_kernel k_spin = ct_kernel(prog, "spin");
    cl_mem b_spin;
    CREATE(b_spin = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4 * 256, NULL, &E));
    cl_uint spin_n = 200000;
    MUST(clSetKernelArg(k_spin, 0, sizeof b_spin, &b_spin));
    MUST(clSetKernelArg(k_spin, 1, sizeof spin_n, &spin_n));
    cl_uint pending = 0;
    for (cl_uint d = 0; d < ndev; d++) {
        cl_event sev;
        size_t g = 256;
        MUST(clEnqueueNDRangeKernel(qs[d], k_spin, 1, NULL, &g, NULL, 0, NULL, &sev));
        MUST(clFlush(qs[d]));
        cl_int st = CL_QUEUED;
        MUST(clGetEventInfo(sev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        if (st != CL_COMPLETE) {
            pending++;
            MUST(clReleaseProgram(ct_build(ctx, kSrc, NULL)));
        }
        MUST(clWaitForEvents(1, &sev));
        MUST(clGetEventInfo(sev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        CHECK_EQ(st, CL_COMPLETE);
        MUST(clReleaseEvent(sev));
    }
    printf("  %-55s %u of %u\n", "commands not complete when polled (branch taken)", pending, ndev);

    cl_mem mems[] = {b_in, b_cnt, b_small, b_sum, b_loop, b_alloc, b_br, b_cz, b_spin};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        MUST(clReleaseMemObject(mems[i]));
    cl_kernel ks[] = {k_count, k_sum, k_step, k_fill, k_collatz, k_spin};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        MUST(clReleaseKernel(ks[i]));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
