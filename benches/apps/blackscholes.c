/*
 * blackscholes.c - PARSEC blackscholes as a multi-device OpenCL application
 * (SnuCL-D thesis, Table IV.5: "blackscholes, PARSEC, 64M/128M options").
 *
 * N European options (spot, strike, rate, volatility, time, call/put) are split
 * into contiguous slices, one per device; every device gets its own six input
 * buffers and its own price buffer (attached to it).  As in PARSEC, the whole
 * pricing is repeated NUM_RUNS times (one kernel launch per run and device), so a
 * device executes 6 writes + NUM_RUNS kernels + 1 read per repetition (the 107
 * commands per device of Table IV.7 with NUM_RUNS = 100).
 *
 * Float throughout (PARSEC's single-precision build).  The CPU reference runs the
 * same formula (CNDF polynomial approximation) with expf/logf/sqrtf; the device
 * may use other correctly-bounded exp/log/sqrt and contract into fma, so prices
 * are compared with |got - ref| <= 1e-4 * max(|ref|, 0.01 * spot): the price is a
 * difference of two terms of the order of the spot price, so its absolute error
 * scales with the spot, not with the (possibly tiny) price.
 *
 * APP_CHECK=sample: the reference prices only a sample of the options (app.h).
 *
 * Environment: APP_SIZE options (default 256K; tests: 16K), BS_RUNS (default 100),
 * APP_REPS, APP_CHECK.
 */
#include "app.h"

static const char *kSrc =
    "#define inv_sqrt_2xPI 0.39894228040143270286f\n"
    "float CNDF(float InputX)\n"
    "{\n"
    "    int sign;\n"
    "    float OutputX, xInput, xNPrimeofX, expValues, xK2, xK2_2, xK2_3, xK2_4, xK2_5;\n"
    "    float xLocal, xLocal_1, xLocal_2, xLocal_3;\n"
    "    if (InputX < 0.0f) { InputX = -InputX; sign = 1; } else sign = 0;\n"
    "    xInput = InputX;\n"
    "    expValues = exp(-0.5f * InputX * InputX);\n"
    "    xNPrimeofX = expValues * inv_sqrt_2xPI;\n"
    "    xK2 = 0.2316419f * xInput;\n"
    "    xK2 = 1.0f + xK2;\n"
    "    xK2 = 1.0f / xK2;\n"
    "    xK2_2 = xK2 * xK2; xK2_3 = xK2_2 * xK2; xK2_4 = xK2_3 * xK2; xK2_5 = xK2_4 * xK2;\n"
    "    xLocal_1 = xK2 * 0.319381530f;\n"
    "    xLocal_2 = xK2_2 * (-0.356563782f);\n"
    "    xLocal_3 = xK2_3 * 1.781477937f;\n"
    "    xLocal_2 = xLocal_2 + xLocal_3;\n"
    "    xLocal_3 = xK2_4 * (-1.821255978f);\n"
    "    xLocal_2 = xLocal_2 + xLocal_3;\n"
    "    xLocal_3 = xK2_5 * 1.330274429f;\n"
    "    xLocal_2 = xLocal_2 + xLocal_3;\n"
    "    xLocal_1 = xLocal_2 + xLocal_1;\n"
    "    xLocal = xLocal_1 * xNPrimeofX;\n"
    "    xLocal = 1.0f - xLocal;\n"
    "    OutputX = xLocal;\n"
    "    if (sign) OutputX = 1.0f - OutputX;\n"
    "    return OutputX;\n"
    "}\n"
    "float BlkSchlsEqEuroNoDiv(float sptprice, float strike, float rate, float volatility,\n"
    "                          float time, int otype)\n"
    "{\n"
    "    float xSqrtTime = sqrt(time);\n"
    "    float xLogTerm = log(sptprice / strike);\n"
    "    float xPowerTerm = volatility * volatility;\n"
    "    xPowerTerm = xPowerTerm * 0.5f;\n"
    "    float xD1 = rate + xPowerTerm;\n"
    "    xD1 = xD1 * time;\n"
    "    xD1 = xD1 + xLogTerm;\n"
    "    float xDen = volatility * xSqrtTime;\n"
    "    xD1 = xD1 / xDen;\n"
    "    float xD2 = xD1 - xDen;\n"
    "    float NofXd1 = CNDF(xD1);\n"
    "    float NofXd2 = CNDF(xD2);\n"
    "    float FutureValueX = strike * exp(-(rate) * (time));\n"
    "    float OptionPrice;\n"
    "    if (otype == 0) {\n"
    "        OptionPrice = (sptprice * NofXd1) - (FutureValueX * NofXd2);\n"
    "    } else {\n"
    "        float NegNofXd1 = 1.0f - NofXd1;\n"
    "        float NegNofXd2 = 1.0f - NofXd2;\n"
    "        OptionPrice = (FutureValueX * NegNofXd2) - (sptprice * NegNofXd1);\n"
    "    }\n"
    "    return OptionPrice;\n"
    "}\n"
    "__kernel void bs_thread(__global const float *sptprice, __global const float *strike,\n"
    "                        __global const float *rate, __global const float *volatility,\n"
    "                        __global const float *otime, __global const int *otype,\n"
    "                        __global float *prices, uint n)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    if (i < n)\n"
    "        prices[i] = BlkSchlsEqEuroNoDiv(sptprice[i], strike[i], rate[i], volatility[i],\n"
    "                                        otime[i], otype[i]);\n"
    "}\n";

