/*
 * callback_enqueues.c - an event callback that enqueues (OpenCL 1.2 §5.9 allows
 * non-blocking enqueues there), while the program goes on enqueuing work that needs
 * the event's command: a kernel writes a buffer on one device, its CL_COMPLETE callback
 * fills another buffer on that device's queue, and the program copies the kernel's
 * output to another device. MirrorCL may learn that the kernel is done while it plans
 * that copy, holding its scheduler's lock; the callback's enqueue takes that lock, so
 * the callback must not run there (it did, and the program hung). The callback also
 * copies the kernel's output to the other device, so in a cluster of one device per
 * rank it plans a transfer between ranks. A callback runs at another point of the
 * program on every rank: MirrorCL names it as a host thread of its own, or the ranks
 * diverged. Every byte checked against the CPU, every round. With
 * CALLBACK_WITH_THREAD=1 the main thread first starts (and joins) a host thread, which
 * turns on the rules for named host threads: race checks, waits paired by command.
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define N 4096
#define ROUNDS 60

static const char *kSrc =
    "__kernel void stamp(__global uint *a, uint round) {\n"
    "    size_t i = get_global_id(0);\n"
    "    a[i] = round * 7919u + (uint)i;\n"
    "}\n";

typedef struct {
    cl_command_queue q, other;
    cl_mem filled, out, copied;
    cl_uint round;
    cl_event fill, copy;
    atomic_int done;
    atomic_int failed;
} hook_t;

/* On the kernel's completion: fill `filled` with the round on the kernel's queue. */
static void CL_CALLBACK on_stamped(cl_event ev, cl_int status, void *data)
{
    (void)ev;
    hook_t *h = data;
    if (status != CL_COMPLETE) {
        atomic_store(&h->failed, 1);
    } else {
        cl_uint value = h->round;
        cl_int rc = clEnqueueFillBuffer(h->q, h->filled, &value, sizeof value, 0, N * sizeof(cl_uint), 0,
                                        NULL, &h->fill);
        if (rc == CL_SUCCESS)
            rc = clEnqueueCopyBuffer(h->other, h->out, h->copied, 0, 0, N * sizeof(cl_uint), 0,
                                     NULL, &h->copy);
        if (rc != CL_SUCCESS || clFlush(h->q) != CL_SUCCESS || clFlush(h->other) != CL_SUCCESS)
            atomic_store(&h->failed, 1);
    }
    atomic_store(&h->done, 1);
}

static void *idle_thread(void *arg)
{
    return arg;
}

int main(void)
{
    ct_init("callback_enqueues");
    if (getenv("CALLBACK_WITH_THREAD")) {
        pthread_t t;
        CHECK_TRUE(pthread_create(&t, NULL, idle_thread, NULL) == 0, "a host thread started");
        pthread_join(t, NULL);
    }
    cl_platform_id p = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(p, devs);
    cl_device_id two[2] = {devs[0], devs[ndev > 1 ? 1 : 0]};
    cl_context ctx = ct_context(p, 2, two);
    cl_command_queue q0 = ct_queue(ctx, two[0], 0), q1 = ct_queue(ctx, two[1], 0);
    cl_kernel k = ct_kernel(ct_build(ctx, kSrc, NULL), "stamp");
    cl_mem a, b, filled, copied;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(cl_uint), NULL, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(cl_uint), NULL, &E));
    CREATE(filled = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(cl_uint), NULL, &E));
    CREATE(copied = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(cl_uint), NULL, &E));
    static cl_uint got[N], want[N];
    size_t global = N;
    for (cl_uint round = 1; round <= ROUNDS; round++) {
        hook_t h = {.q = q0, .other = q1, .filled = filled, .out = a, .copied = copied,
                    .round = round};
        cl_event stamped;
        MUST(clSetKernelArg(k, 0, sizeof a, &a));
        MUST(clSetKernelArg(k, 1, sizeof round, &round));
        MUST(clEnqueueNDRangeKernel(q0, k, 1, NULL, &global, NULL, 0, NULL, &stamped));
        MUST(clSetEventCallback(stamped, CL_COMPLETE, on_stamped, &h));
        MUST(clFlush(q0));
        /* Every other round the kernel is done on the device before the copy is planned
         * (nobody has looked at its event yet); the others race it. */
        if (round % 2 == 0)
            ct_sleep_ms(3);
        MUST(clEnqueueCopyBuffer(q1, a, b, 0, 0, N * sizeof(cl_uint), 1, &stamped, NULL));
        MUST(clFinish(q1));
        CHECK_TRUE(ct_wait_flag((volatile int *)&h.done, 1, 20000), "round %u: the callback ran", round);
        CHECK_EQ(atomic_load(&h.failed), 0);
        if (h.fill && h.copy) {
            cl_event both[2] = {h.fill, h.copy};
            MUST(clWaitForEvents(2, both));
        }
        if (h.fill)
            MUST(clReleaseEvent(h.fill));
        if (h.copy)
            MUST(clReleaseEvent(h.copy));
        MUST(clFinish(q0));
        for (cl_uint i = 0; i < N; i++)
            want[i] = round * 7919u + i;
        MUST(clEnqueueReadBuffer(q1, b, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        CHECK_MEM(got, want, N, sizeof *got, "the kernel's output copied to the other device");
        MUST(clEnqueueReadBuffer(q1, copied, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        CHECK_MEM(got, want, N, sizeof *got, "the kernel's output the callback copied");
        for (cl_uint i = 0; i < N; i++)
            want[i] = round;
        MUST(clEnqueueReadBuffer(q0, filled, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        CHECK_MEM(got, want, N, sizeof *got, "the buffer the callback filled");
        MUST(clReleaseEvent(stamped));
        if (ct_failures)
            break;
    }
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(filled);
    clReleaseMemObject(copied);
    clReleaseKernel(k);
    clReleaseCommandQueue(q0);
    clReleaseCommandQueue(q1);
    clReleaseContext(ctx);
    return ct_finish();
}
