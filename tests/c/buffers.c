/*
 * buffers.c - buffer objects: clCreateBuffer flags (legal and illegal),
 * read/write (blocking, non-blocking, offsets), copy, rect read/write/copy,
 * fill, map/unmap, migrate, sub-buffers, clGetMemObjectInfo,
 * clSetMemObjectDestructorCallback.
 *
 * Data checks go through several devices whenever there are: data is
 * written on device 0's queue (qw), transformed or copied on device 1's (qk)
 * and read back on device 2's (qr) (device i % ndev), ordered by events, so
 * that MirrorCL has to move the data between devices.
 */
#include "check.h"

static const char *kSrc =
    "__kernel void xform(__global const uint *in, __global uint *out, uint mul, uint add)\n"
    "{ size_t i = get_global_id(0); out[i] = in[i] * mul + add; }\n"
    "__kernel void inplace(__global uint *b, uint add)\n"
    "{ size_t i = get_global_id(0); b[i] = b[i] + add + (uint)i; }\n"
    "__kernel void fill_idx(__global uint *b, uint base)\n"
    "{ size_t i = get_global_id(0); b[i] = base + (uint)i; }\n";

static cl_context ctx;
static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_command_queue qw, qk, qr;
static cl_kernel k_xform, k_inplace, k_fill_idx;

static void fill_pattern(void *p, size_t bytes, uint32_t seed)
{
    ct_rng_state = seed ? seed : 1;
    unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        c[i] = (unsigned char)ct_rand();
}

/* Kernel launches on qk. */
static cl_event run_xform(cl_mem in, cl_mem out, size_t n, cl_uint mul, cl_uint add, cl_uint nw,
                          const cl_event *wait)
{
    cl_event ev;
    MUST(clSetKernelArg(k_xform, 0, sizeof in, &in));
    MUST(clSetKernelArg(k_xform, 1, sizeof out, &out));
    MUST(clSetKernelArg(k_xform, 2, sizeof mul, &mul));
    MUST(clSetKernelArg(k_xform, 3, sizeof add, &add));
    MUST(clEnqueueNDRangeKernel(qk, k_xform, 1, NULL, &n, NULL, nw, wait, &ev));
    MUST(clFlush(qk));
    return ev;
}

static cl_event run_inplace(cl_mem b, size_t n, cl_uint add, cl_uint nw, const cl_event *wait)
{
    cl_event ev;
    MUST(clSetKernelArg(k_inplace, 0, sizeof b, &b));
    MUST(clSetKernelArg(k_inplace, 1, sizeof add, &add));
    MUST(clEnqueueNDRangeKernel(qk, k_inplace, 1, NULL, &n, NULL, nw, wait, &ev));
    MUST(clFlush(qk));
    return ev;
}

static void ref_inplace(uint32_t *b, size_t n, uint32_t add)
{
    for (size_t i = 0; i < n; i++)
        b[i] = b[i] + add + (uint32_t)i;
}

static void rect_copy(unsigned char *dst, const size_t dorg[3], size_t drp, size_t dsp,
                      const unsigned char *src, const size_t sorg[3], size_t srp, size_t ssp,
                      const size_t reg[3])
{
    if (!drp) drp = reg[0];
    if (!dsp) dsp = reg[1] * drp;
    if (!srp) srp = reg[0];
    if (!ssp) ssp = reg[1] * srp;
    for (size_t z = 0; z < reg[2]; z++)
        for (size_t y = 0; y < reg[1]; y++)
            memmove(dst + (dorg[2] + z) * dsp + (dorg[1] + y) * drp + dorg[0],
                    src + (sorg[2] + z) * ssp + (sorg[1] + y) * srp + sorg[0], reg[0]);
}

static void release_events(cl_uint n, cl_event *evs)
{
    for (cl_uint i = 0; i < n; i++)
        if (evs[i])
            MUST(clReleaseEvent(evs[i]));
}

/* ------------------------------------------------------------------------ */

