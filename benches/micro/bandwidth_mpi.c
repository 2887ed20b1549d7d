/*
 * bandwidth_mpi.c - the floor MirrorCL's cross-rank copies are measured against: raw
 * MPI between rank 0 and rank 1 (host memory, MPI_Send / MPI_Recv, buffers touched
 * once before timing), for the same sizes as bandwidth.c. Prints, on rank 1:
 *   MPI bytes=<n> reps=<r> seconds_per_copy=<s> gbytes_per_s=<g>
 * A copy is timed from the receiver's point of view like MirrorCL's (the receiver
 * asks, the sender sends: a zero-byte request, then the data).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *env = getenv("BW_MAX_BYTES");
    size_t max = env && *env ? (size_t)strtoull(env, NULL, 0) : (size_t)1 << 30;
    char *buf = malloc(max);
    memset(buf, rank + 1, max);
    for (size_t bytes = 4096; bytes <= max; bytes *= 4) {
        int count = (int)bytes; /* sizes stay below 2 GiB here */
        /* The same number of copies per size as bandwidth.c. */
        size_t want = ((size_t)256 << 20) / bytes;
        int reps = want < 3 ? 3 : want > 300 ? 300 : (int)want;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime(), t = t0;
        for (int r = 0; r < reps; r++) {
            if (rank == 1) {
                MPI_Send(NULL, 0, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, count, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 0) {
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, count, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
            }
        }
        t = MPI_Wtime();
        if (rank == 1) {
            double per = (t - t0) / reps;
            printf("MPI bytes=%zu reps=%d seconds_per_copy=%.9f gbytes_per_s=%.4f\n", bytes, reps, per,
                   bytes / per / 1e9);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