#define WG 64

/* ---- CPU reference: the same formula in C ---- */
static float cndf(float InputX)
{
    int sign;
    float OutputX, xInput, xNPrimeofX, expValues, xK2, xK2_2, xK2_3, xK2_4, xK2_5;
    float xLocal, xLocal_1, xLocal_2, xLocal_3;
    if (InputX < 0.0f) {
        InputX = -InputX;
        sign = 1;
    } else
        sign = 0;
    xInput = InputX;
    expValues = expf(-0.5f * InputX * InputX);
    xNPrimeofX = expValues * 0.39894228040143270286f;
    xK2 = 0.2316419f * xInput;
    xK2 = 1.0f + xK2;
    xK2 = 1.0f / xK2;
    xK2_2 = xK2 * xK2;
    xK2_3 = xK2_2 * xK2;
    xK2_4 = xK2_3 * xK2;
    xK2_5 = xK2_4 * xK2;
    xLocal_1 = xK2 * 0.319381530f;
    xLocal_2 = xK2_2 * (-0.356563782f);
    xLocal_3 = xK2_3 * 1.781477937f;
    xLocal_2 = xLocal_2 + xLocal_3;
    xLocal_3 = xK2_4 * (-1.821255978f);
    xLocal_2 = xLocal_2 + xLocal_3;
    xLocal_3 = xK2_5 * 1.330274429f;
    xLocal_2 = xLocal_2 + xLocal_3;
    xLocal_1 = xLocal_2 + xLocal_1;
    xLocal = xLocal_1 * xNPrimeofX;
    xLocal = 1.0f - xLocal;
    OutputX = xLocal;
    if (sign)
        OutputX = 1.0f - OutputX;
    return OutputX;
}

static float bs_ref(float sptprice, float strike, float rate, float volatility, float time, int otype)
{
    float xSqrtTime = sqrtf(time);
    float xLogTerm = logf(sptprice / strike);
    float xPowerTerm = volatility * volatility * 0.5f;
    float xD1 = (rate + xPowerTerm) * time + xLogTerm;
    float xDen = volatility * xSqrtTime;
    xD1 = xD1 / xDen;
    float xD2 = xD1 - xDen;
    float NofXd1 = cndf(xD1), NofXd2 = cndf(xD2);
    float FutureValueX = strike * expf(-(rate) * (time));
    if (otype == 0)
        return (sptprice * NofXd1) - (FutureValueX * NofXd2);
    return (FutureValueX * (1.0f - NofXd2)) - (sptprice * (1.0f - NofXd1));
}

typedef struct {
    const float *s, *k, *r, *v, *t;
    const int *o;
    const app_sample_t *smp;
    float *out, *mag; /* per checked option */
} ref_ctx_t;

/* Checked options [b, e) (all options under APP_CHECK=all). */
static void ref_range(void *p, size_t b, size_t e)
{
    ref_ctx_t *c = (ref_ctx_t *)p;
    for (size_t k = b; k < e; k++) {
        size_t i = app_sample_at(c->smp, k);
        c->out[k] = bs_ref(c->s[i], c->k[i], c->r[i], c->v[i], c->t[i], c->o[i]);
        c->mag[k] = 0.01f * c->s[i];
    }
}

