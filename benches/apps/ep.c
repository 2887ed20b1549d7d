/*
 * ep.c - NPB EP ("embarrassingly parallel") style Monte Carlo as a multi-device
 * OpenCL application (SnuCL-D thesis, Table IV.5: "EP, NPB, class E").
 *
 * As in NPB EP: pairs of uniform deviates from the NPB linear congruential
 * generator x_{k+1} = 5^13 x_k mod 2^46 (seed 271828183) are turned into pairs of
 * Gaussian deviates by the Marsaglia polar method (accept t = x^2 + y^2 <= 1,
 * gx = x sqrt(-2 ln t / t), gy likewise); the accepted pairs are counted in NQ = 10
 * annuli and the sums sx = sum gx, sy = sum gy are formed.
 *
 * Every work-item handles PPI consecutive pairs; it jumps to the start of its
 * stream with a^(2 PPI g) mod 2^46 (64-bit integer arithmetic: a product mod 2^64
 * is exact mod 2^46), so every work-item's stream is deterministic and independent
 * of the device split.  A work-group of WG work-items reduces its counts and sums
 * in local memory and writes one record; the work-groups are split into
 * contiguous ranges, one per device, with per-device output buffers (attached).
 * No input is written; per device and repetition: 1 kernel, 2 reads.
 *
 * Exact counts.  To make the counts bit-exact on every device, the acceptance and
 * the annulus are decided in integer arithmetic: x = X / 2^31 and y = Y / 2^31
 * with X, Y odd integers from the top 31 bits of the generator's state, so
 * t = T / 2^62 with T = X^2 + Y^2 < 2^63 exact in 64 bits.  The annulus is the
 * radial one of the Gaussian pair, l = floor(sqrt(gx^2 + gy^2)) =
 * floor(sqrt(-2 ln t)), i.e. l >= m  <=>  T <= floor(2^62 exp(-m^2 / 2)); these
 * thresholds are computed once on the host and compiled into the kernel, and the
 * CPU reference uses the same integers.  (NPB EP bins by max(|gx|, |gy|), which
 * needs the transcendental functions and so cannot be bit-exact across
 * implementations.)  The per-work-group counts are compared bit-exactly.
 *
 * The sums are float (per work-item accumulation, tree reduction in the group,
 * as the CPU reference does it); the device's log/sqrt/division may differ by a
 * few ulp, so every work-group's sx and sy must agree within 1e-5 of the group's
 * sum of |gx| (resp. |gy|); one missing or wrong work-item changes them by ~1e-3 of
 * that.
 *
 * APP_CHECK=sample changes nothing: the totals are checked against the reference's
 * totals, which need every work-group.
 *
 * Environment: APP_SIZE number of pairs (multiple of PPI * WG = 65536; default
 * 64M; tests: 1M), APP_REPS, APP_CHECK.
 */
#include "app.h"

#define NQ 10
#define WG 64
#define PPI 1024
#define SEED 271828183ull
#define A_LCG 1220703125ull
#define MASK46 ((1ull << 46) - 1)

