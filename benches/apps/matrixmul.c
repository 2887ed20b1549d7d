/*
 * matrixmul.c - NVIDIA OpenCL SDK MatrixMul (oclMatrixMul) as a multi-device
 * OpenCL application (SnuCL-D thesis, Table IV.5: "MatrixMul, NVIDIA, 16K x 16K").
 *
 * C = A * B for N x N float matrices with the SDK's tiled kernel (BLOCK_SIZE 16
 * tiles of A and B in local memory).  The rows of C (and of A) are split into
 * slices of whole 16-row blocks, one per device; B is replicated: every device
 * gets its own A slice, its own full copy of B and its own C slice, all attached
 * to it.  Per device and repetition: 2 writes, 1 kernel, 1 read (the 4 commands
 * per device of Table IV.7).
 *
 * Check: the elements of A and B are multiples of 1/16 in [-1, 1], so every
 * product is a multiple of 1/256 of magnitude <= 1 and every partial sum a
 * multiple of 1/256 of magnitude <= N < 65536: exactly representable in float.
 * The result is therefore exact whatever the summation order or fma contraction,
 * and C is compared bit-exactly with the CPU reference.  APP_CHECK=sample
 * (app.h): the reference computes only a sample of the elements C[i][j], each as
 * the dot product of row i of A and column j of B (exact too, so still compared
 * bit-exactly).
 *
 * Environment: APP_SIZE matrix order N (multiple of 16, < 65536; default 1280;
 * tests: 256), APP_REPS, APP_CHECK.
 */
#include "app.h"

#define BLOCK_SIZE 16

static const char *kSrc =
    "#define BLOCK_SIZE 16\n"
    "#define AS(i, j) As[j + i * BLOCK_SIZE]\n"
    "#define BS(i, j) Bs[j + i * BLOCK_SIZE]\n"
    "__kernel void matrixMul(__global float *C, __global const float *A, __global const float *B,\n"
    "                        __local float *As, __local float *Bs, int uiWA, int uiWB,\n"
    "                        int trueLocalSize1)\n"
    "{\n"
    "    int bx = get_group_id(0);\n"
    "    int by = get_group_id(1);\n"
    "    int tx = get_local_id(0);\n"
    "    int ty = get_local_id(1);\n"
    "    int aBegin = uiWA * BLOCK_SIZE * by;\n"
    "    int aEnd = aBegin + uiWA - 1;\n"
    "    int aStep = BLOCK_SIZE;\n"
    "    int bBegin = BLOCK_SIZE * bx;\n"
    "    int bStep = BLOCK_SIZE * uiWB;\n"
    "    float Csub = 0.0f;\n"
    "    for (int a = aBegin, b = bBegin; a <= aEnd; a += aStep, b += bStep) {\n"
    "        AS(ty, tx) = A[a + uiWA * ty + tx];\n"
    "        BS(ty, tx) = B[b + uiWB * ty + tx];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (int k = 0; k < BLOCK_SIZE; ++k)\n"
    "            Csub += AS(ty, k) * BS(k, tx);\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (get_global_id(1) < trueLocalSize1)\n"
    "        C[get_global_id(1) * get_global_size(0) + get_global_id(0)] = Csub;\n"
    "}\n";

typedef struct {
    const float *A, *B;
    float *C;
    size_t n;
} ref_ctx_t;

/* Rows [b, e) of C = A * B (i-k-j order; exact, so the order does not matter). */
static void ref_range(void *p, size_t b, size_t e)
{
    ref_ctx_t *c = (ref_ctx_t *)p;
    size_t n = c->n;
    for (size_t i = b; i < e; i++) {
        float *ci = c->C + i * n;
        for (size_t j = 0; j < n; j++)
            ci[j] = 0.0f;
        for (size_t k = 0; k < n; k++) {
            float a = c->A[i * n + k];
            const float *bk = c->B + k * n;
            for (size_t j = 0; j < n; j++)
                ci[j] += a * bk[j];
        }
    }
}

typedef struct {
    const float *A, *B;
    float *R; /* per checked element */
    size_t n;
    const app_sample_t *smp;
} ref_sample_ctx_t;

/* Checked elements [b, e) of the sample (APP_CHECK=sample): C[i][j] = row i of A
 * times column j of B, exact like every other order of the sum. */
static void ref_sample_range(void *p, size_t b, size_t e)
{
    ref_sample_ctx_t *c = (ref_sample_ctx_t *)p;
    size_t n = c->n;
    for (size_t s = b; s < e; s++) {
        size_t idx = app_sample_at(c->smp, s), i = idx / n, j = idx % n;
        const float *ai = c->A + i * n;
        float acc = 0.0f;
        for (size_t k = 0; k < n; k++)
            acc += ai[k] * c->B[k * n + j];
        c->R[s] = acc;
    }
}

