/*
 * nbody.c - NVIDIA OpenCL SDK N-body (oclNbody) as a multi-device OpenCL
 * application (SnuCL-D thesis, Table IV.5: "N-body, NVIDIA, 2.5M/10M bodies").
 *
 * All-pairs gravitation with the SDK's integrateBodies kernel: every work-item
 * owns one body, the positions of all bodies stream through local memory one tile
 * (one work-group's worth) at a time, the acceleration integrates velocity and
 * position (leapfrog-like Euler step with damping).
 *
 * Multi-device, as described in Section IV.7.3.1: the velocities are divided
 * (every device owns the velocities of its slice of bodies), the positions are
 * replicated (every device has a full position array).  Per device i:
 *   posAll[i]  all N positions (read by its kernel),
 *   newPos[i]  the new positions of its slice (written by its kernel),
 *   vel[i]     the velocities of its slice (updated in place),
 * all attached to device i.  After every step but the last, every device gathers
 * the new positions of all slices into its posAll with clEnqueueCopyBuffer from
 * every device's newPos (ndev^2 copies, each waiting for the kernel that produced
 * the slice); a kernel of the next step waits for the copies on other queues that
 * read its newPos before overwriting it.  The exchange is part of kernel_s.
 * The final positions and velocities are read from newPos[i] and vel[i].
 *
 * Float.  The CPU reference integrates the same steps with the same formulas and
 * the same summation order (1/sqrtf for rsqrt).  The check is on what the steps
 * changed: for every body and component, |(got - init) - (ref - init)| <= 1e-3 *
 * the largest change of that quantity over all bodies, for positions and for
 * velocities separately.  A missing slice, a stale or missing exchange, or a wrong
 * body index changes the accelerations by far more than rounding does.
 *
 * APP_CHECK=sample changes nothing: every body depends on all bodies at every step,
 * so no output can be computed without computing all of them.
 *
 * Environment: APP_SIZE bodies (multiple of 128; default 16K; tests: 1024),
 * NBODY_STEPS time steps (default 3), APP_REPS, APP_CHECK.
 */
#include "app.h"

#define DT 0.016f
#define DAMPING 1.0f
#define SOFTENING_SQ 0.01f

static const char *kSrc =
    "float4 bodyBodyInteraction(float4 ai, float4 bi, float4 bj, float softeningSquared)\n"
    "{\n"
    "    float4 r;\n"
    "    r.x = bj.x - bi.x;\n"
    "    r.y = bj.y - bi.y;\n"
    "    r.z = bj.z - bi.z;\n"
    "    r.w = 0.0f;\n"
    "    float distSqr = r.x * r.x + r.y * r.y + r.z * r.z;\n"
    "    distSqr += softeningSquared;\n"
    "    float invDist = rsqrt(distSqr);\n"
    "    float invDistCube = invDist * invDist * invDist;\n"
    "    float s = bj.w * invDistCube;\n"
    "    ai.x += r.x * s;\n"
    "    ai.y += r.y * s;\n"
    "    ai.z += r.z * s;\n"
    "    return ai;\n"
    "}\n"
    "float4 computeBodyAccel(float4 bodyPos, __global const float4 *positions, int numBodies,\n"
    "                        __local float4 *sharedPos, float softeningSquared)\n"
    "{\n"
    "    float4 acc = (float4)(0.0f, 0.0f, 0.0f, 0.0f);\n"
    "    int p = get_local_size(0);\n"
    "    int numTiles = numBodies / p;\n"
    "    for (int tile = 0; tile < numTiles; tile++) {\n"
    "        sharedPos[get_local_id(0)] = positions[tile * p + get_local_id(0)];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (int j = 0; j < p; j++)\n"
    "            acc = bodyBodyInteraction(acc, bodyPos, sharedPos[j], softeningSquared);\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    return acc;\n"
    "}\n"
    "__kernel void integrateBodies(__global float4 *newPos, __global float4 *vel,\n"
    "                              __global const float4 *oldPos, int offset, float deltaTime,\n"
    "                              float damping, float softSq, int numBodies,\n"
    "                              __local float4 *sharedPos)\n"
    "{\n"
    "    int index = get_global_id(0);\n"
    "    float4 pos = oldPos[offset + index];\n"
    "    float4 accel = computeBodyAccel(pos, oldPos, numBodies, sharedPos, softSq);\n"
    "    float4 v = vel[index];\n"
    "    v.x += accel.x * deltaTime;\n"
    "    v.y += accel.y * deltaTime;\n"
    "    v.z += accel.z * deltaTime;\n"
    "    v.x *= damping;\n"
    "    v.y *= damping;\n"
    "    v.z *= damping;\n"
    "    pos.x += v.x * deltaTime;\n"
    "    pos.y += v.y * deltaTime;\n"
    "    pos.z += v.z * deltaTime;\n"
    "    newPos[index] = pos;\n"
    "    vel[index] = v;\n"
    "}\n";

