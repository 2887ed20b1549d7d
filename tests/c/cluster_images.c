/*
 * cluster_images.c - images large enough that a transfer between devices (between
 * ranks in a cluster) moves them in several pieces: a 2D image of 1024 x 1024
 * RGBA/UNSIGNED_INT8 (4 MiB: pieces of rows), a 3D image of 64^3 R/UNSIGNED_INT32
 * (1 MiB: pieces of whole slices), a 2D array of
 * 256 x 256 x 32 RGBA/UNSIGNED_INT16 and a 2D image whose host memory
 * (CL_MEM_USE_HOST_PTR) has padded rows.
 * Kernels wrap their results to the channel size (writes would saturate).
 * Each image is written through device 0, transformed by a kernel on every device in
 * turn (image i's output is device i+1's input), read back through device 0 and mapped
 * there, and compared bit-exactly with a CPU reference; then a partial write on the
 * last device must keep the rest of the image written elsewhere.
 */
#include "check.h"

static const char *kSrc =
    "__constant sampler_t S = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE |"
    " CLK_FILTER_NEAREST;\n"
    "__kernel void step2d(read_only image2d_t in, write_only image2d_t out, uint k)\n"
    "{ int2 p = (int2)(get_global_id(0), get_global_id(1));\n"
    "  uint4 v = read_imageui(in, S, p);\n"
    "  write_imageui(out, p, (v * 3u + (uint4)(k, k + 1u, p.x & 255, p.y & 255)) & 255u); }\n"
    "__kernel void step3d(read_only image3d_t in, __global uint *out, uint k)\n"
    "{ int4 p = (int4)(get_global_id(0), get_global_id(1), get_global_id(2), 0);\n"
    "  size_t i = (get_global_id(2) * get_global_size(1) + get_global_id(1))\n"
    "             * get_global_size(0) + get_global_id(0);\n"
    "  out[i] = read_imageui(in, S, p).x * 5u + k; }\n"
    "__kernel void step_array(read_only image2d_array_t in, write_only image2d_array_t out)\n"
    "{ int4 p = (int4)(get_global_id(0), get_global_id(1), get_global_id(2), 0);\n"
    "  write_imageui(out, p, (read_imageui(in, S, p) + (uint4)(1u, 2u, 3u, 4u)) & 65535u); }\n";

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_context ctx;
static cl_kernel k2d, k3d, karr;

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    return x;
}

/* 2D: 1024 x 1024 RGBA8, chained through every device (uint8 channels wrap). */
static void chain_2d(int use_host_ptr)
{
    const size_t w = 1024, h = 1024, n = w * h * 4;
    const size_t pitch = use_host_ptr ? w * 4 + 64 : 0; /* padded host rows */
    uint8_t *data = malloc(h * (w * 4 + 64)), *ref = malloc(n), *got = malloc(n);
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w * 4; x++)
            data[y * (pitch ? pitch : w * 4) + x] = (uint8_t)mix((uint32_t)(y * 4099 + x));
    for (size_t y = 0; y < h; y++)
        memcpy(ref + y * w * 4, data + y * (pitch ? pitch : w * 4), w * 4);
    cl_image_format f = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_mem img[2];
    CREATE(img[0] = clCreateImage2D(ctx, CL_MEM_READ_WRITE | (use_host_ptr ? CL_MEM_USE_HOST_PTR : 0),
                                    &f, w, h, pitch, use_host_ptr ? data : NULL, &E));
    CREATE(img[1] = clCreateImage2D(ctx, CL_MEM_READ_WRITE, &f, w, h, 0, NULL, &E));
    size_t origin[3] = {0, 0, 0}, region[3] = {w, h, 1}, gws[2] = {w, h};
    if (!use_host_ptr)
        MUST(clEnqueueWriteImage(qs[0], img[0], CL_FALSE, origin, region, 0, 0, data, 0, NULL, NULL));
    MUST(clFinish(qs[0]));
    for (cl_uint d = 0; d < ndev; d++) {
        cl_uint k = d * 7u + (cl_uint)use_host_ptr;
        MUST(clSetKernelArg(k2d, 0, sizeof(cl_mem), &img[d % 2]));
        MUST(clSetKernelArg(k2d, 1, sizeof(cl_mem), &img[(d + 1) % 2]));
        MUST(clSetKernelArg(k2d, 2, sizeof k, &k));
        MUST(clEnqueueNDRangeKernel(qs[d], k2d, 2, NULL, gws, NULL, 0, NULL, NULL));
        MUST(clFinish(qs[d]));
        for (size_t y = 0; y < h; y++)
            for (size_t x = 0; x < w; x++) {
                uint8_t *p = ref + (y * w + x) * 4;
                uint32_t add[4] = {k, k + 1, (uint32_t)(x & 255), (uint32_t)(y & 255)};
                for (int c = 0; c < 4; c++)
                    p[c] = (uint8_t)(p[c] * 3u + add[c]);
            }
    }
    cl_mem last = img[ndev % 2];
    MUST(clEnqueueReadImage(qs[0], last, CL_TRUE, origin, region, 0, 0, got, 0, NULL, NULL));
    CHECK_MEM(got, ref, n, 1, use_host_ptr ? "2D chain (host rows padded)" : "2D chain");
    /* A partial write on the last device keeps the rest: rows 100..199 only. */
    size_t o2[3] = {0, 100, 0}, r2[3] = {w, 100, 1};
    memset(got, 0xA5, w * 4 * 100);
    MUST(clEnqueueWriteImage(qs[ndev - 1], last, CL_TRUE, o2, r2, 0, 0, got, 0, NULL, NULL));
    memset(ref + 100 * w * 4, 0xA5, w * 4 * 100);
    size_t rp = 0;
    uint8_t *m = clEnqueueMapImage(qs[0], last, CL_TRUE, CL_MAP_READ, origin, region, &rp, NULL, 0, NULL, NULL, &E);
    CHECK_EQ(E, CL_SUCCESS);
    if (m) {
        for (size_t y = 0; y < h; y++)
            memcpy(got + y * w * 4, m + y * rp, w * 4);
        CHECK_MEM(got, ref, n, 1, "2D after a partial write elsewhere (mapped)");
        MUST(clEnqueueUnmapMemObject(qs[0], last, m, 0, NULL, NULL));
    }
    MUST(clFinish(qs[0]));
    MUST(clReleaseMemObject(img[0]));
    MUST(clReleaseMemObject(img[1]));
    free(data), free(ref), free(got);
}

