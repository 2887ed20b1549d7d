/*
 * cluster_args.c - clSetKernelArg and clEnqueueNDRangeKernel answer the same on every
 * rank, whichever rank owns the one device a program is built for (ranks once diverged:
 * a program built only for rank 1's device got CL_SUCCESS for an `int` of size 8 on
 * rank 0 and CL_INVALID_ARG_SIZE on rank 1, so the next launch ran on one rank only).
 *
 * For each device t in turn, a program is built for t alone and every validation path
 * of clSetKernelArg is tried on its kernel: index out of range, by-value sizes the
 * vendor accepts and refuses (scalars, 3- and 4-component vectors, a struct of a size no
 * power of two), NULL values, buffers (size, NULL, a pointer to NULL, a handle of another
 * type, a buffer of another context), __local sizes and values, samplers; then launches:
 * on t (checked bit-exactly), on a device it is not built for, with an argument never
 * set, and after refused settings (the old value stays). The expected codes are PoCL's
 * own (a native run passes), but for the sizes a vendor may round up (NVIDIA refuses
 * them); every rank checks them, and prints one line per call
 * ("arg <t> <case> <code>") so the harness can compare the ranks line by line.
 */
#include "check.h"

#define N 256u

static const char *kSrc =
    "typedef struct { int a; float b[4]; } pair_t;\n" /* 20 bytes */
    "__kernel void k(__global int *out, int n, __local int *scratch, float4 v,\n"
    "                __constant int *c, sampler_t s, short3 t, pair_t p, char ch)\n"
    "{\n"
    "    size_t i = get_global_id(0), l = get_local_id(0);\n"
    "    scratch[l] = (int)i;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[i] = scratch[l] * n + (int)v.w + c[i % 4] + t.z + p.a + (int)p.b[3] + ch;\n"
    "}\n";

typedef struct {
    cl_int a;
    cl_float b[4];
} pair_t;

static unsigned target;

