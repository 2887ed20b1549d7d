/*
 * vecadd_multi.c - the main MirrorCL demo.
 *
 * One context containing ALL devices of the platform, one in-order queue per
 * device, and element-wise kernels (float add, float fma, int add, int mad)
 * over N = 1<<20 elements split into one slice per device.  Four variants:
 *   A. private buffers: every device gets its own input/output buffers
 *      (CL_MEM_COPY_HOST_PTR) for its slice;
 *   B. shared buffers + sub-buffers: one input/output buffer for the whole
 *      vector, every device works on CL_BUFFER_CREATE_TYPE_REGION sub-buffers
 *      of its slice (concurrent writes to disjoint sub-buffers are defined
 *      behaviour in OpenCL 1.2, 5.2.1);
 *   C. shared buffers + offsets: the inputs are uploaded slice by slice with
 *      clEnqueueWriteBuffer(offset) from each device's queue, the kernel runs
 *      with a global work offset, and every device reads its slice back with
 *      clEnqueueReadBuffer(offset).  (Several queues touching disjoint byte
 *      ranges of one buffer concurrently: MirrorCL must keep the slices
 *      apart.)
 *   D. one host thread per device: each thread creates its own kernel
 *      object and buffers, enqueues on its device's queue and reads back
 *      (all OpenCL 1.2 calls but clSetKernelArg on a shared kernel are
 *      thread-safe).
 * Results are checked bit-exactly against a CPU reference.
 */
#include "check.h"

#include <pthread.h>

#define N (1u << 20)

static const char *kSrc =
    "__kernel void vadd_f(__global const float *a, __global const float *b,\n"
    "                     __global const float *c, __global float *o)\n"
    "{ size_t i = get_global_id(0); o[i] = a[i] + b[i]; }\n"
    "__kernel void vfma_f(__global const float *a, __global const float *b,\n"
    "                     __global const float *c, __global float *o)\n"
    "{ size_t i = get_global_id(0); o[i] = fma(a[i], b[i], c[i]); }\n"
    "__kernel void vadd_i(__global const int *a, __global const int *b,\n"
    "                     __global const int *c, __global int *o)\n"
    "{ size_t i = get_global_id(0); o[i] = a[i] + b[i]; }\n"
    "__kernel void vmad_i(__global const int *a, __global const int *b,\n"
    "                     __global const int *c, __global int *o)\n"
    "{ size_t i = get_global_id(0); o[i] = a[i] * b[i] + c[i]; }\n";

enum op { OP_ADD_F, OP_FMA_F, OP_ADD_I, OP_MAD_I, OP_COUNT };
static const char *kOpName[OP_COUNT] = {"vadd_f", "vfma_f", "vadd_i", "vmad_i"};

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue queues[CT_MAX_DEVICES];
static cl_context ctx;
static cl_program prog;
static cl_kernel kernels[OP_COUNT];
static size_t slice_off[CT_MAX_DEVICES], slice_len[CT_MAX_DEVICES];

static void *in_a, *in_b, *in_c, *expect;

static void make_inputs(enum op op)
{
    ct_rng_state = 0xC0FFEEu + (uint32_t)op;
    float *fa = in_a, *fb = in_b, *fc = in_c, *fe = expect;
    int32_t *ia = in_a, *ib = in_b, *ic = in_c, *ie = expect;
    for (size_t i = 0; i < N; i++) {
        switch (op) {
        case OP_ADD_F:
            fa[i] = ct_randf();
            fb[i] = ct_randf();
            fc[i] = 0.0f;
            fe[i] = fa[i] + fb[i];
            break;
        case OP_FMA_F:
            fa[i] = ct_randf();
            fb[i] = ct_randf();
            fc[i] = ct_randf();
            fe[i] = fmaf(fa[i], fb[i], fc[i]);
            break;
        case OP_ADD_I:
            ia[i] = (int32_t)(ct_rand() % 2000001u) - 1000000;
            ib[i] = (int32_t)(ct_rand() % 2000001u) - 1000000;
            ic[i] = 0;
            ie[i] = ia[i] + ib[i];
            break;
        default:
            ia[i] = (int32_t)(ct_rand() % 20001u) - 10000;
            ib[i] = (int32_t)(ct_rand() % 20001u) - 10000;
            ic[i] = (int32_t)(ct_rand() % 2000001u) - 1000000;
            ie[i] = ia[i] * ib[i] + ic[i];
            break;
        }
    }
}

