/*
 * cp.c - Parboil CP (Coulombic potential) as a multi-device OpenCL application
 * (SnuCL-D thesis, Table IV.5: "CP, Parboil, 16K x 16K").
 *
 * The electrostatic potential of A point charges on a G x G slice of a lattice
 * (spacing 0.1 A, as in Parboil).  The Parboil kernel: every work-item computes
 * UNROLLX = 8 grid points of one row, BLOCKSIZEX = 16 apart, summing
 * q * rsqrt(dx^2 + dy^2 + dz^2) over the atoms held in __constant memory; the
 * atoms go to the device in chunks of at most MAXATOMS = 4000 (64000 bytes, within
 * the minimum constant buffer size), one kernel launch per chunk accumulating into
 * the grid (energygrid += ...), as in Parboil's host loop.
 *
 * Multi-device: the grid rows are split into slices of whole BLOCKSIZEY-row
 * blocks, one per device; every device has its own energy buffer for its slice and
 * its own copies of all atom chunks (atoms replicated), all attached to it.  A
 * device executes 1 + chunks writes, chunks kernels and 1 read per repetition.
 *
 * Float.  The CPU reference follows the kernel's structure (same dx increments,
 * same chunking, 1/sqrtf for rsqrt); charges are of both signs, so the potential
 * can be a small difference of large terms: a point passes when |got - ref| <=
 * 1e-5 * sum over atoms of |q| / r (the magnitude, computed with the reference).
 *
 * APP_CHECK=sample: the reference potential is computed only at a sample of the
 * grid points (app.h), each with the same operations as in the full reference.
 *
 * Environment: APP_SIZE grid edge G (multiple of 128; default 512; tests: 128), CP_ATOMS
 * number of atoms (default 12000), APP_REPS, APP_CHECK.
 */
#include "app.h"

#define UNROLLX 8
#define BLOCKSIZEX 16
#define BLOCKSIZEY 8
#define MAXATOMS 4000
#define GRIDSPACING 0.1f

static const char *kSrc =
    "#define UNROLLX 8\n"
    "#define BLOCKSIZEX 16\n"
    "__kernel void cenergy(int numatoms, float gridspacing, int yoffset,\n"
    "                      __global float *energygrid, __constant float4 *atominfo)\n"
    "{\n"
    "    unsigned int xindex = get_group_id(0) * get_local_size(0) * UNROLLX + get_local_id(0);\n"
    "    unsigned int yindex = get_global_id(1);\n"
    "    unsigned int outaddr = get_global_size(0) * UNROLLX * yindex + xindex;\n"
    "    float coory = gridspacing * (float)(yindex + yoffset);\n"
    "    float coorx = gridspacing * (float)xindex;\n"
    "    float energyvalx1 = 0.0f, energyvalx2 = 0.0f, energyvalx3 = 0.0f, energyvalx4 = 0.0f;\n"
    "    float energyvalx5 = 0.0f, energyvalx6 = 0.0f, energyvalx7 = 0.0f, energyvalx8 = 0.0f;\n"
    "    float gridspacing_u = gridspacing * BLOCKSIZEX;\n"
    "    for (int atomid = 0; atomid < numatoms; atomid++) {\n"
    "        float4 atom = atominfo[atomid];\n"
    "        float dy = coory - atom.y;\n"
    "        float dyz2 = (dy * dy) + atom.z;\n"
    "        float dx1 = coorx - atom.x;\n"
    "        float dx2 = dx1 + gridspacing_u;\n"
    "        float dx3 = dx2 + gridspacing_u;\n"
    "        float dx4 = dx3 + gridspacing_u;\n"
    "        float dx5 = dx4 + gridspacing_u;\n"
    "        float dx6 = dx5 + gridspacing_u;\n"
    "        float dx7 = dx6 + gridspacing_u;\n"
    "        float dx8 = dx7 + gridspacing_u;\n"
    "        energyvalx1 += atom.w * rsqrt(dx1 * dx1 + dyz2);\n"
    "        energyvalx2 += atom.w * rsqrt(dx2 * dx2 + dyz2);\n"
    "        energyvalx3 += atom.w * rsqrt(dx3 * dx3 + dyz2);\n"
    "        energyvalx4 += atom.w * rsqrt(dx4 * dx4 + dyz2);\n"
    "        energyvalx5 += atom.w * rsqrt(dx5 * dx5 + dyz2);\n"
    "        energyvalx6 += atom.w * rsqrt(dx6 * dx6 + dyz2);\n"
    "        energyvalx7 += atom.w * rsqrt(dx7 * dx7 + dyz2);\n"
    "        energyvalx8 += atom.w * rsqrt(dx8 * dx8 + dyz2);\n"
    "    }\n"
    "    energygrid[outaddr] += energyvalx1;\n"
    "    energygrid[outaddr + 1 * BLOCKSIZEX] += energyvalx2;\n"
    "    energygrid[outaddr + 2 * BLOCKSIZEX] += energyvalx3;\n"
    "    energygrid[outaddr + 3 * BLOCKSIZEX] += energyvalx4;\n"
    "    energygrid[outaddr + 4 * BLOCKSIZEX] += energyvalx5;\n"
    "    energygrid[outaddr + 5 * BLOCKSIZEX] += energyvalx6;\n"
    "    energygrid[outaddr + 6 * BLOCKSIZEX] += energyvalx7;\n"
    "    energygrid[outaddr + 7 * BLOCKSIZEX] += energyvalx8;\n"
    "}\n";

