/*
 * cluster_turns.c - one buffer of 4096 uints (initialised with
 * CL_MEM_COPY_HOST_PTR) modified in turn by every device in device order,
 * ROUNDS rounds: turn t runs on device t % ndev the kernel
 *     x[i] = x[i] * 5 + turn_id + i            (uint, wraps)
 * Variants:
 *   A. turns ordered by events only: the kernel of turn t waits on the event
 *      of turn t-1 (on another queue), no clFinish in between; at the end one
 *      blocking read on queue 0 (waiting on the last turn's event).
 *   B. turns ordered by clFinish on the previous turn's queue.
 *   C. after every turn a non-blocking clEnqueueReadBuffer into a per-turn
 *      host array, waiting on the turn's kernel event; the next turn's kernel
 *      waits on that read (write-after-read).  C1 reads on the device's own
 *      queue, C2 on the NEXT device's queue (a command on device d+1 reads
 *      the buffer written on device d).  At the end every intermediate array
 *      is compared with the reference state after its turn.
 *   D. the first kernel waits on a user event that the host sets to
 *      CL_COMPLETE only after all turns have been enqueued (and flushed).
 *   E. as D, but the program releases the user event before it sets its status
 *      (a common sample bug): MirrorCL keeps a user event that a command waits for
 *      until its status is set, on every rank, so the set succeeds everywhere and the
 *      chain runs. MirrorCL only: PoCL 3.1 natively crashes on it.
 * Every result is compared bit-exactly with a CPU reference.
 */
#include "check.h"

#define N 4096u
#define ROUNDS 3u

static const char *kSrc =
    "__kernel void turn(__global uint *x, uint turn_id)\n"
    "{ size_t i = get_global_id(0); x[i] = x[i] * 5u + turn_id + (uint)i; }\n";

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_context ctx;
static cl_kernel k_turn;
static uint32_t init[N];

static void ref_turn(uint32_t *x, uint32_t turn_id)
{
    for (uint32_t i = 0; i < N; i++)
        x[i] = x[i] * 5u + turn_id + i;
}

static cl_uint turn_id(cl_uint variant, cl_uint t) { return variant * 1000u + t * 7u + 1u; }

static cl_mem make_buffer(void)
{
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4, init, &E));
    MUST(clSetKernelArg(k_turn, 0, sizeof b, &b));
    return b;
}

/* Enqueues turn t (on device t % ndev) waiting on nwait events. */
static void enqueue_turn(cl_uint variant, cl_uint t, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
    cl_uint d = t % ndev, id = turn_id(variant, t);
    size_t gws = N;
    MUST(clSetKernelArg(k_turn, 1, sizeof id, &id));
    MUST(clEnqueueNDRangeKernel(qs[d], k_turn, 1, NULL, &gws, NULL, nwait, nwait ? wait : NULL, ev));
    MUST(clFlush(qs[d]));
}

/* Reference after all turns of a variant. */
static void ref_all(cl_uint variant, uint32_t *ref)
{
    memcpy(ref, init, sizeof init);
    for (cl_uint t = 0; t < ROUNDS * ndev; t++)
        ref_turn(ref, turn_id(variant, t));
}

static void report(const char *what, const uint32_t *got, const uint32_t *ref)
{
    printf("  %-58s %s\n", what, CHECK_MEM(got, ref, N, 4, what) ? "ok" : "MISMATCH");
}

static void variant_events(void)
{
    static uint32_t got[N], ref[N];
    cl_mem b = make_buffer();
    cl_event prev = NULL;
    for (cl_uint t = 0; t < ROUNDS * ndev; t++) {
        cl_event ev;
        enqueue_turn(0, t, prev ? 1 : 0, &prev, &ev);
        if (prev)
            MUST(clReleaseEvent(prev));
        prev = ev;
    }
    memset(got, 0xEE, sizeof got);
    MUST(clEnqueueReadBuffer(qs[0], b, CL_TRUE, 0, N * 4, got, 1, &prev, NULL));
    CHECK_EQ(ct_event_status(prev), CL_COMPLETE);
    MUST(clReleaseEvent(prev));
    MUST(clReleaseMemObject(b));
    ref_all(0, ref);
    report("A turns ordered by events, read on queue 0", got, ref);
}