static void set_args(cl_kernel k, cl_mem a, cl_mem b, cl_mem c, cl_mem o)
{
    MUST(clSetKernelArg(k, 0, sizeof(cl_mem), &a));
    MUST(clSetKernelArg(k, 1, sizeof(cl_mem), &b));
    MUST(clSetKernelArg(k, 2, sizeof(cl_mem), &c));
    MUST(clSetKernelArg(k, 3, sizeof(cl_mem), &o));
}

/* Variant A: private buffers per device. */
static void variant_private(enum op op, void *out)
{
    cl_mem a[CT_MAX_DEVICES], b[CT_MAX_DEVICES], c[CT_MAX_DEVICES], o[CT_MAX_DEVICES];
    cl_event rd[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        size_t off = slice_off[d] * 4, bytes = slice_len[d] * 4;
        if (!bytes)
            continue;
        cl_mem_flags fl = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
        CREATE(a[d] = clCreateBuffer(ctx, fl, bytes, (char *)in_a + off, &E));
        CREATE(b[d] = clCreateBuffer(ctx, fl, bytes, (char *)in_b + off, &E));
        CREATE(c[d] = clCreateBuffer(ctx, fl, bytes, (char *)in_c + off, &E));
        CREATE(o[d] = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &E));
        set_args(kernels[op], a[d], b[d], c[d], o[d]);
        size_t gws = slice_len[d];
        MUST(clEnqueueNDRangeKernel(queues[d], kernels[op], 1, NULL, &gws, NULL, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(queues[d], o[d], CL_FALSE, 0, bytes, (char *)out + off, 0, NULL, &rd[d]));
        MUST(clFlush(queues[d]));
    }
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        MUST(clWaitForEvents(1, &rd[d]));
        CHECK_EQ(ct_event_status(rd[d]), CL_COMPLETE);
        clReleaseEvent(rd[d]);
        clReleaseMemObject(a[d]);
        clReleaseMemObject(b[d]);
        clReleaseMemObject(c[d]);
        clReleaseMemObject(o[d]);
    }
}

/* Variant B: one shared buffer per operand, sub-buffers per device slice. */
static void variant_subbuffers(enum op op, void *out)
{
    cl_mem a, b, c, o;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * 4, in_a, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * 4, in_b, &E));
    CREATE(c = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * 4, in_c, &E));
    CREATE(o = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    cl_mem sa[CT_MAX_DEVICES], sb[CT_MAX_DEVICES], sc[CT_MAX_DEVICES], so[CT_MAX_DEVICES];
    cl_event kev[CT_MAX_DEVICES];
    cl_uint nk = 0;
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        cl_buffer_region r = {slice_off[d] * 4, slice_len[d] * 4};
        CREATE(sa[d] = clCreateSubBuffer(a, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r, &E));
        CREATE(sb[d] = clCreateSubBuffer(b, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r, &E));
        CREATE(sc[d] = clCreateSubBuffer(c, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r, &E));
        CREATE(so[d] = clCreateSubBuffer(o, CL_MEM_WRITE_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r, &E));
        set_args(kernels[op], sa[d], sb[d], sc[d], so[d]);
        size_t gws = slice_len[d];
        MUST(clEnqueueNDRangeKernel(queues[d], kernels[op], 1, NULL, &gws, NULL, 0, NULL, &kev[nk++]));
        MUST(clFlush(queues[d]));
    }
    /* One read of the whole shared output, on the last device's queue. */
    MUST(clEnqueueReadBuffer(queues[ndev - 1], o, CL_TRUE, 0, N * 4, out, nk, kev, NULL));
    for (cl_uint i = 0; i < nk; i++) {
        CHECK_EQ(ct_event_status(kev[i]), CL_COMPLETE);
        clReleaseEvent(kev[i]);
    }
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        MUST(clReleaseMemObject(sa[d]));
        MUST(clReleaseMemObject(sb[d]));
        MUST(clReleaseMemObject(sc[d]));
        MUST(clReleaseMemObject(so[d]));
    }
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(c));
    MUST(clReleaseMemObject(o));
}

