/*
 * lifetimes.c - an object lives while the application holds it or another object
 * uses it (OpenCL 1.2 §5): a handle read back from a live object stays valid after
 * the application released its own reference (CL_QUEUE_CONTEXT, CL_KERNEL_PROGRAM,
 * CL_MEM_ASSOCIATED_MEMOBJECT; C++ bindings retain what getInfo returns), and a
 * buffer set as a kernel argument is deleted, its destructor callbacks run, once
 * the application releases it (kernel arguments do not retain memory objects).
 */
#include "check.h"

static const char *kSrc = "__kernel void inc(__global uint *b) { b[get_global_id(0)] += 1u; }\n";

static volatile int destroyed = 0;

static void CL_CALLBACK on_destroy(cl_mem m, void *data)
{
    (void)m;
    (void)data;
    destroyed = 1;
}

int main(void)
{
    ct_init("lifetimes");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);

    printf("-- a context kept by its queue\n");
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_command_queue q = ct_queue(ctx, devs[ndev - 1], 0);
    MUST(clReleaseContext(ctx));
    cl_context again = NULL;
    MUST(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof again, &again, NULL));
    CHECK_TRUE(again == ctx, "CL_QUEUE_CONTEXT is the context's handle");
    MUST(clRetainContext(again));
    cl_mem b;
    CREATE(b = clCreateBuffer(again, CL_MEM_READ_WRITE, 4096, NULL, &E));
    cl_uint ndev_again = 0;
    MUST(clGetContextInfo(again, CL_CONTEXT_NUM_DEVICES, sizeof ndev_again, &ndev_again, NULL));
    CHECK_EQ(ndev_again, ndev);
    printf("  retained, used and queried after clReleaseContext\n");

    printf("-- a program kept by its kernel\n");
    cl_program prog = ct_build(again, kSrc, NULL);
    cl_kernel k = ct_kernel(prog, "inc");
    MUST(clReleaseProgram(prog));
    cl_program prog_again = NULL;
    MUST(clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof prog_again, &prog_again, NULL));
    CHECK_TRUE(prog_again == prog, "CL_KERNEL_PROGRAM is the program's handle");
    MUST(clRetainProgram(prog_again));
    cl_uint pdev = 0;
    MUST(clGetProgramInfo(prog_again, CL_PROGRAM_NUM_DEVICES, sizeof pdev, &pdev, NULL));
    CHECK_EQ(pdev, ndev);
    cl_kernel k2;
    CREATE(k2 = clCreateKernel(prog_again, "inc", &E));
    MUST(clReleaseKernel(k2));
    MUST(clReleaseProgram(prog_again));
    printf("  retained, queried and built from after clReleaseProgram\n");

    printf("-- a buffer kept by its sub-buffer\n");
    cl_buffer_region region = {0, 1024};
    cl_mem sub;
    CREATE(sub = clCreateSubBuffer(b, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &E));
    MUST(clReleaseMemObject(b));
    cl_mem parent = NULL;
    MUST(clGetMemObjectInfo(sub, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL));
    CHECK_TRUE(parent == b, "CL_MEM_ASSOCIATED_MEMOBJECT is the parent's handle");
    size_t size = 0;
    MUST(clGetMemObjectInfo(parent, CL_MEM_SIZE, sizeof size, &size, NULL));
    CHECK_EQ(size, (size_t)4096);
    uint32_t data[256], got[256];
    for (int i = 0; i < 256; i++)
        data[i] = (uint32_t)i * 7u;
    MUST(clEnqueueWriteBuffer(q, sub, CL_TRUE, 0, sizeof data, data, 0, NULL, NULL));
    MUST(clSetKernelArg(k, 0, sizeof sub, &sub));
    size_t gws = 256;
    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
    MUST(clEnqueueReadBuffer(q, sub, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
    for (int i = 0; i < 256; i++)
        data[i] += 1u;
    CHECK_MEM(got, data, 256, 4, "a kernel on a sub-buffer of a released parent");
    MUST(clReleaseMemObject(sub));
    printf("  queried and used after clReleaseMemObject of the parent\n");

    printf("-- a buffer set as a kernel argument, then released\n");
    cl_mem c;
    CREATE(c = clCreateBuffer(again, CL_MEM_READ_WRITE, 1024, NULL, &E));
    MUST(clSetMemObjectDestructorCallback(c, on_destroy, NULL));
    MUST(clSetKernelArg(k, 0, sizeof c, &c));
    MUST(clFinish(q));
    MUST(clReleaseMemObject(c));
    CHECK_TRUE(ct_wait_flag(&destroyed, 1, 5000), "the destructor callback ran");
    printf("  destructor callback ran after the release\n");

    MUST(clReleaseKernel(k));
    MUST(clReleaseCommandQueue(q));
    MUST(clReleaseContext(again));
    return ct_finish();
}
