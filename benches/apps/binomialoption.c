/*
 * binomialoption.c - AMD APP SDK BinomialOption as a multi-device OpenCL
 * application (SnuCL-D thesis, Table IV.5: "BinomialOption, AMD SDK, 1M samples").
 *
 * The AMD sample's kernel unchanged in substance: a work-group of NUM_STEPS + 1
 * work-items prices one float4 of options (four options, one per component) on a
 * binomial lattice of NUM_STEPS steps held in local memory, stepping back two
 * levels per iteration (ping-pong between callA and callB).  The option
 * parameters are derived from one random float4 per work-group (randArray), as in
 * the sample.  The samples are split into contiguous slices, one per device, each
 * with its own randArray and output buffers (attached to the device).
 *
 * Float.  The CPU reference walks the same lattice with the same float formulas
 * (expf/sqrtf).  The risk-neutral probability pu = (r - d) / (u - d) divides two
 * small differences of numbers close to 1, so a one-ulp difference of exp() on
 * the device turns into a relative error of ~1e-5 in pu, which 254 steps carry into
 * the price; prices are therefore compared with |got - ref| <= 1e-3 * max(|ref|,
 * 0.01 * spot).  A wrong or missing option is off by far more.
 *
 * APP_CHECK=sample: the reference prices only a sample of the options (app.h).
 *
 * APP_THREADS=1: one host thread per device, as AMD's BinomialOptionMultiGPU drives
 * its devices.  The main thread creates the threads (pthread_create) after building
 * the program; each creates its own in-order queue, its two buffers and its kernel
 * object, and per repetition maps its input for write (non-blocking,
 * CL_MAP_WRITE_INVALIDATE_REGION), fills it, unmaps it, runs the kernel, maps its
 * output for read, copies it out and unmaps it, waiting for each of those commands by
 * polling clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS) as the sample does (never
 * clFinish).  The threads synchronise only through host barriers: one after their
 * set-up (queue, buffers, kernel, warm-up: not timed), then per repetition one that
 * starts it and one that ends it (the main thread takes part in all and times the
 * repetition from its start to its end).  kernel_s and transfer_s of the TIME line
 * are those of the thread that finished the repetition last (the threads overlap).
 * Unlike the sample, which sets up its queues and buffers on the main thread and
 * creates its threads anew for every iteration, the threads here set up their own and
 * live through all repetitions, so that the timing holds the repetitions alone.
 * The result check is the single-threaded mode's.  APP_THREADS=0 or unset: one host
 * thread enqueues for every device (the mode above); any other value is fatal.
 *
 * Environment: APP_SIZE options (multiple of 4; default 64K; tests: 4K), BO_STEPS lattice
 * steps (even, default 254 as in the sample; lowered to fit the devices' largest
 * work-group), APP_REPS, APP_CHECK, APP_THREADS.
 */
#include "app.h"

#include <sched.h>

static const char *kSrc =
    "#define RISKFREE 0.02f\n"
    "#define VOLATILITY 0.30f\n"
    "__kernel void binomial_options(int numSteps, const __global float4 *randArray,\n"
    "                               __global float4 *output, __local float4 *callA,\n"
    "                               __local float4 *callB)\n"
    "{\n"
    "    unsigned int tid = get_local_id(0);\n"
    "    unsigned int bid = get_group_id(0);\n"
    "    float4 inRand = randArray[bid];\n"
    "    float4 s = (1.0f - inRand) * 5.0f + inRand * 30.f;\n"
    "    float4 x = (1.0f - inRand) * 1.0f + inRand * 100.f;\n"
    "    float4 optionYears = (1.0f - inRand) * 0.25f + inRand * 10.f;\n"
    "    float4 dt = optionYears * (1.0f / (float)numSteps);\n"
    "    float4 vsdt = VOLATILITY * sqrt(dt);\n"
    "    float4 rdt = RISKFREE * dt;\n"
    "    float4 r = exp(rdt);\n"
    "    float4 rInv = 1.0f / r;\n"
    "    float4 u = exp(vsdt);\n"
    "    float4 d = 1.0f / u;\n"
    "    float4 pu = (r - d) / (u - d);\n"
    "    float4 pd = 1.0f - pu;\n"
    "    float4 puByr = pu * rInv;\n"
    "    float4 pdByr = pd * rInv;\n"
    "    float4 profit = s * exp(vsdt * (2.0f * tid - (float)numSteps)) - x;\n"
    "    callA[tid].x = profit.x > 0 ? profit.x : 0.0f;\n"
    "    callA[tid].y = profit.y > 0 ? profit.y : 0.0f;\n"
    "    callA[tid].z = profit.z > 0 ? profit.z : 0.0f;\n"
    "    callA[tid].w = profit.w > 0 ? profit.w : 0.0f;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int j = numSteps; j > 0; j -= 2) {\n"
    "        if (tid < j)\n"
    "            callB[tid] = puByr * callA[tid] + pdByr * callA[tid + 1];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        if (tid < j - 1)\n"
    "            callA[tid] = puByr * callB[tid] + pdByr * callB[tid + 1];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (tid == 0)\n"
    "        output[bid] = callA[0];\n"
    "}\n";

