/*
 * wait_paths.c - every way a kernel's completion can be awaited, right after the host
 * waited for its queue (where MirrorCL may launch a kernel the program asked no event
 * for without a vendor event of its own, and must back it later).
 *
 * One context of all devices, one in-order queue each. Each round, after a clFinish
 * of queue 0, a kernel adds 1 to every word of buffer A on queue 0 (no event), then the
 * round awaits it one way:
 *   0. clFinish of queue 0;
 *   1. a blocking read of A on queue 0;
 *   2. a second kernel on queue 0 (A += 1 again), then a blocking read;
 *   3. a marker on queue 0, and a copy A -> B on the last device's queue that waits
 *      for it (a dependency across queues and devices), then a blocking read of B;
 *   4. a marker on queue 0 with an event, clWaitForEvents on it, then a mapped read of A;
 *   5. a non-blocking read of A on queue 0 with an event, polled until complete;
 *   6. a marker on queue 0, and a kernel on the last device that waits for it and reads
 *      A (B = A + 1), then clFinish of that queue.
 * Every value is checked bit-exactly against the host's count after every round.
 *
 * WAIT_PATHS_FAIL (with MirrorCL's MIRRORCL_INJECT_FAILURE making its vendor call fail)
 * names a command that fails right after such a kernel, and the program expects it to:
 *   follow: command 6, round 2's second kernel (its bump never happens);
 *   return: command 4, round 1's blocking read (it reports the failure).
 * The kernel before it must still complete, and every later round pass.
 */
#include "check.h"

#define WORDS 4096u
#define ROUNDS 140

static const char *kSrc =
    "__kernel void bump(__global uint *a) { a[get_global_id(0)] += 1u; }\n"
    "__kernel void plus_one(__global const uint *a, __global uint *b)\n"
    "{ size_t i = get_global_id(0); b[i] = a[i] + 1u; }\n";

static uint32_t host[WORDS], got[WORDS];

int main(void)
{
    ct_init("wait_paths");
    cl_platform_id p = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(p, devs);
    cl_context ctx = ct_context(p, ndev, devs);
    cl_command_queue q0 = ct_queue(ctx, devs[0], 0), ql = ct_queue(ctx, devs[ndev - 1], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel bump = ct_kernel(prog, "bump"), plus_one = ct_kernel(prog, "plus_one");
    cl_mem a, b;
    for (size_t i = 0; i < WORDS; i++)
        host[i] = (uint32_t)(i * 7u);
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    MUST(clSetKernelArg(bump, 0, sizeof a, &a));
    MUST(clSetKernelArg(plus_one, 0, sizeof a, &a));
    MUST(clSetKernelArg(plus_one, 1, sizeof b, &b));
    size_t global = WORDS;
    uint32_t count = 0; /* how many times every word of A was bumped */
    const char *fail = getenv("WAIT_PATHS_FAIL");
    int fail_follow = fail && !strcmp(fail, "follow"), fail_return = fail && !strcmp(fail, "return");
    for (int round = 0; round < ROUNDS; round++) {
        MUST(clFinish(q0));
        MUST(clEnqueueNDRangeKernel(q0, bump, 1, NULL, &global, NULL, 0, NULL, NULL));
        count++;
        int way = round % 7;
        uint32_t want = count, extra = 0;
        switch (way) {
        case 0:
            MUST(clFinish(q0));
            MUST(clEnqueueReadBuffer(q0, a, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
            break;
        case 1:
            if (fail_return && round == 1) {
                CHECK(clEnqueueReadBuffer(q0, a, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL),
                      CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
                continue;
            }
            MUST(clEnqueueReadBuffer(q0, a, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
            break;
        case 2:
            MUST(clEnqueueNDRangeKernel(q0, bump, 1, NULL, &global, NULL, 0, NULL, NULL));
            if (!(fail_follow && round == 2))
                count++;
            want = count;
            MUST(clEnqueueReadBuffer(q0, a, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
            break;
        case 3: {
            cl_event marker;
            MUST(clEnqueueMarker(q0, &marker));
            MUST(clEnqueueCopyBuffer(ql, a, b, 0, 0, sizeof got, 1, &marker, NULL));
            MUST(clEnqueueReadBuffer(ql, b, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
            MUST(clReleaseEvent(marker));
            break;
        }
        case 4: {
            cl_event marker;
            MUST(clEnqueueMarker(q0, &marker));
            MUST(clWaitForEvents(1, &marker));
            CHECK_EQ(ct_event_status(marker), CL_COMPLETE);
            MUST(clReleaseEvent(marker));
            void *m = clEnqueueMapBuffer(q0, a, CL_TRUE, CL_MAP_READ, 0, sizeof got, 0, NULL, NULL, &E);
            MUST(E);
            memcpy(got, m, sizeof got);
            MUST(clEnqueueUnmapMemObject(q0, a, m, 0, NULL, NULL));
            break;
        }
        case 5: {
            cl_event read;
            MUST(clEnqueueReadBuffer(q0, a, CL_FALSE, 0, sizeof got, got, 0, NULL, &read));
            MUST(clFlush(q0));
            double t0 = ct_now_us();
            while (ct_event_status(read) != CL_COMPLETE) {
                if (ct_now_us() - t0 > 60e6) {
                    CHECK_TRUE(0, "round %d: a polled read never completed", round);
                    break;
                }
            }
            MUST(clReleaseEvent(read));
            break;
        }
        default: {
            cl_event marker;
            MUST(clEnqueueMarker(q0, &marker));
            MUST(clEnqueueNDRangeKernel(ql, plus_one, 1, NULL, &global, NULL, 1, &marker, NULL));
            MUST(clReleaseEvent(marker));
            MUST(clFinish(ql));
            MUST(clEnqueueReadBuffer(ql, b, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
            extra = 1;
            break;
        }
        }
        for (size_t i = 0; i < WORDS; i++)
            host[i] = (uint32_t)(i * 7u) + want + extra;
        for (size_t i = 0; i < WORDS; i++) {
            if (got[i] != host[i]) {
                CHECK_TRUE(0, "round %d (way %d): word %zu is %u, expected %u", round, way, i,
                           got[i], host[i]);
                break;
            }
        }
    }
    MUST(clFinish(q0));
    MUST(clFinish(ql));
    MUST(clEnqueueReadBuffer(q0, a, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
    for (size_t i = 0; i < WORDS; i++)
        host[i] = (uint32_t)(i * 7u) + count;
    CHECK_MEM(got, host, WORDS, sizeof *got, "A after every round");
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseKernel(bump);
    clReleaseKernel(plus_one);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q0);
    clReleaseCommandQueue(ql);
    clReleaseContext(ctx);
    return ct_finish();
}
