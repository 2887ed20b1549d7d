/*
 * cluster_hybrid.c - a hybrid MPI + OpenCL program: it initialises MPI itself
 * (MPI_THREAD_MULTIPLE), uses every device of the OpenCL platform (under
 * MirrorCL: every device of every rank), checks its result bit-exactly, then
 * uses MPI itself: an allreduce of a checksum of the result (every replica must
 * hold the same bytes) and of the device count, and finalises MPI.
 * MirrorCL must work on a duplicate of the program's world and leave
 * finalisation to the program.  With HYBRID_SEED_FIRST=1 the program seeds rand()
 * from the clock and its pid before it initialises MPI (MirrorCL then initialises
 * MPI for the seed, and the program's MPI_Init_thread / MPI_Finalize leave it
 * alone) and draws its input from rand().  Built with mpicc.
 */
#define _DEFAULT_SOURCE
#include "check.h"

#include <mpi.h>
#include <time.h>
#include <unistd.h>

#define N (1u << 16)

static const char *kSrc =
    "__kernel void scale(__global const uint *a, __global uint *o, uint base)\n"
    "{ size_t i = get_global_id(0); o[i] = a[i] * 7u + (uint)(i + base); }\n";

int main(int argc, char **argv)
{
    int seed_first = ct_env_flag("HYBRID_SEED_FIRST");
    if (seed_first)
        srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        ct_die("MPI_Init_thread failed");
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ct_init("cluster_hybrid");
    CHECK_EQ(provided, MPI_THREAD_MULTIPLE);

    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "scale");

    uint32_t *in = malloc(N * 4), *out = malloc(N * 4), *ref = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++) {
        in[i] = seed_first ? (uint32_t)rand() : i * 2654435761u;
        ref[i] = in[i] * 7u + i;
    }
    size_t per = N / ndev;
    cl_command_queue qs[CT_MAX_DEVICES];
    cl_mem a[CT_MAX_DEVICES], o[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        size_t off = d * per, len = d + 1 == ndev ? N - off : per;
        qs[d] = ct_queue(ctx, devs[d], 0);
        CREATE(a[d] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, len * 4, in + off, &E));
        CREATE(o[d] = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, len * 4, NULL, &E));
        cl_uint base = (cl_uint)off;
        MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &a[d]));
        MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &o[d]));
        MUST(clSetKernelArg(k, 2, sizeof base, &base));
        MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &len, NULL, 0, NULL, NULL));
    }
    for (cl_uint d = 0; d < ndev; d++) {
        size_t off = d * per, len = d + 1 == ndev ? N - off : per;
        MUST(clEnqueueReadBuffer(qs[d], o[d], CL_TRUE, 0, len * 4, out + off, 0, NULL, NULL));
    }
    CHECK_MEM(out, ref, N, 4, "result on every device");

    /* The program's own MPI: every replica holds the same result and device list. */
    unsigned long long sum = 0;
    for (uint32_t i = 0; i < N; i++)
        sum = sum * 31 + out[i];
    unsigned long long sums[2] = {sum, ndev}, lo[2], hi[2];
    MPI_Allreduce(sums, lo, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(sums, hi, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK_TRUE(lo[0] == hi[0] && lo[1] == hi[1], "replicas differ: checksums %llx..%llx, devices %llu..%llu",
               lo[0], hi[0], lo[1], hi[1]);
    printf("  rank %d of %d: %u device(s), checksum %016llx\n", rank, size, ndev, sum);

    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clReleaseMemObject(a[d]));
        MUST(clReleaseMemObject(o[d]));
        MUST(clReleaseCommandQueue(qs[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    free(in);
    free(out);
    free(ref);
    int status = ct_finish();
    MPI_Finalize();
    return status;
}