static const char *kSrcFmt =
    "#define NQ 10\n"
    "#define WG 64\n"
    "#define MASK46 0x3FFFFFFFFFFFUL\n"
    "#define A_LCG 1220703125UL\n"
    "__constant ulong thr[NQ] = {%s};\n"
    "ulong lcg_pow(ulong b, ulong e)\n"
    "{\n"
    "    ulong r = 1;\n"
    "    while (e) {\n"
    "        if (e & 1)\n"
    "            r = (r * b) & MASK46;\n"
    "        b = (b * b) & MASK46;\n"
    "        e >>= 1;\n"
    "    }\n"
    "    return r;\n"
    "}\n"
    "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
    "void ep(ulong seed, uint ppi, uint item_base, __global uint *qout, __global float *sout)\n"
    "{\n"
    "    __local uint lq[NQ * WG];\n"
    "    __local float lsx[WG], lsy[WG];\n"
    "    uint lid = get_local_id(0);\n"
    "    ulong g = (ulong)item_base + get_global_id(0);\n"
    "    ulong s = (lcg_pow(A_LCG, 2UL * ppi * g) * seed) & MASK46;\n"
    "    uint q[NQ];\n"
    "    for (int m = 0; m < NQ; m++)\n"
    "        q[m] = 0;\n"
    "    float sx = 0.0f, sy = 0.0f;\n"
    "    for (uint k = 0; k < ppi; k++) {\n"
    "        s = (s * A_LCG) & MASK46;\n"
    "        long X = 2 * (long)(s >> 15) + 1 - (1L << 31);\n"
    "        s = (s * A_LCG) & MASK46;\n"
    "        long Y = 2 * (long)(s >> 15) + 1 - (1L << 31);\n"
    "        ulong T = (ulong)(X * X) + (ulong)(Y * Y);\n"
    "        if (T <= thr[0]) {\n"
    "            uint l = 0;\n"
    "            for (int m = 1; m < NQ; m++)\n"
    "                l += T <= thr[m] ? 1u : 0u;\n"
    "            q[l]++;\n"
    "            float x = (float)X * 0x1p-31f, y = (float)Y * 0x1p-31f;\n"
    "            float t = (float)T * 0x1p-62f;\n"
    "            float f = sqrt(-2.0f * log(t) / t);\n"
    "            sx += x * f;\n"
    "            sy += y * f;\n"
    "        }\n"
    "    }\n"
    "    for (int m = 0; m < NQ; m++)\n"
    "        lq[m * WG + lid] = q[m];\n"
    "    lsx[lid] = sx;\n"
    "    lsy[lid] = sy;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (uint h = WG / 2; h > 0; h >>= 1) {\n"
    "        if (lid < h) {\n"
    "            for (int m = 0; m < NQ; m++)\n"
    "                lq[m * WG + lid] += lq[m * WG + lid + h];\n"
    "            lsx[lid] += lsx[lid + h];\n"
    "            lsy[lid] += lsy[lid + h];\n"
    "        }\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (lid == 0) {\n"
    "        size_t grp = get_group_id(0);\n"
    "        for (int m = 0; m < NQ; m++)\n"
    "            qout[grp * NQ + m] = lq[m * WG];\n"
    "        sout[2 * grp] = lsx[0];\n"
    "        sout[2 * grp + 1] = lsy[0];\n"
    "    }\n"
    "}\n";

static uint64_t thr[NQ];

static uint64_t lcg_pow(uint64_t b, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1)
            r = (r * b) & MASK46;
        b = (b * b) & MASK46;
        e >>= 1;
    }
    return r;
}

typedef struct {
    uint32_t *q;        /* per group, NQ counts */
    float *s, *mag;     /* per group: sx, sy; sum |gx|, sum |gy| */
} ref_ctx_t;