int main(void)
{
    app_t app;
    app_init(&app, "blackscholes");
    size_t n = (size_t)app_env_ull("APP_SIZE", 256u << 10);
    unsigned runs = (unsigned)app_env_ull("BS_RUNS", 100);
    if (runs < 1)
        runs = 1;
    printf("  %zu options, %u runs per repetition\n", n, runs);
    cl_uint ndev = app.ndev;

    /* Inputs: PARSEC-like ranges. */
    float *in[5];
    for (int a = 0; a < 5; a++)
        in[a] = app_malloc(n * sizeof(float));
    int *otype = app_malloc(n * sizeof(int));
    float *prices = app_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        in[0][i] = 10.0f + 90.0f * app_unif(1, i);     /* spot */
        in[1][i] = 10.0f + 90.0f * app_unif(2, i);     /* strike */
        in[2][i] = 0.01f + 0.09f * app_unif(3, i);     /* risk-free rate */
        in[3][i] = 0.05f + 0.60f * app_unif(4, i);     /* volatility */
        in[4][i] = 0.25f + 9.75f * app_unif(5, i);     /* years */
        otype[i] = app_unif(6, i) < 0.5f ? 0 : 1;      /* call / put */
    }

    cl_program prog = ct_build(app.ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "bs_thread");
    if (app_min_kernel_wg(&app, k) < WG)
        ct_die("a device does not run work-groups of 64 work-items");

    size_t first[CT_MAX_DEVICES], cnt[CT_MAX_DEVICES];
    cl_mem b[CT_MAX_DEVICES][7];
    for (cl_uint d = 0; d < ndev; d++) {
        app_split(n, ndev, d, &first[d], &cnt[d]);
        for (int a = 0; a < 5; a++)
            b[d][a] = app_buffer(&app, d, CL_MEM_READ_ONLY, cnt[d] * sizeof(float));
        b[d][5] = app_buffer(&app, d, CL_MEM_READ_ONLY, cnt[d] * sizeof(int));
        b[d][6] = app_buffer(&app, d, CL_MEM_WRITE_ONLY, cnt[d] * sizeof(float));
    }
    if (app.warmup) {
        cl_uint zero = 0;
        for (cl_uint d = 0; d < ndev; d++) {
            size_t g = (cnt[d] + WG - 1) / WG * WG, l = WG;
            for (cl_uint a = 0; a < 7; a++)
                MUST(clSetKernelArg(k, a, sizeof(cl_mem), &b[d][a]));
            MUST(clSetKernelArg(k, 7, sizeof zero, &zero));
            MUST(clEnqueueNDRangeKernel(app.q[d], k, 1, NULL, &g, &l, 0, NULL, NULL));
        }
        app_finish_all(&app);
    }

    app_times_t t, best = {0};
    for (int rep = 0; rep < app.reps; rep++) {
        for (size_t i = 0; i < n; i++)
            prices[i] = NAN;
        app_t_begin(&t);
        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            for (int a = 0; a < 5; a++)
                MUST(clEnqueueWriteBuffer(app.q[d], b[d][a], CL_FALSE, 0, cnt[d] * sizeof(float),
                                          in[a] + first[d], 0, NULL, NULL));
            MUST(clEnqueueWriteBuffer(app.q[d], b[d][5], CL_FALSE, 0, cnt[d] * sizeof(int), otype + first[d], 0,
                                      NULL, NULL));
        }
        app_finish_all(&app);
        app_t_transfer(&t);

        app_t_mark(&t);
        for (unsigned run = 0; run < runs; run++) {
            for (cl_uint d = 0; d < ndev; d++) {
                cl_uint nd = (cl_uint)cnt[d];
                size_t g = (cnt[d] + WG - 1) / WG * WG, l = WG;
                for (cl_uint a = 0; a < 7; a++)
                    MUST(clSetKernelArg(k, a, sizeof(cl_mem), &b[d][a]));
                MUST(clSetKernelArg(k, 7, sizeof nd, &nd));
                MUST(clEnqueueNDRangeKernel(app.q[d], k, 1, NULL, &g, &l, 0, NULL, NULL));
            }
        }
        app_finish_all(&app);
        app_t_kernel(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++)
            MUST(clEnqueueReadBuffer(app.q[d], b[d][6], CL_FALSE, 0, cnt[d] * sizeof(float), prices + first[d], 0,
                                     NULL, NULL));
        app_finish_all(&app);
        app_t_transfer(&t);
        app_t_end(&t);
        app_t_keep_best(&best, &t, rep);
    }

    app_sample_t smp;
    app_sample_init(&smp, &app, n, ndev, first, cnt);
    float *ref = app_malloc(smp.count * sizeof(float)), *floor_mag = app_malloc(smp.count * sizeof(float));
    ref_ctx_t rc = {in[0], in[1], in[2], in[3], in[4], otype, &smp, ref, floor_mag};
    app_parallel_for(smp.count, ref_range, &rc);
    APP_CHECK_FLOAT_SAMPLE(prices, ref, floor_mag, 0.0, &smp, 1e-4, "option prices");
    app_sample_free(&smp);
    app_report(&app, n, &best);

    for (cl_uint d = 0; d < ndev; d++)
        for (int a = 0; a < 7; a++)
            MUST(clReleaseMemObject(b[d][a]));
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    for (int a = 0; a < 5; a++)
        free(in[a]);
    free(otype);
    free(prices);
    free(ref);
    free(floor_mag);
    return ct_finish();
}
