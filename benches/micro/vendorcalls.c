/*
 * vendorcalls.c - what each vendor call that MirrorCL's issuer makes costs on the
 * native platform, one call at a time, for choosing which calls an issuer job makes:
 * a kernel launch with and without an event out, with its arguments set again, with a
 * wait list; a 16-byte copy and read; a flush. Each figure is the median over RT_ITERS
 * calls of the call alone (µs), the last one right after three non-blocking 16-byte
 * writes with events (as MirrorCL's issuer launches a kernel behind the writes of
 * bytes from other ranks), two ways: "idle" (the queue drained before each call,
 * as in a chain that waits for another rank) and "busy" (calls back to back, as in a
 * burst). Then a kernel's round trip: how the host learns it is done, four ways.
 * Last, the launch with an event beside what MirrorCL keeps around its issuer's
 * calls: 4,096 completed events still held, and another thread polling an event all
 * along.
 *
 *   cc -O2 -std=c11 -I tests/c benches/micro/vendorcalls.c -lOpenCL -lm -o vendorcalls
 *   CTEST_PLATFORM=NVIDIA ./vendorcalls
 */
#include "../../tests/c/check.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_int g_stop;

/* Polls `arg` (a completed event) until told to stop. */
static void *poll_beside(void *arg)
{
    cl_event ev = arg;
    while (!atomic_load(&g_stop)) {
        cl_int st;
        clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    }
    return NULL;
}

/* Median µs of `iters` kernel launches with an event, the queue drained before each. */
static double launch_with_event(cl_command_queue q, cl_kernel k, double *t, int iters)
{
    size_t four = 4;
    for (int i = -iters / 10; i < iters; i++) {
        MUST(clFinish(q));
        cl_event ev;
        double t0 = ct_now_us();
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, &ev));
        if (i >= 0)
            t[i] = ct_now_us() - t0;
        clReleaseEvent(ev);
    }
    return ct_median(t, (size_t)iters);
}

static const char *kSrc =
    "__kernel void fill(__global uint *s, uint dev, uint it) {"
    " s[get_global_id(0)] = dev * 1000u + it; }\n";

enum { K_PLAIN, K_EVENT, K_SETMEM, K_SETINT, K_WAIT1, K_EVENT_WAIT1, COPY, COPY_EVENT,
       READ_EVENT, K_FLUSH, K_EVENT_AFTER_WRITES, N_FIGS };
static const char *kNames[N_FIGS] = {
    "kernel",          "kernel_event",  "kernel_setarg_mem", "kernel_setarg_uint",
    "kernel_wait1",    "kernel_event_wait1", "copy16",       "copy16_event",
    "read16_event",    "kernel_flush",  "kernel_event_after_writes"};