#define RISKFREE 0.02f
#define VOLATILITY 0.30f

/* CPU reference of one option (one component of a sample). */
static float binomial_ref(float inRand, int numSteps, float *call)
{
    float s = (1.0f - inRand) * 5.0f + inRand * 30.f;
    float x = (1.0f - inRand) * 1.0f + inRand * 100.f;
    float optionYears = (1.0f - inRand) * 0.25f + inRand * 10.f;
    float dt = optionYears * (1.0f / (float)numSteps);
    float vsdt = VOLATILITY * sqrtf(dt);
    float rdt = RISKFREE * dt;
    float r = expf(rdt);
    float rInv = 1.0f / r;
    float u = expf(vsdt);
    float d = 1.0f / u;
    float pu = (r - d) / (u - d);
    float pd = 1.0f - pu;
    float puByr = pu * rInv, pdByr = pd * rInv;
    for (int i = 0; i <= numSteps; i++) {
        float profit = s * expf(vsdt * (2.0f * (float)i - (float)numSteps)) - x;
        call[i] = profit > 0 ? profit : 0.0f;
    }
    for (int j = numSteps; j > 0; j--)
        for (int i = 0; i < j; i++)
            call[i] = puByr * call[i] + pdByr * call[i + 1];
    return call[0];
}

typedef struct {
    const float *rnd;
    const app_sample_t *smp;
    float *out, *mag; /* per checked option */
    int steps;
} ref_ctx_t;

/* Checked options [b, e) (all options under APP_CHECK=all). */
static void ref_range(void *p, size_t b, size_t e)
{
    ref_ctx_t *c = (ref_ctx_t *)p;
    float *call = app_malloc((size_t)(c->steps + 1) * sizeof(float));
    for (size_t k = b; k < e; k++) {
        float r = c->rnd[app_sample_at(c->smp, k)];
        c->out[k] = binomial_ref(r, c->steps, call);
        c->mag[k] = 0.01f * ((1.0f - r) * 5.0f + r * 30.f); /* 1% of the spot price */
    }
    free(call);
}

/* ---- APP_THREADS=1 ------------------------------------------------------- */

/* One device's thread: what it is given, and what it measured of the current repetition. */
typedef struct {
    app_t *app;
    cl_program prog;
    cl_uint d;
    size_t first, cnt; /* its slice, in float4 samples */
    size_t wg;
    int steps;
    const float *rnd;
    float *out;
    pthread_barrier_t *start, *end; /* ndev + 1 parties: the threads and the main thread */
    double kernel, transfer, done;  /* of the current repetition; done: when it ended */
} bo_thread_t;

/*
 * Waits for ev's command by polling its status, as the sample does, then releases ev.
 * The sample spins; yielding between polls leaves the core to the devices' and
 * MirrorCL's threads where ranks share cores (PoCL on a small machine).
 */