typedef struct {
    const float *pos; /* old positions, 4 floats per body */
    float *npos, *vel;
    size_t n;
} ref_ctx_t;

static void ref_range(void *p, size_t b, size_t e)
{
    ref_ctx_t *c = (ref_ctx_t *)p;
    for (size_t i = b; i < e; i++) {
        const float *bi = c->pos + 4 * i;
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        for (size_t j = 0; j < c->n; j++) {
            const float *bj = c->pos + 4 * j;
            float rx = bj[0] - bi[0], ry = bj[1] - bi[1], rz = bj[2] - bi[2];
            float distSqr = rx * rx + ry * ry + rz * rz;
            distSqr += SOFTENING_SQ;
            float invDist = 1.0f / sqrtf(distSqr);
            float invDistCube = invDist * invDist * invDist;
            float s = bj[3] * invDistCube;
            ax += rx * s;
            ay += ry * s;
            az += rz * s;
        }
        float *v = c->vel + 4 * i, *np = c->npos + 4 * i;
        v[0] += ax * DT;
        v[1] += ay * DT;
        v[2] += az * DT;
        v[0] *= DAMPING;
        v[1] *= DAMPING;
        v[2] *= DAMPING;
        np[0] = bi[0] + v[0] * DT;
        np[1] = bi[1] + v[1] * DT;
        np[2] = bi[2] + v[2] * DT;
        np[3] = bi[3];
    }
}

/* Compares the change of a float4 quantity (xyz) from init: got vs ref. */
static void check_change(const float *got, const float *ref, const float *init, size_t n, double rtol,
                         const char *what)
{
    float *dg = app_malloc(3 * n * sizeof(float)), *dr = app_malloc(3 * n * sizeof(float));
    double maxd = 0;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            dg[3 * i + c] = got[4 * i + c] - init[4 * i + c];
            dr[3 * i + c] = ref[4 * i + c] - init[4 * i + c];
            if (fabs(dr[3 * i + c]) > maxd)
                maxd = fabs(dr[3 * i + c]);
        }
    printf("  largest change of the %s: %.4g\n", what, maxd);
    CHECK_TRUE(maxd > 0, "the %s changed", what);
    APP_CHECK_FLOAT(dg, dr, NULL, maxd, 3 * n, rtol, what);
    free(dg);
    free(dr);
}