/* 3D: 64^3 R32UI written on device 0, read by a kernel on every device. */
static void read_3d(void)
{
    const size_t s = 64, n = s * s * s;
    uint32_t *data = malloc(n * 4), *got = malloc(n * 4), *ref = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        data[i] = mix((uint32_t)i);
    cl_image_format f = {CL_R, CL_UNSIGNED_INT32};
    cl_mem img, out;
    CREATE(img = clCreateImage3D(ctx, CL_MEM_READ_ONLY, &f, s, s, s, 0, 0, NULL, &E));
    CREATE(out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * 4, NULL, &E));
    size_t origin[3] = {0, 0, 0}, region[3] = {s, s, s};
    MUST(clEnqueueWriteImage(qs[0], img, CL_TRUE, origin, region, 0, 0, data, 0, NULL, NULL));
    for (cl_uint d = 0; d < ndev; d++) {
        cl_uint k = 11u * d + 1u;
        MUST(clSetKernelArg(k3d, 0, sizeof(cl_mem), &img));
        MUST(clSetKernelArg(k3d, 1, sizeof(cl_mem), &out));
        MUST(clSetKernelArg(k3d, 2, sizeof k, &k));
        MUST(clEnqueueNDRangeKernel(qs[d], k3d, 3, NULL, region, NULL, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], out, CL_TRUE, 0, n * 4, got, 0, NULL, NULL));
        for (size_t i = 0; i < n; i++)
            ref[i] = data[i] * 5u + k;
        CHECK_MEM(got, ref, n, 4, "3D image read on each device");
    }
    MUST(clReleaseMemObject(img));
    MUST(clReleaseMemObject(out));
    free(data), free(got), free(ref);
}

/* 2D array: 256 x 256 x 32 RGBA16UI, filled, then +1..4 per device, copied to a buffer. */
static void array_2d(void)
{
    const size_t w = 256, h = 256, a = 32, n = w * h * a * 4;
    uint16_t *ref = malloc(n * 2), *got = malloc(n * 2);
    cl_image_format f = {CL_RGBA, CL_UNSIGNED_INT16};
    cl_image_desc desc = {CL_MEM_OBJECT_IMAGE2D_ARRAY, w, h, 0, a, 0, 0, 0, 0, NULL};
    cl_mem img[2], buf;
    CREATE(img[0] = clCreateImage(ctx, CL_MEM_READ_WRITE, &f, &desc, NULL, &E));
    CREATE(img[1] = clCreateImage(ctx, CL_MEM_READ_WRITE, &f, &desc, NULL, &E));
    CREATE(buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 2, NULL, &E));
    cl_uint4 color = {{7, 300, 65000, 12345}};
    size_t origin[3] = {0, 0, 0}, region[3] = {w, h, a};
    MUST(clEnqueueFillImage(qs[0], img[0], &color, origin, region, 0, NULL, NULL));
    for (size_t i = 0; i < n; i += 4) {
        ref[i] = 7, ref[i + 1] = 300, ref[i + 2] = 65000, ref[i + 3] = 12345;
    }
    for (cl_uint d = 0; d < ndev; d++) {
        MUST(clSetKernelArg(karr, 0, sizeof(cl_mem), &img[d % 2]));
        MUST(clSetKernelArg(karr, 1, sizeof(cl_mem), &img[(d + 1) % 2]));
        MUST(clEnqueueNDRangeKernel(qs[d], karr, 3, NULL, region, NULL, 0, NULL, NULL));
        MUST(clFinish(qs[d]));
        for (size_t i = 0; i < n; i++)
            ref[i] = (uint16_t)(ref[i] + 1 + i % 4);
    }
    /* The copy runs on the last device; the buffer is read through device 0. */
    MUST(clEnqueueCopyImageToBuffer(qs[ndev - 1], img[ndev % 2], buf, origin, region, 0, 0, NULL, NULL));
    MUST(clFinish(qs[ndev - 1]));
    MUST(clEnqueueReadBuffer(qs[0], buf, CL_TRUE, 0, n * 2, got, 0, NULL, NULL));
    CHECK_MEM(got, ref, n, 2, "2D array chain, copied to a buffer");
    MUST(clReleaseMemObject(img[0]));
    MUST(clReleaseMemObject(img[1]));
    MUST(clReleaseMemObject(buf));
    free(ref), free(got);
}

int main(void)
{
    ct_init("cluster_images");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    k2d = ct_kernel(prog, "step2d");
    k3d = ct_kernel(prog, "step3d");
    karr = ct_kernel(prog, "step_array");
    chain_2d(0);
    chain_2d(1);
    read_3d();
    array_2d();
    clReleaseKernel(k2d), clReleaseKernel(k3d), clReleaseKernel(karr);
    clReleaseProgram(prog);
    for (cl_uint d = 0; d < ndev; d++)
        clReleaseCommandQueue(qs[d]);
    clReleaseContext(ctx);
    return ct_finish();
}