int main(void)
{
    ct_init("vendorcalls");
    const char *it = getenv("RT_ITERS");
    int iters = it ? atoi(it) : 2000;
    if (iters < 10)
        ct_die("RT_ITERS must be at least 10");
    cl_context ctx;
    cl_command_queue q = ct_first_device_queue(&ctx);
    cl_kernel k = ct_kernel(ct_build(ctx, kSrc, NULL), "fill");
    cl_mem a, b, c;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    CREATE(c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    cl_uint zero = 0;
    MUST(clSetKernelArg(k, 0, sizeof a, &a));
    MUST(clSetKernelArg(k, 1, sizeof zero, &zero));
    MUST(clSetKernelArg(k, 2, sizeof zero, &zero));
    size_t four = 4;
    uint32_t host[4];
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int busy = 0; busy < 2; busy++) {
        for (int fig = 0; fig < N_FIGS; fig++) {
            cl_event prev = NULL;
            MUST(clFinish(q));
            for (int i = -iters / 10; i < iters; i++) {
                if (!busy)
                    MUST(clFinish(q));
                cl_event ev = NULL, *out = NULL;
                if (fig == K_EVENT || fig == K_EVENT_WAIT1 || fig == COPY_EVENT ||
                    fig == READ_EVENT || fig == K_EVENT_AFTER_WRITES)
                    out = &ev;
                if (fig == K_EVENT_AFTER_WRITES) {
                    static uint32_t landed[12];
                    for (int w = 0; w < 3; w++) {
                        cl_event we;
                        MUST(clEnqueueWriteBuffer(q, c, CL_FALSE, 16 * (size_t)w, 16, landed + 4 * w, 0,
                                                  NULL, &we));
                        clReleaseEvent(we);
                    }
                }
                cl_uint n = (fig == K_WAIT1 || fig == K_EVENT_WAIT1) && prev ? 1 : 0;
                cl_uint v = (cl_uint)i;
                double t0 = ct_now_us();
                switch (fig) {
                case K_SETMEM:
                    MUST(clSetKernelArg(k, 0, sizeof a, &a));
                    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, NULL));
                    break;
                case K_SETINT:
                    MUST(clSetKernelArg(k, 2, sizeof v, &v));
                    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, NULL));
                    break;
                case COPY:
                case COPY_EVENT:
                    MUST(clEnqueueCopyBuffer(q, a, b, 0, 0, 16, 0, NULL, out));
                    break;
                case READ_EVENT:
                    MUST(clEnqueueReadBuffer(q, a, CL_FALSE, 0, 16, host, 0, NULL, out));
                    break;
                case K_FLUSH:
                    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, NULL));
                    MUST(clFlush(q));
                    break;
                default:
                    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, n, n ? &prev : NULL,
                                                out));
                }
                double t1 = ct_now_us();
                if (i >= 0)
                    t[i] = t1 - t0;
                if (fig == K_WAIT1 && !prev) {
                    /* the wait list's event: one marker kept for the whole run */
                    MUST(clEnqueueMarkerWithWaitList(q, 0, NULL, &prev));
                } else if (fig == K_EVENT_WAIT1) {
                    if (prev)
                        clReleaseEvent(prev);
                    prev = ev;
                    ev = NULL;
                }
                if (ev)
                    clReleaseEvent(ev);
            }
            if (prev)
                clReleaseEvent(prev);
            MUST(clFinish(q));
            printf("%s_%s_us=%.2f ", busy ? "busy" : "idle", kNames[fig],
                   ct_median(t, (size_t)iters));
        }
    }
    /* A kernel launched on an idle queue until the host knows it is done, four ways:
     * no event and clFinish (what a program does), its event polled after a flush,
     * clWaitForEvents on its event, its event asked for and clFinish. */
    static const char *kDone[4] = {"finish", "event_polled", "event_waited", "event_finish"};
    for (int way = 0; way < 4; way++) {
        for (int i = -iters / 10; i < iters; i++) {
            cl_event ev = NULL;
            double t0 = ct_now_us();
            MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, way ? &ev : NULL));
            if (way == 1) {
                MUST(clFlush(q));
                cl_int st = 1;
                while (st > 0)
                    MUST(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st,
                                        NULL));
            } else if (way == 2) {
                MUST(clWaitForEvents(1, &ev));
            } else {
                MUST(clFinish(q));
            }
            double t1 = ct_now_us();
            if (i >= 0)
                t[i] = t1 - t0;
            if (ev)
                clReleaseEvent(ev);
        }
        printf("kernel_done_%s_us=%.2f ", kDone[way], ct_median(t, (size_t)iters));
    }
    enum { LIVE = 4096 };
    cl_event *live = malloc(sizeof(cl_event) * LIVE);
    for (int i = 0; i < LIVE; i++)
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, &live[i]));
    MUST(clFinish(q));
    printf("kernel_event_4096_live_events_us=%.2f ", launch_with_event(q, k, t, iters));
    pthread_t poller;
    if (pthread_create(&poller, NULL, poll_beside, live[0]) != 0)
        ct_die("pthread_create");
    printf("kernel_event_beside_a_poller_us=%.2f ", launch_with_event(q, k, t, iters));
    atomic_store(&g_stop, 1);
    pthread_join(poller, NULL);
    for (int i = 0; i < LIVE; i++)
        clReleaseEvent(live[i]);
    free(live);
    printf("\n");
    MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 16, host, 0, NULL, NULL));
    for (int j = 0; j < 4; j++)
        CHECK_EQ(host[j], (uint32_t)(iters - 1));
    free(t);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    clReleaseKernel(k);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return ct_finish();
}
