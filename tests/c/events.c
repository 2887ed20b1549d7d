/*
 * events.c - events and command queues: an event from every enqueue call,
 * clGetEventInfo, clWaitForEvents, profiling, clSetEventCallback, user
 * events gating commands on other devices (including a negative status),
 * markers and barriers (1.2 and 1.1 entry points), cross-queue dependency
 * chains over all devices, clFlush / clFinish, out-of-order queues,
 * clCreateCommandQueueWithProperties, clGetCommandQueueInfo.
 */
#include "check.h"

/* OpenCL 2.0 entry point, not declared by <CL/cl.h> for CL_TARGET_OPENCL_VERSION 120
 * (cl_queue_properties_khr from <CL/cl_ext.h> is the same type as cl_queue_properties). */
extern CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueueWithProperties(
    cl_context context, cl_device_id device, const cl_queue_properties_khr *properties, cl_int *errcode_ret);

static const char *kSrc =
    "__kernel void stepk(__global const uint *in, __global uint *out, uint k)\n"
    "{ size_t i = get_global_id(0); out[i] = in[i] * 2654435761u + k + (uint)i; }\n"
    "__kernel void inc(__global uint *b) { b[get_global_id(0)] += 1u; }\n"
    "__kernel void spin(__global uint *b, uint iters)\n"
    "{ uint x = b[get_global_id(0)];\n"
    "  for (uint i = 0; i < iters; i++) x = x * 1664525u + 1013904223u;\n"
    "  b[get_global_id(0)] = x; }\n";

static cl_platform_id platform;
static cl_context ctx;
static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_program prog;
static cl_kernel k_step, k_inc, k_spin;

static uint32_t step_ref(uint32_t x, uint32_t k, uint32_t i) { return x * 2654435761u + k + i; }

static cl_event enqueue_step(cl_command_queue q, cl_mem in, cl_mem out, cl_uint k, size_t n, cl_uint nw,
                             const cl_event *wait)
{
    cl_event ev;
    MUST(clSetKernelArg(k_step, 0, sizeof in, &in));
    MUST(clSetKernelArg(k_step, 1, sizeof out, &out));
    MUST(clSetKernelArg(k_step, 2, sizeof k, &k));
    MUST(clEnqueueNDRangeKernel(q, k_step, 1, NULL, &n, NULL, nw, wait, &ev));
    return ev;
}