static void test_create_flags(void)
{
    enum { SZ = 4096 };
    static unsigned char host[SZ], got[SZ];
    fill_pattern(host, SZ, 7);
    static const struct {
        cl_mem_flags flags;
        const char *name;
    } legal[] = {
        {0, "0"},
        {CL_MEM_READ_WRITE, "READ_WRITE"},
        {CL_MEM_READ_ONLY, "READ_ONLY"},
        {CL_MEM_WRITE_ONLY, "WRITE_ONLY"},
        {CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, "READ_WRITE|USE_HOST_PTR"},
        {CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, "READ_ONLY|USE_HOST_PTR"},
        {CL_MEM_WRITE_ONLY | CL_MEM_USE_HOST_PTR, "WRITE_ONLY|USE_HOST_PTR"},
        {CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, "READ_WRITE|COPY_HOST_PTR"},
        {CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, "READ_ONLY|COPY_HOST_PTR"},
        {CL_MEM_COPY_HOST_PTR, "COPY_HOST_PTR"},
        {CL_MEM_USE_HOST_PTR, "USE_HOST_PTR"},
        {CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, "READ_WRITE|ALLOC_HOST_PTR"},
        {CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR, "READ_WRITE|ALLOC|COPY"},
        {CL_MEM_READ_WRITE | CL_MEM_HOST_WRITE_ONLY, "READ_WRITE|HOST_WRITE_ONLY"},
        {CL_MEM_READ_WRITE | CL_MEM_HOST_READ_ONLY, "READ_WRITE|HOST_READ_ONLY"},
        {CL_MEM_READ_WRITE | CL_MEM_HOST_NO_ACCESS, "READ_WRITE|HOST_NO_ACCESS"},
        {CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR | CL_MEM_HOST_NO_ACCESS, "READ_ONLY|COPY|HOST_NO_ACCESS"},
        {CL_MEM_WRITE_ONLY | CL_MEM_HOST_READ_ONLY, "WRITE_ONLY|HOST_READ_ONLY"},
        {CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR | CL_MEM_HOST_READ_ONLY, "READ_WRITE|USE|HOST_READ_ONLY"},
        {CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR | CL_MEM_HOST_WRITE_ONLY, "READ_WRITE|ALLOC|HOST_WRITE_ONLY"},
    };
    cl_mem scratch;
    CREATE(scratch = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SZ, NULL, &E));
    for (size_t i = 0; i < sizeof legal / sizeof legal[0]; i++) {
        cl_mem_flags f = legal[i].flags;
        int use = (f & CL_MEM_USE_HOST_PTR) != 0, copy = (f & CL_MEM_COPY_HOST_PTR) != 0;
        unsigned char *hp = NULL;
        if (use) {
            hp = aligned_alloc(4096, SZ);
            memcpy(hp, host, SZ);
        } else if (copy) {
            hp = host;
        }
        cl_mem b;
        CHECK_CREATE(b = clCreateBuffer(ctx, f, SZ, hp, &E), CL_SUCCESS);
        if (!b) {
            fprintf(stderr, "    (flags %s)\n", legal[i].name);
            continue;
        }
        cl_mem_flags gf = 0;
        MUST(clGetMemObjectInfo(b, CL_MEM_FLAGS, sizeof gf, &gf, NULL));
        if (f != 0)
            CHECK_TRUE(gf == f, "CL_MEM_FLAGS 0x%llx, created with %s", (unsigned long long)gf, legal[i].name);
        void *gp = (void *)1;
        MUST(clGetMemObjectInfo(b, CL_MEM_HOST_PTR, sizeof gp, &gp, NULL));
        CHECK_TRUE(gp == (use ? (void *)hp : NULL), "CL_MEM_HOST_PTR %p for %s (host %p)", gp, legal[i].name,
                   (void *)hp);
        size_t gs = 0;
        MUST(clGetMemObjectInfo(b, CL_MEM_SIZE, sizeof gs, &gs, NULL));
        CHECK_EQ(gs, SZ);
        /* Content: initial data (COPY/USE) or written on qw, copied on qk, read on qr. */
        cl_event ev[3] = {0};
        const unsigned char *want = host;
        if (!use && !copy) {
            if (!(f & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)))
                MUST(clEnqueueWriteBuffer(qw, b, CL_FALSE, 0, SZ, host, 0, NULL, &ev[0]));
            else
                want = NULL; /* uninitialised content: only check the copy works */
        }
        MUST(clEnqueueCopyBuffer(qk, b, scratch, 0, 0, SZ, ev[0] ? 1 : 0, ev[0] ? ev : NULL, &ev[1]));
        memset(got, 0, SZ);
        MUST(clEnqueueReadBuffer(qr, scratch, CL_TRUE, 0, SZ, got, 1, &ev[1], NULL));
        if (want) {
            char what[96];
            snprintf(what, sizeof what, "buffer created with %s", legal[i].name);
            CHECK_MEM(got, want, SZ, 1, what);
        }
        release_events(2, ev);
        MUST(clReleaseMemObject(b));
        if (use)
            free(hp);
    }
    MUST(clReleaseMemObject(scratch));

    /* Illegal combinations. */
    static const struct {
        cl_mem_flags flags;
        int hostptr;
        cl_int err;
        const char *name;
    } illegal[] = {
        {CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 0, CL_INVALID_VALUE, "READ_ONLY|WRITE_ONLY"},
        {CL_MEM_READ_WRITE | CL_MEM_READ_ONLY, 0, CL_INVALID_VALUE, "READ_WRITE|READ_ONLY"},
        {CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY, 0, CL_INVALID_VALUE, "READ_WRITE|WRITE_ONLY"},
        {CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR, 1, CL_INVALID_VALUE, "USE|ALLOC"},
        {CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR, 1, CL_INVALID_VALUE, "USE|COPY"},
        {CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_WRITE_ONLY, 0, CL_INVALID_VALUE, "HOST_READ_ONLY|HOST_WRITE_ONLY"},
        {CL_MEM_HOST_NO_ACCESS | CL_MEM_HOST_READ_ONLY, 0, CL_INVALID_VALUE, "HOST_NO_ACCESS|HOST_READ_ONLY"},
        {CL_MEM_HOST_NO_ACCESS | CL_MEM_HOST_WRITE_ONLY, 0, CL_INVALID_VALUE, "HOST_NO_ACCESS|HOST_WRITE_ONLY"},
        {(cl_mem_flags)1 << 40, 0, CL_INVALID_VALUE, "unknown bit 1<<40"},
        {CL_MEM_COPY_HOST_PTR, 0, CL_INVALID_HOST_PTR, "COPY_HOST_PTR with NULL host_ptr"},
        {CL_MEM_USE_HOST_PTR, 0, CL_INVALID_HOST_PTR, "USE_HOST_PTR with NULL host_ptr"},
        {CL_MEM_READ_WRITE, 1, CL_INVALID_HOST_PTR, "host_ptr without USE/COPY"},
        {CL_MEM_ALLOC_HOST_PTR, 1, CL_INVALID_HOST_PTR, "host_ptr with ALLOC only"},
    };
    for (size_t i = 0; i < sizeof illegal / sizeof illegal[0]; i++) {
        E = ERR_SENTINEL;
        cl_mem b = clCreateBuffer(ctx, illegal[i].flags, SZ, illegal[i].hostptr ? host : NULL, &E);
        if (!CHECK_EQ(E, illegal[i].err) || !CHECK_TRUE(b == NULL, "buffer returned on error"))
            fprintf(stderr, "    (flags %s: expected %s, got %s)\n", illegal[i].name,
                    cl_err_name(illegal[i].err), cl_err_name(E));
        if (b)
            clReleaseMemObject(b);
    }
    CHECK_FAILS(clCreateBuffer(ctx, CL_MEM_READ_WRITE, 0, NULL, &E), CL_INVALID_BUFFER_SIZE);
    CHECK_FAILS(clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, 0, host, &E), CL_INVALID_BUFFER_SIZE);
    cl_ulong maxalloc = ct_device_ulong(devs[0], CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    for (cl_uint d = 1; d < ndev; d++) {
        cl_ulong m = ct_device_ulong(devs[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE);
        if (m > maxalloc)
            maxalloc = m;
    }
    CHECK_FAILS(clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)maxalloc + 1, NULL, &E), CL_INVALID_BUFFER_SIZE);
    CHECK_FAILS(clCreateBuffer(NULL, CL_MEM_READ_WRITE, SZ, NULL, &E), CL_INVALID_CONTEXT);
    printf("  create flags: %zu legal, %zu illegal combinations checked\n", sizeof legal / sizeof legal[0],
           sizeof illegal / sizeof illegal[0]);
}

/* CL_MEM_HOST_* flags are enforced by the enqueue calls (OpenCL 1.2). */
static void test_host_access_flags(void)
{
    unsigned char buf[64] = {0};
    cl_mem wo, ro, na;
    CREATE(wo = clCreateBuffer(ctx, CL_MEM_HOST_WRITE_ONLY, sizeof buf, NULL, &E));
    CREATE(ro = clCreateBuffer(ctx, CL_MEM_HOST_READ_ONLY, sizeof buf, NULL, &E));
    CREATE(na = clCreateBuffer(ctx, CL_MEM_HOST_NO_ACCESS, sizeof buf, NULL, &E));
    CHECK(clEnqueueReadBuffer(qr, wo, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL), CL_INVALID_OPERATION);
    CHECK(clEnqueueWriteBuffer(qw, ro, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL), CL_INVALID_OPERATION);
    CHECK(clEnqueueReadBuffer(qr, na, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL), CL_INVALID_OPERATION);
    CHECK(clEnqueueWriteBuffer(qw, na, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL), CL_INVALID_OPERATION);
    size_t o[3] = {0, 0, 0}, r[3] = {8, 2, 1};
    CHECK(clEnqueueReadBufferRect(qr, wo, CL_TRUE, o, o, r, 0, 0, 0, 0, buf, 0, NULL, NULL), CL_INVALID_OPERATION);
    CHECK(clEnqueueWriteBufferRect(qw, ro, CL_TRUE, o, o, r, 0, 0, 0, 0, buf, 0, NULL, NULL), CL_INVALID_OPERATION);
    CHECK_FAILS(clEnqueueMapBuffer(qr, wo, CL_TRUE, CL_MAP_READ, 0, 16, 0, NULL, NULL, &E), CL_INVALID_OPERATION);
    CHECK_FAILS(clEnqueueMapBuffer(qw, ro, CL_TRUE, CL_MAP_WRITE, 0, 16, 0, NULL, NULL, &E), CL_INVALID_OPERATION);
    CHECK_FAILS(clEnqueueMapBuffer(qw, na, CL_TRUE, CL_MAP_READ, 0, 16, 0, NULL, NULL, &E), CL_INVALID_OPERATION);
    /* The allowed direction works. */
    CHECK(clEnqueueWriteBuffer(qw, wo, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL), CL_SUCCESS);
    CHECK(clEnqueueReadBuffer(qr, ro, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL), CL_SUCCESS);
    MUST(clFinish(qw));
    clReleaseMemObject(wo);
    clReleaseMemObject(ro);
    clReleaseMemObject(na);
}