typedef struct {
    const float *atoms; /* x, y, dz^2, q */
    int natoms, chunk;
    size_t G;
    float *ref, *mag;
} ref_ctx_t;

/* Rows [b, e) of the reference, in the kernel's order of operations. */
static void ref_range(void *p, size_t b, size_t e)
{
    ref_ctx_t *c = (ref_ctx_t *)p;
    size_t G = c->G;
    float gridspacing_u = GRIDSPACING * BLOCKSIZEX;
    for (size_t y = b; y < e; y++) {
        float coory = GRIDSPACING * (float)y;
        for (size_t x0 = 0; x0 < G; x0 += BLOCKSIZEX * UNROLLX) {
            for (size_t lx = 0; lx < BLOCKSIZEX; lx++) {
                size_t xi = x0 + lx;
                float coorx = GRIDSPACING * (float)xi;
                float e8[UNROLLX], m8[UNROLLX];
                for (int u = 0; u < UNROLLX; u++)
                    e8[u] = m8[u] = 0.0f;
                for (int a0 = 0; a0 < c->natoms; a0 += c->chunk) {
                    int a1 = a0 + c->chunk < c->natoms ? a0 + c->chunk : c->natoms;
                    float acc[UNROLLX] = {0};
                    for (int a = a0; a < a1; a++) {
                        const float *at = c->atoms + 4 * (size_t)a;
                        float dy = coory - at[1];
                        float dyz2 = (dy * dy) + at[2];
                        float dx = coorx - at[0];
                        for (int u = 0; u < UNROLLX; u++) {
                            if (u)
                                dx = dx + gridspacing_u;
                            float inv = 1.0f / sqrtf(dx * dx + dyz2);
                            acc[u] += at[3] * inv;
                            m8[u] += fabsf(at[3]) * inv;
                        }
                    }
                    for (int u = 0; u < UNROLLX; u++)
                        e8[u] += acc[u];
                }
                for (int u = 0; u < UNROLLX; u++) {
                    c->ref[y * G + xi + (size_t)u * BLOCKSIZEX] = e8[u];
                    c->mag[y * G + xi + (size_t)u * BLOCKSIZEX] = m8[u];
                }
            }
        }
    }
}

/*
 * One grid point (APP_CHECK=sample): the operations of ref_range for that point
 * alone.  Point x of a row is lane u = (x % 128) / 16 of the work-item at column
 * xi = x - 16 u, whose dx starts at coorx(xi) - atom.x and grows by
 * gridspacing_u u times, as in the kernel.
 */
static void ref_point(const ref_ctx_t *c, size_t y, size_t x, float *e_out, float *m_out)
{
    float gridspacing_u = GRIDSPACING * BLOCKSIZEX;
    int u = (int)((x % (BLOCKSIZEX * UNROLLX)) / BLOCKSIZEX);
    size_t xi = x - (size_t)u * BLOCKSIZEX;
    float coory = GRIDSPACING * (float)y;
    float coorx = GRIDSPACING * (float)xi;
    float e = 0.0f, m = 0.0f;
    for (int a0 = 0; a0 < c->natoms; a0 += c->chunk) {
        int a1 = a0 + c->chunk < c->natoms ? a0 + c->chunk : c->natoms;
        float acc = 0.0f;
        for (int a = a0; a < a1; a++) {
            const float *at = c->atoms + 4 * (size_t)a;
            float dy = coory - at[1];
            float dyz2 = (dy * dy) + at[2];
            float dx = coorx - at[0];
            for (int v = 1; v <= u; v++)
                dx = dx + gridspacing_u;
            float inv = 1.0f / sqrtf(dx * dx + dyz2);
            acc += at[3] * inv;
            m += fabsf(at[3]) * inv;
        }
        e += acc;
    }
    *e_out = e;
    *m_out = m;
}

