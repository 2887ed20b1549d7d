/*
 * errors.c - bad input, each with the error code the OpenCL 1.2 spec
 * requires: NULL handles of every object type, released handles and
 * handles of the wrong type (MirrorCL only: native platforms may crash on
 * those), wrong param_value_size, out-of-range transfers, overlapping
 * copies, bad event wait lists, objects from another context, build
 * failures, unset kernel arguments, images on devices without image
 * support.  After all of it the runtime must still work: the program ends
 * with kernels on every device checked bit-exactly.
 *
 * PoCL 3.1 deviations (checked strictly only under MirrorCL, see
 * CHECK_NATIVE_DEVIATES and the ct_mirrorcl() guards): it crashes on a
 * NULL kernel in clEnqueueNDRangeKernel/clEnqueueTask and on a NULL event
 * inside clWaitForEvents' list, and does not check some overlaps.
 */
#include "check.h"

static const char *kSrc =
    "__kernel void twice(__global const uint *in, __global uint *out)\n"
    "{ size_t i = get_global_id(0); out[i] = in[i] * 2u + 1u; }\n";

static cl_platform_id platform;
static cl_context ctx, other_ctx;
static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_program prog;
static cl_kernel kern;

static void test_null_handles(void)
{
    char buf[64];
    cl_uint u;
    size_t sz;
    cl_int err;
    /* Platform: NULL in CL_CONTEXT_PLATFORM. */
    cl_context_properties nullplat[] = {CL_CONTEXT_PLATFORM, 0, 0};
    CHECK_FAILS(clCreateContext(nullplat, ndev, devs, NULL, NULL, &E), CL_INVALID_PLATFORM);
    CHECK_FAILS(clCreateContextFromType(nullplat, CL_DEVICE_TYPE_ALL, NULL, NULL, &E), CL_INVALID_PLATFORM);
    /* Device. */
    CHECK(clGetDeviceInfo(NULL, CL_DEVICE_NAME, sizeof buf, buf, NULL), CL_INVALID_DEVICE);
    CHECK(clRetainDevice(NULL), CL_INVALID_DEVICE);
    CHECK(clReleaseDevice(NULL), CL_INVALID_DEVICE);
    cl_device_partition_property eq[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
    CHECK(clCreateSubDevices(NULL, eq, 0, NULL, &u), CL_INVALID_DEVICE);
    CHECK_FAILS(clCreateCommandQueue(ctx, NULL, 0, &E), CL_INVALID_DEVICE);
    cl_device_id withnull[2] = {devs[0], NULL};
    CHECK_FAILS(clCreateContext(NULL, 2, withnull, NULL, NULL, &E), CL_INVALID_DEVICE);
    /* Context. */
    CHECK(clGetContextInfo(NULL, CL_CONTEXT_NUM_DEVICES, sizeof u, &u, NULL), CL_INVALID_CONTEXT);
    CHECK(clRetainContext(NULL), CL_INVALID_CONTEXT);
    CHECK(clReleaseContext(NULL), CL_INVALID_CONTEXT);
    CHECK_FAILS(clCreateCommandQueue(NULL, devs[0], 0, &E), CL_INVALID_CONTEXT);
    CHECK_FAILS(clCreateBuffer(NULL, CL_MEM_READ_WRITE, 64, NULL, &E), CL_INVALID_CONTEXT);
    CHECK_FAILS(clCreateProgramWithSource(NULL, 1, &kSrc, NULL, &E), CL_INVALID_CONTEXT);
    CHECK_FAILS(clCreateUserEvent(NULL, &E), CL_INVALID_CONTEXT);
    /* Command queue. */
    CHECK(clGetCommandQueueInfo(NULL, CL_QUEUE_REFERENCE_COUNT, sizeof u, &u, NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clRetainCommandQueue(NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clReleaseCommandQueue(NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clFlush(NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clFinish(NULL), CL_INVALID_COMMAND_QUEUE);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    CHECK(clEnqueueWriteBuffer(NULL, b, CL_TRUE, 0, 16, buf, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clEnqueueReadBuffer(NULL, b, CL_TRUE, 0, 16, buf, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clEnqueueMarkerWithWaitList(NULL, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    size_t gws = 16;
    CHECK(clEnqueueNDRangeKernel(NULL, kern, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    /* Memory objects. */
    CHECK(clGetMemObjectInfo(NULL, CL_MEM_SIZE, sizeof sz, &sz, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clRetainMemObject(NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clReleaseMemObject(NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clEnqueueWriteBuffer(qs[0], NULL, CL_TRUE, 0, 16, buf, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clEnqueueReadBuffer(qs[0], NULL, CL_TRUE, 0, 16, buf, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clEnqueueCopyBuffer(qs[0], NULL, b, 0, 0, 16, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clEnqueueCopyBuffer(qs[0], b, NULL, 0, 0, 16, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    u = 0;
    CHECK(clEnqueueFillBuffer(qs[0], NULL, &u, 4, 0, 16, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    CHECK_FAILS(clEnqueueMapBuffer(qs[0], NULL, CL_TRUE, CL_MAP_READ, 0, 16, 0, NULL, NULL, &E), CL_INVALID_MEM_OBJECT);
    CHECK(clEnqueueUnmapMemObject(qs[0], NULL, buf, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    cl_buffer_region r = {0, 16};
    CHECK_FAILS(clCreateSubBuffer(NULL, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &E), CL_INVALID_MEM_OBJECT);
    CHECK(clSetMemObjectDestructorCallback(NULL, NULL, NULL), CL_INVALID_MEM_OBJECT);
    /* Programs. */
    CHECK(clGetProgramInfo(NULL, CL_PROGRAM_NUM_DEVICES, sizeof u, &u, NULL), CL_INVALID_PROGRAM);
    CHECK(clGetProgramBuildInfo(NULL, devs[0], CL_PROGRAM_BUILD_STATUS, sizeof u, &u, NULL), CL_INVALID_PROGRAM);
    CHECK(clRetainProgram(NULL), CL_INVALID_PROGRAM);
    CHECK(clReleaseProgram(NULL), CL_INVALID_PROGRAM);
    CHECK(clBuildProgram(NULL, 0, NULL, NULL, NULL, NULL), CL_INVALID_PROGRAM);
    CHECK_FAILS(clCreateKernel(NULL, "twice", &E), CL_INVALID_PROGRAM);
    CHECK(clCreateKernelsInProgram(NULL, 0, NULL, &u), CL_INVALID_PROGRAM);
    /* Kernels. */
    CHECK(clGetKernelInfo(NULL, CL_KERNEL_NUM_ARGS, sizeof u, &u, NULL), CL_INVALID_KERNEL);
    CHECK(clRetainKernel(NULL), CL_INVALID_KERNEL);
    CHECK(clReleaseKernel(NULL), CL_INVALID_KERNEL);
    CHECK(clSetKernelArg(NULL, 0, sizeof b, &b), CL_INVALID_KERNEL);
    CHECK(clGetKernelWorkGroupInfo(NULL, devs[0], CL_KERNEL_WORK_GROUP_SIZE, sizeof sz, &sz, NULL), CL_INVALID_KERNEL);
    if (ct_mirrorcl()) { /* PoCL 3.1 crashes on these */
        CHECK(clEnqueueNDRangeKernel(qs[0], NULL, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_KERNEL);
        CHECK(clEnqueueTask(qs[0], NULL, 0, NULL, NULL), CL_INVALID_KERNEL);
    }
    /* Events. */
    CHECK(clGetEventInfo(NULL, CL_EVENT_COMMAND_TYPE, sizeof u, &u, NULL), CL_INVALID_EVENT);
    CHECK(clRetainEvent(NULL), CL_INVALID_EVENT);
    CHECK(clReleaseEvent(NULL), CL_INVALID_EVENT);
    CHECK(clSetUserEventStatus(NULL, CL_COMPLETE), CL_INVALID_EVENT);
    cl_ulong t;
    CHECK(clGetEventProfilingInfo(NULL, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL), CL_INVALID_EVENT);
    cl_event nullev = NULL;
    CHECK(clWaitForEvents(1, &nullev), CL_INVALID_EVENT);
    err = clSetEventCallback(NULL, CL_COMPLETE, NULL, NULL);
    CHECK_TRUE(err == CL_INVALID_EVENT || err == CL_INVALID_VALUE, "clSetEventCallback(NULL, ..., NULL) = %s",
               cl_err_name(err));
    MUST(clReleaseMemObject(b));
}

/* MirrorCL only: released handles and handles of the wrong type. */
static void test_released_and_wrong_handles(void)
{
    char buf[64];
    cl_uint u;
    size_t sz;
    /* Buffer. */
    cl_mem b, good;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    CREATE(good = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    MUST(clReleaseMemObject(b));
    CHECK(clGetMemObjectInfo(b, CL_MEM_SIZE, sizeof sz, &sz, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clRetainMemObject(b), CL_INVALID_MEM_OBJECT);
    CHECK(clReleaseMemObject(b), CL_INVALID_MEM_OBJECT);
    CHECK(clEnqueueWriteBuffer(qs[0], b, CL_TRUE, 0, 16, buf, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clEnqueueCopyBuffer(qs[0], good, b, 0, 0, 16, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clSetKernelArg(kern, 0, sizeof b, &b), CL_INVALID_MEM_OBJECT);
    cl_buffer_region r = {0, 16};
    CHECK_FAILS(clCreateSubBuffer(b, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &E), CL_INVALID_MEM_OBJECT);
    /* Context. */
    cl_context c;
    CREATE(c = clCreateContext(NULL, 1, devs, NULL, NULL, &E));
    MUST(clReleaseContext(c));
    CHECK(clGetContextInfo(c, CL_CONTEXT_NUM_DEVICES, sizeof u, &u, NULL), CL_INVALID_CONTEXT);
    CHECK(clRetainContext(c), CL_INVALID_CONTEXT);
    CHECK(clReleaseContext(c), CL_INVALID_CONTEXT);
    CHECK_FAILS(clCreateBuffer(c, CL_MEM_READ_WRITE, 64, NULL, &E), CL_INVALID_CONTEXT);
    CHECK_FAILS(clCreateCommandQueue(c, devs[0], 0, &E), CL_INVALID_CONTEXT);
    CHECK_FAILS(clCreateUserEvent(c, &E), CL_INVALID_CONTEXT);
    /* Queue. */
    cl_command_queue q = ct_queue(ctx, devs[0], 0);
    MUST(clReleaseCommandQueue(q));
    CHECK(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof u, &u, NULL), CL_INVALID_COMMAND_QUEUE);
    CHECK(clFlush(q), CL_INVALID_COMMAND_QUEUE);
    CHECK(clFinish(q), CL_INVALID_COMMAND_QUEUE);
    CHECK(clReleaseCommandQueue(q), CL_INVALID_COMMAND_QUEUE);
    CHECK(clEnqueueWriteBuffer(q, good, CL_TRUE, 0, 16, buf, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    /* Program. */
    cl_program p;
    CREATE(p = clCreateProgramWithSource(ctx, 1, &kSrc, NULL, &E));
    MUST(clReleaseProgram(p));
    CHECK(clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof u, &u, NULL), CL_INVALID_PROGRAM);
    CHECK(clBuildProgram(p, 0, NULL, NULL, NULL, NULL), CL_INVALID_PROGRAM);
    CHECK_FAILS(clCreateKernel(p, "twice", &E), CL_INVALID_PROGRAM);
    CHECK(clReleaseProgram(p), CL_INVALID_PROGRAM);
    /* Kernel. */
    cl_kernel k = ct_kernel(prog, "twice");
    MUST(clReleaseKernel(k));
    CHECK(clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof u, &u, NULL), CL_INVALID_KERNEL);
    CHECK(clSetKernelArg(k, 0, sizeof good, &good), CL_INVALID_KERNEL);
    size_t gws = 16;
    CHECK(clEnqueueNDRangeKernel(qs[0], k, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_KERNEL);
    CHECK(clReleaseKernel(k), CL_INVALID_KERNEL);
    /* Event. */
    cl_event ev;
    CREATE(ev = clCreateUserEvent(ctx, &E));
    MUST(clSetUserEventStatus(ev, CL_COMPLETE));
    MUST(clReleaseEvent(ev));
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof u, &u, NULL), CL_INVALID_EVENT);
    CHECK(clWaitForEvents(1, &ev), CL_INVALID_EVENT);
    CHECK(clRetainEvent(ev), CL_INVALID_EVENT);
    CHECK(clReleaseEvent(ev), CL_INVALID_EVENT);
    CHECK(clEnqueueWriteBuffer(qs[0], good, CL_TRUE, 0, 16, buf, 1, &ev, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueMarkerWithWaitList(qs[0], 1, &ev, NULL), CL_INVALID_EVENT_WAIT_LIST);
    /* Sub-device. */
    cl_device_id sub[64];
    cl_uint nsub = 0;
    cl_uint cu = ct_device_uint(devs[0], CL_DEVICE_MAX_COMPUTE_UNITS);
    cl_device_partition_property eq[] = {CL_DEVICE_PARTITION_EQUALLY, cu > 1 ? cu / 2 : 1, 0};
    if (cu > 1 && clCreateSubDevices(devs[0], eq, 64, sub, &nsub) == CL_SUCCESS && nsub > 0) {
        for (cl_uint i = 0; i < nsub && i < 64; i++)
            MUST(clReleaseDevice(sub[i]));
        CHECK(clGetDeviceInfo(sub[0], CL_DEVICE_NAME, sizeof buf, buf, NULL), CL_INVALID_DEVICE);
        CHECK(clReleaseDevice(sub[0]), CL_INVALID_DEVICE);
    }
    /* Handles of the wrong type. */
    CHECK(clGetPlatformInfo((cl_platform_id)(void *)devs[0], CL_PLATFORM_NAME, sizeof buf, buf, NULL),
          CL_INVALID_PLATFORM);
    CHECK(clGetDeviceIDs((cl_platform_id)(void *)ctx, CL_DEVICE_TYPE_ALL, 0, NULL, &u), CL_INVALID_PLATFORM);
    CHECK(clGetDeviceInfo((cl_device_id)(void *)ctx, CL_DEVICE_NAME, sizeof buf, buf, NULL), CL_INVALID_DEVICE);
    CHECK(clGetContextInfo((cl_context)(void *)good, CL_CONTEXT_NUM_DEVICES, sizeof u, &u, NULL), CL_INVALID_CONTEXT);
    CHECK(clGetCommandQueueInfo((cl_command_queue)(void *)ctx, CL_QUEUE_REFERENCE_COUNT, sizeof u, &u, NULL),
          CL_INVALID_COMMAND_QUEUE);
    CHECK(clGetMemObjectInfo((cl_mem)(void *)qs[0], CL_MEM_SIZE, sizeof sz, &sz, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clGetProgramInfo((cl_program)(void *)kern, CL_PROGRAM_NUM_DEVICES, sizeof u, &u, NULL), CL_INVALID_PROGRAM);
    CHECK(clGetKernelInfo((cl_kernel)(void *)prog, CL_KERNEL_NUM_ARGS, sizeof u, &u, NULL), CL_INVALID_KERNEL);
    CHECK(clGetEventInfo((cl_event)(void *)kern, CL_EVENT_COMMAND_TYPE, sizeof u, &u, NULL), CL_INVALID_EVENT);
    CHECK(clEnqueueWriteBuffer(qs[0], (cl_mem)(void *)kern, CL_TRUE, 0, 16, buf, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    {
        cl_mem notmem = (cl_mem)(void *)qs[0];
        CHECK(clSetKernelArg(kern, 0, sizeof notmem, &notmem), CL_INVALID_MEM_OBJECT);
    }
    MUST(clReleaseMemObject(good));
}

static void test_param_sizes(void)
{
    char c;
    unsigned short s;
    cl_uint u;
    cl_int i;
    CHECK(clGetPlatformInfo(platform, CL_PLATFORM_NAME, 1, &c, NULL), CL_INVALID_VALUE);
    CHECK(clGetPlatformInfo(platform, CL_PLATFORM_NAME, 0, &c, NULL), CL_INVALID_VALUE);
    CHECK(clGetDeviceInfo(devs[0], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof s, &s, NULL), CL_INVALID_VALUE);
    CHECK(clGetDeviceInfo(devs[0], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof u, &u, NULL), CL_INVALID_VALUE);
    CHECK(clGetDeviceInfo(devs[0], CL_DEVICE_NAME, 1, &c, NULL), CL_INVALID_VALUE);
    CHECK(clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof s, &s, NULL), CL_INVALID_VALUE);
    CHECK(clGetContextInfo(ctx, CL_CONTEXT_DEVICES, sizeof u, &u, NULL), CL_INVALID_VALUE);
    CHECK(clGetCommandQueueInfo(qs[0], CL_QUEUE_CONTEXT, sizeof u, &u, NULL), CL_INVALID_VALUE);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    CHECK(clGetMemObjectInfo(b, CL_MEM_SIZE, sizeof u, &u, NULL), CL_INVALID_VALUE);
    CHECK(clGetMemObjectInfo(b, CL_MEM_FLAGS, sizeof u, &u, NULL), CL_INVALID_VALUE);
    CHECK(clGetProgramInfo(prog, CL_PROGRAM_NUM_KERNELS, sizeof u, &u, NULL), CL_INVALID_VALUE);
    CHECK(clGetProgramInfo(prog, CL_PROGRAM_CONTEXT, sizeof u, &u, NULL), CL_INVALID_VALUE);
    CHECK(clGetProgramBuildInfo(prog, devs[0], CL_PROGRAM_BUILD_STATUS, sizeof s, &s, NULL), CL_INVALID_VALUE);
    CHECK(clGetKernelInfo(kern, CL_KERNEL_NUM_ARGS, sizeof s, &s, NULL), CL_INVALID_VALUE);
    CHECK(clGetKernelInfo(kern, CL_KERNEL_FUNCTION_NAME, 2, &s, NULL), CL_INVALID_VALUE);
    size_t wg;
    CHECK(clGetKernelWorkGroupInfo(kern, devs[0], CL_KERNEL_WORK_GROUP_SIZE, sizeof u, &u, NULL), CL_INVALID_VALUE);
    (void)wg;
    cl_event ev;
    CREATE(ev = clCreateUserEvent(ctx, &E));
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL), CL_INVALID_VALUE);
    CHECK(clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof i, &i, NULL), CL_INVALID_VALUE);
    MUST(clSetUserEventStatus(ev, CL_COMPLETE));
    MUST(clReleaseEvent(ev));
    MUST(clReleaseMemObject(b));
}

static void test_transfer_ranges(void)
{
    enum { SZ = 1024 };
    unsigned char host[SZ * 2];
    memset(host, 1, sizeof host);
    cl_mem b, b2;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SZ, NULL, &E));
    CREATE(b2 = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SZ, NULL, &E));
    cl_command_queue q = qs[0];
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, SZ + 1, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, SZ - 4, 8, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, SZ, 1, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 16, NULL, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK_NATIVE_DEVIATES(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 0, host, 0, NULL, NULL), CL_INVALID_VALUE, CL_SUCCESS);
    CHECK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, SZ + 1, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueReadBuffer(q, b, CL_TRUE, SZ - 1, 2, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 16, NULL, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK_NATIVE_DEVIATES(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 0, host, 0, NULL, NULL), CL_INVALID_VALUE, CL_SUCCESS);
    CHECK(clEnqueueCopyBuffer(q, b, b2, SZ - 8, 0, 16, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueCopyBuffer(q, b, b2, 0, SZ - 8, 16, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueCopyBuffer(q, b, b2, 0, 0, 0, 0, NULL, NULL), CL_INVALID_VALUE);
    cl_uint pat = 0;
    CHECK(clEnqueueFillBuffer(q, b, &pat, 4, SZ - 4, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK_FAILS(clEnqueueMapBuffer(q, b, CL_TRUE, CL_MAP_READ, SZ - 4, 8, 0, NULL, NULL, &E), CL_INVALID_VALUE);
    size_t o[3] = {0, 0, 0}, reg[3] = {16, 16, 1}, far[3] = {0, 64, 0};
    CHECK(clEnqueueWriteBufferRect(q, b, CL_TRUE, far, o, reg, 16, 0, 16, 0, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueReadBufferRect(q, b, CL_TRUE, far, o, reg, 16, 0, 16, 0, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueCopyBufferRect(q, b, b2, far, o, reg, 16, 0, 16, 0, 0, NULL, NULL), CL_INVALID_VALUE);

    /* Overlapping copies. */
    CHECK(clEnqueueCopyBuffer(q, b, b, 0, 16, 64, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
    CHECK(clEnqueueCopyBuffer(q, b, b, 64, 0, 65, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
    size_t align = ct_max_align(ndev, devs);
    if (2 * align <= SZ / 2) {
        cl_mem s1, s2;
        cl_buffer_region r1 = {0, 2 * align}, r2 = {align, 2 * align};
        CREATE(s1 = clCreateSubBuffer(b, 0, CL_BUFFER_CREATE_TYPE_REGION, &r1, &E));
        CREATE(s2 = clCreateSubBuffer(b, 0, CL_BUFFER_CREATE_TYPE_REGION, &r2, &E));
        /* s1[align, 2*align) and s2[0, align) are the same bytes of b. */
        CHECK(clEnqueueCopyBuffer(q, s1, s2, align, 0, align, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
        CHECK(clEnqueueCopyBuffer(q, s1, b, 0, 0, 64, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
        /* Disjoint parts: fine. */
        CHECK(clEnqueueCopyBuffer(q, s1, s2, 0, align, align, 0, NULL, NULL), CL_SUCCESS);
        MUST(clFinish(q));
        MUST(clReleaseMemObject(s1));
        MUST(clReleaseMemObject(s2));
    }
    size_t so[3] = {0, 0, 0}, dov[3] = {8, 1, 0}, dok[3] = {0, 4, 0}, rr[3] = {32, 4, 1};
    CHECK(clEnqueueCopyBufferRect(q, b, b, so, dov, rr, 64, 0, 64, 0, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
    /* Non-overlapping copies inside one buffer work. */
    unsigned char init[SZ], got[SZ], ref[SZ];
    for (int i = 0; i < SZ; i++)
        init[i] = (unsigned char)(i * 7 + 3);
    MUST(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, SZ, init, 0, NULL, NULL));
    MUST(clFinish(q)); /* a blocking write need not be complete when it returns */
    MUST(clEnqueueCopyBuffer(qs[1 % ndev], b, b, 0, 512, 256, 0, NULL, NULL));
    MUST(clFinish(qs[1 % ndev]));
    MUST(clEnqueueCopyBufferRect(qs[1 % ndev], b, b, so, dok, rr, 64, 0, 64, 0, 0, NULL, NULL));
    MUST(clFinish(qs[1 % ndev]));
    MUST(clEnqueueReadBuffer(qs[2 % ndev], b, CL_TRUE, 0, SZ, got, 0, NULL, NULL));
    memcpy(ref, init, SZ);
    memmove(ref + 512, ref, 256);
    for (int y = 0; y < 4; y++)
        memmove(ref + (4 + y) * 64, ref + y * 64, 32);
    CHECK_MEM(got, ref, SZ, 1, "non-overlapping copies inside one buffer");
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(b2));
}

static void test_wait_lists(void)
{
    unsigned char host[64];
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    MUST(clSetKernelArg(kern, 0, sizeof b, &b));
    MUST(clSetKernelArg(kern, 1, sizeof b, &b));
    cl_event ok, oev, nullev = NULL;
    CREATE(ok = clCreateUserEvent(ctx, &E));
    MUST(clSetUserEventStatus(ok, CL_COMPLETE));
    CREATE(oev = clCreateUserEvent(other_ctx, &E));
    MUST(clSetUserEventStatus(oev, CL_COMPLETE));
    cl_event withnull[2] = {ok, nullev}, mixed[2] = {ok, oev};
    cl_command_queue q = qs[0];
    size_t gws = 16;
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 16, host, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 16, host, 0, &ok, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 16, host, 2, withnull, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 16, host, 2, mixed, NULL), CL_INVALID_CONTEXT);
    CHECK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 16, host, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 16, host, 2, withnull, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 16, host, 1, &oev, NULL), CL_INVALID_CONTEXT);
    if (ct_mirrorcl()) { /* PoCL 3.1 crashes on these (no wait list validation in clEnqueueNDRangeKernel) */
        CHECK(clEnqueueNDRangeKernel(q, kern, 1, NULL, &gws, NULL, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
        CHECK(clEnqueueNDRangeKernel(q, kern, 1, NULL, &gws, NULL, 2, withnull, NULL), CL_INVALID_EVENT_WAIT_LIST);
    }
    CHECK_NATIVE_DEVIATES(clEnqueueNDRangeKernel(q, kern, 1, NULL, &gws, NULL, 0, &ok, NULL),
                          CL_INVALID_EVENT_WAIT_LIST, CL_SUCCESS);
    CHECK_NATIVE_DEVIATES(clEnqueueNDRangeKernel(q, kern, 1, NULL, &gws, NULL, 2, mixed, NULL), CL_INVALID_CONTEXT,
                          CL_SUCCESS);
    CHECK(clEnqueueMarkerWithWaitList(q, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueMarkerWithWaitList(q, 2, withnull, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueMarkerWithWaitList(q, 1, &oev, NULL), CL_INVALID_CONTEXT);
    CHECK(clEnqueueBarrierWithWaitList(q, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueCopyBuffer(q, b, b, 0, 32, 16, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clEnqueueMigrateMemObjects(q, 1, &b, 0, 1, NULL, NULL), CL_INVALID_EVENT_WAIT_LIST);
    CHECK(clWaitForEvents(2, mixed), CL_INVALID_CONTEXT);
    MUST(clFinish(q));
    MUST(clReleaseEvent(ok));
    MUST(clReleaseEvent(oev));
    MUST(clReleaseMemObject(b));
}

static void test_context_mismatch(void)
{
    unsigned char host[64] = {0};
    cl_mem ob;
    CREATE(ob = clCreateBuffer(other_ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    CHECK(clEnqueueWriteBuffer(qs[0], ob, CL_TRUE, 0, 16, host, 0, NULL, NULL), CL_INVALID_CONTEXT);
    CHECK(clEnqueueReadBuffer(qs[0], ob, CL_TRUE, 0, 16, host, 0, NULL, NULL), CL_INVALID_CONTEXT);
    CHECK(clEnqueueCopyBuffer(qs[0], b, ob, 0, 0, 16, 0, NULL, NULL), CL_INVALID_CONTEXT);
    CHECK_FAILS(clEnqueueMapBuffer(qs[0], ob, CL_TRUE, CL_MAP_READ, 0, 16, 0, NULL, NULL, &E), CL_INVALID_CONTEXT);
    cl_program op = ct_build(other_ctx, kSrc, NULL);
    cl_kernel ok = ct_kernel(op, "twice");
    MUST(clSetKernelArg(ok, 0, sizeof ob, &ob));
    MUST(clSetKernelArg(ok, 1, sizeof ob, &ob));
    size_t gws = 16;
    CHECK(clEnqueueNDRangeKernel(qs[0], ok, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_CONTEXT);
    CHECK(clEnqueueTask(qs[0], ok, 0, NULL, NULL), CL_INVALID_CONTEXT);
    MUST(clFinish(qs[0]));
    MUST(clReleaseKernel(ok));
    MUST(clReleaseProgram(op));
    MUST(clReleaseMemObject(ob));
    MUST(clReleaseMemObject(b));
}

static void test_build_and_args(void)
{
    const char *bad = "__kernel void broken(__global uint *p) { p[0] = missing_symbol_qq + ; }\n";
    cl_program p;
    CREATE(p = clCreateProgramWithSource(ctx, 1, &bad, NULL, &E));
    CHECK(clBuildProgram(p, 0, NULL, NULL, NULL, NULL), CL_BUILD_PROGRAM_FAILURE);
    size_t total = 0;
    for (cl_uint d = 0; d < ndev; d++) {
        size_t sz = 0;
        MUST(clGetProgramBuildInfo(p, devs[d], CL_PROGRAM_BUILD_LOG, 0, NULL, &sz));
        total += sz > 1 ? sz - 1 : 0;
        cl_build_status st = 0;
        MUST(clGetProgramBuildInfo(p, devs[d], CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL));
        CHECK_EQ(st, CL_BUILD_ERROR);
    }
    CHECK_TRUE(total > 0, "build logs are empty after a failed build");
    CHECK_FAILS(clCreateKernel(p, "broken", &E), CL_INVALID_PROGRAM_EXECUTABLE);
    MUST(clReleaseProgram(p));
    /* Unbuilt program. */
    CREATE(p = clCreateProgramWithSource(ctx, 1, &kSrc, NULL, &E));
    CHECK_FAILS(clCreateKernel(p, "twice", &E), CL_INVALID_PROGRAM_EXECUTABLE);
    MUST(clReleaseProgram(p));
    /* Unset kernel arguments. */
    cl_kernel k = ct_kernel(prog, "twice");
    size_t gws = 16;
    CHECK(clEnqueueNDRangeKernel(qs[0], k, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_KERNEL_ARGS);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    MUST(clSetKernelArg(k, 1, sizeof b, &b));
    CHECK(clEnqueueNDRangeKernel(qs[0], k, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_KERNEL_ARGS);
    CHECK(clSetKernelArg(k, 2, sizeof b, &b), CL_INVALID_ARG_INDEX);
    CHECK(clSetKernelArg(k, 0, sizeof b - 1, &b), CL_INVALID_ARG_SIZE);
    MUST(clReleaseMemObject(b));
    MUST(clReleaseKernel(k));
    if (ct_mirrorcl()) { /* PoCL 3.1 asserts on this launch */
        /* More __local memory than the device has: CL_OUT_OF_RESOURCES at the launch. */
        const char *ls = "__kernel void loc(__global uint *o, __local uint *l)\n"
                         "{ l[get_local_id(0)] = 1u; barrier(CLK_LOCAL_MEM_FENCE); o[get_global_id(0)] = l[0]; }\n";
        cl_program lp = ct_build(ctx, ls, NULL);
        cl_kernel lk = ct_kernel(lp, "loc");
        cl_mem o;
        CREATE(o = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * 4, NULL, &E));
        MUST(clSetKernelArg(lk, 0, sizeof o, &o));
        size_t g = 64, l = 1;
        for (cl_uint d = 0; d < ndev; d++) {
            cl_ulong have = ct_device_ulong(devs[d], CL_DEVICE_LOCAL_MEM_SIZE);
            MUST(clSetKernelArg(lk, 1, (size_t)have + 4096, NULL));
            CHECK(clEnqueueNDRangeKernel(qs[d], lk, 1, NULL, &g, &l, 0, NULL, NULL), CL_OUT_OF_RESOURCES);
            MUST(clSetKernelArg(lk, 1, 64, NULL));
            MUST(clEnqueueNDRangeKernel(qs[d], lk, 1, NULL, &g, &l, 0, NULL, NULL));
            MUST(clFinish(qs[d]));
        }
        MUST(clReleaseMemObject(o));
        MUST(clReleaseKernel(lk));
        MUST(clReleaseProgram(lp));
    }
}

static void test_images(void)
{
    cl_bool any = CL_FALSE;
    for (cl_uint d = 0; d < ndev; d++) {
        cl_bool img = CL_FALSE;
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL));
        if (img)
            any = CL_TRUE;
    }
    cl_image_format fmt = {CL_RGBA, CL_UNORM_INT8};
    cl_image_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = 16;
    desc.image_height = 16;
    cl_mem img;
    if (!any) {
        CHECK_FAILS(clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &E), CL_INVALID_OPERATION);
        CHECK_FAILS(clCreateImage2D(ctx, CL_MEM_READ_WRITE, &fmt, 16, 16, 0, NULL, &E), CL_INVALID_OPERATION);
        CHECK_FAILS(clCreateImage3D(ctx, CL_MEM_READ_WRITE, &fmt, 16, 16, 4, 0, 0, NULL, &E), CL_INVALID_OPERATION);
        CHECK_FAILS(clCreateSampler(ctx, CL_FALSE, CL_ADDRESS_CLAMP, CL_FILTER_NEAREST, &E), CL_INVALID_OPERATION);
        printf("  no device supports images: clCreateImage* -> CL_INVALID_OPERATION checked\n");
    } else {
        CREATE(img = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &E));
        cl_mem_object_type t = 0;
        MUST(clGetMemObjectInfo(img, CL_MEM_TYPE, sizeof t, &t, NULL));
        CHECK_EQ(t, CL_MEM_OBJECT_IMAGE2D);
        MUST(clReleaseMemObject(img));
        printf("  devices support images: clCreateImage succeeded\n");
    }
    /* Invalid descriptors are rejected either way. */
    desc.image_type = CL_MEM_OBJECT_BUFFER;
    E = ERR_SENTINEL;
    img = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &E);
    CHECK_TRUE(img == NULL && E != CL_SUCCESS, "clCreateImage with a buffer descriptor: %s", cl_err_name(E));
}

/* The runtime still works: every device, bit-exact. */
static void final_run(void)
{
    enum { N = 1 << 16 };
    uint32_t *in = malloc(N * 4), *out = malloc(N * 4), *ref = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        in[i] = ct_rand();
        ref[i] = in[i] * 2u + 1u;
    }
    cl_mem bi, bo;
    CREATE(bi = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * 4, in, &E));
    CREATE(bo = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    MUST(clSetKernelArg(kern, 0, sizeof bi, &bi));
    MUST(clSetKernelArg(kern, 1, sizeof bo, &bo));
    for (cl_uint d = 0; d < ndev; d++) {
        size_t gws = N;
        memset(out, 0, N * 4);
        cl_event k;
        MUST(clEnqueueNDRangeKernel(qs[d], kern, 1, NULL, &gws, NULL, 0, NULL, &k));
        MUST(clEnqueueReadBuffer(qs[(d + 1) % ndev], bo, CL_TRUE, 0, N * 4, out, 1, &k, NULL));
        CHECK_MEM(out, ref, N, 4, "final kernel run after all the errors");
        MUST(clReleaseEvent(k));
        MUST(clFinish(qs[d]));
    }
    MUST(clReleaseMemObject(bi));
    MUST(clReleaseMemObject(bo));
    free(in);
    free(out);
    free(ref);
    printf("  final kernel run on %u devices: ok\n", ndev);
}

int main(void)
{
    ct_init("errors");
    platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    other_ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    prog = ct_build(ctx, kSrc, NULL);
    kern = ct_kernel(prog, "twice");

    printf("-- NULL handles\n");
    test_null_handles();
    if (ct_mirrorcl()) {
        printf("-- released handles and handles of the wrong type\n");
        test_released_and_wrong_handles();
    }
    printf("-- param_value_size\n");
    test_param_sizes();
    printf("-- transfer ranges and overlaps\n");
    test_transfer_ranges();
    printf("-- event wait lists\n");
    test_wait_lists();
    printf("-- objects from another context\n");
    test_context_mismatch();
    printf("-- build failures and kernel arguments\n");
    test_build_and_args();
    printf("-- images\n");
    test_images();
    printf("-- final run\n");
    final_run();

    MUST(clReleaseKernel(kern));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    MUST(clReleaseContext(other_ctx));
    return ct_finish();
}