static void test_read_write_offsets(void)
{
    enum { N = 65536 };
    uint32_t *host = malloc(N * 4), *ref = malloc(N * 4), *got = malloc(N * 4), *patch = malloc(500 * 4);
    fill_pattern(host, N * 4, 11);
    fill_pattern(patch, 500 * 4, 12);
    cl_mem b, out;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    CREATE(out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    cl_event ev[8] = {0};
    /* qw: non-blocking full write then a blocking partial write at an offset. */
    MUST(clEnqueueWriteBuffer(qw, b, CL_FALSE, 0, N * 4, host, 0, NULL, &ev[0]));
    MUST(clEnqueueWriteBuffer(qw, b, CL_TRUE, 1000 * 4, 500 * 4, patch, 0, NULL, &ev[1]));
    /*
     * A blocking write only guarantees that ptr may be reused, not that the
     * command completed; once the later write completed, the earlier one in
     * the same in-order queue has too.
     */
    MUST(clWaitForEvents(1, &ev[1]));
    CHECK_EQ(ct_event_status(ev[0]), CL_COMPLETE);
    memcpy(ref, host, N * 4);
    memcpy(ref + 1000, patch, 500 * 4);
    /* qk: kernel reads b, writes out. */
    ev[2] = run_xform(b, out, N, 3, 17, 1, &ev[1]);
    for (size_t i = 0; i < N; i++)
        ref[i] = ref[i] * 3 + 17;
    /* qr: two non-blocking reads at offsets, one blocking read. */
    memset(got, 0, N * 4);
    MUST(clEnqueueReadBuffer(qr, out, CL_FALSE, 0, 300 * 4, got, 1, &ev[2], &ev[3]));
    MUST(clEnqueueReadBuffer(qr, out, CL_FALSE, 777 * 4, (N - 777) * 4, got + 777, 1, &ev[2], &ev[4]));
    MUST(clEnqueueReadBuffer(qr, out, CL_TRUE, 300 * 4, 477 * 4, got + 300, 1, &ev[2], &ev[5]));
    MUST(clWaitForEvents(2, &ev[3]));
    CHECK_MEM(got, ref, N, 4, "write(qw) -> kernel(qk) -> read with offsets(qr)");

    /* Unaligned byte offsets and sizes. */
    unsigned char small[13], back[21], bref[21];
    fill_pattern(small, sizeof small, 13);
    MUST(clEnqueueWriteBuffer(qw, out, CL_TRUE, 5, sizeof small, small, 1, &ev[2], &ev[6]));
    memcpy(bref, (unsigned char *)ref + 1, 21);
    memcpy(bref + 4, small, sizeof small);
    MUST(clEnqueueReadBuffer(qr, out, CL_TRUE, 1, sizeof back, back, 1, &ev[6], NULL));
    CHECK_MEM(back, bref, 21, 1, "unaligned write(qw) / read(qr)");

    /* Copy with offsets on qk, plus a non-overlapping copy inside one buffer. */
    MUST(clEnqueueCopyBuffer(qk, out, b, 12, 400, 1000, 1, &ev[6], &ev[7]));
    unsigned char *bref2 = malloc(N * 4);
    memcpy(bref2, host, N * 4);
    memcpy((uint32_t *)(void *)bref2 + 1000, patch, 500 * 4);
    {
        unsigned char *outref = malloc(N * 4);
        memcpy(outref, ref, N * 4);
        memcpy(outref + 5, small, sizeof small);
        memcpy(bref2 + 400, outref + 12, 1000);
        free(outref);
    }
    cl_event ev2[2];
    MUST(clEnqueueCopyBuffer(qk, b, b, 0, 200 * 1024, 4096, 0, NULL, &ev2[0]));
    memmove(bref2 + 200 * 1024, bref2, 4096);
    MUST(clEnqueueReadBuffer(qr, b, CL_TRUE, 0, N * 4, got, 1, &ev2[0], NULL));
    CHECK_MEM(got, bref2, N * 4, 1, "copy with offsets (qk) then read (qr)");
    release_events(8, ev);
    release_events(1, ev2);
    free(bref2);
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(out));
    free(host);
    free(ref);
    free(got);
    free(patch);
}