/* Work-groups [b, e) exactly as the kernel computes them. */
static void ref_range(void *p, size_t b, size_t e)
{
    ref_ctx_t *c = (ref_ctx_t *)p;
    uint32_t q[WG][NQ];
    float sx[WG], sy[WG];
    for (size_t grp = b; grp < e; grp++) {
        double mx = 0, my = 0;
        for (int lid = 0; lid < WG; lid++) {
            uint64_t g = grp * WG + (uint64_t)lid;
            uint64_t s = (lcg_pow(A_LCG, 2ull * PPI * g) * SEED) & MASK46;
            memset(q[lid], 0, sizeof q[lid]);
            float ax = 0.0f, ay = 0.0f;
            for (int k = 0; k < PPI; k++) {
                s = (s * A_LCG) & MASK46;
                int64_t X = 2 * (int64_t)(s >> 15) + 1 - (INT64_C(1) << 31);
                s = (s * A_LCG) & MASK46;
                int64_t Y = 2 * (int64_t)(s >> 15) + 1 - (INT64_C(1) << 31);
                uint64_t T = (uint64_t)(X * X) + (uint64_t)(Y * Y);
                if (T <= thr[0]) {
                    unsigned l = 0;
                    for (int m = 1; m < NQ; m++)
                        l += T <= thr[m] ? 1u : 0u;
                    q[lid][l]++;
                    float x = (float)X * 0x1p-31f, y = (float)Y * 0x1p-31f;
                    float t = (float)T * 0x1p-62f;
                    float f = sqrtf(-2.0f * logf(t) / t);
                    ax += x * f;
                    ay += y * f;
                    mx += fabsf(x * f);
                    my += fabsf(y * f);
                }
            }
            sx[lid] = ax;
            sy[lid] = ay;
        }
        for (int h = WG / 2; h > 0; h >>= 1)
            for (int lid = 0; lid < h; lid++) {
                for (int m = 0; m < NQ; m++)
                    q[lid][m] += q[lid + h][m];
                sx[lid] += sx[lid + h];
                sy[lid] += sy[lid + h];
            }
        memcpy(c->q + grp * NQ, q[0], sizeof q[0]);
        c->s[2 * grp] = sx[0];
        c->s[2 * grp + 1] = sy[0];
        c->mag[2 * grp] = (float)mx;
        c->mag[2 * grp + 1] = (float)my;
    }
}