int main(void)
{
    app_t app;
    app_init(&app, "matrixmul");
    size_t n = (size_t)app_env_ull("APP_SIZE", 1280);
    if (n == 0 || n % BLOCK_SIZE || n >= 65536)
        ct_die("APP_SIZE (matrix order) must be a positive multiple of 16 below 65536");
    cl_uint ndev = app.ndev;
    printf("  %zu x %zu matrices\n", n, n);

    size_t nn = n * n;
    float *A = app_malloc(nn * sizeof(float)), *B = app_malloc(nn * sizeof(float));
    float *C = app_malloc(nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) {
        A[i] = (float)((int)(app_mix64(41 * 0x100000001b3ull + i) % 33) - 16) / 16.0f;
        B[i] = (float)((int)(app_mix64(42 * 0x100000001b3ull + i) % 33) - 16) / 16.0f;
    }

    cl_program prog = ct_build(app.ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "matrixMul");
    if (app_min_kernel_wg(&app, k) < BLOCK_SIZE * BLOCK_SIZE)
        ct_die("a device does not run work-groups of 16 x 16 work-items");
    size_t local[2] = {BLOCK_SIZE, BLOCK_SIZE};

    size_t first[CT_MAX_DEVICES], rows[CT_MAX_DEVICES];
    cl_mem bA[CT_MAX_DEVICES], bB[CT_MAX_DEVICES], bC[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        app_split(n / BLOCK_SIZE, ndev, d, &first[d], &rows[d]);
        first[d] *= BLOCK_SIZE;
        rows[d] *= BLOCK_SIZE;
        bA[d] = app_buffer(&app, d, CL_MEM_READ_ONLY, rows[d] * n * sizeof(float));
        bB[d] = app_buffer(&app, d, CL_MEM_READ_ONLY, nn * sizeof(float));
        bC[d] = app_buffer(&app, d, CL_MEM_WRITE_ONLY, rows[d] * n * sizeof(float));
    }
    int wa = (int)n, wb = (int)n;
    MUST(clSetKernelArg(k, 3, BLOCK_SIZE * BLOCK_SIZE * sizeof(float), NULL));
    MUST(clSetKernelArg(k, 4, BLOCK_SIZE * BLOCK_SIZE * sizeof(float), NULL));
    MUST(clSetKernelArg(k, 6, sizeof wb, &wb));
    if (app.warmup) {
        int zero = 0; /* uiWA = 0: no tiles, C = 0 */
        MUST(clSetKernelArg(k, 5, sizeof zero, &zero));
        for (cl_uint d = 0; d < ndev; d++) {
            int tl = (int)rows[d];
            size_t g[2] = {n, rows[d]};
            MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &bC[d]));
            MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &bA[d]));
            MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &bB[d]));
            MUST(clSetKernelArg(k, 7, sizeof tl, &tl));
            MUST(clEnqueueNDRangeKernel(app.q[d], k, 2, NULL, g, local, 0, NULL, NULL));
        }
        app_finish_all(&app);
    }
    MUST(clSetKernelArg(k, 5, sizeof wa, &wa));

    app_times_t t, best = {0};
    for (int rep = 0; rep < app.reps; rep++) {
        for (size_t i = 0; i < nn; i++)
            C[i] = NAN;
        app_t_begin(&t);
        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clEnqueueWriteBuffer(app.q[d], bA[d], CL_FALSE, 0, rows[d] * n * sizeof(float), A + first[d] * n, 0,
                                      NULL, NULL));
            MUST(clEnqueueWriteBuffer(app.q[d], bB[d], CL_FALSE, 0, nn * sizeof(float), B, 0, NULL, NULL));
        }
        app_finish_all(&app);
        app_t_transfer(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            int tl = (int)rows[d];
            size_t g[2] = {n, rows[d]};
            MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &bC[d]));
            MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &bA[d]));
            MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &bB[d]));
            MUST(clSetKernelArg(k, 7, sizeof tl, &tl));
            MUST(clEnqueueNDRangeKernel(app.q[d], k, 2, NULL, g, local, 0, NULL, NULL));
        }
        app_finish_all(&app);
        app_t_kernel(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++)
            MUST(clEnqueueReadBuffer(app.q[d], bC[d], CL_FALSE, 0, rows[d] * n * sizeof(float), C + first[d] * n, 0,
                                     NULL, NULL));
        app_finish_all(&app);
        app_t_transfer(&t);
        app_t_end(&t);
        app_t_keep_best(&best, &t, rep);
    }

    /* The devices' slices in elements of C (the split is in rows). */
    size_t efirst[CT_MAX_DEVICES], ecnt[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        efirst[d] = first[d] * n;
        ecnt[d] = rows[d] * n;
    }
    app_sample_t smp;
    app_sample_init(&smp, &app, nn, ndev, efirst, ecnt);
    float *R = app_malloc(smp.count * sizeof(float));
    if (smp.idx) {
        ref_sample_ctx_t sc = {A, B, R, n, &smp};
        app_parallel_for(smp.count, ref_sample_range, &sc);
        if (APP_CHECK_MEM_SAMPLE(C, R, sizeof(float), &smp, "C = A * B"))
            printf("  check C = A * B: %zu of %zu values (sampled) bit-exact\n", smp.count, nn);
    } else {
        ref_ctx_t rc = {A, B, R, n};
        app_parallel_for(n, ref_range, &rc);
        if (CHECK_MEM(C, R, nn, sizeof(float), "C = A * B"))
            printf("  check C = A * B: %zu values bit-exact\n", nn);
    }
    app_sample_free(&smp);
    app_report(&app, n, &best);

    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clReleaseMemObject(bA[d]));
        MUST(clReleaseMemObject(bB[d]));
        MUST(clReleaseMemObject(bC[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    free(A);
    free(B);
    free(C);
    free(R);
    return ct_finish();
}