static void test_rect(void)
{
    /* Buffer: rows of 80 bytes, 24 rows per slice, 4 slices. */
    enum { BRP = 80, BSP = 80 * 24, BSZ = 80 * 24 * 4 };
    /* Host: rows of 100 bytes, 20 rows per slice, 3 slices. */
    enum { HRP = 100, HSP = 100 * 20, HSZ = 100 * 20 * 3 };
    unsigned char *init = malloc(BSZ), *hostsrc = malloc(HSZ), *ref = malloc(BSZ), *got = malloc(BSZ);
    unsigned char *hdst = malloc(HSZ), *href = malloc(HSZ);
    fill_pattern(init, BSZ, 21);
    fill_pattern(hostsrc, HSZ, 22);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, BSZ, NULL, &E));
    cl_event ev[6];

    /* WriteBufferRect on qw, kernel on qk, full read on qr. */
    size_t borg[3] = {3, 2, 1}, horg[3] = {5, 1, 0}, reg[3] = {37, 7, 2};
    MUST(clEnqueueWriteBuffer(qw, b, CL_FALSE, 0, BSZ, init, 0, NULL, NULL));
    MUST(clEnqueueWriteBufferRect(qw, b, CL_FALSE, borg, horg, reg, BRP, BSP, HRP, HSP, hostsrc, 0, NULL, &ev[0]));
    ev[1] = run_inplace(b, BSZ / 4, 5, 1, &ev[0]);
    MUST(clEnqueueReadBuffer(qr, b, CL_TRUE, 0, BSZ, got, 1, &ev[1], NULL));
    memcpy(ref, init, BSZ);
    rect_copy(ref, borg, BRP, BSP, hostsrc, horg, HRP, HSP, reg);
    ref_inplace((uint32_t *)(void *)ref, BSZ / 4, 5);
    CHECK_MEM(got, ref, BSZ, 1, "clEnqueueWriteBufferRect + kernel");

    /* ReadBufferRect on qr (after the kernel) with other origins. */
    size_t borg2[3] = {10, 5, 2}, horg2[3] = {1, 3, 1}, reg2[3] = {61, 11, 2};
    memset(hdst, 0x5A, HSZ);
    memcpy(href, hdst, HSZ);
    MUST(clEnqueueReadBufferRect(qr, b, CL_TRUE, borg2, horg2, reg2, BRP, BSP, HRP, HSP, hdst, 1, &ev[1], NULL));
    rect_copy(href, horg2, HRP, HSP, ref, borg2, BRP, BSP, reg2);
    CHECK_MEM(hdst, href, HSZ, 1, "clEnqueueReadBufferRect");

    /* CopyBufferRect on qk into a buffer with another pitch, read on qr. */
    enum { DRP = 64, DSP = 64 * 16, DSZ = 64 * 16 * 4 };
    unsigned char dinit[DSZ], dref[DSZ], dgot[DSZ];
    fill_pattern(dinit, DSZ, 23);
    cl_mem d;
    CREATE(d = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, DSZ, dinit, &E));
    size_t sorg[3] = {7, 3, 0}, dorg[3] = {1, 0, 2}, reg3[3] = {50, 9, 2};
    MUST(clEnqueueCopyBufferRect(qk, b, d, sorg, dorg, reg3, BRP, BSP, DRP, DSP, 1, &ev[1], &ev[2]));
    MUST(clEnqueueReadBuffer(qr, d, CL_TRUE, 0, DSZ, dgot, 1, &ev[2], NULL));
    memcpy(dref, dinit, DSZ);
    rect_copy(dref, dorg, DRP, DSP, ref, sorg, BRP, BSP, reg3);
    CHECK_MEM(dgot, dref, DSZ, 1, "clEnqueueCopyBufferRect");

    /* Zero pitches (computed from the region), 2D region in one slice. */
    size_t o0[3] = {4, 1, 1}, h0[3] = {0, 0, 0}, r0[3] = {16, 4, 2};
    MUST(clEnqueueWriteBufferRect(qw, d, CL_FALSE, o0, h0, r0, 0, 0, 0, 0, hostsrc, 1, &ev[2], &ev[3]));
    rect_copy(dref, o0, 0, 0, hostsrc, h0, 0, 0, r0);
    size_t r2d[3] = {20, 6, 1}, o2d[3] = {30, 2, 0};
    MUST(clEnqueueCopyBufferRect(qk, d, b, o2d, o2d, r2d, DRP, 0, BRP, 0, 1, &ev[3], &ev[4]));
    rect_copy(ref, o2d, BRP, 0, dref, o2d, DRP, 0, r2d);
    MUST(clEnqueueReadBuffer(qr, d, CL_FALSE, 0, DSZ, dgot, 1, &ev[4], NULL));
    MUST(clEnqueueReadBuffer(qr, b, CL_TRUE, 0, BSZ, got, 1, &ev[4], NULL));
    CHECK_MEM(dgot, dref, DSZ, 1, "clEnqueueWriteBufferRect with zero pitches");
    CHECK_MEM(got, ref, BSZ, 1, "clEnqueueCopyBufferRect 2D with zero slice pitch");

    /* Rect errors. */
    size_t big[3] = {81, 1, 1}, z[3] = {0, 0, 0};
    CHECK(clEnqueueWriteBufferRect(qw, b, CL_TRUE, z, z, big, BRP, BSP, HRP, HSP, hostsrc, 0, NULL, NULL),
          CL_INVALID_VALUE); /* row pitch < region[0] */
    size_t zero_reg[3] = {0, 1, 1};
    CHECK(clEnqueueWriteBufferRect(qw, b, CL_TRUE, z, z, zero_reg, BRP, BSP, HRP, HSP, hostsrc, 0, NULL, NULL),
          CL_INVALID_VALUE);
    size_t far[3] = {0, 0, 4}, one[3] = {1, 1, 1};
    CHECK(clEnqueueReadBufferRect(qr, b, CL_TRUE, far, z, one, BRP, BSP, HRP, HSP, hdst, 0, NULL, NULL),
          CL_INVALID_VALUE); /* out of range */
    CHECK(clEnqueueWriteBufferRect(qw, b, CL_TRUE, z, z, one, BRP, 81, HRP, HSP, hostsrc, 0, NULL, NULL),
          CL_INVALID_VALUE); /* slice pitch not a multiple of row pitch */

    release_events(5, ev);
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(d));
    free(init);
    free(hostsrc);
    free(ref);
    free(got);
    free(hdst);
    free(href);
}