/* Variant C: shared buffers, per-slice writes/reads with offsets, global offset. */
static void variant_offsets(enum op op, void *out)
{
    cl_mem a, b, c, o;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_ONLY, N * 4, NULL, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_ONLY, N * 4, NULL, &E));
    CREATE(c = clCreateBuffer(ctx, CL_MEM_READ_ONLY, N * 4, NULL, &E));
    CREATE(o = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    cl_event rd[CT_MAX_DEVICES];
    set_args(kernels[op], a, b, c, o);
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        size_t off = slice_off[d] * 4, bytes = slice_len[d] * 4;
        MUST(clEnqueueWriteBuffer(queues[d], a, CL_FALSE, off, bytes, (char *)in_a + off, 0, NULL, NULL));
        MUST(clEnqueueWriteBuffer(queues[d], b, CL_FALSE, off, bytes, (char *)in_b + off, 0, NULL, NULL));
        MUST(clEnqueueWriteBuffer(queues[d], c, CL_FALSE, off, bytes, (char *)in_c + off, 0, NULL, NULL));
        size_t goff = slice_off[d], gws = slice_len[d];
        MUST(clEnqueueNDRangeKernel(queues[d], kernels[op], 1, &goff, &gws, NULL, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(queues[d], o, CL_FALSE, off, bytes, (char *)out + off, 0, NULL, &rd[d]));
        MUST(clFlush(queues[d]));
    }
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        MUST(clFinish(queues[d]));
        CHECK_EQ(ct_event_status(rd[d]), CL_COMPLETE);
        clReleaseEvent(rd[d]);
    }
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(c));
    MUST(clReleaseMemObject(o));
}

/* Variant D: one host thread per device. */
struct thread_arg {
    cl_uint d;
    enum op op;
    void *out;
    cl_int err;
    int line;
};

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        cl_int e_ = (expr);                                                                        \
        if (e_ != CL_SUCCESS) {                                                                    \
            ta->err = e_;                                                                          \
            ta->line = __LINE__;                                                                   \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)

static void *thread_main(void *p)
{
    struct thread_arg *ta = p;
    cl_uint d = ta->d;
    size_t off = slice_off[d] * 4, bytes = slice_len[d] * 4;
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(prog, kOpName[ta->op], &err);
    TRY(err);
    cl_mem m[4];
    void *src[3] = {(char *)in_a + off, (char *)in_b + off, (char *)in_c + off};
    for (int i = 0; i < 3; i++) {
        m[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, src[i], &err);
        TRY(err);
    }
    m[3] = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    TRY(err);
    for (cl_uint i = 0; i < 4; i++)
        TRY(clSetKernelArg(k, i, sizeof(cl_mem), &m[i]));
    size_t gws = slice_len[d];
    cl_event kev;
    TRY(clEnqueueNDRangeKernel(queues[d], k, 1, NULL, &gws, NULL, 0, NULL, &kev));
    TRY(clEnqueueReadBuffer(queues[d], m[3], CL_TRUE, 0, bytes, (char *)ta->out + off, 1, &kev, NULL));
    TRY(clReleaseEvent(kev));
    for (int i = 0; i < 4; i++)
        TRY(clReleaseMemObject(m[i]));
    TRY(clReleaseKernel(k));
    return NULL;
}

static void variant_threads(enum op op, void *out)
{
    pthread_t th[CT_MAX_DEVICES];
    struct thread_arg args[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        args[d] = (struct thread_arg){d, op, out, CL_SUCCESS, 0};
        if (slice_len[d] && pthread_create(&th[d], NULL, thread_main, &args[d]) != 0)
            ct_die("pthread_create failed");
    }
    for (cl_uint d = 0; d < ndev; d++) {
        if (!slice_len[d])
            continue;
        pthread_join(th[d], NULL);
        if (args[d].err != CL_SUCCESS) {
            char what[128];
            snprintf(what, sizeof what, "host thread of device %u: call at vecadd_multi.c:%d", d, args[d].line);
            ct_check_code(args[d].err, CL_SUCCESS, what, __FILE__, __LINE__, 0);
        }
    }
}

