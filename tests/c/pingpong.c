/*
 * pingpong.c - one buffer modified in turn by kernels on device
 * 0,1,2,0,1,2,... (30 rounds), first ordered only by events (no clFinish in
 * between), then ordered by clFinish; then a copy chain with
 * clEnqueueCopyBuffer between buffers used on different devices.  Every
 * result is checked bit-exactly against a CPU reference.
 */
#include "check.h"

#define N (1u << 18)
#define ROUNDS 30

static const char *kSrc =
    "__kernel void bump(__global uint *b, uint round)\n"
    "{ size_t i = get_global_id(0); b[i] = b[i] * 3u + round + (uint)(i & 255u); }\n"
    "__kernel void bump_f(__global float *b, float s)\n"
    "{ size_t i = get_global_id(0); b[i] = fma(b[i], s, 1.0f); }\n";

static uint32_t bump_ref(uint32_t x, uint32_t round, uint32_t i) { return x * 3u + round + (i & 255u); }

int main(void)
{
    ct_init("pingpong");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx = ct_context(platform, ndev, devs);
    cl_command_queue qs[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    cl_kernel bump = ct_kernel(prog, "bump"), bump_f = ct_kernel(prog, "bump_f");

    uint32_t *init = malloc(N * 4), *ref = malloc(N * 4), *got = malloc(N * 4);
    for (cl_uint i = 0; i < N; i++)
        init[i] = ct_rand();
    size_t gws = N;

    /* Phase 1: ordered by events only. */
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4, init, &E));
    memcpy(ref, init, N * 4);
    MUST(clSetKernelArg(bump, 0, sizeof b, &b));
    cl_event prev = NULL;
    for (cl_uint r = 0; r < ROUNDS; r++) {
        cl_uint d = r % ndev;
        cl_event ev;
        MUST(clSetKernelArg(bump, 1, sizeof r, &r));
        MUST(clEnqueueNDRangeKernel(qs[d], bump, 1, NULL, &gws, NULL, prev ? 1 : 0, prev ? &prev : NULL, &ev));
        MUST(clFlush(qs[d]));
        if (prev)
            MUST(clReleaseEvent(prev));
        prev = ev;
        for (cl_uint i = 0; i < N; i++)
            ref[i] = bump_ref(ref[i], r, i);
    }
    MUST(clEnqueueReadBuffer(qs[ROUNDS % ndev], b, CL_TRUE, 0, N * 4, got, 1, &prev, NULL));
    MUST(clReleaseEvent(prev));
    CHECK_MEM(got, ref, N, 4, "ping-pong ordered by events");
    printf("  phase 1: %d rounds over %u devices ordered by events: %s\n", ROUNDS, ndev,
           memcmp(got, ref, N * 4) ? "MISMATCH" : "ok");

    /* Phase 2: ordered by clFinish, with host writes and reads in between. */
    for (cl_uint r = 0; r < ROUNDS; r++) {
        cl_uint d = r % ndev;
        cl_uint rr = 1000 + r;
        MUST(clSetKernelArg(bump, 1, sizeof rr, &rr));
        MUST(clEnqueueNDRangeKernel(qs[d], bump, 1, NULL, &gws, NULL, 0, NULL, NULL));
        MUST(clFinish(qs[d]));
        for (cl_uint i = 0; i < N; i++)
            ref[i] = bump_ref(ref[i], rr, i);
        if (r % 7 == 3) {
            /* Host peeks on the next device and patches a slice through yet another one. */
            uint32_t peek[256];
            MUST(clEnqueueReadBuffer(qs[(d + 1) % ndev], b, CL_TRUE, 4096 * 4, sizeof peek, peek, 0, NULL, NULL));
            CHECK_MEM(peek, ref + 4096, 256, 4, "host read between finished rounds");
            for (int i = 0; i < 256; i++)
                peek[i] ^= 0x5A5A5A5Au;
            MUST(clEnqueueWriteBuffer(qs[(d + 2) % ndev], b, CL_TRUE, 8192 * 4, sizeof peek, peek, 0, NULL, NULL));
            MUST(clFinish(qs[(d + 2) % ndev]));
            memcpy(ref + 8192, peek, sizeof peek);
        }
    }
    MUST(clEnqueueReadBuffer(qs[0], b, CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
    CHECK_MEM(got, ref, N, 4, "ping-pong ordered by clFinish");
    printf("  phase 2: %d rounds ordered by clFinish: %s\n", ROUNDS, memcmp(got, ref, N * 4) ? "MISMATCH" : "ok");

    /* Phase 3: floats, fma, events, mapped read at the end on another device. */
    float *fin = malloc(N * 4), *fref = malloc(N * 4);
    for (cl_uint i = 0; i < N; i++)
        fref[i] = fin[i] = ct_randf() / 1000.0f;
    cl_mem fb;
    CREATE(fb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    MUST(clEnqueueWriteBuffer(qs[ndev - 1], fb, CL_FALSE, 0, N * 4, fin, 0, NULL, &prev));
    MUST(clSetKernelArg(bump_f, 0, sizeof fb, &fb));
    for (cl_uint r = 0; r < ROUNDS; r++) {
        cl_uint d = r % ndev;
        float s = 0.5f + (float)r / 64.0f;
        cl_event ev;
        MUST(clSetKernelArg(bump_f, 1, sizeof s, &s));
        MUST(clEnqueueNDRangeKernel(qs[d], bump_f, 1, NULL, &gws, NULL, 1, &prev, &ev));
        MUST(clFlush(qs[d]));
        MUST(clReleaseEvent(prev));
        prev = ev;
        for (cl_uint i = 0; i < N; i++)
            fref[i] = fmaf(fref[i], s, 1.0f);
    }
    float *mp;
    CREATE(mp = clEnqueueMapBuffer(qs[(ROUNDS + 1) % ndev], fb, CL_TRUE, CL_MAP_READ, 0, N * 4, 1, &prev, NULL, &E));
    CHECK_MEM(mp, fref, N, 4, "float ping-pong (fma) read through a map");
    MUST(clEnqueueUnmapMemObject(qs[(ROUNDS + 1) % ndev], fb, mp, 0, NULL, NULL));
    MUST(clFinish(qs[(ROUNDS + 1) % ndev]));
    MUST(clReleaseEvent(prev));
    printf("  phase 3: float fma ping-pong checked\n");

    /* Phase 4: copy chain between buffers used on different devices. */
    enum { HOPS = 9 };
    cl_mem chain[HOPS + 1];
    for (int h = 0; h <= HOPS; h++)
        CREATE(chain[h] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    memcpy(ref, init, N * 4);
    MUST(clEnqueueWriteBuffer(qs[0], chain[0], CL_FALSE, 0, N * 4, init, 0, NULL, &prev));
    for (int h = 0; h < HOPS; h++) {
        cl_uint dc = (cl_uint)h % ndev, dk = (cl_uint)(h + 1) % ndev;
        cl_event cev0, cev, kev;
        /* Copy on device dc (part shifted), kernel on device dk modifies the copy in place. */
        MUST(clEnqueueCopyBuffer(qs[dc], chain[h], chain[h + 1], 0, 0, N * 4, 1, &prev, &cev0));
        MUST(clEnqueueCopyBuffer(qs[dc], chain[h], chain[h + 1], 0, 4 * 1024, 4 * 1024, 0, NULL, &cev));
        memmove(ref + 1024, ref, 4 * 1024);
        cl_uint rr = 500 + (cl_uint)h;
        MUST(clSetKernelArg(bump, 0, sizeof chain[h + 1], &chain[h + 1]));
        MUST(clSetKernelArg(bump, 1, sizeof rr, &rr));
        MUST(clEnqueueNDRangeKernel(qs[dk], bump, 1, NULL, &gws, NULL, 1, &cev, &kev));
        MUST(clFlush(qs[dc]));
        MUST(clFlush(qs[dk]));
        for (cl_uint i = 0; i < N; i++)
            ref[i] = bump_ref(ref[i], rr, i);
        MUST(clReleaseEvent(prev));
        MUST(clReleaseEvent(cev0));
        MUST(clReleaseEvent(cev));
        prev = kev;
    }
    MUST(clEnqueueReadBuffer(qs[(HOPS + 1) % ndev], chain[HOPS], CL_TRUE, 0, N * 4, got, 1, &prev, NULL));
    CHECK_MEM(got, ref, N, 4, "copy chain across devices");
    /* Every intermediate buffer is still intact (read on yet another device). */
    MUST(clEnqueueReadBuffer(qs[1 % ndev], chain[0], CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
    CHECK_MEM(got, init, N, 4, "first buffer of the copy chain");
    MUST(clReleaseEvent(prev));
    printf("  phase 4: copy chain of %d hops checked\n", HOPS);

    for (int h = 0; h <= HOPS; h++)
        MUST(clReleaseMemObject(chain[h]));
    MUST(clReleaseMemObject(fb));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseKernel(bump));
    MUST(clReleaseKernel(bump_f));
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    free(init);
    free(ref);
    free(got);
    free(fin);
    free(fref);
    return ct_finish();
}
