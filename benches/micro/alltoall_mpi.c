/*
 * alltoall_mpi.c - the floor for the IV.7.2 microbenchmark (tests/c/cluster_alltoall.c):
 * the same exchange written by hand with MPI point-to-point calls and the vendor's
 * OpenCL, as an MPI+OpenCL programmer would. Each rank drives one device of the first
 * platform (device rank % count; run it without libmirrorcl). Every iteration each
 * rank rewrites its 16-byte src with the same kernel as cluster_alltoall, reads it to
 * the host, sends it to every other rank and receives theirs (MPI_Isend / MPI_Irecv),
 * then writes the n gathered 16-byte pieces into its dst with one write. At the end
 * every rank checks its dst against every rank's last pattern, bit-exact.
 *
 * Environment: CLUSTER_ITERS (default 20). Rank 0 prints the time of the iterations
 * in the same form as cluster_alltoall; every rank prints how an iteration splits into
 * the kernel's launch, the blocking read, MPI and the blocking write, to set beside
 * the vendor calls of a MirrorCL trace (`mirrorcl trace`).
 */
#include "../../tests/c/check.h"

#include <mpi.h>

static const char *kSrc =
    "__kernel void fill(__global uint *s, uint dev, uint it)\n"
    "{ size_t i = get_global_id(0); s[i] = dev * 0x01000193u ^ it * 0x9e3779b9u ^ (uint)i; }\n";

static uint32_t pattern(cl_uint dev, cl_uint it, uint32_t i) { return dev * 0x01000193u ^ it * 0x9e3779b9u ^ i; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ct_init("alltoall_mpi");
    cl_platform_id platform = ct_platform();
    cl_device_id dev = ct_device_at(platform, (unsigned)rank);
    cl_context ctx = ct_context(platform, 1, &dev);
    cl_command_queue q = ct_queue(ctx, dev, 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "fill");
    const char *env = getenv("CLUSTER_ITERS");
    cl_uint iters = env && *env ? (cl_uint)atoi(env) : 20;
    cl_uint n = (cl_uint)size, me = (cl_uint)rank;

    cl_mem src, dst;
    CREATE(src = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16, NULL, &E));
    CREATE(dst = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16 * (size_t)n, NULL, &E));
    uint32_t *all = calloc((size_t)n, 16); /* slot r: rank r's src */
    MPI_Request *reqs = malloc(2 * (size_t)n * sizeof(MPI_Request));
    size_t four = 4;
    MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &src));
    MUST(clSetKernelArg(k, 1, sizeof me, &me));

    /* Warm-up, untimed (as in cluster_alltoall.c): vendors finish building a kernel at
     * its first launch. */
    cl_uint zero = 0;
    MUST(clSetKernelArg(k, 2, sizeof zero, &zero));
    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, NULL));
    MUST(clFinish(q));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    double phase[4] = {0, 0, 0, 0}; /* launch, read, MPI, write: seconds in all */
    for (cl_uint it = 0; it < iters; it++) {
        double p0 = MPI_Wtime();
        MUST(clSetKernelArg(k, 2, sizeof it, &it));
        MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &four, NULL, 0, NULL, NULL));
        double p1 = MPI_Wtime();
        MUST(clEnqueueReadBuffer(q, src, CL_TRUE, 0, 16, all + 4 * (size_t)me, 0, NULL, NULL));
        double p2 = MPI_Wtime();
        int nr = 0;
        for (cl_uint p = 0; p < n; p++) {
            if (p == me)
                continue;
            MPI_Irecv(all + 4 * (size_t)p, 16, MPI_BYTE, (int)p, (int)it, MPI_COMM_WORLD, &reqs[nr++]);
            MPI_Isend(all + 4 * (size_t)me, 16, MPI_BYTE, (int)p, (int)it, MPI_COMM_WORLD, &reqs[nr++]);
        }
        MPI_Waitall(nr, reqs, MPI_STATUSES_IGNORE);
        double p3 = MPI_Wtime();
        /* Blocking: `all` is refilled by the next iteration's read and receives. */
        MUST(clEnqueueWriteBuffer(q, dst, CL_TRUE, 0, 16 * (size_t)n, all, 0, NULL, NULL));
        phase[0] += p1 - p0;
        phase[1] += p2 - p1;
        phase[2] += p3 - p2;
        phase[3] += MPI_Wtime() - p3;
    }
    MUST(clFinish(q));
    double secs = MPI_Wtime() - t0; /* rank 0's, as cluster_alltoall reports */
    if (rank == 0)
        printf("  %u device(s), %u iterations of %u copies: %.6f s (hand-written MPI + OpenCL)\n", n, iters, n * n,
               secs);
    if (iters > 0)
        printf("  rank %d, us per iteration: kernel launch %.1f, blocking read %.1f, MPI %.1f, blocking write %.1f\n",
               rank, phase[0] * 1e6 / iters, phase[1] * 1e6 / iters, phase[2] * 1e6 / iters,
               phase[3] * 1e6 / iters);

    uint32_t *got = malloc(16 * (size_t)n), *ref = malloc(16 * (size_t)n);
    for (cl_uint i = 0; i < n; i++)
        for (uint32_t w = 0; w < 4; w++)
            ref[i * 4 + w] = pattern(i, iters - 1, w);
    memset(got, 0xEE, 16 * (size_t)n);
    MUST(clEnqueueReadBuffer(q, dst, CL_TRUE, 0, 16 * (size_t)n, got, 0, NULL, NULL));
    if (iters > 0)
        CHECK_MEM(got, ref, 4 * (size_t)n, 4, "dst of this rank's device");
    MUST(clReleaseMemObject(src));
    MUST(clReleaseMemObject(dst));
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseContext(ctx));
    free(all);
    free(reqs);
    free(got);
    free(ref);
    MPI_Finalize();
    return ct_finish();
}
