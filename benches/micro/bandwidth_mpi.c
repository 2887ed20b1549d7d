/*
 * bandwidth_mpi.c - the floors MirrorCL's cross-rank copies are measured against, for
 * the same sizes and repetition counts as bandwidth.c, between rank 0 and rank 1:
 *   (default)   raw MPI: MPI_Send / MPI_Recv of host memory (touched once before
 *               timing). Prints on rank 1:
 *                 MPI bytes=<n> reps=<r> seconds_per_copy=<s> gbytes_per_s=<g>
 *   --opencl    the copy an MPI+OpenCL programmer writes by hand: rank 0 reads its
 *               device buffer into host memory (blocking clEnqueueReadBuffer), sends
 *               it; rank 1 receives it and writes it to its device buffer (blocking
 *               clEnqueueWriteBuffer). Each rank drives device (rank % count) of the
 *               first platform; run it without libmirrorcl. Checks the bytes that
 *               arrived once per size. Prints on rank 1:
 *                 MPICL bytes=<n> reps=<r> seconds_per_copy=<s> gbytes_per_s=<g>
 * A copy is timed from the receiver's point of view like MirrorCL's (the receiver
 * asks, the sender sends: a zero-byte request, then the data).
 */
#include "../../tests/c/check.h"

#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int opencl = argc > 1 && strcmp(argv[1], "--opencl") == 0;
    const char *env = getenv("BW_MAX_BYTES");
    size_t max = env && *env ? (size_t)strtoull(env, NULL, 0) : (size_t)1 << 30;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (opencl) {
        ct_init("bandwidth_mpi");
        cl_platform_id platform = ct_platform();
        cl_device_id dev = ct_device_at(platform, (unsigned)rank);
        ctx = ct_context(platform, 1, &dev);
        q = ct_queue(ctx, dev, 0);
        cl_ulong alloc = ct_device_ulong(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
        if (max > alloc)
            max = (size_t)alloc;
        /* Both ranks must agree on the sizes. */
        unsigned long long mine = max, least = 0;
        MPI_Allreduce(&mine, &least, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        max = (size_t)least;
    }
    uint32_t *buf = malloc(max);
    for (size_t i = 0; i < max / 4; i++)
        buf[i] = rank == 0 ? (uint32_t)i * 2654435761u : 0;
    for (size_t bytes = 4096; bytes <= max; bytes *= 4) {
        int count = (int)bytes; /* sizes stay below 2 GiB here */
        cl_mem m = NULL;
        if (opencl) {
            CREATE(m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | (rank == 0 ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                                      rank == 0 ? buf : NULL, &E));
            MUST(clFinish(q));
        }
        /* The same number of copies per size as bandwidth.c. */
        size_t want = ((size_t)256 << 20) / bytes;
        int reps = want < 3 ? 3 : want > 300 ? 300 : (int)want;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int r = 0; r < reps; r++) {
            if (rank == 1) {
                MPI_Send(NULL, 0, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, count, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (opencl)
                    MUST(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, bytes, buf, 0, NULL, NULL));
            } else if (rank == 0) {
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (opencl)
                    MUST(clEnqueueReadBuffer(q, m, CL_TRUE, 0, bytes, buf, 0, NULL, NULL));
                MPI_Send(buf, count, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
            }
        }
        double per = (MPI_Wtime() - t0) / reps;
        if (rank == 1) {
            printf("%s bytes=%zu reps=%d seconds_per_copy=%.9f gbytes_per_s=%.4f\n", opencl ? "MPICL" : "MPI", bytes,
                   reps, per, bytes / per / 1e9);
            fflush(stdout);
        }
        if (opencl) {
            if (rank == 1) {
                size_t check = bytes < 4096 ? bytes : 4096;
                uint32_t *back = malloc(check), *ref = malloc(check);
                MUST(clEnqueueReadBuffer(q, m, CL_TRUE, bytes - check, check, back, 0, NULL, NULL));
                for (size_t i = 0; i < check / 4; i++)
                    ref[i] = (uint32_t)((bytes - check) / 4 + i) * 2654435761u;
                CHECK_MEM(back, ref, check / 4, 4, "the end of the copied buffer");
                free(back);
                free(ref);
            }
            MUST(clReleaseMemObject(m));
        }
    }
    free(buf);
    int rc = 0;
    if (opencl) {
        MUST(clReleaseCommandQueue(q));
        MUST(clReleaseContext(ctx));
        rc = ct_finish();
    }
    MPI_Finalize();
    return rc;
}