int main(void)
{
    ct_init("vecadd_multi");

    /* Every platform, then the one under test. */
    cl_uint nplat = 0;
    MUST(clGetPlatformIDs(0, NULL, &nplat));
    cl_platform_id plats[16];
    MUST(clGetPlatformIDs(nplat < 16 ? nplat : 16, plats, NULL));
    for (cl_uint i = 0; i < nplat && i < 16; i++) {
        char *name = ct_platform_str(plats[i], CL_PLATFORM_NAME);
        char *ver = ct_platform_str(plats[i], CL_PLATFORM_VERSION);
        char *vendor = ct_platform_str(plats[i], CL_PLATFORM_VENDOR);
        printf("platform %u: %s | %s | %s\n", i, name, vendor, ver);
        free(name);
        free(ver);
        free(vendor);
    }
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    for (cl_uint d = 0; d < ndev; d++) {
        char *name = ct_device_str(devs[d], CL_DEVICE_NAME);
        cl_device_type t = 0;
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof t, &t, NULL));
        printf("  device %u: %s | type %s | %u compute units | %llu MiB global memory\n", d, name,
               ct_devtype_str(t), ct_device_uint(devs[d], CL_DEVICE_MAX_COMPUTE_UNITS),
               (unsigned long long)(ct_device_ulong(devs[d], CL_DEVICE_GLOBAL_MEM_SIZE) >> 20));
        free(name);
    }

    /* ONE context with all devices, created from type ALL. */
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    CREATE(ctx = clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, NULL, NULL, &E));
    cl_uint ctx_ndev = 0;
    MUST(clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof ctx_ndev, &ctx_ndev, NULL));
    CHECK_EQ(ctx_ndev, ndev);
    cl_device_id ctx_devs[CT_MAX_DEVICES];
    MUST(clGetContextInfo(ctx, CL_CONTEXT_DEVICES, ndev * sizeof(cl_device_id), ctx_devs, NULL));
    for (cl_uint d = 0; d < ndev; d++) {
        devs[d] = ctx_devs[d];
        queues[d] = ct_queue(ctx, devs[d], 0);
    }
    prog = ct_build(ctx, kSrc, NULL);
    for (int op = 0; op < OP_COUNT; op++)
        kernels[op] = ct_kernel(prog, kOpName[op]);

    /* Slices aligned to every device's base address alignment. */
    size_t gran = ct_max_align(ndev, devs) / 4;
    if (gran < 1024)
        gran = 1024;
    size_t per = ((N + ndev - 1) / ndev + gran - 1) / gran * gran;
    for (cl_uint d = 0; d < ndev; d++) {
        size_t off = d * per;
        slice_off[d] = off < N ? off : N;
        slice_len[d] = off < N ? (N - off < per ? N - off : per) : 0;
        printf("  slice %u: [%zu, %zu)\n", d, slice_off[d], slice_off[d] + slice_len[d]);
    }

    in_a = malloc(N * 4);
    in_b = malloc(N * 4);
    in_c = malloc(N * 4);
    expect = malloc(N * 4);
    void *out = malloc(N * 4);
    static const char *vname[4] = {"private buffers", "shared buffer + sub-buffers",
                                   "shared buffer + offsets", "one host thread per device"};
    /* Variant D's threads enqueue at once, interleaving differently on every rank of a
     * cluster: MirrorCL names each thread (threaded host programs), so it runs on any
     * number of ranks. */
    int variants = 4;
    for (int op = 0; op < OP_COUNT; op++) {
        make_inputs((enum op)op);
        for (int v = 0; v < variants; v++) {
            memset(out, 0xEE, N * 4);
            if (v == 0)
                variant_private((enum op)op, out);
            else if (v == 1)
                variant_subbuffers((enum op)op, out);
            else if (v == 2)
                variant_offsets((enum op)op, out);
            else
                variant_threads((enum op)op, out);
            char what[128];
            snprintf(what, sizeof what, "%s / %s", kOpName[op], vname[v]);
            int ok = CHECK_MEM(out, expect, N, 4, what);
            printf("  %-8s %-30s %s\n", kOpName[op], vname[v], ok ? "ok" : "MISMATCH");
        }
    }

    for (int op = 0; op < OP_COUNT; op++)
        MUST(clReleaseKernel(kernels[op]));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(queues[d]));
    MUST(clReleaseContext(ctx));
    free(in_a);
    free(in_b);
    free(in_c);
    free(expect);
    free(out);

    if (ct_failures == 0)
        printf("result: OK (%u elements on %u devices)\n", N, ndev);
    else
        printf("result: FAILED (%d failed checks)\n", ct_failures);
    return ct_finish();
}
