/*
 * stencil.c - a 2-D Jacobi stencil split in row blocks over all devices, ghost rows
 * exchanged between neighbours' buffers with clEnqueueCopyBuffer every step: the
 * halo exchange of every structured-grid code, for the cost of a dependency that
 * crosses devices (ranks, under MirrorCL).  Its hand-written MPI + OpenCL twin is
 * benches/micro/stencil_mpi.c; grid, kernel and reference: stencil.h.
 *
 * Per step s and device d (all enqueued ahead, events chaining the steps, no
 * clFinish inside the loop):
 *   - the kernel reads buffer s % 2 (block and ghost rows) and writes the block of
 *     buffer (s + 1) % 2; it waits for the neighbours' copies of step s - 2, the
 *     last ones that read the rows it overwrites (they run on the neighbours'
 *     queues; its own ghost rows were written on its own in-order queue);
 *   - on d's queue, d's ghost rows of buffer (s + 1) % 2 are copied from the
 *     neighbours' boundary rows of their buffer (s + 1) % 2, each copy waiting for
 *     the neighbour's kernel of step s.  Every buffer is written only by its own
 *     device's queue.
 * The steps are the kernel phase of app.h's TIME line; the STEP line gives it per
 * step (step_us), which the benchmark harness compares with the twin.
 *
 * Check: the whole grid after the steps, bit-exact against the CPU reference.
 * APP_CHECK=sample changes nothing (every value depends on its neighbourhood's
 * history, so the reference computes all of them).
 *
 * Environment: APP_SIZE grid side (default 1024; tests: 64), APP_STEPS (default
 * 100), APP_REPS, APP_ATTACH, APP_WARMUP, APP_CHECK.
 */
#include "stencil.h"

typedef struct {
    app_t *app;
    size_t n, first[CT_MAX_DEVICES], rows[CT_MAX_DEVICES];
    cl_mem buf[CT_MAX_DEVICES][2];
    cl_kernel k;
} grid_t;

/* The kernel on device d from buffer `from` to the other, after `nwait` events. */
static void enqueue_step(grid_t *g, cl_uint d, int from, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
    size_t global[2] = {g->n, g->rows[d]};
    int first = (int)g->first[d];
    MUST(clSetKernelArg(g->k, 0, sizeof(cl_mem), &g->buf[d][1 - from]));
    MUST(clSetKernelArg(g->k, 1, sizeof(cl_mem), &g->buf[d][from]));
    MUST(clSetKernelArg(g->k, 3, sizeof first, &first));
    MUST(clEnqueueNDRangeKernel(g->app->q[d], g->k, 2, NULL, global, NULL, nwait, nwait ? wait : NULL, ev));
}

/* d's ghost rows of buffer b from its neighbours' boundary rows (on d's queue, after
 * the neighbours' kernels `done`); *last: the event of the last copy (NULL: none). */
static void enqueue_ghosts(grid_t *g, cl_uint d, int b, const cl_event *done, cl_event *last)
{
    size_t row = g->n * sizeof(float);
    int below = d + 1 < g->app->ndev;
    *last = NULL;
    if (d > 0) /* d - 1's last row into d's top ghost */
        MUST(clEnqueueCopyBuffer(g->app->q[d], g->buf[d - 1][b], g->buf[d][b], g->rows[d - 1] * row, 0, row, 1,
                                 &done[d - 1], below ? NULL : last));
    if (below) /* d + 1's first row into d's bottom ghost */
        MUST(clEnqueueCopyBuffer(g->app->q[d], g->buf[d + 1][b], g->buf[d][b], row, (g->rows[d] + 1) * row, row, 1,
                                 &done[d + 1], last));
}

static void release_all(cl_event *ev, cl_uint n)
{
    for (cl_uint d = 0; d < n; d++)
        if (ev[d]) {
            MUST(clReleaseEvent(ev[d]));
            ev[d] = NULL;
        }
}