static void check_event_info(cl_event ev, cl_command_queue q, cl_command_type type, const char *what)
{
    static const struct {
        cl_event_info id;
        const char *name;
        size_t size;
    } params[] = {
        {CL_EVENT_COMMAND_QUEUE, "CL_EVENT_COMMAND_QUEUE", sizeof(cl_command_queue)},
        {CL_EVENT_CONTEXT, "CL_EVENT_CONTEXT", sizeof(cl_context)},
        {CL_EVENT_COMMAND_TYPE, "CL_EVENT_COMMAND_TYPE", sizeof(cl_command_type)},
        {CL_EVENT_COMMAND_EXECUTION_STATUS, "CL_EVENT_COMMAND_EXECUTION_STATUS", sizeof(cl_int)},
        {CL_EVENT_REFERENCE_COUNT, "CL_EVENT_REFERENCE_COUNT", sizeof(cl_uint)},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        size_t sz = 0;
        if (!ct_check_code(clGetEventInfo(ev, params[i].id, 0, NULL, &sz), CL_SUCCESS, params[i].name, __FILE__,
                           __LINE__, 0))
            continue;
        ct_check_true(sz == params[i].size, params[i].name, __FILE__, __LINE__, "%s: size %zu", what, sz);
        unsigned char buf[16];
        size_t sz2 = 0;
        ct_check_code(clGetEventInfo(ev, params[i].id, sz, buf, &sz2), CL_SUCCESS, params[i].name, __FILE__, __LINE__,
                      0);
        ct_check_true(sz2 == sz, params[i].name, __FILE__, __LINE__, "%s: size %zu vs %zu", what, sz, sz2);
        ct_check_code(clGetEventInfo(ev, params[i].id, sz - 1, buf, NULL), CL_INVALID_VALUE, params[i].name,
                      __FILE__, __LINE__, 0);
    }
    cl_command_queue gq = (cl_command_queue)1;
    cl_context gc = NULL;
    cl_command_type gt = 0;
    MUST(clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof gq, &gq, NULL));
    MUST(clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof gc, &gc, NULL));
    MUST(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof gt, &gt, NULL));
    CHECK_TRUE(gq == q, "%s: CL_EVENT_COMMAND_QUEUE %p, expected %p", what, (void *)gq, (void *)q);
    CHECK_TRUE(gc == ctx, "%s: CL_EVENT_CONTEXT %p, expected %p", what, (void *)gc, (void *)ctx);
    if (type == CL_COMMAND_TASK && gt == CL_COMMAND_NDRANGE_KERNEL && !ct_mirrorcl())
        printf("  note: clEnqueueTask event has CL_COMMAND_NDRANGE_KERNEL type (known native deviation)\n");
    else
        CHECK_TRUE(gt == type, "%s: CL_EVENT_COMMAND_TYPE 0x%x, expected 0x%x", what, gt, type);
    cl_uint v;
    CHECK(clGetEventInfo(ev, 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
}

/* Every enqueue call returns an event of the right type; each waits for the previous one (on another device). */
static void test_command_types(void)
{
    enum { N = 1024 };
    uint32_t host[N], host2[N];
    for (int i = 0; i < N; i++)
        host[i] = (uint32_t)i * 3u;
    cl_mem a, b;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    cl_event evs[32];
    cl_command_queue eq[32];
    cl_command_type et[32];
    const char *en[32];
    int n = 0;
    size_t o[3] = {0, 0, 0}, r[3] = {64, 4, 1};
    uint32_t pat = 0x01020304u;
    size_t gws = N;
#define NEXTQ (eq[n] = qs[n % ndev])
#define WAIT (n ? 1u : 0u), (n ? &evs[n - 1] : NULL), &evs[n]
#define DONE(t, name) (et[n] = (t), en[n] = (name), n++)
    MUST(clEnqueueWriteBuffer(NEXTQ, a, CL_FALSE, 0, sizeof host, host, WAIT));
    DONE(CL_COMMAND_WRITE_BUFFER, "clEnqueueWriteBuffer");
    MUST(clEnqueueCopyBuffer(NEXTQ, a, b, 0, 0, sizeof host, WAIT));
    DONE(CL_COMMAND_COPY_BUFFER, "clEnqueueCopyBuffer");
    MUST(clEnqueueReadBuffer(NEXTQ, b, CL_FALSE, 0, sizeof host2, host2, WAIT));
    DONE(CL_COMMAND_READ_BUFFER, "clEnqueueReadBuffer");
    MUST(clEnqueueFillBuffer(NEXTQ, a, &pat, 4, 0, 256, WAIT));
    DONE(CL_COMMAND_FILL_BUFFER, "clEnqueueFillBuffer");
    MUST(clEnqueueWriteBufferRect(NEXTQ, a, CL_FALSE, o, o, r, 128, 0, 64, 0, host, WAIT));
    DONE(CL_COMMAND_WRITE_BUFFER_RECT, "clEnqueueWriteBufferRect");
    MUST(clEnqueueReadBufferRect(NEXTQ, a, CL_FALSE, o, o, r, 128, 0, 64, 0, host2, WAIT));
    DONE(CL_COMMAND_READ_BUFFER_RECT, "clEnqueueReadBufferRect");
    MUST(clEnqueueCopyBufferRect(NEXTQ, a, b, o, o, r, 128, 0, 128, 0, WAIT));
    DONE(CL_COMMAND_COPY_BUFFER_RECT, "clEnqueueCopyBufferRect");
    void *p;
    CREATE(p = clEnqueueMapBuffer(NEXTQ, b, CL_FALSE, CL_MAP_READ, 0, 256, WAIT, &E));
    DONE(CL_COMMAND_MAP_BUFFER, "clEnqueueMapBuffer");
    MUST(clEnqueueUnmapMemObject(eq[n - 1], b, p, WAIT)); /* same queue as the map */
    eq[n] = eq[n - 1];
    DONE(CL_COMMAND_UNMAP_MEM_OBJECT, "clEnqueueUnmapMemObject");
    MUST(clSetKernelArg(k_inc, 0, sizeof a, &a));
    MUST(clEnqueueNDRangeKernel(NEXTQ, k_inc, 1, NULL, &gws, NULL, WAIT));
    DONE(CL_COMMAND_NDRANGE_KERNEL, "clEnqueueNDRangeKernel");
    MUST(clEnqueueTask(NEXTQ, k_inc, WAIT));
    DONE(CL_COMMAND_TASK, "clEnqueueTask");
    MUST(clEnqueueMarkerWithWaitList(NEXTQ, WAIT));
    DONE(CL_COMMAND_MARKER, "clEnqueueMarkerWithWaitList");
    MUST(clEnqueueBarrierWithWaitList(NEXTQ, WAIT));
    DONE(CL_COMMAND_BARRIER, "clEnqueueBarrierWithWaitList");
    MUST(clEnqueueMigrateMemObjects(NEXTQ, 1, &a, 0, WAIT));
    DONE(CL_COMMAND_MIGRATE_MEM_OBJECTS, "clEnqueueMigrateMemObjects");
    /* PoCL 3.1 does not implement clEnqueueWaitForEvents (it aborts): MirrorCL only. */
    if (ct_mirrorcl())
        MUST(clEnqueueWaitForEvents(NEXTQ, 1, &evs[n - 1]));
    else
        MUST(clEnqueueBarrierWithWaitList(NEXTQ, 1, &evs[n - 1], NULL));
    MUST(clEnqueueMarker(eq[n], &evs[n]));
    DONE(CL_COMMAND_MARKER, "clEnqueueMarker");
    MUST(clEnqueueReadBuffer(NEXTQ, a, CL_TRUE, 0, sizeof host2, host2, WAIT));
    DONE(CL_COMMAND_READ_BUFFER, "blocking clEnqueueReadBuffer");
#undef NEXTQ
#undef WAIT
#undef DONE
    MUST(clWaitForEvents((cl_uint)n, evs));
    for (int i = 0; i < n; i++) {
        check_event_info(evs[i], eq[i], et[i], en[i]);
        CHECK_TRUE(ct_event_status(evs[i]) == CL_COMPLETE, "%s: status %d after clWaitForEvents", en[i],
                   ct_event_status(evs[i]));
    }
    /* Content: fill of 256 bytes, rect write, then inc by NDRange (all) and task (element 0). */
    uint32_t ref[N];
    memcpy(ref, host, sizeof ref);
    for (int i = 0; i < 64; i++)
        ref[i] = pat;
    for (size_t y = 0; y < 4; y++)
        memcpy((char *)ref + y * 128, (char *)host + y * 64, 64);
    for (int i = 0; i < N; i++)
        ref[i] += 1;
    ref[0] += 1;
    CHECK_MEM(host2, ref, N, 4, "result of the command chain");
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clFinish(qs[d]));
    /*
     * Reference counting: command events may carry internal references that
     * go away asynchronously, so exact counts are checked on a user event.
     */
    cl_uint rc = 0;
    MUST(clGetEventInfo(evs[0], CL_EVENT_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_TRUE(rc >= 1, "event reference count %u", rc);
    cl_event ue;
    CREATE(ue = clCreateUserEvent(ctx, &E));
    MUST(clGetEventInfo(ue, CL_EVENT_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 1);
    MUST(clRetainEvent(ue));
    MUST(clGetEventInfo(ue, CL_EVENT_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 2);
    MUST(clReleaseEvent(ue));
    MUST(clGetEventInfo(ue, CL_EVENT_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 1);
    MUST(clSetUserEventStatus(ue, CL_COMPLETE));
    MUST(clReleaseEvent(ue));
    for (int i = 0; i < n; i++)
        MUST(clReleaseEvent(evs[i]));
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
    printf("  %d command types checked\n", n);
}

static void test_wait_errors(void)
{
    cl_event ev;
    CHECK(clWaitForEvents(0, NULL), CL_INVALID_VALUE);
    CHECK(clWaitForEvents(1, NULL), CL_INVALID_VALUE);
    CREATE(ev = clCreateUserEvent(ctx, &E));
    CHECK(clWaitForEvents(0, &ev), CL_INVALID_VALUE);
    cl_context other;
    CREATE(other = clCreateContext(NULL, 1, devs, NULL, NULL, &E));
    cl_event oev;
    CREATE(oev = clCreateUserEvent(other, &E));
    MUST(clSetUserEventStatus(oev, CL_COMPLETE));
    MUST(clSetUserEventStatus(ev, CL_COMPLETE));
    cl_event mixed[2] = {ev, oev};
    CHECK(clWaitForEvents(2, mixed), CL_INVALID_CONTEXT);
    cl_event withnull[2] = {ev, NULL};
    CHECK(clWaitForEvents(2, withnull), CL_INVALID_EVENT);
    MUST(clWaitForEvents(1, &ev));
    MUST(clReleaseEvent(ev));
    MUST(clReleaseEvent(oev));
    MUST(clReleaseContext(other));
}

static void test_profiling(void)
{
    enum { N = 4096 };
    uint32_t host[N];
    for (int i = 0; i < N; i++)
        host[i] = (uint32_t)i;
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    static const struct {
        cl_profiling_info id;
        const char *name;
    } params[] = {
        {CL_PROFILING_COMMAND_QUEUED, "CL_PROFILING_COMMAND_QUEUED"},
        {CL_PROFILING_COMMAND_SUBMIT, "CL_PROFILING_COMMAND_SUBMIT"},
        {CL_PROFILING_COMMAND_START, "CL_PROFILING_COMMAND_START"},
        {CL_PROFILING_COMMAND_END, "CL_PROFILING_COMMAND_END"},
    };
    for (cl_uint d = 0; d < ndev; d++) {
        cl_command_queue pq = ct_queue(ctx, devs[d], CL_QUEUE_PROFILING_ENABLE);
        cl_event ev[2];
        MUST(clEnqueueWriteBuffer(pq, b, CL_FALSE, 0, sizeof host, host, 0, NULL, &ev[0]));
        cl_uint iters = 2000;
        MUST(clSetKernelArg(k_spin, 0, sizeof b, &b));
        MUST(clSetKernelArg(k_spin, 1, sizeof iters, &iters));
        size_t gws = N;
        MUST(clEnqueueNDRangeKernel(pq, k_spin, 1, NULL, &gws, NULL, 1, &ev[0], &ev[1]));
        MUST(clWaitForEvents(2, ev));
        for (int e = 0; e < 2; e++) {
            cl_ulong t[4] = {0};
            for (int i = 0; i < 4; i++) {
                size_t sz = 0;
                CHECK(clGetEventProfilingInfo(ev[e], params[i].id, 0, NULL, &sz), CL_SUCCESS);
                CHECK_EQ(sz, sizeof(cl_ulong));
                CHECK(clGetEventProfilingInfo(ev[e], params[i].id, sizeof t[i], &t[i], &sz), CL_SUCCESS);
                cl_uint small;
                CHECK(clGetEventProfilingInfo(ev[e], params[i].id, sizeof small, &small, NULL), CL_INVALID_VALUE);
            }
            CHECK_TRUE(t[0] > 0 && t[0] <= t[1] && t[1] <= t[2] && t[2] <= t[3],
                       "device %u event %d: QUEUED %llu SUBMIT %llu START %llu END %llu not ordered", d, e,
                       (unsigned long long)t[0], (unsigned long long)t[1], (unsigned long long)t[2],
                       (unsigned long long)t[3]);
            if (e == 1)
                printf("  device %u: kernel took %llu ns (queued->end %llu ns)\n", d,
                       (unsigned long long)(t[3] - t[2]), (unsigned long long)(t[3] - t[0]));
        }
        cl_ulong x;
        CHECK(clGetEventProfilingInfo(ev[1], 0x7fff, sizeof x, &x, NULL), CL_INVALID_VALUE);
        MUST(clReleaseEvent(ev[0]));
        MUST(clReleaseEvent(ev[1]));
        MUST(clReleaseCommandQueue(pq));
    }
    /* Non-profiling queue and user events: CL_PROFILING_INFO_NOT_AVAILABLE. */
    cl_event ev, ue;
    MUST(clEnqueueWriteBuffer(qs[0], b, CL_TRUE, 0, sizeof host, host, 0, NULL, &ev));
    MUST(clWaitForEvents(1, &ev));
    cl_ulong t;
    CHECK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t, &t, NULL), CL_PROFILING_INFO_NOT_AVAILABLE);
    CREATE(ue = clCreateUserEvent(ctx, &E));
    MUST(clSetUserEventStatus(ue, CL_COMPLETE));
    CHECK(clGetEventProfilingInfo(ue, CL_PROFILING_COMMAND_START, sizeof t, &t, NULL), CL_PROFILING_INFO_NOT_AVAILABLE);
    MUST(clReleaseEvent(ev));
    MUST(clReleaseEvent(ue));
    MUST(clReleaseMemObject(b));
}

/* calls counts the callbacks recorded: a thread that saw it reach n reads the first n
 * slots whole (a callback runs on another thread: counted before its status was written,
 * a waiter under load read the slot's initial 0). */
struct cb_record {
    volatile int taken;
    volatile int calls;
    volatile cl_int status[4];
    volatile cl_event ev[4];
};

static void CL_CALLBACK event_cb(cl_event ev, cl_int status, void *user)
{
    struct cb_record *r = user;
    int slot = __atomic_fetch_add(&r->taken, 1, __ATOMIC_SEQ_CST);
    if (slot < 4) {
        r->status[slot] = status;
        r->ev[slot] = ev;
    }
    __atomic_fetch_add(&r->calls, 1, __ATOMIC_SEQ_CST);
}

static void test_callbacks(void)
{
    static struct cb_record sub, run, done, late, user;
    cl_event ue, w;
    CREATE(ue = clCreateUserEvent(ctx, &E));
    uint32_t data[256] = {0};
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof data, NULL, &E));
    cl_command_queue q = qs[1 % ndev];
    MUST(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, sizeof data, data, 1, &ue, &w));
    MUST(clFlush(q));
    MUST(clSetEventCallback(w, CL_SUBMITTED, event_cb, &sub));
    MUST(clSetEventCallback(w, CL_RUNNING, event_cb, &run));
    MUST(clSetEventCallback(w, CL_COMPLETE, event_cb, &done));
    MUST(clSetEventCallback(ue, CL_COMPLETE, event_cb, &user));
    ct_sleep_ms(50);
    CHECK_EQ(done.calls, 0);
    CHECK_EQ(user.calls, 0);
    MUST(clSetUserEventStatus(ue, CL_COMPLETE));
    MUST(clWaitForEvents(1, &w));
    CHECK_TRUE(ct_wait_flag(&done.calls, 1, 10000), "CL_COMPLETE callback not called");
    CHECK_TRUE(ct_wait_flag(&sub.calls, 1, 10000), "CL_SUBMITTED callback not called");
    CHECK_TRUE(ct_wait_flag(&run.calls, 1, 10000), "CL_RUNNING callback not called");
    CHECK_TRUE(ct_wait_flag(&user.calls, 1, 10000), "user event CL_COMPLETE callback not called");
    CHECK_TRUE(done.calls == 1 && done.status[0] == CL_COMPLETE && done.ev[0] == w,
               "CL_COMPLETE callback: %d calls, status %d", done.calls, done.status[0]);
    CHECK_TRUE(sub.calls == 1 && sub.status[0] == CL_SUBMITTED && sub.ev[0] == w,
               "CL_SUBMITTED callback: %d calls, status %d", sub.calls, sub.status[0]);
    CHECK_TRUE(run.calls == 1 && run.status[0] == CL_RUNNING && run.ev[0] == w,
               "CL_RUNNING callback: %d calls, status %d", run.calls, run.status[0]);
    CHECK_TRUE(user.calls == 1 && user.status[0] == CL_COMPLETE && user.ev[0] == ue,
               "user event callback: %d calls, status %d", user.calls, user.status[0]);
    /* Registered after completion: still called. */
    MUST(clSetEventCallback(w, CL_COMPLETE, event_cb, &late));
    CHECK_TRUE(ct_wait_flag(&late.calls, 1, 10000), "callback registered after completion not called");
    CHECK_TRUE(late.status[0] == CL_COMPLETE, "late callback status %d", late.status[0]);
    /* Errors. */
    CHECK(clSetEventCallback(w, CL_COMPLETE, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clSetEventCallback(w, CL_QUEUED, event_cb, &late), CL_INVALID_VALUE);
    CHECK(clSetEventCallback(w, 17, event_cb, &late), CL_INVALID_VALUE);
    CHECK(clSetEventCallback(NULL, CL_COMPLETE, event_cb, &late), CL_INVALID_EVENT);
    MUST(clReleaseEvent(w));
    MUST(clReleaseEvent(ue));
    MUST(clReleaseMemObject(b));
}

static void test_user_events(void)
{
    enum { N = 8192 };
    uint32_t in[N], out[N], ref[N];
    for (int i = 0; i < N; i++) {
        in[i] = ct_rand();
        ref[i] = step_ref(in[i], 5, (uint32_t)i);
        out[i] = 0xDEADBEEFu;
    }
    cl_mem a, b;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
    cl_event ue;
    CREATE(ue = clCreateUserEvent(ctx, &E));
    check_event_info(ue, NULL, CL_COMMAND_USER, "user event");
    CHECK_EQ(ct_event_status(ue), CL_SUBMITTED);
    cl_event w, wl[2], k, r;
    MUST(clEnqueueWriteBuffer(qs[0], a, CL_FALSE, 0, sizeof in, in, 0, NULL, &w));
    wl[0] = ue;
    wl[1] = w;
    k = enqueue_step(qs[1 % ndev], a, b, 5, N, 2, wl);
    MUST(clEnqueueReadBuffer(qs[2 % ndev], b, CL_FALSE, 0, sizeof out, out, 1, &k, &r));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clFlush(qs[d]));
    ct_sleep_ms(200);
    cl_int sk = ct_event_status(k), sr = ct_event_status(r);
    CHECK_TRUE(sk == CL_QUEUED || sk == CL_SUBMITTED, "kernel gated by a user event has status %d", sk);
    CHECK_TRUE(sr == CL_QUEUED || sr == CL_SUBMITTED, "read after the gated kernel has status %d", sr);
    CHECK_TRUE(out[0] == 0xDEADBEEFu && out[N - 1] == 0xDEADBEEFu, "host memory written before the gate opened");
    MUST(clSetUserEventStatus(ue, CL_COMPLETE));
    CHECK_EQ(ct_event_status(ue), CL_COMPLETE);
    MUST(clWaitForEvents(1, &r));
    CHECK_EQ(ct_event_status(k), CL_COMPLETE);
    CHECK_MEM(out, ref, N, 4, "kernel gated by a user event (device 1), read on device 2");
    CHECK(clSetUserEventStatus(ue, CL_COMPLETE), CL_INVALID_OPERATION);
    CHECK(clSetUserEventStatus(ue, -3), CL_INVALID_OPERATION);
    cl_event ue2;
    CREATE(ue2 = clCreateUserEvent(ctx, &E));
    CHECK(clSetUserEventStatus(ue2, CL_RUNNING), CL_INVALID_VALUE);
    CHECK(clSetUserEventStatus(ue2, CL_SUBMITTED), CL_INVALID_VALUE);
    MUST(clSetUserEventStatus(ue2, CL_COMPLETE));
    CHECK(clSetUserEventStatus(w, CL_COMPLETE), CL_INVALID_EVENT);
    CHECK_FAILS(clCreateUserEvent(NULL, &E), CL_INVALID_CONTEXT);
    /* One user event gating commands on every device. */
    cl_event ue3, ks[CT_MAX_DEVICES];
    CREATE(ue3 = clCreateUserEvent(ctx, &E));
    cl_mem outs[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        CREATE(outs[d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
        cl_event wl2[2] = {ue3, w};
        ks[d] = enqueue_step(qs[d], a, outs[d], 100 + d, N, 2, wl2);
        MUST(clFlush(qs[d]));
    }
    ct_sleep_ms(50);
    for (cl_uint d = 0; d < ndev; d++) {
        cl_int s = ct_event_status(ks[d]);
        CHECK_TRUE(s == CL_QUEUED || s == CL_SUBMITTED, "device %u kernel status %d before the gate opened", d, s);
    }
    MUST(clSetUserEventStatus(ue3, CL_COMPLETE));
    MUST(clWaitForEvents(ndev, ks));
    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clEnqueueReadBuffer(qs[(d + 1) % ndev], outs[d], CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        for (int i = 0; i < N; i++)
            ref[i] = step_ref(in[i], 100 + d, (uint32_t)i);
        CHECK_MEM(out, ref, N, 4, "kernels on all devices gated by one user event");
        MUST(clReleaseEvent(ks[d]));
        MUST(clReleaseMemObject(outs[d]));
    }
    MUST(clReleaseEvent(ue3));
    MUST(clReleaseEvent(ue2));
    MUST(clReleaseEvent(ue));
    MUST(clReleaseEvent(w));
    MUST(clReleaseEvent(k));
    MUST(clReleaseEvent(r));
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
}

static void test_markers_barriers(void)
{
    enum { N = 2048 };
    uint32_t in[N], out[N], ref[N];
    for (int i = 0; i < N; i++)
        in[i] = ct_rand();
    cl_mem a, b;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
    cl_command_queue q0 = qs[0], q1 = qs[1 % ndev];

    /* Marker without wait list: completes after all previous commands of its queue. */
    cl_event w, m;
    MUST(clEnqueueWriteBuffer(q0, a, CL_FALSE, 0, sizeof in, in, 0, NULL, &w));
    cl_event k1 = enqueue_step(q0, a, b, 1, N, 0, NULL);
    MUST(clEnqueueMarkerWithWaitList(q0, 0, NULL, &m));
    MUST(clWaitForEvents(1, &m));
    CHECK_EQ(ct_event_status(w), CL_COMPLETE);
    CHECK_EQ(ct_event_status(k1), CL_COMPLETE);
    MUST(clReleaseEvent(m));
    MUST(clReleaseEvent(k1));
    MUST(clReleaseEvent(w));

    /* Marker with a wait list from another queue, gated by a user event. */
    cl_event ue;
    CREATE(ue = clCreateUserEvent(ctx, &E));
    MUST(clEnqueueWriteBuffer(q0, a, CL_FALSE, 0, sizeof in, in, 1, &ue, &w));
    MUST(clEnqueueMarkerWithWaitList(q1, 1, &w, &m));
    MUST(clFlush(q0));
    MUST(clFlush(q1));
    ct_sleep_ms(50);
    cl_int s = ct_event_status(m);
    CHECK_TRUE(s > CL_COMPLETE, "marker waiting on a gated write has status %d", s);
    MUST(clSetUserEventStatus(ue, CL_COMPLETE));
    MUST(clWaitForEvents(1, &m));
    CHECK_EQ(ct_event_status(w), CL_COMPLETE);
    MUST(clReleaseEvent(ue));
    MUST(clReleaseEvent(w));

    /* Barrier with a wait list: later commands of the queue wait for it. */
    CREATE(ue = clCreateUserEvent(ctx, &E));
    cl_event bar;
    MUST(clEnqueueBarrierWithWaitList(q1, 1, &ue, &bar));
    cl_event k2 = enqueue_step(q1, a, b, 2, N, 0, NULL);
    MUST(clFlush(q1));
    ct_sleep_ms(50);
    s = ct_event_status(k2);
    CHECK_TRUE(s > CL_COMPLETE, "kernel behind a gated barrier has status %d", s);
    MUST(clSetUserEventStatus(ue, CL_COMPLETE));
    MUST(clEnqueueReadBuffer(qs[2 % ndev], b, CL_TRUE, 0, sizeof out, out, 1, &k2, NULL));
    for (int i = 0; i < N; i++)
        ref[i] = step_ref(in[i], 2, (uint32_t)i);
    CHECK_MEM(out, ref, N, 4, "kernel after barrier with wait list");
    CHECK_EQ(ct_event_status(bar), CL_COMPLETE);
    MUST(clReleaseEvent(bar));
    MUST(clReleaseEvent(k2));
    MUST(clReleaseEvent(ue));
    MUST(clReleaseEvent(m));

    /* 1.1 entry points: clEnqueueWaitForEvents gates the queue, clEnqueueBarrier, clEnqueueMarker. */
    CREATE(ue = clCreateUserEvent(ctx, &E));
    if (ct_mirrorcl()) /* (unimplemented in PoCL 3.1) */
        MUST(clEnqueueWaitForEvents(q1, 1, &ue));
    else
        MUST(clEnqueueBarrierWithWaitList(q1, 1, &ue, NULL));
    cl_event k3 = enqueue_step(q1, a, b, 3, N, 0, NULL);
    MUST(clEnqueueBarrier(q1));
    cl_event mk;
    MUST(clEnqueueMarker(q1, &mk));
    MUST(clFlush(q1));
    ct_sleep_ms(50);
    s = ct_event_status(k3);
    CHECK_TRUE(s > CL_COMPLETE, "kernel behind clEnqueueWaitForEvents(user event) has status %d", s);
    CHECK_TRUE(ct_event_status(mk) > CL_COMPLETE, "marker completed before the gate opened");
    MUST(clSetUserEventStatus(ue, CL_COMPLETE));
    MUST(clWaitForEvents(1, &mk));
    CHECK_EQ(ct_event_status(k3), CL_COMPLETE);
    MUST(clEnqueueReadBuffer(qs[2 % ndev], b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    for (int i = 0; i < N; i++)
        ref[i] = step_ref(in[i], 3, (uint32_t)i);
    CHECK_MEM(out, ref, N, 4, "kernel after clEnqueueWaitForEvents / clEnqueueBarrier");
    MUST(clReleaseEvent(mk));
    MUST(clReleaseEvent(k3));

    /* Errors. */
    CHECK(clEnqueueMarker(q0, NULL), CL_INVALID_VALUE);
    cl_event nullev = NULL;
    if (ct_mirrorcl()) {
        CHECK(clEnqueueWaitForEvents(q0, 0, NULL), CL_INVALID_VALUE);
        CHECK(clEnqueueWaitForEvents(q0, 1, NULL), CL_INVALID_VALUE);
        CHECK(clEnqueueWaitForEvents(q0, 1, &nullev), CL_INVALID_EVENT);
    }
    CHECK(clEnqueueMarkerWithWaitList(q0, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueMarkerWithWaitList(q0, 0, &ue, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueBarrierWithWaitList(q0, 1, &nullev, NULL), CL_INVALID_EVENT_WAIT_LIST);
    {
        cl_context other;
        CREATE(other = clCreateContext(NULL, 1, devs, NULL, NULL, &E));
        cl_event oev;
        CREATE(oev = clCreateUserEvent(other, &E));
        MUST(clSetUserEventStatus(oev, CL_COMPLETE));
        if (ct_mirrorcl())
            CHECK(clEnqueueWaitForEvents(q0, 1, &oev), CL_INVALID_CONTEXT);
        CHECK(clEnqueueMarkerWithWaitList(q0, 1, &oev, NULL), CL_INVALID_CONTEXT);
        MUST(clReleaseEvent(oev));
        MUST(clReleaseContext(other));
    }
    MUST(clReleaseEvent(ue));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clFinish(qs[d]));
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
}

/* device0 kernel -> event -> device1 kernel reading its output -> ... */
static void test_chain(void)
{
    enum { N = 1 << 16 };
    cl_uint steps = 3 * ndev + 1;
    uint32_t *host = malloc(N * 4), *ref = malloc(N * 4), *out = malloc(N * 4);
    for (int i = 0; i < N; i++)
        ref[i] = host[i] = ct_rand();
    cl_mem bufs[3 * CT_MAX_DEVICES + 2];
    for (cl_uint i = 0; i <= steps; i++)
        CREATE(bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    cl_event prev;
    MUST(clEnqueueWriteBuffer(qs[0], bufs[0], CL_FALSE, 0, N * 4, host, 0, NULL, &prev));
    for (cl_uint s = 0; s < steps; s++) {
        cl_event ev = enqueue_step(qs[s % ndev], bufs[s], bufs[s + 1], 1000 + s, N, 1, &prev);
        MUST(clFlush(qs[s % ndev]));
        MUST(clReleaseEvent(prev));
        prev = ev;
        for (int i = 0; i < N; i++)
            ref[i] = step_ref(ref[i], 1000 + s, (uint32_t)i);
    }
    MUST(clEnqueueReadBuffer(qs[steps % ndev], bufs[steps], CL_TRUE, 0, N * 4, out, 1, &prev, NULL));
    CHECK_MEM(out, ref, N, 4, "cross-device kernel chain");
    MUST(clReleaseEvent(prev));
    for (cl_uint i = 0; i <= steps; i++)
        MUST(clReleaseMemObject(bufs[i]));
    printf("  chain of %u kernels over %u devices checked\n", steps, ndev);
    free(host);
    free(ref);
    free(out);
}

static void check_queue_info(cl_command_queue q, cl_device_id d, cl_command_queue_properties props)
{
    static const struct {
        cl_command_queue_info id;
        const char *name;
        size_t size;
    } params[] = {
        {CL_QUEUE_CONTEXT, "CL_QUEUE_CONTEXT", sizeof(cl_context)},
        {CL_QUEUE_DEVICE, "CL_QUEUE_DEVICE", sizeof(cl_device_id)},
        {CL_QUEUE_REFERENCE_COUNT, "CL_QUEUE_REFERENCE_COUNT", sizeof(cl_uint)},
        {CL_QUEUE_PROPERTIES, "CL_QUEUE_PROPERTIES", sizeof(cl_command_queue_properties)},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        size_t sz = 0;
        if (!ct_check_code(clGetCommandQueueInfo(q, params[i].id, 0, NULL, &sz), CL_SUCCESS, params[i].name, __FILE__,
                           __LINE__, 0))
            continue;
        ct_check_true(sz == params[i].size, params[i].name, __FILE__, __LINE__, "size %zu", sz);
        unsigned char buf[16];
        size_t sz2 = 0;
        ct_check_code(clGetCommandQueueInfo(q, params[i].id, sz, buf, &sz2), CL_SUCCESS, params[i].name, __FILE__,
                      __LINE__, 0);
        ct_check_true(sz2 == sz, params[i].name, __FILE__, __LINE__, "size %zu vs %zu", sz, sz2);
        ct_check_code(clGetCommandQueueInfo(q, params[i].id, sz - 1, buf, NULL), CL_INVALID_VALUE, params[i].name,
                      __FILE__, __LINE__, 0);
    }
    cl_context c = NULL;
    cl_device_id dd = NULL;
    cl_command_queue_properties p = 0;
    cl_uint rc = 0;
    MUST(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof c, &c, NULL));
    MUST(clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dd, &dd, NULL));
    MUST(clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof p, &p, NULL));
    MUST(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_TRUE(c == ctx, "CL_QUEUE_CONTEXT %p", (void *)c);
    CHECK_TRUE(dd == d, "CL_QUEUE_DEVICE %p, expected %p", (void *)dd, (void *)d);
    CHECK_TRUE(p == props, "CL_QUEUE_PROPERTIES 0x%llx, expected 0x%llx", (unsigned long long)p,
               (unsigned long long)props);
    CHECK_TRUE(rc >= 1, "CL_QUEUE_REFERENCE_COUNT %u", rc);
    cl_uint v;
    CHECK(clGetCommandQueueInfo(q, 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
}

static void test_queues(void)
{
    for (cl_uint d = 0; d < ndev; d++)
        check_queue_info(qs[d], devs[d], 0);
    /* Refcount of a fresh queue. */
    cl_command_queue q = ct_queue(ctx, devs[0], CL_QUEUE_PROFILING_ENABLE);
    check_queue_info(q, devs[0], CL_QUEUE_PROFILING_ENABLE);
    cl_uint rc = 0;
    MUST(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 1);
    MUST(clRetainCommandQueue(q));
    MUST(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 2);
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseCommandQueue(q));
    CHECK(clFlush(qs[0]), CL_SUCCESS);
    CHECK(clFinish(qs[0]), CL_SUCCESS);
    CHECK(clFlush(NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clFinish(NULL), CL_INVALID_COMMAND_QUEUE);

    /* clCreateCommandQueue errors. */
    {
        /* Unknown property bit (PoCL 3.1 ignores it and creates the queue). */
        E = ERR_SENTINEL;
        cl_command_queue bad = clCreateCommandQueue(ctx, devs[0], (cl_command_queue_properties)1 << 10, &E);
        CHECK_NATIVE_DEVIATES(E, CL_INVALID_VALUE, CL_SUCCESS);
        if (bad)
            MUST(clReleaseCommandQueue(bad));
    }
    CHECK_FAILS(clCreateCommandQueue(ctx, NULL, 0, &E), CL_INVALID_DEVICE);
    CHECK_FAILS(clCreateCommandQueue(NULL, devs[0], 0, &E), CL_INVALID_CONTEXT);
    if (ndev > 1) {
        cl_context c1;
        CREATE(c1 = clCreateContext(NULL, 1, devs, NULL, NULL, &E));
        CHECK_FAILS(clCreateCommandQueue(c1, devs[1], 0, &E), CL_INVALID_DEVICE);
        MUST(clReleaseContext(c1));
    }

    /* Out-of-order queues. */
    enum { N = 4096 };
    uint32_t in[N], out[N], ref[N];
    for (int i = 0; i < N; i++) {
        in[i] = ct_rand();
        ref[i] = step_ref(step_ref(in[i], 7, (uint32_t)i), 8, (uint32_t)i);
    }
    cl_mem a, b;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
    for (cl_uint d = 0; d < ndev; d++) {
        cl_command_queue_properties dp = 0;
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_QUEUE_PROPERTIES, sizeof dp, &dp, NULL));
        cl_command_queue oq;
        if (!(dp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) {
            E = ERR_SENTINEL;
            oq = clCreateCommandQueue(ctx, devs[d], CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &E);
            CHECK_EQ(E, CL_INVALID_QUEUE_PROPERTIES);
            printf("  device %u: no out-of-order support\n", d);
            continue;
        }
        oq = ct_queue(ctx, devs[d], CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | CL_QUEUE_PROFILING_ENABLE);
        check_queue_info(oq, devs[d], CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | CL_QUEUE_PROFILING_ENABLE);
        cl_event w, k1, k2, r;
        MUST(clEnqueueWriteBuffer(oq, a, CL_FALSE, 0, sizeof in, in, 0, NULL, &w));
        k1 = enqueue_step(oq, a, b, 7, N, 1, &w);
        k2 = enqueue_step(oq, b, a, 8, N, 1, &k1);
        /* Barrier without wait list: everything before it. */
        MUST(clEnqueueBarrierWithWaitList(oq, 0, NULL, NULL));
        memset(out, 0, sizeof out);
        MUST(clEnqueueReadBuffer(oq, a, CL_FALSE, 0, sizeof out, out, 0, NULL, &r));
        MUST(clFinish(oq));
        CHECK_EQ(ct_event_status(k2), CL_COMPLETE);
        CHECK_MEM(out, ref, N, 4, "out-of-order queue with event dependencies");
        MUST(clReleaseEvent(w));
        MUST(clReleaseEvent(k1));
        MUST(clReleaseEvent(k2));
        MUST(clReleaseEvent(r));
        MUST(clReleaseCommandQueue(oq));
    }

    /* clCreateCommandQueueWithProperties (OpenCL 2.0 entry point). */
    for (cl_uint d = 0; d < ndev; d++) {
        cl_queue_properties_khr props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
        cl_command_queue pq;
        CREATE(pq = clCreateCommandQueueWithProperties(ctx, devs[d], props, &E));
        check_queue_info(pq, devs[d], CL_QUEUE_PROFILING_ENABLE);
        cl_event ev;
        MUST(clEnqueueWriteBuffer(pq, a, CL_TRUE, 0, sizeof in, in, 0, NULL, &ev));
        MUST(clWaitForEvents(1, &ev));
        cl_ulong t0 = 0, t1 = 0;
        MUST(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_QUEUED, sizeof t0, &t0, NULL));
        MUST(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL));
        CHECK_TRUE(t0 <= t1 && t1 > 0, "profiling %llu..%llu", (unsigned long long)t0, (unsigned long long)t1);
        MUST(clReleaseEvent(ev));
        MUST(clReleaseCommandQueue(pq));
        CREATE(pq = clCreateCommandQueueWithProperties(ctx, devs[d], NULL, &E));
        check_queue_info(pq, devs[d], 0);
        MUST(clEnqueueReadBuffer(pq, a, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        CHECK_MEM(out, in, N, 4, "read through clCreateCommandQueueWithProperties queue");
        MUST(clReleaseCommandQueue(pq));
    }
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
}

static struct cb_record failed_cb;

/* Runs last, in its own context: after a terminated command the context is implementation-defined. */
static void test_negative_user_event(void)
{
    cl_context c2 = ct_context(platform, ndev, devs);
    cl_command_queue q0 = ct_queue(c2, devs[0], 0), q1 = ct_queue(c2, devs[1 % ndev], 0);
    cl_program p2 = ct_build(c2, kSrc, NULL);
    cl_kernel ks = ct_kernel(p2, "stepk");
    enum { N = 1024 };
    uint32_t in[N];
    memset(in, 0, sizeof in);
    cl_mem a, b;
    CREATE(a = clCreateBuffer(c2, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof in, in, &E));
    CREATE(b = clCreateBuffer(c2, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
    cl_event ue, w, k;
    CREATE(ue = clCreateUserEvent(c2, &E));
    MUST(clEnqueueWriteBuffer(q0, a, CL_FALSE, 0, sizeof in, in, 0, NULL, &w));
    cl_event wl[2] = {w, ue};
    cl_uint kk = 1;
    MUST(clSetKernelArg(ks, 0, sizeof a, &a));
    MUST(clSetKernelArg(ks, 1, sizeof b, &b));
    MUST(clSetKernelArg(ks, 2, sizeof kk, &kk));
    size_t gws = N;
    MUST(clEnqueueNDRangeKernel(q1, ks, 1, NULL, &gws, NULL, 2, wl, &k));
    MUST(clSetEventCallback(k, CL_COMPLETE, event_cb, &failed_cb));
    MUST(clFlush(q0));
    MUST(clFlush(q1));
    MUST(clWaitForEvents(1, &w));
    MUST(clSetUserEventStatus(ue, -55));
    CHECK(clWaitForEvents(1, &k), CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    CHECK(clWaitForEvents(1, &ue), CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    cl_event both[2] = {w, k};
    CHECK(clWaitForEvents(2, both), CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    CHECK_EQ(ct_event_status(ue), -55);
    cl_int sk = ct_event_status(k);
    CHECK_TRUE(sk < 0, "command depending on a failed user event has status %d (expected < 0)", sk);
    /*
     * "The callback function registered for CL_COMPLETE will be called when
     * the command has completed successfully or if the command was abnormally
     * terminated" (1.2, 5.9).  PoCL 3.1 never calls it: MirrorCL only.
     */
    if (ct_mirrorcl()) {
        CHECK_TRUE(ct_wait_flag(&failed_cb.calls, 1, 10000), "CL_COMPLETE callback of the terminated command not called");
        CHECK_TRUE(failed_cb.status[0] < 0, "callback of a terminated command got status %d", failed_cb.status[0]);
    }
    /* The original context is unaffected. */
}

int main(void)
{
    ct_init("events");
    platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    prog = ct_build(ctx, kSrc, NULL);
    k_step = ct_kernel(prog, "stepk");
    k_inc = ct_kernel(prog, "inc");
    k_spin = ct_kernel(prog, "spin");

    printf("-- an event from every enqueue call\n");
    test_command_types();
    printf("-- clWaitForEvents errors\n");
    test_wait_errors();
    printf("-- profiling\n");
    test_profiling();
    printf("-- callbacks\n");
    test_callbacks();
    printf("-- user events\n");
    test_user_events();
    printf("-- markers and barriers\n");
    test_markers_barriers();
    printf("-- cross-device chain\n");
    test_chain();
    printf("-- command queues\n");
    test_queues();
    printf("-- user event with a negative status\n");
    test_negative_user_event();
    /* Still working after all this. */
    test_chain();

    MUST(clReleaseKernel(k_step));
    MUST(clReleaseKernel(k_inc));
    MUST(clReleaseKernel(k_spin));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
