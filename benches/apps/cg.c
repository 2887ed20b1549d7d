/*
 * cg.c - a conjugate-gradient solver split over all devices: many small kernels,
 * copies between devices and small reads per iteration (the pattern of NAS CG),
 * for the cost of MirrorCL's hand-offs where devices outnumber cores.
 *
 * Solves A x = b for the 5-point Laplacian on an n x n grid (A = 4 I - the four
 * neighbours, zero outside the grid), x0 = 0, a fixed number of iterations
 * (APP_ITERS, default 100).  The grid's rows are split into slices, one per
 * device; each device keeps its slice of x, r, q and of p with one ghost row
 * above and below.  Per iteration and device:
 *   - the ghost rows of p are copied from the neighbours' p (clEnqueueCopyBuffer
 *     on the receiving device's queue, after the neighbour's update of p);
 *   - q = A p (kernel), partial sums of p.q (kernel) read back (small read);
 *   - alpha = (r.r) / (p.q) on the host; x += alpha p, r -= alpha q (kernel);
 *   - partial sums of r.r (kernel) read back; beta on the host;
 *   - p = r + beta p (kernel).
 * 5 kernels, up to 2 copies and 2 reads per device and iteration.
 *
 * Check: double precision with contraction off (#pragma OPENCL FP_CONTRACT OFF
 * and ISO C on the host), every operation written in one order, and each dot
 * product summed in fixed chunks of CHUNK elements per device slice, the chunks
 * summed on the host in order: the CPU reference repeats exactly these
 * operations, so x is compared bit-exactly.  The energy 1/2 x.Ax - b.x, which CG
 * lowers at every step, must have fallen below x0's.
 *
 * Environment: APP_SIZE grid order n (default 512; tests: 64), APP_ITERS,
 * APP_REPS, APP_CHECK (all; sample has no effect: every value depends on all).
 */
#include "app.h"

#define CHUNK 256

static const char *kSrc =
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "/* p has a ghost row above and below the slice: row i of the slice is row i + 1. */\n"
    "__kernel void cg_spmv(__global double *q, __global const double *p, int n)\n"
    "{\n"
    "    int j = get_global_id(0), i = get_global_id(1);\n"
    "    __global const double *c = p + (size_t)(i + 1) * n + j;\n"
    "    double s = 4.0 * c[0];\n"
    "    s = s - c[-n];\n"
    "    s = s - c[n];\n"
    "    s = s - (j > 0 ? c[-1] : 0.0);\n"
    "    s = s - (j < n - 1 ? c[1] : 0.0);\n"
    "    q[(size_t)i * n + j] = s;\n"
    "}\n"
    "__kernel void cg_dot(__global double *partial, __global const double *a, int a_off,\n"
    "                  __global const double *b, int len)\n"
    "{\n"
    "    int g = get_global_id(0);\n"
    "    int end = min(len, (g + 1) * CHUNK);\n"
    "    double s = 0.0;\n"
    "    for (int k = g * CHUNK; k < end; k++) {\n"
    "        double t = a[a_off + k] * b[k];\n"
    "        s = s + t;\n"
    "    }\n"
    "    partial[g] = s;\n"
    "}\n"
    "__kernel void cg_step(__global double *x, __global double *r, __global const double *p,\n"
    "                   __global const double *q, int n, double alpha)\n"
    "{\n"
    "    size_t k = get_global_id(0);\n"
    "    double ap = alpha * p[k + n];\n"
    "    double aq = alpha * q[k];\n"
    "    x[k] = x[k] + ap;\n"
    "    r[k] = r[k] - aq;\n"
    "}\n"
    "__kernel void cg_direction(__global double *p, __global const double *r, int n, double beta)\n"
    "{\n"
    "    size_t k = get_global_id(0);\n"
    "    double bp = beta * p[k + n];\n"
    "    p[k + n] = r[k] + bp;\n"
    "}\n";

