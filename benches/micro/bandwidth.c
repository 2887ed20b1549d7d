/*
 * bandwidth.c - buffer copy bandwidth between the FIRST and the LAST device of the
 * platform, for sizes from 4 KiB to 1 GiB (BW_MAX_BYTES). Under MirrorCL with two
 * ranks and one device each, every copy crosses ranks: the source buffer is attached
 * to the first device (clAttachBufferToDevice), so each clEnqueueCopyBuffer on the
 * last device's queue moves all of it, every time. Natively (one process) it is the
 * vendor's own copy between two devices. Prints one line per size:
 *   BW bytes=<n> reps=<r> seconds_per_copy=<s> gbytes_per_s=<g>
 * and checks the copied bytes once per size.
 */
#include "../../tests/c/check.h"
#include "../../include/CL/cl_ext_mirrorcl.h"

#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    ct_init("bandwidth");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint n = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, n, devs);
    cl_command_queue q0 = ct_queue(ctx, devs[0], 0), q1 = ct_queue(ctx, devs[n - 1], 0);
    clAttachBufferToDevice_fn attach =
        (clAttachBufferToDevice_fn)clGetExtensionFunctionAddressForPlatform(platform, "clAttachBufferToDevice");
    const char *env = getenv("BW_MAX_BYTES");
    size_t max = env && *env ? (size_t)strtoull(env, NULL, 0) : (size_t)1 << 30;
    cl_ulong alloc = ct_device_ulong(devs[0], CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    if (max > alloc)
        max = (size_t)alloc;
    printf("  %u device(s); copies from device 0 to device %u; attach %s\n", n, n - 1, attach ? "used" : "not available");
    uint32_t *host = malloc(max), *back = malloc(4096);
    for (size_t i = 0; i < max / 4; i++)
        host[i] = (uint32_t)i * 2654435761u;
    for (size_t bytes = 4096; bytes <= max; bytes *= 4) {
        cl_mem a, b;
        CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host, &E));
        CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &E));
        if (attach) {
            MUST(attach(a, devs[0]));
            MUST(attach(b, devs[n - 1]));
        }
        MUST(clFinish(q0));
        /* Warm-up, then a number of copies fixed by the size (never by the clock: every
         * replica of the program must make the same calls). */
        MUST(clEnqueueCopyBuffer(q1, a, b, 0, 0, bytes, 0, NULL, NULL));
        MUST(clFinish(q1));
        size_t want = ((size_t)256 << 20) / bytes;
        int reps = want < 3 ? 3 : want > 300 ? 300 : (int)want;
        double t0 = now();
        for (int r = 0; r < reps; r++) {
            MUST(clEnqueueCopyBuffer(q1, a, b, 0, 0, bytes, 0, NULL, NULL));
            MUST(clFinish(q1));
        }
        double per = (now() - t0) / reps;
        printf("BW bytes=%zu reps=%d seconds_per_copy=%.9f gbytes_per_s=%.4f\n", bytes, reps, per, bytes / per / 1e9);
        fflush(stdout);
        size_t check = bytes < 4096 ? bytes : 4096;
        MUST(clEnqueueReadBuffer(q1, b, CL_TRUE, bytes - check, check, back, 0, NULL, NULL));
        CHECK_MEM(back, host + (bytes - check) / 4, check / 4, 4, "the end of the copied buffer");
        MUST(clReleaseMemObject(a));
        MUST(clReleaseMemObject(b));
    }
    free(host);
    free(back);
    MUST(clReleaseCommandQueue(q0));
    MUST(clReleaseCommandQueue(q1));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