static void bo_poll(cl_event ev)
{
    cl_int st = CL_QUEUED;
    for (;;) {
        MUST(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        if (st == CL_COMPLETE)
            break;
        if (st < 0)
            ct_die("a command of a device thread failed");
        sched_yield();
    }
    MUST(clReleaseEvent(ev));
}

static void *bo_thread(void *p)
{
    bo_thread_t *w = (bo_thread_t *)p;
    app_t *a = w->app;
    cl_command_queue q = ct_queue(a->ctx, a->devs[w->d], 0);
    cl_kernel k = ct_kernel(w->prog, "binomial_options");
    size_t bytes = w->cnt * 4 * sizeof(float), g = w->cnt * w->wg;
    cl_mem bin = app_buffer(a, w->d, CL_MEM_READ_ONLY, bytes);
    cl_mem bout = app_buffer(a, w->d, CL_MEM_WRITE_ONLY, bytes);
    MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &bin));
    MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &bout));
    MUST(clSetKernelArg(k, 3, w->wg * 4 * sizeof(float), NULL));
    MUST(clSetKernelArg(k, 4, w->wg * 4 * sizeof(float), NULL));
    cl_event ev;
    if (a->warmup) {
        int nosteps = 0; /* as the single-threaded warm-up: only the leaves */
        MUST(clSetKernelArg(k, 0, sizeof(int), &nosteps));
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &w->wg, 0, NULL, &ev));
        MUST(clFlush(q));
        bo_poll(ev);
    }
    MUST(clSetKernelArg(k, 0, sizeof(int), &w->steps));
    pthread_barrier_wait(w->end); /* set up: the repetitions' timing starts after this */
    for (int rep = 0; rep < a->reps; rep++) {
        pthread_barrier_wait(w->start);
        double t0 = app_now();
        float *in;
        CREATE(in = (float *)clEnqueueMapBuffer(q, bin, CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION, 0, bytes, 0,
                                                NULL, &ev, &E));
        MUST(clFlush(q));
        bo_poll(ev);
        memcpy(in, w->rnd + w->first * 4, bytes);
        MUST(clEnqueueUnmapMemObject(q, bin, in, 0, NULL, &ev));
        MUST(clFlush(q));
        bo_poll(ev);
        double t1 = app_now();
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &w->wg, 0, NULL, &ev));
        MUST(clFlush(q));
        bo_poll(ev);
        double t2 = app_now();
        const float *res;
        CREATE(res = (const float *)clEnqueueMapBuffer(q, bout, CL_FALSE, CL_MAP_READ, 0, bytes, 0, NULL, &ev, &E));
        MUST(clFlush(q));
        bo_poll(ev);
        memcpy(w->out + w->first * 4, res, bytes);
        MUST(clEnqueueUnmapMemObject(q, bout, (void *)res, 0, NULL, &ev));
        MUST(clFlush(q));
        bo_poll(ev);
        double t3 = app_now();
        w->transfer = (t1 - t0) + (t3 - t2);
        w->kernel = t2 - t1;
        w->done = t3;
        pthread_barrier_wait(w->end);
    }
    MUST(clReleaseMemObject(bin));
    MUST(clReleaseMemObject(bout));
    MUST(clReleaseKernel(k));
    MUST(clReleaseCommandQueue(q));
    return NULL;
}

/* The timed repetitions with one host thread per device; the best one in *best. */
static void bo_threaded(app_t *app, cl_program prog, const size_t *first, const size_t *cnt, size_t wg, int steps,
                        const float *rnd, float *out, size_t n, app_times_t *best)
{
    cl_uint ndev = app->ndev;
    pthread_barrier_t start, end;
    pthread_barrier_init(&start, NULL, ndev + 1);
    pthread_barrier_init(&end, NULL, ndev + 1);
    pthread_t th[CT_MAX_DEVICES];
    bo_thread_t w[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        w[d] = (bo_thread_t){app, prog, d, first[d], cnt[d], wg, steps, rnd, out, &start, &end, 0, 0, 0};
        if (pthread_create(&th[d], NULL, bo_thread, &w[d]) != 0)
            ct_die("pthread_create failed");
    }
    pthread_barrier_wait(&end); /* every thread has its queue, buffers and kernel, warmed up */
    for (int rep = 0; rep < app->reps; rep++) {
        for (size_t i = 0; i < n; i++)
            out[i] = NAN;
        app_times_t t;
        app_t_begin(&t);
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&end);
        app_t_end(&t);
        cl_uint last = 0;
        for (cl_uint d = 1; d < ndev; d++)
            if (w[d].done > w[last].done)
                last = d;
        t.kernel = w[last].kernel;
        t.transfer = w[last].transfer;
        app_t_keep_best(best, &t, rep);
    }
    for (cl_uint d = 0; d < ndev; d++)
        pthread_join(th[d], NULL);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&end);
}