typedef struct {
    size_t n, ndev, first[CT_MAX_DEVICES], rows[CT_MAX_DEVICES];
} split_t;

/* p.q (or r.r) as the devices compute it: per slice, chunks of CHUNK summed in
 * order, then the chunks' sums in order, slice after slice. */
static double ref_dot(const split_t *s, const double *a, const double *b)
{
    double total = 0.0;
    for (size_t d = 0; d < s->ndev; d++) {
        size_t base = s->first[d] * s->n, len = s->rows[d] * s->n;
        for (size_t c = 0; c < len; c += CHUNK) {
            double part = 0.0;
            for (size_t k = c; k < len && k < c + CHUNK; k++) {
                double t = a[base + k] * b[base + k];
                part = part + t;
            }
            total = total + part;
        }
    }
    return total;
}

/* The whole solve on the CPU, operation for operation. */
static void ref_solve(const split_t *s, const double *b, double *x, int iters, double *rr_out)
{
    size_t n = s->n, nn = n * n;
    double *r = app_malloc(nn * sizeof(double)), *p = app_malloc(nn * sizeof(double));
    double *q = app_malloc(nn * sizeof(double));
    for (size_t k = 0; k < nn; k++) {
        x[k] = 0.0;
        r[k] = b[k];
        p[k] = b[k];
    }
    double rr = ref_dot(s, r, r);
    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                size_t k = i * n + j;
                double v = 4.0 * p[k];
                v = v - (i > 0 ? p[k - n] : 0.0);
                v = v - (i < n - 1 ? p[k + n] : 0.0);
                v = v - (j > 0 ? p[k - 1] : 0.0);
                v = v - (j < n - 1 ? p[k + 1] : 0.0);
                q[k] = v;
            }
        double alpha = rr / ref_dot(s, p, q);
        for (size_t k = 0; k < nn; k++) {
            double ap = alpha * p[k], aq = alpha * q[k];
            x[k] = x[k] + ap;
            r[k] = r[k] - aq;
        }
        double rr_new = ref_dot(s, r, r);
        double beta = rr_new / rr;
        rr = rr_new;
        for (size_t k = 0; k < nn; k++) {
            double bp = beta * p[k];
            p[k] = r[k] + bp;
        }
    }
    *rr_out = rr;
    free(r);
    free(p);
    free(q);
}

typedef struct {
    app_t *app;
    const split_t *s;
    cl_mem x[CT_MAX_DEVICES], r[CT_MAX_DEVICES], p[CT_MAX_DEVICES], q[CT_MAX_DEVICES];
    cl_mem part[CT_MAX_DEVICES];
    size_t nparts[CT_MAX_DEVICES];
    double *host_parts[CT_MAX_DEVICES];
    cl_kernel spmv, dot, step, direction;
} gpu_t;

/* Kernels on device d: q = A p; partial sums of a.b (a from a_off, len elements);
 * x += alpha p, r -= alpha q; p = r + beta p (its event in ev, if not NULL). */
static void enqueue_spmv(gpu_t *g, cl_uint d)
{
    size_t global[2] = {g->s->n, g->s->rows[d]};
    MUST(clSetKernelArg(g->spmv, 0, sizeof(cl_mem), &g->q[d]));
    MUST(clSetKernelArg(g->spmv, 1, sizeof(cl_mem), &g->p[d]));
    MUST(clEnqueueNDRangeKernel(g->app->q[d], g->spmv, 2, NULL, global, NULL, 0, NULL, NULL));
}