int main(void)
{
    app_t app;
    app_init(&app, "ep");
    unsigned long long pairs = app_env_ull("APP_SIZE", 64ull << 20);
    if (pairs == 0 || pairs % ((unsigned long long)PPI * WG))
        ct_die("APP_SIZE (pairs) must be a positive multiple of 65536");
    size_t groups = (size_t)(pairs / ((unsigned long long)PPI * WG));
    if (groups * WG > 0xffffffffull)
        ct_die("APP_SIZE too large");
    cl_uint ndev = app.ndev;
    printf("  %llu pairs, %zu work-groups of %d work-items, %d pairs each\n", pairs, groups, WG, PPI);

    /* Thresholds: thr[0] = 2^62 (t <= 1), thr[m] = floor(2^62 exp(-m^2/2)). */
    char list[NQ * 32] = "", *lp = list;
    for (int m = 0; m < NQ; m++) {
        thr[m] = m == 0 ? (1ull << 62) : (uint64_t)floor(ldexp(exp(-0.5 * m * m), 62));
        lp += sprintf(lp, "%s0x%llxUL", m ? ", " : "", (unsigned long long)thr[m]);
    }
    size_t srclen = strlen(kSrcFmt) + strlen(list) + 1;
    char *src = app_malloc(srclen);
    snprintf(src, srclen, kSrcFmt, list);

    cl_program prog = ct_build(app.ctx, src, NULL);
    cl_kernel k = ct_kernel(prog, "ep");
    if (app_min_kernel_wg(&app, k) < WG)
        ct_die("a device does not run work-groups of 64 work-items");

    size_t first[CT_MAX_DEVICES], cnt[CT_MAX_DEVICES]; /* in work-groups */
    cl_mem bq[CT_MAX_DEVICES], bs[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        app_split(groups, ndev, d, &first[d], &cnt[d]);
        bq[d] = app_buffer(&app, d, CL_MEM_WRITE_ONLY, cnt[d] * NQ * sizeof(cl_uint));
        bs[d] = app_buffer(&app, d, CL_MEM_WRITE_ONLY, cnt[d] * 2 * sizeof(float));
    }
    cl_ulong seed = SEED;
    cl_uint ppi = PPI;
    MUST(clSetKernelArg(k, 0, sizeof seed, &seed));
    size_t wg = WG;
    if (app.warmup) {
        cl_uint zero = 0; /* no pairs */
        MUST(clSetKernelArg(k, 1, sizeof zero, &zero));
        for (cl_uint d = 0; d < ndev; d++) {
            cl_uint base = (cl_uint)(first[d] * WG);
            size_t g = cnt[d] * WG;
            MUST(clSetKernelArg(k, 2, sizeof base, &base));
            MUST(clSetKernelArg(k, 3, sizeof(cl_mem), &bq[d]));
            MUST(clSetKernelArg(k, 4, sizeof(cl_mem), &bs[d]));
            MUST(clEnqueueNDRangeKernel(app.q[d], k, 1, NULL, &g, &wg, 0, NULL, NULL));
        }
        app_finish_all(&app);
    }
    MUST(clSetKernelArg(k, 1, sizeof ppi, &ppi));

    uint32_t *q = app_malloc(groups * NQ * sizeof(uint32_t)), *rq = app_malloc(groups * NQ * sizeof(uint32_t));
    float *s = app_malloc(groups * 2 * sizeof(float)), *rs = app_malloc(groups * 2 * sizeof(float));
    float *mag = app_malloc(groups * 2 * sizeof(float));
    app_times_t t, best = {0};
    for (int rep = 0; rep < app.reps; rep++) {
        memset(q, 0xEE, groups * NQ * sizeof(uint32_t));
        for (size_t i = 0; i < 2 * groups; i++)
            s[i] = NAN;
        app_t_begin(&t);
        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            cl_uint base = (cl_uint)(first[d] * WG);
            size_t g = cnt[d] * WG;
            MUST(clSetKernelArg(k, 2, sizeof base, &base));
            MUST(clSetKernelArg(k, 3, sizeof(cl_mem), &bq[d]));
            MUST(clSetKernelArg(k, 4, sizeof(cl_mem), &bs[d]));
            MUST(clEnqueueNDRangeKernel(app.q[d], k, 1, NULL, &g, &wg, 0, NULL, NULL));
        }
        app_finish_all(&app);
        app_t_kernel(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clEnqueueReadBuffer(app.q[d], bq[d], CL_FALSE, 0, cnt[d] * NQ * sizeof(cl_uint), q + first[d] * NQ, 0,
                                     NULL, NULL));
            MUST(clEnqueueReadBuffer(app.q[d], bs[d], CL_FALSE, 0, cnt[d] * 2 * sizeof(float), s + first[d] * 2, 0,
                                     NULL, NULL));
        }
        app_finish_all(&app);
        app_t_transfer(&t);
        app_t_end(&t);
        app_t_keep_best(&best, &t, rep);
    }

    app_sample_not_applicable(&app, "the counts and sums are global");
    ref_ctx_t rc = {rq, rs, mag};
    app_parallel_for(groups, ref_range, &rc);
    unsigned long long tq[NQ] = {0}, rtq[NQ] = {0}, acc = 0;
    double sx = 0, sy = 0;
    for (size_t g = 0; g < groups; g++) {
        for (int m = 0; m < NQ; m++) {
            tq[m] += q[g * NQ + m];
            rtq[m] += rq[g * NQ + m];
        }
        sx += s[2 * g];
        sy += s[2 * g + 1];
    }
    printf("  counts:");
    for (int m = 0; m < NQ; m++) {
        printf(" %llu", tq[m]);
        acc += tq[m];
    }
    printf("\n  accepted %llu of %llu pairs, sx = %.6f, sy = %.6f\n", acc, pairs, sx, sy);
    for (int m = 0; m < NQ; m++)
        CHECK_EQ(tq[m], rtq[m]);
    if (CHECK_MEM(q, rq, groups * NQ, sizeof(uint32_t), "per-work-group annulus counts"))
        printf("  check counts: %zu work-group records bit-exact\n", groups);
    APP_CHECK_FLOAT(s, rs, mag, 0.0, 2 * groups, 1e-5, "per-work-group sums sx, sy");
    app_report(&app, pairs, &best);

    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clReleaseMemObject(bq[d]));
        MUST(clReleaseMemObject(bs[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    free(src);
    free(q);
    free(rq);
    free(s);
    free(rs);
    free(mag);
    return ct_finish();
}