int main(void)
{
    app_t app;
    app_init(&app, "binomialoption");
    size_t n = (size_t)app_env_ull("APP_SIZE", 64u << 10);
    int steps = (int)app_env_ull("BO_STEPS", 254);
    if (n % 4 || n == 0)
        ct_die("APP_SIZE (options) must be a positive multiple of 4");
    cl_uint ndev = app.ndev;
    unsigned long long threaded = app_env_ull("APP_THREADS", 0);
    if (threaded > 1)
        ct_die("APP_THREADS must be 0 (one host thread) or 1 (one host thread per device)");

    cl_program prog = ct_build(app.ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "binomial_options");
    size_t maxwg = app_min_kernel_wg(&app, k);
    if ((size_t)steps + 1 > maxwg)
        steps = (int)(maxwg - 1);
    steps &= ~1;
    if (steps < 2)
        ct_die("BO_STEPS must be an even number >= 2");
    size_t samples = n / 4, wg = (size_t)steps + 1;
    printf("  %zu options (%zu float4 samples), %d steps, work-group %zu\n", n, samples, steps, wg);
    printf("  %s\n", threaded ? "one host thread per device (APP_THREADS=1)" : "one host thread for all devices");

    float *rnd = app_malloc(n * sizeof(float)), *out = app_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        rnd[i] = app_unif(11, i);

    size_t first[CT_MAX_DEVICES], cnt[CT_MAX_DEVICES];
    cl_mem bin[CT_MAX_DEVICES], bout[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        app_split(samples, ndev, d, &first[d], &cnt[d]);
        if (threaded)
            continue; /* each device's thread creates its own buffers */
        bin[d] = app_buffer(&app, d, CL_MEM_READ_ONLY, cnt[d] * 4 * sizeof(float));
        bout[d] = app_buffer(&app, d, CL_MEM_WRITE_ONLY, cnt[d] * 4 * sizeof(float));
    }
    app_times_t best = {0};
    if (threaded) {
        bo_threaded(&app, prog, first, cnt, wg, steps, rnd, out, n, &best);
    } else {
        app_times_t t;
        MUST(clSetKernelArg(k, 3, wg * 4 * sizeof(float), NULL));
        MUST(clSetKernelArg(k, 4, wg * 4 * sizeof(float), NULL));
        if (app.warmup) {
            int nosteps = 0; /* no lattice steps: the launch only computes the leaves */
            MUST(clSetKernelArg(k, 0, sizeof(int), &nosteps));
            for (cl_uint d = 0; d < ndev; d++) {
                size_t g = cnt[d] * wg;
                MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &bin[d]));
                MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &bout[d]));
                MUST(clEnqueueNDRangeKernel(app.q[d], k, 1, NULL, &g, &wg, 0, NULL, NULL));
            }
            app_finish_all(&app);
        }
        MUST(clSetKernelArg(k, 0, sizeof(int), &steps));

        for (int rep = 0; rep < app.reps; rep++) {
            for (size_t i = 0; i < n; i++)
                out[i] = NAN;
            app_t_begin(&t);
            app_t_mark(&t);
            for (cl_uint d = 0; d < ndev; d++)
                MUST(clEnqueueWriteBuffer(app.q[d], bin[d], CL_FALSE, 0, cnt[d] * 4 * sizeof(float), rnd + first[d] * 4,
                                          0, NULL, NULL));
            app_finish_all(&app);
            app_t_transfer(&t);

            app_t_mark(&t);
            for (cl_uint d = 0; d < ndev; d++) {
                size_t g = cnt[d] * wg;
                MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &bin[d]));
                MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &bout[d]));
                MUST(clEnqueueNDRangeKernel(app.q[d], k, 1, NULL, &g, &wg, 0, NULL, NULL));
            }
            app_finish_all(&app);
            app_t_kernel(&t);

            app_t_mark(&t);
            for (cl_uint d = 0; d < ndev; d++)
                MUST(clEnqueueReadBuffer(app.q[d], bout[d], CL_FALSE, 0, cnt[d] * 4 * sizeof(float), out + first[d] * 4,
                                         0, NULL, NULL));
            app_finish_all(&app);
            app_t_transfer(&t);
            app_t_end(&t);
            app_t_keep_best(&best, &t, rep);
        }
    }

    /* The devices' slices in options (the split is in float4 samples). */
    size_t ofirst[CT_MAX_DEVICES], ocnt[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        ofirst[d] = first[d] * 4;
        ocnt[d] = cnt[d] * 4;
    }
    app_sample_t smp;
    app_sample_init(&smp, &app, n, ndev, ofirst, ocnt);
    float *ref = app_malloc(smp.count * sizeof(float)), *mag = app_malloc(smp.count * sizeof(float));
    ref_ctx_t rc = {rnd, &smp, ref, mag, steps};
    app_parallel_for(smp.count, ref_range, &rc);
    APP_CHECK_FLOAT_SAMPLE(out, ref, mag, 0.0, &smp, 1e-3, "option prices");
    app_sample_free(&smp);
    app_report(&app, n, &best);

    for (cl_uint d = 0; d < ndev && !threaded; d++) {
        MUST(clReleaseMemObject(bin[d]));
        MUST(clReleaseMemObject(bout[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    free(rnd);
    free(out);
    free(ref);
    free(mag);
    return ct_finish();
}
