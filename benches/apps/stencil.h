/*
 * stencil.h - what the stencil application (stencil.c) and its hand-written MPI +
 * OpenCL twin (benches/micro/stencil_mpi.c) share: the grid, its row split, the
 * kernel, the initial values and the CPU reference, so that both compute the same
 * thing and are checked the same way.
 *
 * Jacobi iteration of Laplace's equation on an n x n float grid with fixed
 * boundaries: every step, every interior point becomes the average of its four
 * neighbours of the previous step; the outer rows and columns keep their values.
 * The rows are split in blocks over the devices (app_split); a device's buffer holds
 * its block with one ghost row above and one below ((rows + 2) x n floats, local row
 * i + 1 is global row first + i); the ghost rows are the neighbours' boundary rows,
 * exchanged after every step.  Two buffers per device, swapped every step.
 *
 * Bit-exact check: the sum is written in one order, contraction is off on the
 * device (FP_CONTRACT OFF, no fast-math options) and on the host (ISO C), the
 * division by 4 is an exact multiplication, and the values stay in [1, 2) (no
 * denormals): the CPU reference repeats the very same float operations.
 */
#ifndef MIRRORCL_BENCH_STENCIL_H
#define MIRRORCL_BENCH_STENCIL_H

#include "app.h"

#define STENCIL_SEED 0x57e4c11ull

static const char *kStencilSrc =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "/* One step on a block of rows: in and out have a ghost row above and below the\n"
    " * block, local row i + 1 is global row first + i. */\n"
    "__kernel void stencil_step(__global float *out, __global const float *in, int n, int first)\n"
    "{\n"
    "    int j = get_global_id(0), i = get_global_id(1) + 1, g = first + i - 1;\n"
    "    size_t k = (size_t)i * n + j;\n"
    "    float v;\n"
    "    if (g == 0 || g == n - 1 || j == 0 || j == n - 1) {\n"
    "        v = in[k];\n"
    "    } else {\n"
    "        float s = in[k - n] + in[k + n];\n"
    "        s = s + in[k - 1];\n"
    "        s = s + in[k + 1];\n"
    "        v = s * 0.25f;\n"
    "    }\n"
    "    out[k] = v;\n"
    "}\n";

/* The initial value of global point (i, j): in [1, 2). */
APP_FN float stencil_initial(size_t n, size_t i, size_t j) { return 1.0f + app_unif(STENCIL_SEED, i * n + j); }

/* The initial contents of a device's buffer for rows [first, first + rows): the block
 * and its ghost rows (0 where they fall outside the grid). */
APP_FN void stencil_block(size_t n, size_t first, size_t rows, float *buf)
{
    for (size_t li = 0; li < rows + 2; li++) {
        size_t g = first + li; /* global row + 1 */
        for (size_t j = 0; j < n; j++)
            buf[li * n + j] = (g >= 1 && g <= n) ? stencil_initial(n, g - 1, j) : 0.0f;
    }
}

typedef struct {
    size_t n;
    const float *in;
    float *out;
} stencil_ref_t;

static void stencil_ref_rows(void *ctx, size_t begin, size_t end)
{
    const stencil_ref_t *r = (const stencil_ref_t *)ctx;
    size_t n = r->n;
    for (size_t i = begin; i < end; i++)
        for (size_t j = 0; j < n; j++) {
            size_t k = i * n + j;
            float v;
            if (i == 0 || i == n - 1 || j == 0 || j == n - 1) {
                v = r->in[k];
            } else {
                float s = r->in[k - n] + r->in[k + n];
                s = s + r->in[k - 1];
                s = s + r->in[k + 1];
                v = s * 0.25f;
            }
            r->out[k] = v;
        }
}

/* The whole grid after `steps` steps, on the CPU, in grid (n x n). */
APP_FN void stencil_reference(size_t n, int steps, float *grid)
{
    float *a = grid, *b = (float *)app_malloc(n * n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            a[i * n + j] = stencil_initial(n, i, j);
    for (int s = 0; s < steps; s++) {
        stencil_ref_t r = {n, a, b};
        app_parallel_for(n, stencil_ref_rows, &r);
        float *t = a;
        a = b;
        b = t;
    }
    if (a != grid) {
        memcpy(grid, a, n * n * sizeof(float));
        b = a;
    }
    free(b);
}

/* APP_SIZE (grid side) and APP_STEPS, checked. */
APP_FN void stencil_params(size_t *n, int *steps)
{
    *n = (size_t)app_env_ull("APP_SIZE", 1024);
    *steps = (int)app_env_ull("APP_STEPS", 100);
    if (*n < 3 || *n > 65536)
        ct_die("APP_SIZE (grid side) must be between 3 and 65536");
}

/* The per-step line the benchmark harness reads (rank 0's). */
APP_FN void stencil_report_step(const char *name, unsigned parts, size_t n, int steps, double seconds)
{
    printf("STEP app=%s devices=%u size=%zu steps=%d step_us=%.3f\n", name, parts, n, steps,
           steps > 0 ? seconds / steps * 1e6 : 0.0);
}

#endif
