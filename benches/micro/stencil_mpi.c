/*
 * stencil_mpi.c - the hand-written MPI + OpenCL twin of benches/apps/stencil.c: what
 * an HPC programmer writes instead of one OpenCL program over all devices.  One rank
 * per device (device rank % count of the first platform; run it without
 * libmirrorcl), the same grid, row split, kernel and reference (benches/apps/stencil.h).
 * Per step every rank runs the kernel on its block, reads its boundary rows to the
 * host (blocking: the last read of the step waits for the kernel and the reads before
 * it on the in-order queue), exchanges them with its neighbours (MPI_Irecv /
 * MPI_Isend, MPI_Waitall) and writes the received rows into its ghost rows
 * (blocking, likewise).  At the end every rank checks its block against the CPU
 * reference, bit-exact.
 *
 * Output: rank 0 prints the STEP line of stencil.c (step_us: the time of the steps as
 * rank 0 measures it, from a barrier, divided by the steps), for the benchmark harness.
 * Warm-up, untimed: one kernel launch and one exchange (vendors finish building a
 * kernel at its first launch; MPI may connect at the first message).
 *
 * Environment: APP_SIZE grid side (default 1024), APP_STEPS (default 100), APP_WARMUP.
 */
#include "../apps/stencil.h"

#include <mpi.h>

typedef struct {
    cl_command_queue q;
    cl_mem buf;
    size_t n, rows;
    int up, down; /* neighbour ranks, or MPI_PROC_NULL */
    float *send[2], *recv[2];
} halo_t;

/* Boundary rows of buf out to the neighbours, their rows into buf's ghost rows. */
static void exchange(halo_t *h, int tag)
{
    size_t row = h->n * sizeof(float);
    size_t off_send[2] = {row, h->rows * row}, off_recv[2] = {0, (h->rows + 1) * row};
    int peer[2] = {h->up, h->down};
    int last = peer[1] != MPI_PROC_NULL ? 1 : 0;
    for (int s = 0; s < 2; s++)
        if (peer[s] != MPI_PROC_NULL)
            MUST(clEnqueueReadBuffer(h->q, h->buf, s == last ? CL_TRUE : CL_FALSE, off_send[s], row, h->send[s], 0,
                                     NULL, NULL));
    MPI_Request reqs[4];
    int nr = 0;
    for (int s = 0; s < 2; s++)
        if (peer[s] != MPI_PROC_NULL) {
            MPI_Irecv(h->recv[s], (int)h->n, MPI_FLOAT, peer[s], tag, MPI_COMM_WORLD, &reqs[nr++]);
            MPI_Isend(h->send[s], (int)h->n, MPI_FLOAT, peer[s], tag, MPI_COMM_WORLD, &reqs[nr++]);
        }
    MPI_Waitall(nr, reqs, MPI_STATUSES_IGNORE);
    for (int s = 0; s < 2; s++)
        if (peer[s] != MPI_PROC_NULL)
            MUST(clEnqueueWriteBuffer(h->q, h->buf, s == last ? CL_TRUE : CL_FALSE, off_recv[s], row, h->recv[s], 0,
                                      NULL, NULL));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ct_init("stencil_mpi");
    size_t n;
    int steps;
    stencil_params(&n, &steps);
    if ((size_t)size > n)
        ct_die("more ranks than grid rows");
    cl_platform_id platform = ct_platform();
    cl_device_id dev = ct_device_at(platform, (unsigned)rank);
    cl_context ctx = ct_context(platform, 1, &dev);
    cl_command_queue q = ct_queue(ctx, dev, 0);
    cl_program prog = ct_build(ctx, kStencilSrc, NULL);
    cl_kernel k = ct_kernel(prog, "stencil_step");
    size_t first, rows, row = n * sizeof(float);
    app_split(n, (cl_uint)size, (cl_uint)rank, &first, &rows);
    if (rank == 0)
        printf("  %d rank(s), %zu x %zu grid, %d steps, ghost rows of %zu bytes (hand-written MPI + OpenCL)\n", size,
               n, n, steps, row);

    cl_mem buf[2];
    for (int b = 0; b < 2; b++)
        CREATE(buf[b] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (rows + 2) * row, NULL, &E));
    float *init = app_malloc((rows + 2) * row);
    stencil_block(n, first, rows, init);
    halo_t h = {.q = q, .n = n, .rows = rows, .up = rank > 0 ? rank - 1 : MPI_PROC_NULL,
                .down = rank + 1 < size ? rank + 1 : MPI_PROC_NULL};
    for (int s = 0; s < 2; s++) {
        h.send[s] = app_malloc(row);
        h.recv[s] = app_malloc(row);
    }
    int in = (int)n, ifirst = (int)first;
    size_t global[2] = {n, rows};
    MUST(clSetKernelArg(k, 2, sizeof in, &in));
    MUST(clSetKernelArg(k, 3, sizeof ifirst, &ifirst));

    const char *w = getenv("APP_WARMUP");
    if (!(w && strcmp(w, "0") == 0)) {
        /* On the buffers written again below. */
        MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &buf[1]));
        MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &buf[0]));
        MUST(clEnqueueNDRangeKernel(q, k, 2, NULL, global, NULL, 0, NULL, NULL));
        h.buf = buf[1];
        exchange(&h, 0);
        MUST(clFinish(q));
    }
    for (int b = 0; b < 2; b++)
        MUST(clEnqueueWriteBuffer(q, buf[b], CL_TRUE, 0, (rows + 2) * row, init, 0, NULL, NULL));

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int s = 0; s < steps; s++) {
        int from = s % 2;
        MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &buf[1 - from]));
        MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &buf[from]));
        MUST(clEnqueueNDRangeKernel(q, k, 2, NULL, global, NULL, 0, NULL, NULL));
        h.buf = buf[1 - from];
        exchange(&h, 1 + s % 2);
    }
    MUST(clFinish(q));
    double secs = MPI_Wtime() - t0; /* rank 0's */
    if (rank == 0)
        stencil_report_step("stencil_mpi", (unsigned)size, n, steps, secs);

    float *got = app_malloc(rows * row), *ref = app_malloc(n * row);
    MUST(clEnqueueReadBuffer(q, buf[steps % 2], CL_TRUE, row, rows * row, got, 0, NULL, NULL));
    stencil_reference(n, steps, ref);
    if (CHECK_MEM(got, ref + first * n, rows * n, sizeof(float), "this rank's block after the steps"))
        printf("  check block of rows %zu..%zu: %zu values bit-exact\n", first, first + rows - 1, rows * n);
    for (int b = 0; b < 2; b++)
        MUST(clReleaseMemObject(buf[b]));
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseContext(ctx));
    for (int s = 0; s < 2; s++) {
        free(h.send[s]);
        free(h.recv[s]);
    }
    free(init);
    free(got);
    free(ref);
    MPI_Finalize();
    return ct_finish();
}