static void test_fill(void)
{
    enum { SZ = 8192 };
    unsigned char init[SZ], ref[SZ], got[SZ];
    memset(init, 0xAB, SZ);
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SZ, NULL, &E));
    cl_event wev;
    MUST(clEnqueueWriteBuffer(qw, b, CL_FALSE, 0, SZ, init, 0, NULL, &wev));
    memcpy(ref, init, SZ);
    cl_event prev = wev;
    static const size_t sizes[] = {1, 2, 4, 8, 16, 32, 64, 128};
    size_t pos = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t ps = sizes[i];
        unsigned char pat[128];
        for (size_t k = 0; k < ps; k++)
            pat[k] = (unsigned char)(0x10 * (i + 1) + k + 1);
        pos = (pos + ps - 1) / ps * ps + ps * 3; /* offset multiple of the pattern size */
        size_t size = ps * 9;
        cl_event fev;
        MUST(clEnqueueFillBuffer(qk, b, pat, ps, pos, size, 1, &prev, &fev));
        for (size_t k = 0; k < size; k++)
            ref[pos + k] = pat[k % ps];
        pos += size;
        MUST(clReleaseEvent(prev));
        prev = fev;
    }
    MUST(clEnqueueReadBuffer(qr, b, CL_TRUE, 0, SZ, got, 1, &prev, NULL));
    CHECK_MEM(got, ref, SZ, 1, "clEnqueueFillBuffer 1..128-byte patterns");
    MUST(clReleaseEvent(prev));
    unsigned char pat[16] = {0};
    CHECK(clEnqueueFillBuffer(qk, b, pat, 3, 0, 12, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueFillBuffer(qk, b, pat, 256, 0, 256, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueFillBuffer(qk, b, pat, 4, 2, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueFillBuffer(qk, b, pat, 4, 0, 6, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueFillBuffer(qk, b, NULL, 4, 0, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueFillBuffer(qk, b, pat, 4, SZ - 4, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueFillBuffer(qk, b, pat, 0, 0, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    MUST(clFinish(qk));
    MUST(clReleaseMemObject(b));
}

static cl_uint map_count(cl_mem m)
{
    cl_uint c = 0xdead;
    MUST(clGetMemObjectInfo(m, CL_MEM_MAP_COUNT, sizeof c, &c, NULL));
    return c;
}

static void test_map(void)
{
    enum { N = 16384 };
    uint32_t *host = malloc(N * 4), *ref = malloc(N * 4), *got = malloc(N * 4);
    fill_pattern(host, N * 4, 31);
    cl_mem b, out;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    CREATE(out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    cl_event ev[8];

    /* Read map on qr of data produced by a kernel on qk. */
    MUST(clEnqueueWriteBuffer(qw, b, CL_FALSE, 0, N * 4, host, 0, NULL, &ev[0]));
    ev[1] = run_xform(b, out, N, 5, 1, 1, &ev[0]);
    for (size_t i = 0; i < N; i++)
        ref[i] = host[i] * 5 + 1;
    uint32_t *p;
    CREATE(p = clEnqueueMapBuffer(qr, out, CL_TRUE, CL_MAP_READ, 0, N * 4, 1, &ev[1], &ev[2], &E));
    if (p) {
        CHECK_EQ(map_count(out), 1);
        CHECK_MEM(p, ref, N, 4, "CL_MAP_READ of kernel output");
        /* A second, overlapping read mapping of a sub range. */
        uint32_t *p2;
        CREATE(p2 = clEnqueueMapBuffer(qr, out, CL_TRUE, CL_MAP_READ, 64, 256, 0, NULL, NULL, &E));
        CHECK_EQ(map_count(out), 2);
        if (p2) {
            CHECK_MEM(p2, ref + 16, 64, 4, "second CL_MAP_READ at offset 64");
            MUST(clEnqueueUnmapMemObject(qr, out, p2, 0, NULL, NULL));
        }
        MUST(clEnqueueUnmapMemObject(qr, out, p, 0, NULL, &ev[3]));
        MUST(clWaitForEvents(1, &ev[3]));
        MUST(clFinish(qr));
        /* The map count is "immediately stale" (debugging aid): allow it a moment to settle. */
        cl_uint mc = map_count(out);
        for (int t = 0; t < 200 && mc != 0; t++) {
            ct_sleep_ms(5);
            mc = map_count(out);
        }
        CHECK_EQ(mc, 0);
    }

    /* Write map on qw, kernel on qk sees the data, read on qr. */
    uint32_t *w;
    CREATE(w = clEnqueueMapBuffer(qw, b, CL_TRUE, CL_MAP_WRITE, 256, 1024, 0, NULL, NULL, &E));
    if (w) {
        for (size_t i = 0; i < 256; i++)
            w[i] = 0x1000000u + (uint32_t)i * 7u;
        MUST(clEnqueueUnmapMemObject(qw, b, w, 0, NULL, &ev[4]));
        for (size_t i = 0; i < 256; i++)
            host[64 + i] = 0x1000000u + (uint32_t)i * 7u;
        cl_event k = run_xform(b, out, N, 9, 2, 1, &ev[4]);
        for (size_t i = 0; i < N; i++)
            ref[i] = host[i] * 9 + 2;
        MUST(clEnqueueReadBuffer(qr, out, CL_TRUE, 0, N * 4, got, 1, &k, NULL));
        CHECK_MEM(got, ref, N, 4, "kernel (qk) after CL_MAP_WRITE (qw)");
        /* And the written buffer itself, read on qr. */
        MUST(clEnqueueReadBuffer(qr, b, CL_TRUE, 0, N * 4, got, 1, &k, NULL));
        CHECK_MEM(got, host, N, 4, "buffer after CL_MAP_WRITE");
        MUST(clReleaseEvent(k));
        MUST(clReleaseEvent(ev[4]));
    }

    /* CL_MAP_WRITE_INVALIDATE_REGION: whole region overwritten, rest kept. */
    uint32_t *inv;
    CREATE(inv = clEnqueueMapBuffer(qw, b, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 512 * 4, 2048 * 4, 0, NULL,
                                    NULL, &E));
    if (inv) {
        for (size_t i = 0; i < 2048; i++) {
            inv[i] = 0xCAFE0000u + (uint32_t)i;
            host[512 + i] = 0xCAFE0000u + (uint32_t)i;
        }
        MUST(clEnqueueUnmapMemObject(qw, b, inv, 0, NULL, &ev[5]));
        cl_event k = run_inplace(b, N, 3, 1, &ev[5]);
        ref_inplace(host, N, 3);
        MUST(clEnqueueReadBuffer(qr, b, CL_TRUE, 0, N * 4, got, 1, &k, NULL));
        CHECK_MEM(got, host, N, 4, "CL_MAP_WRITE_INVALIDATE_REGION then kernel");
        MUST(clReleaseEvent(k));
        MUST(clReleaseEvent(ev[5]));
    }

    /* Non-blocking map: pointer valid after the event completes. */
    uint32_t *nb;
    CREATE(nb = clEnqueueMapBuffer(qr, b, CL_FALSE, CL_MAP_READ, 0, N * 4, 0, NULL, &ev[6], &E));
    if (nb) {
        MUST(clWaitForEvents(1, &ev[6]));
        CHECK_MEM(nb, host, N, 4, "non-blocking CL_MAP_READ");
        MUST(clEnqueueUnmapMemObject(qr, b, nb, 0, NULL, NULL));
        MUST(clReleaseEvent(ev[6]));
    }

    /* USE_HOST_PTR: mapped pointer lies inside host_ptr. */
    uint32_t *hp = aligned_alloc(4096, N * 4);
    memcpy(hp, host, N * 4);
    cl_mem u;
    CREATE(u = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, N * 4, hp, &E));
    cl_event k = run_inplace(u, N, 11, 0, NULL);
    ref_inplace(host, N, 11);
    uint32_t *up;
    CREATE(up = clEnqueueMapBuffer(qr, u, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 128, N * 4 - 128, 1, &k, NULL, &E));
    if (up) {
        CHECK_TRUE((void *)up == (void *)((char *)hp + 128), "USE_HOST_PTR map returned %p, expected host_ptr+128 = %p",
                   (void *)up, (void *)((char *)hp + 128));
        CHECK_MEM(up, host + 32, N - 32, 4, "USE_HOST_PTR map after kernel");
        up[0] = 0xABCDEF01u;
        host[32] = 0xABCDEF01u;
        MUST(clEnqueueUnmapMemObject(qr, u, up, 0, NULL, &ev[7]));
        cl_event k2 = run_xform(u, out, N, 1, 0, 1, &ev[7]);
        MUST(clEnqueueReadBuffer(qw, out, CL_TRUE, 0, N * 4, got, 1, &k2, NULL));
        CHECK_MEM(got, host, N, 4, "kernel sees data written through USE_HOST_PTR map");
        MUST(clReleaseEvent(k2));
        MUST(clReleaseEvent(ev[7]));
    }
    MUST(clReleaseEvent(k));

    /* Map errors. */
    CHECK_FAILS(clEnqueueMapBuffer(qr, b, CL_TRUE, CL_MAP_READ, N * 4 - 4, 8, 0, NULL, NULL, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clEnqueueMapBuffer(qr, b, CL_TRUE, CL_MAP_READ, 0, 0, 0, NULL, NULL, &E), CL_INVALID_VALUE);
    /* Invalid map flags (PoCL 3.1 deviation: it maps anyway and returns CL_SUCCESS). */
    static const cl_map_flags badflags[] = {CL_MAP_READ | CL_MAP_WRITE_INVALIDATE_REGION,
                                            CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION, (cl_map_flags)1 << 20};
    for (int i = 0; i < 3; i++) {
        E = ERR_SENTINEL;
        void *bp = clEnqueueMapBuffer(qr, b, CL_TRUE, badflags[i], 0, 16, 0, NULL, NULL, &E);
        if (!CHECK_NATIVE_DEVIATES(E, CL_INVALID_VALUE, CL_SUCCESS))
            fprintf(stderr, "    (map flags 0x%llx)\n", (unsigned long long)badflags[i]);
        if (bp)
            MUST(clEnqueueUnmapMemObject(qr, b, bp, 0, NULL, NULL));
    }
    int notmapped;
    CHECK(clEnqueueUnmapMemObject(qr, b, &notmapped, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueUnmapMemObject(qr, NULL, &notmapped, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);

    MUST(clFinish(qr));
    MUST(clFinish(qk));
    MUST(clFinish(qw));
    MUST(clReleaseMemObject(u));
    free(hp);
    release_events(3, ev);
    MUST(clReleaseEvent(ev[3]));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(out));
    free(host);
    free(ref);
    free(got);
}

static void test_migrate(void)
{
    enum { N = 8192 };
    uint32_t host[N], got[N];
    fill_pattern(host, sizeof host, 41);
    cl_mem b, s;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    CREATE(s = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &E));
    cl_event prev;
    MUST(clEnqueueWriteBuffer(qw, b, CL_FALSE, 0, sizeof host, host, 0, NULL, &prev));
    cl_mem both[2] = {b, s};
    for (cl_uint r = 0; r < 2 * ndev; r++) {
        cl_event ev;
        cl_command_queue q = qs[(r + 1) % ndev];
        MUST(clEnqueueMigrateMemObjects(q, 1, &b, 0, 1, &prev, &ev));
        MUST(clReleaseEvent(prev));
        prev = ev;
        if (r == ndev) {
            MUST(clEnqueueMigrateMemObjects(q, 1, &b, CL_MIGRATE_MEM_OBJECT_HOST, 1, &prev, &ev));
            MUST(clReleaseEvent(prev));
            prev = ev;
        }
    }
    MUST(clEnqueueReadBuffer(qr, b, CL_TRUE, 0, sizeof got, got, 1, &prev, NULL));
    CHECK_MEM(got, host, N, 4, "data after migrating over all devices");
    MUST(clReleaseEvent(prev));
    /* Content-undefined migration, then new content. */
    MUST(clEnqueueMigrateMemObjects(qk, 2, both, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0, NULL, &prev));
    cl_event k = run_xform(b, s, N, 2, 1, 1, &prev);
    MUST(clEnqueueReadBuffer(qr, s, CL_TRUE, 0, sizeof got, got, 1, &k, NULL));
    (void)got; /* b's content is undefined: only the commands must complete */
    MUST(clReleaseEvent(k));
    MUST(clReleaseEvent(prev));
    /* Errors. */
    CHECK(clEnqueueMigrateMemObjects(qk, 0, both, 0, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueMigrateMemObjects(qk, 1, NULL, 0, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueMigrateMemObjects(qk, 1, both, (cl_mem_migration_flags)1 << 10, 0, NULL, NULL), CL_INVALID_VALUE);
    cl_mem withnull[2] = {b, NULL};
    CHECK(clEnqueueMigrateMemObjects(qk, 2, withnull, 0, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    MUST(clFinish(qk));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(s));
}

static void test_sub_buffers(void)
{
    enum { N = 4096 };
    size_t align = ct_max_align(ndev, devs);
    size_t min_align = (size_t)-1;
    for (cl_uint d = 0; d < ndev; d++) {
        size_t a = ct_device_uint(devs[d], CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
        if (a < min_align)
            min_align = a;
    }
    uint32_t *host = malloc(N * 4), *ref = malloc(N * 4), *got = malloc(N * 4);
    fill_pattern(host, N * 4, 51);
    cl_mem p;
    CREATE(p = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &E));
    cl_event ev[4];
    MUST(clEnqueueWriteBuffer(qw, p, CL_FALSE, 0, N * 4, host, 0, NULL, &ev[0]));
    cl_buffer_region r = {2 * align, 256 * 4};
    cl_mem s;
    CREATE(s = clCreateSubBuffer(p, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &E));
    /* Kernel on qk writes through the sub-buffer, parent read on qr sees it. */
    cl_uint base = 1000;
    MUST(clSetKernelArg(k_fill_idx, 0, sizeof s, &s));
    MUST(clSetKernelArg(k_fill_idx, 1, sizeof base, &base));
    size_t gws = 256;
    MUST(clEnqueueNDRangeKernel(qk, k_fill_idx, 1, NULL, &gws, NULL, 1, &ev[0], &ev[1]));
    memcpy(ref, host, N * 4);
    for (size_t i = 0; i < 256; i++)
        ref[r.origin / 4 + i] = base + (uint32_t)i;
    MUST(clEnqueueReadBuffer(qr, p, CL_TRUE, 0, N * 4, got, 1, &ev[1], NULL));
    CHECK_MEM(got, ref, N, 4, "parent after a kernel wrote through a sub-buffer");
    MUST(clEnqueueReadBuffer(qr, s, CL_TRUE, 0, 256 * 4, got, 1, &ev[1], NULL));
    CHECK_MEM(got, ref + r.origin / 4, 256, 4, "sub-buffer read");
    /* Write to the parent on qw, kernel on qk through the sub-buffer into another buffer. */
    uint32_t patch[64];
    fill_pattern(patch, sizeof patch, 52);
    MUST(clEnqueueWriteBuffer(qw, p, CL_FALSE, r.origin + 32 * 4, sizeof patch, patch, 1, &ev[1], &ev[2]));
    memcpy(ref + r.origin / 4 + 32, patch, sizeof patch);
    cl_mem o;
    CREATE(o = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256 * 4, NULL, &E));
    ev[3] = run_xform(s, o, 256, 7, 3, 1, &ev[2]);
    uint32_t sref[256];
    for (size_t i = 0; i < 256; i++)
        sref[i] = ref[r.origin / 4 + i] * 7 + 3;
    MUST(clEnqueueReadBuffer(qr, o, CL_TRUE, 0, sizeof sref, got, 1, &ev[3], NULL));
    CHECK_MEM(got, sref, 256, 4, "kernel reading a sub-buffer after a parent write");
    release_events(4, ev);

    /* clGetMemObjectInfo on the sub-buffer. */
    cl_mem assoc = NULL;
    size_t off = 1, size = 0;
    MUST(clGetMemObjectInfo(s, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof assoc, &assoc, NULL));
    CHECK_TRUE(assoc == p, "CL_MEM_ASSOCIATED_MEMOBJECT %p, expected parent %p", (void *)assoc, (void *)p);
    MUST(clGetMemObjectInfo(s, CL_MEM_OFFSET, sizeof off, &off, NULL));
    CHECK_EQ(off, r.origin);
    MUST(clGetMemObjectInfo(s, CL_MEM_SIZE, sizeof size, &size, NULL));
    CHECK_EQ(size, r.size);
    MUST(clGetMemObjectInfo(p, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof assoc, &assoc, NULL));
    CHECK_TRUE(assoc == NULL, "parent's CL_MEM_ASSOCIATED_MEMOBJECT %p", (void *)assoc);
    MUST(clGetMemObjectInfo(p, CL_MEM_OFFSET, sizeof off, &off, NULL));
    CHECK_EQ(off, 0);
    cl_mem_flags sf = 0;
    MUST(clGetMemObjectInfo(s, CL_MEM_FLAGS, sizeof sf, &sf, NULL));
    CHECK_TRUE(sf & CL_MEM_READ_WRITE, "sub-buffer flags 0x%llx", (unsigned long long)sf);

    /* Errors. */
    if (min_align > 4) {
        cl_buffer_region mis = {4, 64};
        CHECK_FAILS(clCreateSubBuffer(p, 0, CL_BUFFER_CREATE_TYPE_REGION, &mis, &E), CL_MISALIGNED_SUB_BUFFER_OFFSET);
    }
    cl_buffer_region oor = {N * 4 - align, 2 * align};
    CHECK_FAILS(clCreateSubBuffer(p, 0, CL_BUFFER_CREATE_TYPE_REGION, &oor, &E), CL_INVALID_VALUE);
    cl_buffer_region oor2 = {N * 4 + align, 64};
    CHECK_FAILS(clCreateSubBuffer(p, 0, CL_BUFFER_CREATE_TYPE_REGION, &oor2, &E), CL_INVALID_VALUE);
    cl_buffer_region empty = {0, 0};
    CHECK_FAILS(clCreateSubBuffer(p, 0, CL_BUFFER_CREATE_TYPE_REGION, &empty, &E), CL_INVALID_BUFFER_SIZE);
    cl_buffer_region small = {0, 64};
    CHECK_FAILS(clCreateSubBuffer(s, 0, CL_BUFFER_CREATE_TYPE_REGION, &small, &E), CL_INVALID_MEM_OBJECT);
    CHECK_FAILS(clCreateSubBuffer(p, 0, 0x5555, &small, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clCreateSubBuffer(p, 0, CL_BUFFER_CREATE_TYPE_REGION, NULL, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clCreateSubBuffer(p, CL_MEM_USE_HOST_PTR, CL_BUFFER_CREATE_TYPE_REGION, &small, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clCreateSubBuffer(NULL, 0, CL_BUFFER_CREATE_TYPE_REGION, &small, &E), CL_INVALID_MEM_OBJECT);
    {
        cl_mem wo, hna;
        CREATE(wo = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, N * 4, NULL, &E));
        CREATE(hna = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_HOST_NO_ACCESS, N * 4, NULL, &E));
        CHECK_FAILS(clCreateSubBuffer(wo, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &small, &E), CL_INVALID_VALUE);
        CHECK_FAILS(clCreateSubBuffer(wo, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &small, &E), CL_INVALID_VALUE);
        CHECK_FAILS(clCreateSubBuffer(hna, CL_MEM_HOST_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &small, &E),
                    CL_INVALID_VALUE);
        /* Inherited flags. */
        cl_mem ok;
        CREATE(ok = clCreateSubBuffer(wo, 0, CL_BUFFER_CREATE_TYPE_REGION, &small, &E));
        MUST(clGetMemObjectInfo(ok, CL_MEM_FLAGS, sizeof sf, &sf, NULL));
        CHECK_TRUE(sf & CL_MEM_WRITE_ONLY, "sub-buffer of WRITE_ONLY parent has flags 0x%llx", (unsigned long long)sf);
        clReleaseMemObject(ok);
        clReleaseMemObject(wo);
        clReleaseMemObject(hna);
    }

    /* Sub-buffer of a USE_HOST_PTR buffer: CL_MEM_HOST_PTR = host_ptr + origin. */
    uint32_t *hp = aligned_alloc(4096, N * 4);
    memcpy(hp, host, N * 4);
    cl_mem u, us;
    CREATE(u = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, N * 4, hp, &E));
    cl_buffer_region ur = {align, 128 * 4};
    CREATE(us = clCreateSubBuffer(u, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &ur, &E));
    void *uhp = NULL;
    MUST(clGetMemObjectInfo(us, CL_MEM_HOST_PTR, sizeof uhp, &uhp, NULL));
    CHECK_TRUE(uhp == (char *)hp + align, "sub-buffer CL_MEM_HOST_PTR %p, expected %p", uhp, (void *)((char *)hp + align));
    cl_event k = run_inplace(us, 128, 1, 0, NULL);
    MUST(clEnqueueReadBuffer(qr, u, CL_TRUE, 0, N * 4, got, 1, &k, NULL));
    memcpy(ref, host, N * 4);
    ref_inplace(ref + align / 4, 128, 1);
    CHECK_MEM(got, ref, N, 4, "USE_HOST_PTR parent after kernel on its sub-buffer");
    MUST(clReleaseEvent(k));
    MUST(clReleaseMemObject(us));
    MUST(clReleaseMemObject(u));
    free(hp);

    MUST(clReleaseMemObject(o));
    MUST(clReleaseMemObject(s));
    MUST(clReleaseMemObject(p));
    free(host);
    free(ref);
    free(got);
}

static void test_mem_info(void)
{
    static const struct {
        cl_mem_info id;
        const char *name;
        size_t size;
    } params[] = {
        {CL_MEM_TYPE, "CL_MEM_TYPE", sizeof(cl_mem_object_type)},
        {CL_MEM_FLAGS, "CL_MEM_FLAGS", sizeof(cl_mem_flags)},
        {CL_MEM_SIZE, "CL_MEM_SIZE", sizeof(size_t)},
        {CL_MEM_HOST_PTR, "CL_MEM_HOST_PTR", sizeof(void *)},
        {CL_MEM_MAP_COUNT, "CL_MEM_MAP_COUNT", sizeof(cl_uint)},
        {CL_MEM_REFERENCE_COUNT, "CL_MEM_REFERENCE_COUNT", sizeof(cl_uint)},
        {CL_MEM_CONTEXT, "CL_MEM_CONTEXT", sizeof(cl_context)},
        {CL_MEM_ASSOCIATED_MEMOBJECT, "CL_MEM_ASSOCIATED_MEMOBJECT", sizeof(cl_mem)},
        {CL_MEM_OFFSET, "CL_MEM_OFFSET", sizeof(size_t)},
    };
    static uint32_t hostmem[1024];
    cl_mem b, u, s;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_ONLY, 4096, NULL, &E));
    CREATE(u = clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR, sizeof hostmem, hostmem, &E));
    cl_buffer_region r = {0, 1024};
    CREATE(s = clCreateSubBuffer(b, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r, &E));
    cl_mem objs[3] = {b, u, s};
    for (int o = 0; o < 3; o++) {
        for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
            size_t sz = 0;
            if (!ct_check_code(clGetMemObjectInfo(objs[o], params[i].id, 0, NULL, &sz), CL_SUCCESS,
                               params[i].name, __FILE__, __LINE__, 0))
                continue;
            ct_check_true(sz == params[i].size, params[i].name, __FILE__, __LINE__, "size %zu, expected %zu",
                          sz, params[i].size);
            unsigned char buf[64];
            size_t sz2 = 0;
            ct_check_code(clGetMemObjectInfo(objs[o], params[i].id, sz, buf, &sz2), CL_SUCCESS, params[i].name,
                          __FILE__, __LINE__, 0);
            ct_check_true(sz2 == sz, params[i].name, __FILE__, __LINE__, "size %zu vs %zu", sz, sz2);
            ct_check_code(clGetMemObjectInfo(objs[o], params[i].id, sz - 1, buf, NULL), CL_INVALID_VALUE,
                          params[i].name, __FILE__, __LINE__, 0);
        }
        cl_mem_object_type t = 0;
        MUST(clGetMemObjectInfo(objs[o], CL_MEM_TYPE, sizeof t, &t, NULL));
        CHECK_EQ(t, CL_MEM_OBJECT_BUFFER);
        cl_context c = NULL;
        MUST(clGetMemObjectInfo(objs[o], CL_MEM_CONTEXT, sizeof c, &c, NULL));
        CHECK_TRUE(c == ctx, "CL_MEM_CONTEXT %p", (void *)c);
        CHECK_EQ(map_count(objs[o]), 0);
    }
    void *hp = NULL;
    MUST(clGetMemObjectInfo(u, CL_MEM_HOST_PTR, sizeof hp, &hp, NULL));
    CHECK_TRUE(hp == (void *)hostmem, "CL_MEM_HOST_PTR %p, expected %p", hp, (void *)hostmem);
    cl_mem_flags f = 0;
    MUST(clGetMemObjectInfo(b, CL_MEM_FLAGS, sizeof f, &f, NULL));
    CHECK_EQ(f, CL_MEM_READ_ONLY);
    /* Reference counting on a fresh buffer. */
    cl_mem rc;
    CREATE(rc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &E));
    cl_uint cnt = 0;
    MUST(clGetMemObjectInfo(rc, CL_MEM_REFERENCE_COUNT, sizeof cnt, &cnt, NULL));
    CHECK_EQ(cnt, 1);
    MUST(clRetainMemObject(rc));
    MUST(clGetMemObjectInfo(rc, CL_MEM_REFERENCE_COUNT, sizeof cnt, &cnt, NULL));
    CHECK_EQ(cnt, 2);
    MUST(clReleaseMemObject(rc));
    MUST(clGetMemObjectInfo(rc, CL_MEM_REFERENCE_COUNT, sizeof cnt, &cnt, NULL));
    CHECK_EQ(cnt, 1);
    MUST(clReleaseMemObject(rc));
    cl_uint v;
    CHECK(clGetMemObjectInfo(b, 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
    CHECK(clGetMemObjectInfo(NULL, CL_MEM_SIZE, sizeof v, &v, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clRetainMemObject(NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clReleaseMemObject(NULL), CL_INVALID_MEM_OBJECT);
    MUST(clReleaseMemObject(s));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(u));
}

static volatile int dtor_order[8];
/* dtor_calls counts the callbacks recorded (their slots written): a callback may run on
 * another thread than the one that waits for the count. */
static volatile int dtor_taken, dtor_calls;

static void CL_CALLBACK dtor(cl_mem m, void *user)
{
    (void)m;
    int slot = __atomic_fetch_add(&dtor_taken, 1, __ATOMIC_SEQ_CST);
    if (slot < 8)
        dtor_order[slot] = (int)(intptr_t)user;
    __atomic_fetch_add(&dtor_calls, 1, __ATOMIC_SEQ_CST);
}

static void test_destructor_callback(void)
{
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1024, NULL, &E));
    uint32_t data[256] = {1, 2, 3};
    MUST(clEnqueueWriteBuffer(qw, b, CL_TRUE, 0, sizeof data, data, 0, NULL, NULL));
    MUST(clFinish(qw));
    MUST(clSetMemObjectDestructorCallback(b, dtor, (void *)(intptr_t)1));
    MUST(clSetMemObjectDestructorCallback(b, dtor, (void *)(intptr_t)2));
    CHECK(clSetMemObjectDestructorCallback(b, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clSetMemObjectDestructorCallback(NULL, dtor, NULL), CL_INVALID_MEM_OBJECT);
    MUST(clRetainMemObject(b));
    MUST(clReleaseMemObject(b));
    ct_sleep_ms(50);
    CHECK_EQ(__atomic_load_n(&dtor_calls, __ATOMIC_SEQ_CST), 0); /* still referenced */
    MUST(clReleaseMemObject(b));
    CHECK_TRUE(ct_wait_flag(&dtor_calls, 2, 10000), "destructor callbacks: %d of 2 called within 10 s", dtor_calls);
    CHECK_TRUE(dtor_order[0] == 2 && dtor_order[1] == 1,
               "destructor callbacks must run in reverse registration order: got %d, %d", dtor_order[0],
               dtor_order[1]);
    /* Sub-buffer and USE_HOST_PTR buffer. */
    static uint32_t hostmem[1024];
    cl_mem u, s;
    CREATE(u = clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR, sizeof hostmem, hostmem, &E));
    cl_buffer_region r = {0, 256};
    CREATE(s = clCreateSubBuffer(u, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &E));
    MUST(clSetMemObjectDestructorCallback(s, dtor, (void *)(intptr_t)3));
    MUST(clSetMemObjectDestructorCallback(u, dtor, (void *)(intptr_t)4));
    MUST(clReleaseMemObject(s));
    CHECK_TRUE(ct_wait_flag(&dtor_calls, 3, 10000), "sub-buffer destructor callback not called");
    MUST(clReleaseMemObject(u));
    CHECK_TRUE(ct_wait_flag(&dtor_calls, 4, 10000), "USE_HOST_PTR destructor callback not called");
}

int main(void)
{
    ct_init("buffers");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);
    qw = qs[0];
    qk = qs[1 % ndev];
    qr = qs[2 % ndev];
    printf("  write queue: device 0, kernel queue: device %u, read queue: device %u\n", 1 % ndev, 2 % ndev);
    cl_program prog = ct_build(ctx, kSrc, NULL);
    k_xform = ct_kernel(prog, "xform");
    k_inplace = ct_kernel(prog, "inplace");
    k_fill_idx = ct_kernel(prog, "fill_idx");

    printf("-- create flags\n");
    test_create_flags();
    printf("-- host access flags\n");
    test_host_access_flags();
    printf("-- read/write/copy with offsets\n");
    test_read_write_offsets();
    printf("-- rect\n");
    test_rect();
    printf("-- fill\n");
    test_fill();
    printf("-- map\n");
    test_map();
    printf("-- migrate\n");
    test_migrate();
    printf("-- sub-buffers\n");
    test_sub_buffers();
    printf("-- mem object info\n");
    test_mem_info();
    printf("-- destructor callbacks\n");
    test_destructor_callback();

    clReleaseKernel(k_xform);
    clReleaseKernel(k_inplace);
    clReleaseKernel(k_fill_idx);
    clReleaseProgram(prog);
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