/* One call: its code is checked and printed. */
#define ARG(name, call, expected)                                                                  \
    do {                                                                                           \
        cl_int rc_ = (call);                                                                       \
        printf("arg %u %s %d\n", target, name, (int)rc_);                                          \
        ct_check_code(rc_, (cl_int)(expected), name ": " #call, __FILE__, __LINE__, 0);            \
    } while (0)
/* A size the specification refuses (it is not the type's) and a vendor may round up:
 * PoCL accepts it, NVIDIA refuses it; either is right if every rank answers alike. */
#define ARG_SIZE_LENIENT(name, call)                                                               \
    do {                                                                                           \
        cl_int rc_ = (call);                                                                       \
        printf("arg %u %s %d\n", target, name, (int)rc_);                                          \
        if (rc_ != CL_INVALID_ARG_SIZE)                                                            \
            ct_check_code(rc_, CL_SUCCESS, name ": " #call, __FILE__, __LINE__, 0);                \
    } while (0)
/* A check PoCL does not make (known native deviation, see tests/tests/c_programs.rs). */
#define ARG_DEV(name, call, expected, deviation)                                                   \
    do {                                                                                           \
        cl_int rc_ = (call);                                                                       \
        printf("arg %u %s %d\n", target, name, (int)(ct_mirrorcl() ? rc_ : (cl_int)(expected)));  \
        ct_check_dev(rc_, (cl_int)(expected), (cl_int)(deviation), name ": " #call, __FILE__,     \
                     __LINE__);                                                                    \
    } while (0)

int main(void)
{
    ct_init("cluster_args");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_context other = ct_context(platform, 1, devs);
    cl_command_queue qs[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    printf("  %u device(s)\n", ndev);

    cl_mem out, cbuf, foreign;
    CREATE(out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(cl_int), NULL, &E));
    cl_int cvals[4] = {100, 200, 300, 400};
    CREATE(cbuf = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof cvals, cvals,
                                 &E));
    CREATE(foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &E));
    cl_sampler sampler;
    CREATE(sampler = clCreateSampler(ctx, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST, &E));
    cl_mem nullmem = NULL;

    for (target = 0; target < ndev; target++) {
        cl_program prog;
        CREATE(prog = clCreateProgramWithSource(ctx, 1, &kSrc, NULL, &E));
        cl_int built = clBuildProgram(prog, 1, &devs[target], NULL, NULL, NULL);
        if (built != CL_SUCCESS)
            ct_print_build_logs(prog);
        MUST(built);
        cl_kernel k = ct_kernel(prog, "k");
        cl_kernel fresh = ct_kernel(prog, "k");

        cl_int n = 3, wide[2] = {3, 0};
        cl_float4 v = {{1, 2, 3, 4}};
        cl_short3 t = {{5, 6, 7, 0}};
        pair_t p = {11, {0, 0, 0, 13}};
        cl_char ch = 1;
        char zeros[64] = {0};

        /* Index and kernel. */
        ARG("index", clSetKernelArg(k, 9, sizeof n, &n), CL_INVALID_ARG_INDEX);
        ARG("index-huge", clSetKernelArg(k, 0xffffffffu, sizeof n, &n), CL_INVALID_ARG_INDEX);
        ARG("kernel-null", clSetKernelArg(NULL, 1, sizeof n, &n), CL_INVALID_KERNEL);
        if (ct_mirrorcl()) /* PoCL 3.1 takes it for a kernel and crashes */
            ARG("kernel-wrong-type", clSetKernelArg((cl_kernel)out, 1, sizeof n, &n),
                CL_INVALID_KERNEL);

        /* By-value: the case first, on a kernel with nothing set yet. */
        ARG("int-size8", clSetKernelArg(k, 1, sizeof wide, wide), CL_INVALID_ARG_SIZE);
        ARG("int-size2", clSetKernelArg(k, 1, 2, &n), CL_INVALID_ARG_SIZE);
        ARG("int-size0", clSetKernelArg(k, 1, 0, &n), CL_INVALID_ARG_SIZE);
        ARG("int-null", clSetKernelArg(k, 1, sizeof n, NULL), CL_INVALID_ARG_VALUE);
        ARG_SIZE_LENIENT("int-size3", clSetKernelArg(k, 1, 3, zeros));
        ARG("int", clSetKernelArg(k, 1, sizeof n, &n), CL_SUCCESS);
        ARG("float4-size8", clSetKernelArg(k, 3, 8, &v), CL_INVALID_ARG_SIZE);
        ARG_SIZE_LENIENT("float4-size12", clSetKernelArg(k, 3, 12, &v));
        ARG("float4-size32", clSetKernelArg(k, 3, 32, zeros), CL_INVALID_ARG_SIZE);
        ARG("float4", clSetKernelArg(k, 3, sizeof v, &v), CL_SUCCESS);
        ARG("short3-size4", clSetKernelArg(k, 6, 4, &t), CL_INVALID_ARG_SIZE);
        ARG_SIZE_LENIENT("short3-size6", clSetKernelArg(k, 6, 6, &t));
        ARG("short3", clSetKernelArg(k, 6, sizeof t, &t), CL_SUCCESS);
        ARG_SIZE_LENIENT("struct-size16", clSetKernelArg(k, 7, 16, &p));
        ARG_SIZE_LENIENT("struct-size24", clSetKernelArg(k, 7, 24, zeros));
        ARG_SIZE_LENIENT("struct-size32", clSetKernelArg(k, 7, 32, zeros));
        ARG("struct-null", clSetKernelArg(k, 7, sizeof p, NULL), CL_INVALID_ARG_VALUE);
        ARG("struct", clSetKernelArg(k, 7, sizeof p, &p), CL_SUCCESS);
        ARG("char-size2", clSetKernelArg(k, 8, 2, zeros), CL_INVALID_ARG_SIZE);
        ARG("char", clSetKernelArg(k, 8, sizeof ch, &ch), CL_SUCCESS);

        /* Buffers (__global and __constant). */
        ARG("global-size4", clSetKernelArg(k, 0, 4, &out), CL_INVALID_ARG_SIZE);
        ARG("global-null", clSetKernelArg(k, 0, sizeof(cl_mem), NULL), CL_SUCCESS);
        ARG("global-null-handle", clSetKernelArg(k, 0, sizeof(cl_mem), &nullmem), CL_SUCCESS);
        ARG_DEV("global-sampler", clSetKernelArg(k, 0, sizeof sampler, &sampler),
                CL_INVALID_MEM_OBJECT, CL_SUCCESS);
        ARG_DEV("global-foreign", clSetKernelArg(k, 0, sizeof foreign, &foreign),
                CL_INVALID_MEM_OBJECT, CL_SUCCESS);
        ARG("global", clSetKernelArg(k, 0, sizeof out, &out), CL_SUCCESS);
        ARG("constant-size4", clSetKernelArg(k, 4, 4, &cbuf), CL_INVALID_ARG_SIZE);
        ARG("constant", clSetKernelArg(k, 4, sizeof cbuf, &cbuf), CL_SUCCESS);

        /* __local. */
        ARG("local-value", clSetKernelArg(k, 2, 64, zeros), CL_INVALID_ARG_VALUE);
        ARG("local-size0", clSetKernelArg(k, 2, 0, NULL), CL_INVALID_ARG_SIZE);
        ARG("local-size3", clSetKernelArg(k, 2, 3, NULL), CL_SUCCESS);
        ARG("local-huge", clSetKernelArg(k, 2, (size_t)1 << 40, NULL), CL_SUCCESS);
        ARG("local", clSetKernelArg(k, 2, 64 * sizeof(cl_int), NULL), CL_SUCCESS);

        /* Samplers. */
        ARG("sampler-size4", clSetKernelArg(k, 5, 4, &sampler), CL_INVALID_ARG_SIZE);
        ARG("sampler-null", clSetKernelArg(k, 5, sizeof sampler, NULL), CL_INVALID_ARG_VALUE);
        ARG_DEV("sampler-buffer", clSetKernelArg(k, 5, sizeof out, &out), CL_INVALID_SAMPLER,
                CL_SUCCESS);
        ARG("sampler", clSetKernelArg(k, 5, sizeof sampler, &sampler), CL_SUCCESS);

        /* Launches. Every argument of k is set (refused settings kept the old values). */
        size_t gws = N, lws = 64;
        ARG("launch", clEnqueueNDRangeKernel(qs[target], k, 1, NULL, &gws, &lws, 0, NULL, NULL),
            CL_SUCCESS);
        /* On a device the program is not built for (PoCL 3.1 asserts natively). */
        for (cl_uint d = 0; d < ndev && ct_mirrorcl(); d++)
            if (d != target)
                ARG("launch-unbuilt",
                    clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &gws, &lws, 0, NULL, NULL),
                    CL_INVALID_PROGRAM_EXECUTABLE);
        /* A kernel whose `int` was only ever refused: its arguments are not all set. */
        MUST(clSetKernelArg(fresh, 0, sizeof out, &out));
        MUST(clSetKernelArg(fresh, 2, 64 * sizeof(cl_int), NULL));
        MUST(clSetKernelArg(fresh, 3, sizeof v, &v));
        MUST(clSetKernelArg(fresh, 4, sizeof cbuf, &cbuf));
        MUST(clSetKernelArg(fresh, 5, sizeof sampler, &sampler));
        MUST(clSetKernelArg(fresh, 6, sizeof t, &t));
        MUST(clSetKernelArg(fresh, 7, sizeof p, &p));
        MUST(clSetKernelArg(fresh, 8, sizeof ch, &ch));
        ARG("fresh-int-size8", clSetKernelArg(fresh, 1, sizeof wide, wide), CL_INVALID_ARG_SIZE);
        ARG("fresh-launch",
            clEnqueueNDRangeKernel(qs[target], fresh, 1, NULL, &gws, &lws, 0, NULL, NULL),
            CL_INVALID_KERNEL_ARGS);
        MUST(clSetKernelArg(fresh, 1, sizeof n, &n));
        MUST(clSetKernelArg(fresh, 2, (size_t)1 << 40, NULL));
        /* More local memory than the device has (PoCL 3.1 asserts natively). */
        if (ct_mirrorcl())
            ARG("fresh-local-huge-launch",
                clEnqueueNDRangeKernel(qs[target], fresh, 1, NULL, &gws, &lws, 0, NULL, NULL),
                CL_OUT_OF_RESOURCES);

        cl_int got[N], want[N];
        MUST(clEnqueueReadBuffer(qs[target], out, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        for (cl_uint i = 0; i < N; i++)
            want[i] = (cl_int)i * n + 4 + cvals[i % 4] + 7 + 11 + 13 + 1;
        CHECK_MEM(got, want, N, sizeof(cl_int), "result of the launch on the built device");

        /* The same kernel from the program's binary for t: a vendor may give no argument
         * information then (MirrorCL cannot build the source again for it), and every
         * answer is still the vendor's, the same on every rank. */
        cl_device_id pdevs[CT_MAX_DEVICES];
        size_t psz = 0, sizes[CT_MAX_DEVICES] = {0};
        MUST(clGetProgramInfo(prog, CL_PROGRAM_DEVICES, sizeof pdevs, pdevs, &psz));
        MUST(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof sizes, sizes, NULL));
        unsigned char *bins[CT_MAX_DEVICES] = {0}, *bin = NULL;
        size_t bin_size = 0;
        for (size_t i = 0; i < psz / sizeof(cl_device_id); i++) {
            bins[i] = malloc(sizes[i] ? sizes[i] : 1);
            /* t's binary; natively PoCL 3.1 may list it under another of its (identical)
             * devices. */
            if (sizes[i] && (pdevs[i] == devs[target] || !bin_size)) {
                bin = bins[i];
                bin_size = sizes[i];
            }
        }
        MUST(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL));
        CHECK_TRUE(bin && bin_size > 0, "a binary for device %u", target);
        if (bin && bin_size > 0) {
            cl_program bprog;
            const unsigned char *cbin = bin;
            CREATE(bprog = clCreateProgramWithBinary(ctx, 1, &devs[target], &bin_size, &cbin, NULL,
                                                     &E));
            MUST(clBuildProgram(bprog, 1, &devs[target], NULL, NULL, NULL));
            cl_kernel bk = ct_kernel(bprog, "k");
            ARG("bin-index", clSetKernelArg(bk, 9, sizeof n, &n), CL_INVALID_ARG_INDEX);
            ARG("bin-int-size8", clSetKernelArg(bk, 1, sizeof wide, wide), CL_INVALID_ARG_SIZE);
            ARG("bin-int-size0", clSetKernelArg(bk, 1, 0, &n), CL_INVALID_ARG_SIZE);
            ARG("bin-int-null", clSetKernelArg(bk, 1, sizeof n, NULL), CL_INVALID_ARG_VALUE);
            ARG("bin-int", clSetKernelArg(bk, 1, sizeof n, &n), CL_SUCCESS);
            ARG("bin-float4-size8", clSetKernelArg(bk, 3, 8, &v), CL_INVALID_ARG_SIZE);
            ARG("bin-float4", clSetKernelArg(bk, 3, sizeof v, &v), CL_SUCCESS);
            ARG("bin-global-size4", clSetKernelArg(bk, 0, 4, &out), CL_INVALID_ARG_SIZE);
            ARG("bin-global", clSetKernelArg(bk, 0, sizeof out, &out), CL_SUCCESS);
            ARG("bin-local-value", clSetKernelArg(bk, 2, 64, zeros), CL_INVALID_ARG_VALUE);
            ARG("bin-local", clSetKernelArg(bk, 2, 64 * sizeof(cl_int), NULL), CL_SUCCESS);
            ARG("bin-constant", clSetKernelArg(bk, 4, sizeof cbuf, &cbuf), CL_SUCCESS);
            ARG("bin-sampler", clSetKernelArg(bk, 5, sizeof sampler, &sampler), CL_SUCCESS);
            ARG("bin-short3", clSetKernelArg(bk, 6, sizeof t, &t), CL_SUCCESS);
            ARG("bin-struct", clSetKernelArg(bk, 7, sizeof p, &p), CL_SUCCESS);
            ARG("bin-char-size2", clSetKernelArg(bk, 8, 2, zeros), CL_INVALID_ARG_SIZE);
            ARG("bin-char", clSetKernelArg(bk, 8, sizeof ch, &ch), CL_SUCCESS);
            MUST(clEnqueueFillBuffer(qs[target], out, zeros, sizeof(cl_int), 0, sizeof got, 0,
                                     NULL, NULL));
            ARG("bin-launch",
                clEnqueueNDRangeKernel(qs[target], bk, 1, NULL, &gws, &lws, 0, NULL, NULL),
                CL_SUCCESS);
            MUST(clEnqueueReadBuffer(qs[target], out, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
            CHECK_MEM(got, want, N, sizeof(cl_int), "result of the kernel from the binary");
            MUST(clReleaseKernel(bk));
            MUST(clReleaseProgram(bprog));
        }
        for (size_t i = 0; i < CT_MAX_DEVICES; i++)
            free(bins[i]);

        MUST(clReleaseKernel(fresh));
        MUST(clReleaseKernel(k));
        MUST(clReleaseProgram(prog));
    }
    MUST(clReleaseSampler(sampler));
    MUST(clReleaseMemObject(foreign));
    MUST(clReleaseMemObject(cbuf));
    MUST(clReleaseMemObject(out));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(other));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