static void variant_finish(void)
{
    static uint32_t got[N], ref[N];
    cl_mem b = make_buffer();
    for (cl_uint t = 0; t < ROUNDS * ndev; t++) {
        enqueue_turn(1, t, 0, NULL, NULL);
        MUST(clFinish(qs[t % ndev]));
    }
    memset(got, 0xEE, sizeof got);
    MUST(clEnqueueReadBuffer(qs[0], b, CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
    MUST(clReleaseMemObject(b));
    ref_all(1, ref);
    report("B turns ordered by clFinish, read on queue 0", got, ref);
}

/* C: per-turn intermediate reads; next_queue selects C2 (read on device d+1). */
static void variant_intermediate(int next_queue)
{
    cl_uint variant = next_queue ? 3 : 2;
    cl_uint nturns = ROUNDS * ndev;
    uint32_t *got = malloc((size_t)nturns * N * 4), *ref = malloc(N * 4);
    cl_event *rd = malloc(nturns * sizeof(cl_event));
    if (!got || !ref || !rd)
        ct_die("out of host memory");
    memset(got, 0xEE, (size_t)nturns * N * 4);
    cl_mem b = make_buffer();
    for (cl_uint t = 0; t < nturns; t++) {
        cl_event kev;
        enqueue_turn(variant, t, t ? 1 : 0, t ? &rd[t - 1] : NULL, &kev);
        cl_uint rq = next_queue ? (t + 1) % ndev : t % ndev;
        MUST(clEnqueueReadBuffer(qs[rq], b, CL_FALSE, 0, N * 4, got + (size_t)t * N, 1, &kev, &rd[t]));
        MUST(clFlush(qs[rq]));
        MUST(clReleaseEvent(kev));
    }
    MUST(clWaitForEvents(nturns, rd));
    memcpy(ref, init, sizeof init);
    int bad = 0;
    for (cl_uint t = 0; t < nturns; t++) {
        CHECK_EQ(ct_event_status(rd[t]), CL_COMPLETE);
        MUST(clReleaseEvent(rd[t]));
        ref_turn(ref, turn_id(variant, t));
        char what[128];
        snprintf(what, sizeof what, "%s: state after turn %u (device %u)",
                 next_queue ? "C2 read on next device" : "C1 read on own device", t, t % ndev);
        if (!CHECK_MEM(got + (size_t)t * N, ref, N, 4, what))
            bad++;
    }
    MUST(clReleaseMemObject(b));
    printf("  %-58s %s\n",
           next_queue ? "C2 intermediate reads on the next device's queue"
                      : "C1 intermediate reads on the device's own queue",
           bad ? "MISMATCH" : "ok");
    free(got);
    free(ref);
    free(rd);
}

/* D, or E with `release_first`: the program lets go of the user event before it sets
 * its status. */
static void variant_user_event(int release_first)
{
    static uint32_t got[N], ref[N];
    cl_mem b = make_buffer();
    cl_event user;
    CREATE(user = clCreateUserEvent(ctx, &E));
    cl_event prev = user;
    for (cl_uint t = 0; t < ROUNDS * ndev; t++) {
        cl_event ev;
        enqueue_turn(4, t, 1, &prev, &ev);
        if (prev != user)
            MUST(clReleaseEvent(prev));
        prev = ev;
    }
    /* Nothing can have run yet: the whole chain hangs on the user event. */
    cl_int st = ct_event_status(prev);
    CHECK_TRUE(st > CL_COMPLETE, "last turn has status %d before the user event is set", (int)st);
    if (release_first)
        MUST(clReleaseEvent(user));
    MUST(clSetUserEventStatus(user, CL_COMPLETE));
    memset(got, 0xEE, sizeof got);
    MUST(clEnqueueReadBuffer(qs[0], b, CL_TRUE, 0, N * 4, got, 1, &prev, NULL));
    CHECK_EQ(ct_event_status(prev), CL_COMPLETE);
    if (!release_first) {
        CHECK_EQ(ct_event_status(user), CL_COMPLETE);
        MUST(clReleaseEvent(user));
    }
    MUST(clReleaseEvent(prev));
    MUST(clReleaseMemObject(b));
    ref_all(4, ref);
    report(release_first ? "E user event released before its status is set"
                         : "D chain released by a user event",
           got, ref);
}

int main(void)
{
    ct_init("cluster_turns");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    k_turn = ct_kernel(prog, "turn");
    printf("  %u device(s), %u rounds, %u turns per variant\n", ndev, ROUNDS, ROUNDS * ndev);

    ct_rng_state = 0x7A11u;
    for (cl_uint i = 0; i < N; i++)
        init[i] = ct_rand();

    variant_events();
    variant_finish();
    variant_intermediate(0);
    variant_intermediate(1);
    variant_user_event(0);
    if (ct_mirrorcl())
        variant_user_event(1);

    MUST(clReleaseKernel(k_turn));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