static void enqueue_dot(gpu_t *g, cl_uint d, cl_mem a, int a_off, cl_mem b, int len)
{
    size_t global = g->nparts[d];
    MUST(clSetKernelArg(g->dot, 0, sizeof(cl_mem), &g->part[d]));
    MUST(clSetKernelArg(g->dot, 1, sizeof(cl_mem), &a));
    MUST(clSetKernelArg(g->dot, 2, sizeof a_off, &a_off));
    MUST(clSetKernelArg(g->dot, 3, sizeof(cl_mem), &b));
    MUST(clSetKernelArg(g->dot, 4, sizeof len, &len));
    MUST(clEnqueueNDRangeKernel(g->app->q[d], g->dot, 1, NULL, &global, NULL, 0, NULL, NULL));
}

static void enqueue_step(gpu_t *g, cl_uint d, double alpha)
{
    size_t global = g->s->rows[d] * g->s->n;
    MUST(clSetKernelArg(g->step, 0, sizeof(cl_mem), &g->x[d]));
    MUST(clSetKernelArg(g->step, 1, sizeof(cl_mem), &g->r[d]));
    MUST(clSetKernelArg(g->step, 2, sizeof(cl_mem), &g->p[d]));
    MUST(clSetKernelArg(g->step, 3, sizeof(cl_mem), &g->q[d]));
    MUST(clSetKernelArg(g->step, 5, sizeof alpha, &alpha));
    MUST(clEnqueueNDRangeKernel(g->app->q[d], g->step, 1, NULL, &global, NULL, 0, NULL, NULL));
}

static void enqueue_direction(gpu_t *g, cl_uint d, double beta, cl_event *ev)
{
    size_t global = g->s->rows[d] * g->s->n;
    MUST(clSetKernelArg(g->direction, 0, sizeof(cl_mem), &g->p[d]));
    MUST(clSetKernelArg(g->direction, 1, sizeof(cl_mem), &g->r[d]));
    MUST(clSetKernelArg(g->direction, 3, sizeof beta, &beta));
    MUST(clEnqueueNDRangeKernel(g->app->q[d], g->direction, 1, NULL, &global, NULL, 0, NULL, ev));
}

/* a.b over every device (a_off: a's first element of the slice), summed as
 * ref_dot does. */
static double device_dot(gpu_t *g, cl_mem *a, int a_off, cl_mem *b)
{
    const split_t *s = g->s;
    for (cl_uint d = 0; d < s->ndev; d++) {
        enqueue_dot(g, d, a[d], a_off, b[d], (int)(s->rows[d] * s->n));
        MUST(clEnqueueReadBuffer(g->app->q[d], g->part[d], CL_FALSE, 0, g->nparts[d] * sizeof(double),
                                 g->host_parts[d], 0, NULL, NULL));
    }
    app_finish_all(g->app);
    double total = 0.0;
    for (size_t d = 0; d < s->ndev; d++)
        for (size_t c = 0; c < g->nparts[d]; c++)
            total = total + g->host_parts[d][c];
    return total;
}

/* Ghost rows of p from the neighbours, on the receiving device's queue, after
 * the neighbour's last update of p (its event). */
static void exchange_ghosts(gpu_t *g, cl_event *updated)
{
    const split_t *s = g->s;
    size_t row = s->n * sizeof(double);
    for (size_t d = 0; d + 1 < s->ndev; d++) {
        /* d's last row into d+1's top ghost; d+1's first row into d's bottom ghost. */
        MUST(clEnqueueCopyBuffer(g->app->q[d + 1], g->p[d], g->p[d + 1], s->rows[d] * row, 0, row,
                                 updated[d] ? 1 : 0, updated[d] ? &updated[d] : NULL, NULL));
        MUST(clEnqueueCopyBuffer(g->app->q[d], g->p[d + 1], g->p[d], row, (s->rows[d] + 1) * row, row,
                                 updated[d + 1] ? 1 : 0, updated[d + 1] ? &updated[d + 1] : NULL, NULL));
    }
}