int main(void)
{
    app_t app;
    app_init(&app, "nbody");
    size_t n = (size_t)app_env_ull("APP_SIZE", 16u << 10);
    int steps = (int)app_env_ull("NBODY_STEPS", 3);
    if (steps < 1)
        ct_die("NBODY_STEPS must be positive");
    cl_uint ndev = app.ndev;

    cl_program prog = ct_build(app.ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "integrateBodies");
    size_t p = 128;
    size_t maxwg = app_min_kernel_wg(&app, k);
    while (p > maxwg)
        p /= 2;
    if (n == 0 || n % p)
        ct_die("APP_SIZE (bodies) must be a positive multiple of the work-group size (128)");
    printf("  %zu bodies, %d step(s), work-group %zu\n", n, steps, p);

    /* SDK's random configuration: positions in a ball of radius clusterScale *
     * max(1, N/1024), velocities in a ball of radius velocityScale * that, mass 1. */
    float scale = 1.54f * (n / 1024.0f > 1.0f ? (float)n / 1024.0f : 1.0f);
    float vscale = 8.0f * scale;
    float *pos0 = app_malloc(n * 4 * sizeof(float)), *vel0 = app_malloc(n * 4 * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float x, y, z, l;
        uint64_t s = 0;
        do {
            x = 2.0f * app_unif(31, 4 * i + s) - 1.0f;
            y = 2.0f * app_unif(32, 4 * i + s) - 1.0f;
            z = 2.0f * app_unif(33, 4 * i + s) - 1.0f;
            l = x * x + y * y + z * z;
            s += 4 * n;
        } while (l > 1.0f);
        pos0[4 * i + 0] = x * scale;
        pos0[4 * i + 1] = y * scale;
        pos0[4 * i + 2] = z * scale;
        pos0[4 * i + 3] = 1.0f;
        s = 0;
        do {
            x = 2.0f * app_unif(34, 4 * i + s) - 1.0f;
            y = 2.0f * app_unif(35, 4 * i + s) - 1.0f;
            z = 2.0f * app_unif(36, 4 * i + s) - 1.0f;
            l = x * x + y * y + z * z;
            s += 4 * n;
        } while (l > 1.0f);
        vel0[4 * i + 0] = x * vscale;
        vel0[4 * i + 1] = y * vscale;
        vel0[4 * i + 2] = z * vscale;
        vel0[4 * i + 3] = 1.0f;
    }
    float *gpos = app_malloc(n * 4 * sizeof(float)), *gvel = app_malloc(n * 4 * sizeof(float));

    size_t first[CT_MAX_DEVICES], cnt[CT_MAX_DEVICES]; /* in bodies */
    cl_mem posAll[CT_MAX_DEVICES], newPos[CT_MAX_DEVICES], vel[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        app_split(n / p, ndev, d, &first[d], &cnt[d]);
        first[d] *= p;
        cnt[d] *= p;
        posAll[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, n * 4 * sizeof(float));
        newPos[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, cnt[d] * 4 * sizeof(float));
        vel[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, cnt[d] * 4 * sizeof(float));
    }
    float dt = DT, damping = DAMPING, soft = SOFTENING_SQ;
    int nb = (int)n;
    MUST(clSetKernelArg(k, 4, sizeof dt, &dt));
    MUST(clSetKernelArg(k, 5, sizeof damping, &damping));
    MUST(clSetKernelArg(k, 6, sizeof soft, &soft));
    MUST(clSetKernelArg(k, 8, p * 4 * sizeof(float), NULL));
    if (app.warmup) {
        int zero = 0; /* no bodies to interact with */
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &newPos[d]));
            MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &vel[d]));
            MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &posAll[d]));
            MUST(clSetKernelArg(k, 3, sizeof zero, &zero));
            MUST(clSetKernelArg(k, 7, sizeof zero, &zero));
            MUST(clEnqueueNDRangeKernel(app.q[d], k, 1, NULL, &cnt[d], &p, 0, NULL, NULL));
        }
        app_finish_all(&app);
    }
    MUST(clSetKernelArg(k, 7, sizeof nb, &nb));

    cl_event kev[CT_MAX_DEVICES], cev[CT_MAX_DEVICES][CT_MAX_DEVICES]; /* cev[i][j]: slice j into posAll[i] */
    app_times_t t, best = {0};
    for (int rep = 0; rep < app.reps; rep++) {
        for (size_t i = 0; i < 4 * n; i++)
            gpos[i] = gvel[i] = NAN;
        app_t_begin(&t);
        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clEnqueueWriteBuffer(app.q[d], posAll[d], CL_FALSE, 0, n * 4 * sizeof(float), pos0, 0, NULL, NULL));
            MUST(clEnqueueWriteBuffer(app.q[d], vel[d], CL_FALSE, 0, cnt[d] * 4 * sizeof(float), vel0 + 4 * first[d],
                                      0, NULL, NULL));
        }
        app_finish_all(&app);
        app_t_transfer(&t);

        app_t_mark(&t);
        for (int s = 0; s < steps; s++) {
            for (cl_uint i = 0; i < ndev; i++) {
                /* Wait for the copies (on other queues) that read newPos[i] last step. */
                cl_event wl[CT_MAX_DEVICES];
                cl_uint nw = 0;
                if (s > 0)
                    for (cl_uint o = 0; o < ndev; o++)
                        if (o != i)
                            wl[nw++] = cev[o][i];
                int off = (int)first[i];
                MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &newPos[i]));
                MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &vel[i]));
                MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &posAll[i]));
                MUST(clSetKernelArg(k, 3, sizeof off, &off));
                MUST(clEnqueueNDRangeKernel(app.q[i], k, 1, NULL, &cnt[i], &p, nw, nw ? wl : NULL, &kev[i]));
            }
            if (s > 0)
                for (cl_uint i = 0; i < ndev; i++)
                    for (cl_uint j = 0; j < ndev; j++)
                        MUST(clReleaseEvent(cev[i][j]));
            if (s + 1 < steps) {
                /* Exchange: device i gathers every slice j into its posAll. */
                for (cl_uint i = 0; i < ndev; i++)
                    for (cl_uint j = 0; j < ndev; j++)
                        MUST(clEnqueueCopyBuffer(app.q[i], newPos[j], posAll[i], 0, first[j] * 4 * sizeof(float),
                                                 cnt[j] * 4 * sizeof(float), j == i ? 0 : 1,
                                                 j == i ? NULL : &kev[j], &cev[i][j]));
            }
            for (cl_uint i = 0; i < ndev; i++)
                MUST(clReleaseEvent(kev[i]));
        }
        app_finish_all(&app);
        app_t_kernel(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clEnqueueReadBuffer(app.q[d], newPos[d], CL_FALSE, 0, cnt[d] * 4 * sizeof(float), gpos + 4 * first[d],
                                     0, NULL, NULL));
            MUST(clEnqueueReadBuffer(app.q[d], vel[d], CL_FALSE, 0, cnt[d] * 4 * sizeof(float), gvel + 4 * first[d], 0,
                                     NULL, NULL));
        }
        app_finish_all(&app);
        app_t_transfer(&t);
        app_t_end(&t);
        app_t_keep_best(&best, &t, rep);
    }

    /* CPU reference: the same steps (of all bodies whatever APP_CHECK says). */
    app_sample_not_applicable(&app, "every body depends on all");
    float *rpos = app_malloc(n * 4 * sizeof(float)), *rnew = app_malloc(n * 4 * sizeof(float));
    float *rvel = app_malloc(n * 4 * sizeof(float));
    memcpy(rpos, pos0, n * 4 * sizeof(float));
    memcpy(rvel, vel0, n * 4 * sizeof(float));
    for (int s = 0; s < steps; s++) {
        ref_ctx_t rc = {rpos, rnew, rvel, n};
        app_parallel_for(n, ref_range, &rc);
        float *tmp = rpos;
        rpos = rnew;
        rnew = tmp;
    }
    check_change(gpos, rpos, pos0, n, 1e-3, "positions");
    check_change(gvel, rvel, vel0, n, 1e-3, "velocities");
    app_report(&app, n, &best);

    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clReleaseMemObject(posAll[d]));
        MUST(clReleaseMemObject(newPos[d]));
        MUST(clReleaseMemObject(vel[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    free(pos0);
    free(vel0);
    free(gpos);
    free(gvel);
    free(rpos);
    free(rnew);
    free(rvel);
    return ct_finish();
}