typedef struct {
    const ref_ctx_t *rc;
    const app_sample_t *smp;
} ref_sample_ctx_t;

/* Checked points [b, e) of the sample, into ref[k] and mag[k]. */
static void ref_sample_range(void *p, size_t b, size_t e)
{
    ref_sample_ctx_t *c = (ref_sample_ctx_t *)p;
    size_t G = c->rc->G;
    for (size_t k = b; k < e; k++) {
        size_t i = app_sample_at(c->smp, k);
        ref_point(c->rc, i / G, i % G, &c->rc->ref[k], &c->rc->mag[k]);
    }
}

int main(void)
{
    app_t app;
    app_init(&app, "cp");
    size_t G = (size_t)app_env_ull("APP_SIZE", 512);
    int natoms = (int)app_env_ull("CP_ATOMS", 12000);
    if (G == 0 || G % (BLOCKSIZEX * UNROLLX))
        ct_die("APP_SIZE (grid edge) must be a positive multiple of 128");
    if (natoms < 1)
        ct_die("CP_ATOMS must be positive");
    cl_uint ndev = app.ndev;

    /* Chunk size: Parboil's MAXATOMS, lowered if a device has less constant memory. */
    int chunk = MAXATOMS;
    for (cl_uint d = 0; d < ndev; d++) {
        cl_ulong cmax = ct_device_ulong(app.devs[d], CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE);
        if ((cl_ulong)chunk * 16 > cmax)
            chunk = (int)(cmax / 16);
    }
    int nchunks = (natoms + chunk - 1) / chunk;
    printf("  %zu x %zu grid, %d atoms in %d chunk(s) of up to %d\n", G, G, natoms, nchunks, chunk);

    /* Random atoms above/below the slice (z = 0): |dz| in [0.5, 5] A, charge in [-1, 1). */
    float *atoms = app_malloc((size_t)natoms * 4 * sizeof(float));
    float extent = GRIDSPACING * (float)G;
    for (int a = 0; a < natoms; a++) {
        float dz = 0.5f + 4.5f * app_unif(21, (uint64_t)a);
        atoms[4 * a + 0] = extent * app_unif(22, (uint64_t)a);
        atoms[4 * a + 1] = extent * app_unif(23, (uint64_t)a);
        atoms[4 * a + 2] = dz * dz;
        atoms[4 * a + 3] = 2.0f * app_unif(24, (uint64_t)a) - 1.0f;
    }
    size_t npts = G * G;
    float *grid = app_malloc(npts * sizeof(float)), *zeros = calloc(npts, sizeof(float));
    if (!zeros)
        ct_die("out of host memory");

    cl_program prog = ct_build(app.ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "cenergy");
    size_t local[2] = {BLOCKSIZEX, BLOCKSIZEY};
    if (app_min_kernel_wg(&app, k) < BLOCKSIZEX * BLOCKSIZEY)
        ct_die("a device does not run work-groups of 16 x 8 work-items");

    size_t firstblk[CT_MAX_DEVICES], nblk[CT_MAX_DEVICES];
    cl_mem egrid[CT_MAX_DEVICES];
    cl_mem *abuf = app_malloc((size_t)ndev * (size_t)nchunks * sizeof(cl_mem));
    for (cl_uint d = 0; d < ndev; d++) {
        app_split(G / BLOCKSIZEY, ndev, d, &firstblk[d], &nblk[d]);
        egrid[d] = app_buffer(&app, d, CL_MEM_READ_WRITE, nblk[d] * BLOCKSIZEY * G * sizeof(float));
        for (int c = 0; c < nchunks; c++) {
            int na = natoms - c * chunk < chunk ? natoms - c * chunk : chunk;
            abuf[d * (size_t)nchunks + c] = app_buffer(&app, d, CL_MEM_READ_ONLY, (size_t)na * 4 * sizeof(float));
        }
    }
    float gs = GRIDSPACING;
    MUST(clSetKernelArg(k, 1, sizeof gs, &gs));
    if (app.warmup) {
        int zero = 0;
        for (cl_uint d = 0; d < ndev; d++) {
            size_t g[2] = {G / UNROLLX, nblk[d] * BLOCKSIZEY};
            MUST(clSetKernelArg(k, 0, sizeof zero, &zero)); /* no atoms */
            MUST(clSetKernelArg(k, 2, sizeof zero, &zero));
            MUST(clSetKernelArg(k, 3, sizeof(cl_mem), &egrid[d]));
            MUST(clSetKernelArg(k, 4, sizeof(cl_mem), &abuf[d * (size_t)nchunks]));
            MUST(clEnqueueNDRangeKernel(app.q[d], k, 2, NULL, g, local, 0, NULL, NULL));
        }
        app_finish_all(&app);
    }

    app_times_t t, best = {0};
    for (int rep = 0; rep < app.reps; rep++) {
        for (size_t i = 0; i < npts; i++)
            grid[i] = NAN;
        app_t_begin(&t);
        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++) {
            size_t rows = nblk[d] * BLOCKSIZEY;
            MUST(clEnqueueWriteBuffer(app.q[d], egrid[d], CL_FALSE, 0, rows * G * sizeof(float), zeros, 0, NULL,
                                      NULL));
            for (int c = 0; c < nchunks; c++) {
                int na = natoms - c * chunk < chunk ? natoms - c * chunk : chunk;
                MUST(clEnqueueWriteBuffer(app.q[d], abuf[d * (size_t)nchunks + c], CL_FALSE, 0,
                                          (size_t)na * 4 * sizeof(float), atoms + (size_t)c * chunk * 4, 0, NULL,
                                          NULL));
            }
        }
        app_finish_all(&app);
        app_t_transfer(&t);

        app_t_mark(&t);
        for (int c = 0; c < nchunks; c++) {
            int na = natoms - c * chunk < chunk ? natoms - c * chunk : chunk;
            for (cl_uint d = 0; d < ndev; d++) {
                int yoff = (int)(firstblk[d] * BLOCKSIZEY);
                size_t g[2] = {G / UNROLLX, nblk[d] * BLOCKSIZEY};
                MUST(clSetKernelArg(k, 0, sizeof na, &na));
                MUST(clSetKernelArg(k, 2, sizeof yoff, &yoff));
                MUST(clSetKernelArg(k, 3, sizeof(cl_mem), &egrid[d]));
                MUST(clSetKernelArg(k, 4, sizeof(cl_mem), &abuf[d * (size_t)nchunks + c]));
                MUST(clEnqueueNDRangeKernel(app.q[d], k, 2, NULL, g, local, 0, NULL, NULL));
            }
        }
        app_finish_all(&app);
        app_t_kernel(&t);

        app_t_mark(&t);
        for (cl_uint d = 0; d < ndev; d++)
            MUST(clEnqueueReadBuffer(app.q[d], egrid[d], CL_FALSE, 0, nblk[d] * BLOCKSIZEY * G * sizeof(float),
                                     grid + firstblk[d] * BLOCKSIZEY * G, 0, NULL, NULL));
        app_finish_all(&app);
        app_t_transfer(&t);
        app_t_end(&t);
        app_t_keep_best(&best, &t, rep);
    }

    /* The devices' slices in grid points (the split is in blocks of rows). */
    size_t pfirst[CT_MAX_DEVICES], pcnt[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        pfirst[d] = firstblk[d] * BLOCKSIZEY * G;
        pcnt[d] = nblk[d] * BLOCKSIZEY * G;
    }
    app_sample_t smp;
    app_sample_init(&smp, &app, npts, ndev, pfirst, pcnt);
    float *ref = app_malloc(smp.count * sizeof(float)), *mag = app_malloc(smp.count * sizeof(float));
    ref_ctx_t rc = {atoms, natoms, chunk, G, ref, mag};
    if (smp.idx) {
        ref_sample_ctx_t sc = {&rc, &smp};
        app_parallel_for(smp.count, ref_sample_range, &sc);
    } else {
        app_parallel_for(G, ref_range, &rc);
    }
    APP_CHECK_FLOAT_SAMPLE(grid, ref, mag, 0.0, &smp, 1e-5, "potential grid");
    app_sample_free(&smp);
    app_report(&app, G, &best);

    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clReleaseMemObject(egrid[d]));
        for (int c = 0; c < nchunks; c++)
            MUST(clReleaseMemObject(abuf[d * (size_t)nchunks + c]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    app_release(&app);
    free(abuf);
    free(atoms);
    free(grid);
    free(zeros);
    free(ref);
    free(mag);
    return ct_finish();
}