int main(void)
{
    app_t app;
    app_init(&app, "cg");
    size_t n = (size_t)app_env_ull("APP_SIZE", 512);
    int iters = (int)app_env_ull("APP_ITERS", 100);
    if (n < 4 || n > 8192)
        ct_die("APP_SIZE (grid order) must be between 4 and 8192");
    app_sample_not_applicable(&app, "every value depends on all");
    split_t s = {.n = n, .ndev = app.ndev};
    if (s.ndev > n)
        ct_die("more devices than grid rows");
    printf("  %zu x %zu grid, %d iterations\n", n, n, iters);
    size_t nn = n * n;
    double *b = app_malloc(nn * sizeof(double)), *x = app_malloc(nn * sizeof(double));
    double *xref = app_malloc(nn * sizeof(double));
    for (size_t k = 0; k < nn; k++)
        b[k] = (double)(app_mix64(77 * 0x100000001b3ull + k) % 1024) / 1024.0;

    char opts[64];
    snprintf(opts, sizeof opts, "-DCHUNK=%d", CHUNK);
    cl_program prog = ct_build(app.ctx, kSrc, opts);
    gpu_t g = {.app = &app, .s = &s};
    g.spmv = ct_kernel(prog, "cg_spmv");
    g.dot = ct_kernel(prog, "cg_dot");
    g.step = ct_kernel(prog, "cg_step");
    g.direction = ct_kernel(prog, "cg_direction");
    size_t row = n * sizeof(double);
    double zero = 0.0;
    for (cl_uint d = 0; d < app.ndev; d++) {
        app_split(n, app.ndev, d, &s.first[d], &s.rows[d]);
        size_t len = s.rows[d] * n;
        g.x[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, len * sizeof(double));
        g.r[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, len * sizeof(double));
        g.q[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, len * sizeof(double));
        g.p[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, (s.rows[d] + 2) * row);
        g.nparts[d] = (len + CHUNK - 1) / CHUNK;
        g.part[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, g.nparts[d] * sizeof(double));
        g.host_parts[d] = app_malloc(g.nparts[d] * sizeof(double));
    }
    int in = (int)n;
    MUST(clSetKernelArg(g.spmv, 2, sizeof in, &in));
    MUST(clSetKernelArg(g.step, 4, sizeof in, &in));
    MUST(clSetKernelArg(g.direction, 2, sizeof in, &in));

    if (app.warmup) {
        /* Each kernel once per device with its timed NDRange, on buffers the timed
         * phase sets again before reading: alpha = beta = 0, dot products of nothing. */
        for (cl_uint d = 0; d < app.ndev; d++) {
            size_t len = s.rows[d] * n;
            MUST(clEnqueueFillBuffer(app.q[d], g.p[d], &zero, sizeof zero, 0, (s.rows[d] + 2) * row, 0, NULL, NULL));
            MUST(clEnqueueFillBuffer(app.q[d], g.x[d], &zero, sizeof zero, 0, len * sizeof(double), 0, NULL, NULL));
            MUST(clEnqueueFillBuffer(app.q[d], g.r[d], &zero, sizeof zero, 0, len * sizeof(double), 0, NULL, NULL));
            enqueue_spmv(&g, d);
            enqueue_dot(&g, d, g.r[d], 0, g.r[d], 0);
            enqueue_step(&g, d, 0.0);
            enqueue_direction(&g, d, 0.0, NULL);
        }
        app_finish_all(&app);
    }

    app_times_t t, best = {0};
    double rr0 = 0.0, rr = 0.0;
    for (int rep = 0; rep < app.reps; rep++) {
        app_t_begin(&t);
        app_t_mark(&t);
        /* x = 0, r = p = b; the ghost rows at the grid's edges stay 0. */
        for (cl_uint d = 0; d < app.ndev; d++) {
            size_t len = s.rows[d] * n;
            const double *bd = b + s.first[d] * n;
            MUST(clEnqueueFillBuffer(app.q[d], g.x[d], &zero, sizeof zero, 0, len * sizeof(double), 0, NULL, NULL));
            MUST(clEnqueueFillBuffer(app.q[d], g.p[d], &zero, sizeof zero, 0, (s.rows[d] + 2) * row, 0, NULL, NULL));
            MUST(clEnqueueWriteBuffer(app.q[d], g.r[d], CL_FALSE, 0, len * sizeof(double), bd, 0, NULL, NULL));
            MUST(clEnqueueWriteBuffer(app.q[d], g.p[d], CL_FALSE, row, len * sizeof(double), bd, 0, NULL, NULL));
        }
        app_finish_all(&app);
        app_t_transfer(&t);

        app_t_mark(&t);
        cl_event updated[CT_MAX_DEVICES] = {0};
        rr = device_dot(&g, g.r, 0, g.r);
        rr0 = rr;
        for (int it = 0; it < iters; it++) {
            exchange_ghosts(&g, updated);
            for (cl_uint d = 0; d < app.ndev; d++) {
                if (updated[d])
                    MUST(clReleaseEvent(updated[d]));
                updated[d] = NULL;
                enqueue_spmv(&g, d);
            }
            double alpha = rr / device_dot(&g, g.p, in, g.q);
            for (cl_uint d = 0; d < app.ndev; d++)
                enqueue_step(&g, d, alpha);
            double rr_new = device_dot(&g, g.r, 0, g.r);
            double beta = rr_new / rr;
            rr = rr_new;
            for (cl_uint d = 0; d < app.ndev; d++)
                enqueue_direction(&g, d, beta, &updated[d]);
        }
        app_finish_all(&app);
        for (cl_uint d = 0; d < app.ndev; d++)
            if (updated[d])
                MUST(clReleaseEvent(updated[d]));
        app_t_kernel(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < app.ndev; d++)
            MUST(clEnqueueReadBuffer(app.q[d], g.x[d], CL_FALSE, 0, s.rows[d] * row, x + s.first[d] * n, 0, NULL,
                                     NULL));
        app_finish_all(&app);
        app_t_transfer(&t);
        app_t_end(&t);
        app_t_keep_best(&best, &t, rep);
    }

    double rr_ref = 0.0;
    ref_solve(&s, b, xref, iters, &rr_ref);
    if (CHECK_MEM(x, xref, nn, sizeof(double), "x after the iterations"))
        printf("  check x: %zu values bit-exact\n", nn);
    CHECK_TRUE(rr == rr_ref, "r.r %.17g on the devices, %.17g on the CPU", rr, rr_ref);
    /* CG lowers the energy 1/2 x.Ax - b.x (0 at x0 = 0) at every step, though not
     * always the residual. */
    double energy = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            size_t k = i * n + j;
            double ax = 4.0 * x[k] - (i > 0 ? x[k - n] : 0.0) - (i < n - 1 ? x[k + n] : 0.0) -
                        (j > 0 ? x[k - 1] : 0.0) - (j < n - 1 ? x[k + 1] : 0.0);
            energy += 0.5 * x[k] * ax - b[k] * x[k];
        }
    CHECK_TRUE(iters == 0 || energy < 0.0, "the energy fell below 0 (x0's): %.6g", energy);
    printf("  r.r %.3e -> %.3e after %d iterations\n", rr0, rr, iters);
    app_report(&app, n, &best);

    for (cl_uint d = 0; d < app.ndev; d++) {
        MUST(clReleaseMemObject(g.x[d]));
        MUST(clReleaseMemObject(g.r[d]));
        MUST(clReleaseMemObject(g.p[d]));
        MUST(clReleaseMemObject(g.q[d]));
        MUST(clReleaseMemObject(g.part[d]));
        free(g.host_parts[d]);
    }
    MUST(clReleaseKernel(g.spmv));
    MUST(clReleaseKernel(g.dot));
    MUST(clReleaseKernel(g.step));
    MUST(clReleaseKernel(g.direction));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    free(b);
    free(x);
    free(xref);
    return ct_finish();
}
