/*
 * cluster_build.c - program builds for ALL devices of the platform.
 *   1. A source with a deliberate syntax error: clBuildProgram must return
 *      CL_BUILD_PROGRAM_FAILURE; for EVERY device CL_PROGRAM_BUILD_STATUS
 *      must be CL_BUILD_ERROR and the build log non-empty; clCreateKernel
 *      must fail with CL_INVALID_PROGRAM_EXECUTABLE.  (Natively, PoCL 3.1
 *      leaves the log of every device after the first failing one empty;
 *      that is only a note unless MIRRORCL_EXPECT is set.  Its logs also
 *      name a random temporary file, so they differ between processes.)
 *      For every device d one
 *      line is printed:
 *          build-log device <d> status <status> length <len> hash <hash>
 *      status is the numeric cl_build_status, len is strlen(log) and hash is
 *      the FNV-1a 64-bit hash of those len bytes as 16 lower-case hex digits,
 *      so that a harness can compare the lines across ranks.
 *   2. A correct source built for the explicit list of all devices:
 *      CL_BUILD_SUCCESS on every device; per device the lines
 *          wg device <d> size <n> multiple <m>
 *          device <d> name <name> cu <n> mem <bytes>
 *      (CL_KERNEL_WORK_GROUP_SIZE, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
 *      CL_DEVICE_NAME, CL_DEVICE_MAX_COMPUTE_UNITS, CL_DEVICE_GLOBAL_MEM_SIZE);
 *      the kernel is run on every device (without and with an explicit local
 *      size) and the results checked bit-exactly.
 */
#include "check.h"

#define N 4096u

static const char *kBad =
    "__kernel void broken(__global uint *x)\n"
    "{\n"
    "    x[get_global_id(0)] = ;\n"
    "}\n";

static const char *kGood =
    "__kernel void good(__global uint *o, uint mul)\n"
    "{ size_t i = get_global_id(0); o[i] = (uint)i * mul + 7u; }\n";

static uint64_t fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int main(void)
{
    ct_init("cluster_build");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_command_queue qs[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    printf("  %u device(s)\n", ndev);

    /* ---- 1. a build that fails on every device -------------------------------- */
    cl_program bad;
    CREATE(bad = clCreateProgramWithSource(ctx, 1, &kBad, NULL, &E));
    CHECK(clBuildProgram(bad, 0, NULL, NULL, NULL, NULL), CL_BUILD_PROGRAM_FAILURE);
    for (cl_uint d = 0; d < ndev; d++) {
        cl_build_status st = 12345;
        MUST(clGetProgramBuildInfo(bad, devs[d], CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL));
        CHECK_EQ(st, CL_BUILD_ERROR);
        size_t sz = 0;
        MUST(clGetProgramBuildInfo(bad, devs[d], CL_PROGRAM_BUILD_LOG, 0, NULL, &sz));
        char *log = calloc(sz + 1, 1);
        MUST(clGetProgramBuildInfo(bad, devs[d], CL_PROGRAM_BUILD_LOG, sz, log, NULL));
        size_t len = strlen(log);
        if (len == 0 && d > 0 && !ct_mirrorcl())
            /* PoCL 3.1 stops at the first device that fails: the others keep
             * an empty log (known native deviation; strict under MirrorCL). */
            printf("  note: build log of device %u is empty (known native deviation)\n", d);
        else
            CHECK_TRUE(len > 0, "build log of device %u is empty", d);
        printf("build-log device %u status %d length %zu hash %016llx\n", d, (int)st, len,
               (unsigned long long)fnv1a64(log, len));
        free(log);
    }
    CHECK_FAILS(clCreateKernel(bad, "broken", &E), CL_INVALID_PROGRAM_EXECUTABLE);
    MUST(clReleaseProgram(bad));

    /* ---- 2. a correct build for the explicit list of all devices ------------- */
    cl_program good;
    CREATE(good = clCreateProgramWithSource(ctx, 1, &kGood, NULL, &E));
    cl_int berr = clBuildProgram(good, ndev, devs, NULL, NULL, NULL);
    if (berr != CL_SUCCESS)
        ct_print_build_logs(good);
    MUST(berr);
    for (cl_uint d = 0; d < ndev; d++) {
        cl_build_status st = 12345;
        MUST(clGetProgramBuildInfo(good, devs[d], CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL));
        CHECK_EQ(st, CL_BUILD_SUCCESS);
    }
    cl_kernel k = ct_kernel(good, "good");
    size_t wg[CT_MAX_DEVICES], mult[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clGetKernelWorkGroupInfo(k, devs[d], CL_KERNEL_WORK_GROUP_SIZE, sizeof wg[d], &wg[d], NULL));
        MUST(clGetKernelWorkGroupInfo(k, devs[d], CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof mult[d],
                                      &mult[d], NULL));
        CHECK_TRUE(wg[d] >= 1, "CL_KERNEL_WORK_GROUP_SIZE of device %u is 0", d);
        CHECK_TRUE(mult[d] >= 1, "CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE of device %u is 0", d);
        printf("wg device %u size %zu multiple %zu\n", d, wg[d], mult[d]);
    }
    for (cl_uint d = 0; d < ndev; d++) {
        char *name = ct_device_str(devs[d], CL_DEVICE_NAME);
        printf("device %u name %s cu %u mem %llu\n", d, name, ct_device_uint(devs[d], CL_DEVICE_MAX_COMPUTE_UNITS),
               (unsigned long long)ct_device_ulong(devs[d], CL_DEVICE_GLOBAL_MEM_SIZE));
        free(name);
    }

    /* Run the kernel on every device: once with the implementation's local
     * size, once with an explicit local size (a power of two <= the kernel's
     * work-group size, at most 64, dividing N). */
    static uint32_t got[N], ref[N];
    cl_mem o[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++)
        CREATE(o[d] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    for (int pass = 0; pass < 2; pass++) {
        int bad_devs = 0;
        for (cl_uint d = 0; d < ndev; d++) {
            cl_uint mul = 2654435761u + d * 2u + (cl_uint)pass;
            MUST(clSetKernelArg(k, 0, sizeof o[d], &o[d]));
            MUST(clSetKernelArg(k, 1, sizeof mul, &mul));
            size_t gws = N, lws = 1;
            while (lws * 2 <= wg[d] && lws * 2 <= 64)
                lws *= 2;
            MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &gws, pass ? &lws : NULL, 0, NULL, NULL));
            MUST(clFlush(qs[d]));
        }
        for (cl_uint d = 0; d < ndev; d++) {
            cl_uint mul = 2654435761u + d * 2u + (cl_uint)pass;
            for (uint32_t i = 0; i < N; i++)
                ref[i] = i * mul + 7u;
            memset(got, 0xEE, sizeof got);
            MUST(clEnqueueReadBuffer(qs[d], o[d], CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
            char what[96];
            snprintf(what, sizeof what, "kernel result on device %u (%s local size)", d, pass ? "explicit" : "default");
            if (!CHECK_MEM(got, ref, N, 4, what))
                bad_devs++;
        }
        printf("  %-40s %s\n", pass ? "kernel on every device, explicit local size" : "kernel on every device",
               bad_devs ? "MISMATCH" : "ok");
    }

    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clReleaseMemObject(o[d]));
        MUST(clReleaseCommandQueue(qs[d]));
    }
    MUST(clReleaseKernel(k));
    MUST(clReleaseProgram(good));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