/* `steps` steps from buffer 0: the loop of the timed phase (and of the warm-up). */
static void run_steps(grid_t *g, int steps)
{
    cl_uint ndev = g->app->ndev;
    cl_event kev[CT_MAX_DEVICES] = {0};
    cl_event cev[2][CT_MAX_DEVICES] = {{0}}; /* last copy on each queue, by step parity */
    for (int s = 0; s < steps; s++) {
        int from = s % 2;
        cl_event *old = cev[s % 2]; /* step s - 2's */
        for (cl_uint d = 0; d < ndev; d++) {
            cl_event wait[2];
            cl_uint nw = 0;
            if (d > 0 && old[d - 1])
                wait[nw++] = old[d - 1];
            if (d + 1 < ndev && old[d + 1])
                wait[nw++] = old[d + 1];
            enqueue_step(g, d, from, nw, wait, &kev[d]);
        }
        release_all(old, ndev);
        for (cl_uint d = 0; d < ndev; d++)
            enqueue_ghosts(g, d, 1 - from, kev, &old[d]);
        release_all(kev, ndev);
    }
    release_all(cev[0], ndev);
    release_all(cev[1], ndev);
}

int main(void)
{
    app_t app;
    app_init(&app, "stencil");
    size_t n;
    int steps;
    stencil_params(&n, &steps);
    app_sample_not_applicable(&app, "every value depends on its neighbourhood's history");
    grid_t g = {.app = &app, .n = n};
    if (app.ndev > n)
        ct_die("more devices than grid rows");
    printf("  %zu x %zu grid, %d steps, ghost rows of %zu bytes\n", n, n, steps, n * sizeof(float));
    size_t row = n * sizeof(float);
    float *init[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < app.ndev; d++) {
        app_split(n, app.ndev, d, &g.first[d], &g.rows[d]);
        for (int b = 0; b < 2; b++)
            g.buf[d][b] = app_buffer(&app, d, CL_MEM_READ_WRITE, (g.rows[d] + 2) * row);
        init[d] = app_malloc((g.rows[d] + 2) * row);
        stencil_block(n, g.first[d], g.rows[d], init[d]);
    }
    cl_program prog = ct_build(app.ctx, kStencilSrc, NULL);
    g.k = ct_kernel(prog, "stencil_step");
    int in = (int)n;
    MUST(clSetKernelArg(g.k, 2, sizeof in, &in));

    if (app.warmup) {
        /* One step on the buffers the timed phase writes again: the kernel's launch
         * with its NDRange on every device, and a first copy between neighbours. */
        run_steps(&g, 1);
        app_finish_all(&app);
    }

    float *x = app_malloc(n * row), *ref = app_malloc(n * row);
    app_times_t t, best = {0};
    for (int rep = 0; rep < app.reps; rep++) {
        app_t_begin(&t);
        app_t_mark(&t);
        for (cl_uint d = 0; d < app.ndev; d++)
            for (int b = 0; b < 2; b++)
                MUST(clEnqueueWriteBuffer(app.q[d], g.buf[d][b], CL_FALSE, 0, (g.rows[d] + 2) * row, init[d], 0,
                                          NULL, NULL));
        app_finish_all(&app);
        app_t_transfer(&t);

        app_t_mark(&t);
        run_steps(&g, steps);
        app_finish_all(&app);
        app_t_kernel(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < app.ndev; d++)
            MUST(clEnqueueReadBuffer(app.q[d], g.buf[d][steps % 2], CL_FALSE, row, g.rows[d] * row,
                                     x + g.first[d] * n, 0, NULL, NULL));
        app_finish_all(&app);
        app_t_transfer(&t);
        app_t_end(&t);
        app_t_keep_best(&best, &t, rep);
    }

    stencil_reference(n, steps, ref);
    if (CHECK_MEM(x, ref, n * n, sizeof(float), "the grid after the steps"))
        printf("  check grid: %zu values bit-exact\n", n * n);
    app_report(&app, n, &best);
    stencil_report_step(app.name, app.ndev, n, steps, best.kernel);

    for (cl_uint d = 0; d < app.ndev; d++) {
        for (int b = 0; b < 2; b++)
            MUST(clReleaseMemObject(g.buf[d][b]));
        free(init[d]);
    }
    MUST(clReleaseKernel(g.k));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    free(x);
    free(ref);
    return ct_finish();
}
