/*
 * images.c - OpenCL 1.2 images and samplers on every device of the platform:
 * device image limits, clGetSupportedImageFormats, clCreateImage of every
 * 1.2 image type (COPY_HOST_PTR, USE_HOST_PTR with padded pitches, plain),
 * clGetImageInfo / clGetMemObjectInfo, read/write/copy/fill/map of images
 * and image <-> buffer copies (blocking and non-blocking with events),
 * kernels reading and writing images across devices (constant and argument
 * samplers, clamp-to-edge reads out of bounds, a chain through every
 * device, a 3D read), 1D image buffers, samplers, the error codes the spec
 * names, and the deprecated clCreateImage2D/3D.
 *
 * All data is integer or exactly representable: every result is compared
 * bit-exactly with a CPU reference computed here.  Data written through one
 * device's queue is read back through another one's whenever there are
 * several, ordered by events, so that MirrorCL has to move images between
 * devices.
 */
#include "check.h"

static const char *kSrc =
    "__constant sampler_t csmp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP_TO_EDGE |\n"
    "                            CLK_FILTER_NEAREST;\n"
    "__kernel void shift_const(read_only image2d_t in, write_only image2d_t out, int dx, int dy)\n"
    "{ int x = get_global_id(0), y = get_global_id(1);\n"
    "  uint4 v = read_imageui(in, csmp, (int2)(x + dx, y + dy));\n"
    "  write_imageui(out, (int2)(x, y), (v + (uint4)(1, 2, 3, 4)) & (uint4)(255)); }\n"
    "__kernel void shift_arg(read_only image2d_t in, write_only image2d_t out, sampler_t s,\n"
    "                        int dx, int dy)\n"
    "{ int x = get_global_id(0), y = get_global_id(1);\n"
    "  uint4 v = read_imageui(in, s, (int2)(x + dx, y + dy));\n"
    "  write_imageui(out, (int2)(x, y), (v + (uint4)(1, 2, 3, 4)) & (uint4)(255)); }\n"
    "__kernel void chain(read_only image2d_t in, write_only image2d_t out, uint add)\n"
    "{ int x = get_global_id(0), y = get_global_id(1);\n"
    "  uint v = read_imageui(in, (int2)(x, y)).x;\n"
    "  write_imageui(out, (int2)(x, y), (uint4)(v * 3u + add + (uint)x, 0, 0, 0)); }\n"
    "__kernel void read3d(read_only image3d_t in, __global uint4 *out, int4 off)\n"
    "{ int x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);\n"
    "  size_t i = ((size_t)z * get_global_size(1) + y) * get_global_size(0) + x;\n"
    "  out[i] = read_imageui(in, csmp, (int4)(x, y, z, 0) + off); }\n"
    "__kernel void read1dbuf(read_only image1d_buffer_t in, __global uint4 *out)\n"
    "{ int x = get_global_id(0); out[x] = read_imageui(in, x); }\n";

static cl_context ctx;
static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];
static cl_kernel k_shift_const, k_shift_arg, k_chain, k_read3d, k_read1dbuf;
/* Devices of NVIDIA's OpenCL: checks where it deviates natively are left out. */
static int nvidia;

static const cl_image_format kRGBA8 = {CL_RGBA, CL_UNSIGNED_INT8};
static const cl_image_format kRGBAF = {CL_RGBA, CL_FLOAT};
static const cl_image_format kR32 = {CL_R, CL_UNSIGNED_INT32};

static void fill_pattern(void *p, size_t bytes, uint32_t seed)
{
    ct_rng_state = seed ? seed : 1;
    unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        c[i] = (unsigned char)ct_rand();
}

static void release_events(cl_uint n, cl_event *evs)
{
    for (cl_uint i = 0; i < n; i++)
        if (evs[i])
            MUST(clReleaseEvent(evs[i]));
}

static size_t clampz(long v, size_t n) { return v < 0 ? 0 : (size_t)v >= n ? n - 1 : (size_t)v; }

/*
 * Image geometry as the box the enqueue calls address: 1D (w,1,1), 1D array
 * (w,layers,1), 2D (w,h,1), 2D array (w,h,layers), 3D (w,h,d).  Host memory
 * of a 1D image array spaces its layers by the slice pitch, every other type
 * its rows by the row pitch and its slices/layers by the slice pitch.
 */
typedef struct {
    cl_mem_object_type type;
    const char *name;
    size_t w, h, d;
} geom;

enum { SL_NONE, SL_1DARR, SL_3D };
static int slice_kind(const geom *g)
{
    if (g->type == CL_MEM_OBJECT_IMAGE1D_ARRAY)
        return SL_1DARR;
    if (g->type == CL_MEM_OBJECT_IMAGE3D || g->type == CL_MEM_OBJECT_IMAGE2D_ARRAY)
        return SL_3D;
    return SL_NONE;
}

static size_t hoff(const geom *g, size_t el, size_t x, size_t y, size_t z, size_t rp, size_t sp)
{
    return slice_kind(g) == SL_1DARR ? x * el + y * sp : x * el + y * rp + z * sp;
}

/* Copies a box of reg elements between two host layouts of geometry g. */
static void box_copy(const geom *g, size_t el, unsigned char *dst, const size_t dorg[3], size_t drp, size_t dsp,
                     const unsigned char *src, const size_t sorg[3], size_t srp, size_t ssp, const size_t reg[3])
{
    for (size_t z = 0; z < reg[2]; z++)
        for (size_t y = 0; y < reg[1]; y++)
            memmove(dst + hoff(g, el, dorg[0], dorg[1] + y, dorg[2] + z, drp, dsp),
                    src + hoff(g, el, sorg[0], sorg[1] + y, sorg[2] + z, srp, ssp), reg[0] * el);
}

/* Fills a box of the dense layout with one element value. */
static void box_fill(const geom *g, size_t el, unsigned char *dst, size_t drp, size_t dsp, const size_t org[3],
                     const size_t reg[3], const void *px)
{
    for (size_t z = 0; z < reg[2]; z++)
        for (size_t y = 0; y < reg[1]; y++)
            for (size_t x = 0; x < reg[0]; x++)
                memcpy(dst + hoff(g, el, org[0] + x, org[1] + y, org[2] + z, drp, dsp), px, el);
}

/* Bytes a host layout with pitches rp/sp needs for a box reg. */
static size_t host_bytes(const geom *g, size_t el, size_t rp, size_t sp, const size_t reg[3])
{
    return hoff(g, el, reg[0] - 1, reg[1] - 1, reg[2] - 1, rp, sp) + el;
}

/*
 * Padded host pitches for a box reg: row pitch (reg0 + pad) * el, slice pitch a multiple.
 * For a 1D image array the slice pitch (the spacing of the layers) equals the row pitch:
 * PoCL 3.1 spaces 1D array layers in host memory by the row pitch, not by the slice pitch
 * as the spec says, and the two readings agree only there.
 */
static void padded_pitches(const geom *g, size_t el, const size_t reg[3], size_t pad, size_t *rp, size_t *sp)
{
    *rp = (reg[0] + pad) * el;
    int k = slice_kind(g);
    *sp = k == SL_1DARR ? *rp : k == SL_3D ? *rp * (reg[1] + 1) : 0;
}

/* A sub-box: origin full/4 + shift (dims > 1), extent full/2. */
static void sub_box(const size_t full[3], size_t shift, size_t org[3], size_t reg[3])
{
    for (int i = 0; i < 3; i++) {
        org[i] = full[i] > 1 ? full[i] / 4 + shift % 2 : 0;
        reg[i] = full[i] > 1 ? full[i] / 2 : 1;
    }
}

static cl_image_desc mkdesc(const geom *g, size_t rp, size_t sp)
{
    cl_image_desc d;
    memset(&d, 0, sizeof d);
    d.image_type = g->type;
    d.image_width = g->w;
    if (g->type == CL_MEM_OBJECT_IMAGE2D || g->type == CL_MEM_OBJECT_IMAGE3D ||
        g->type == CL_MEM_OBJECT_IMAGE2D_ARRAY)
        d.image_height = g->h;
    if (g->type == CL_MEM_OBJECT_IMAGE3D)
        d.image_depth = g->d;
    if (g->type == CL_MEM_OBJECT_IMAGE2D_ARRAY)
        d.image_array_size = g->d;
    if (g->type == CL_MEM_OBJECT_IMAGE1D_ARRAY)
        d.image_array_size = g->h;
    d.image_row_pitch = rp;
    d.image_slice_pitch = sp;
    return d;
}

static size_t img_size(cl_mem m, cl_image_info p)
{
    size_t v = 0;
    MUST(clGetImageInfo(m, p, sizeof v, &v, NULL));
    return v;
}

/* clGetImageInfo and clGetMemObjectInfo of an image of geometry g. */
static void check_image_info(cl_mem m, const geom *g, const cl_image_format *fmt, size_t el, cl_mem_flags flags,
                             void *hp)
{
    cl_image_format f = {0, 0};
    size_t sz = 0;
    MUST(clGetImageInfo(m, CL_IMAGE_FORMAT, sizeof f, &f, &sz));
    CHECK_EQ(sz, sizeof f);
    CHECK_TRUE(f.image_channel_order == fmt->image_channel_order &&
                   f.image_channel_data_type == fmt->image_channel_data_type,
               "%s: CL_IMAGE_FORMAT 0x%x/0x%x", g->name, f.image_channel_order, f.image_channel_data_type);
    int k = slice_kind(g);
    int has_h = g->type == CL_MEM_OBJECT_IMAGE2D || g->type == CL_MEM_OBJECT_IMAGE3D ||
                g->type == CL_MEM_OBJECT_IMAGE2D_ARRAY;
    CHECK_EQ(img_size(m, CL_IMAGE_ELEMENT_SIZE), el);
    CHECK_EQ(img_size(m, CL_IMAGE_WIDTH), g->w);
    CHECK_EQ(img_size(m, CL_IMAGE_HEIGHT), has_h ? g->h : 0);
    CHECK_EQ(img_size(m, CL_IMAGE_DEPTH), g->type == CL_MEM_OBJECT_IMAGE3D ? g->d : 0);
    CHECK_EQ(img_size(m, CL_IMAGE_ARRAY_SIZE), g->type == CL_MEM_OBJECT_IMAGE2D_ARRAY   ? g->d
                                               : g->type == CL_MEM_OBJECT_IMAGE1D_ARRAY ? g->h
                                                                                       : 0);
    size_t rp = img_size(m, CL_IMAGE_ROW_PITCH), sp = img_size(m, CL_IMAGE_SLICE_PITCH);
    /* NVIDIA reports a row pitch of 0 for a 1D image buffer. */
    if (!(nvidia && g->type == CL_MEM_OBJECT_IMAGE1D_BUFFER))
        CHECK_TRUE(rp >= g->w * el, "%s: CL_IMAGE_ROW_PITCH %zu < %zu", g->name, rp, g->w * el);
    if (k == SL_NONE)
        CHECK_TRUE(sp == 0, "%s: CL_IMAGE_SLICE_PITCH %zu, expected 0", g->name, sp);
    else
        CHECK_TRUE(sp >= (k == SL_1DARR ? rp : rp * g->h), "%s: CL_IMAGE_SLICE_PITCH %zu too small", g->name, sp);
    cl_uint u = 99;
    MUST(clGetImageInfo(m, CL_IMAGE_NUM_MIP_LEVELS, sizeof u, &u, NULL));
    CHECK_EQ(u, 0);
    MUST(clGetImageInfo(m, CL_IMAGE_NUM_SAMPLES, sizeof u, &u, NULL));
    CHECK_EQ(u, 0);
    if (g->type != CL_MEM_OBJECT_IMAGE1D_BUFFER) {
        cl_mem b = (cl_mem)1;
        MUST(clGetImageInfo(m, CL_IMAGE_BUFFER, sizeof b, &b, NULL));
        CHECK_TRUE(b == NULL, "%s: CL_IMAGE_BUFFER %p", g->name, (void *)b);
    }
    cl_mem_object_type t = 0;
    MUST(clGetMemObjectInfo(m, CL_MEM_TYPE, sizeof t, &t, NULL));
    CHECK_EQ(t, g->type);
    size_t msz = 0;
    MUST(clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof msz, &msz, NULL));
    CHECK_TRUE(msz >= g->w * g->h * g->d * el, "%s: CL_MEM_SIZE %zu too small", g->name, msz);
    void *p = (void *)1;
    MUST(clGetMemObjectInfo(m, CL_MEM_HOST_PTR, sizeof p, &p, NULL));
    /* NVIDIA also reports the pointer a CL_MEM_COPY_HOST_PTR image was made from. */
    if (!nvidia || (flags & CL_MEM_USE_HOST_PTR))
        CHECK_TRUE(p == ((flags & CL_MEM_USE_HOST_PTR) ? hp : NULL), "%s: CL_MEM_HOST_PTR %p (host %p)", g->name, p, hp);
    cl_mem_flags mf = 0;
    MUST(clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof mf, &mf, NULL));
    if (g->type == CL_MEM_OBJECT_IMAGE1D_BUFFER) /* the host pointer flags come from the buffer */
        mf &= ~(cl_mem_flags)(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR | CL_MEM_ALLOC_HOST_PTR);
    CHECK_EQ(mf, flags);
    cl_context c = NULL;
    MUST(clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof c, &c, NULL));
    CHECK_TRUE(c == ctx, "%s: CL_MEM_CONTEXT", g->name);
}

/* ------------------------------------------------------------------------ */

/* Device image support and limits (FULL_PROFILE minimums of the 1.2 spec). */
static void test_device_limits(void)
{
    for (cl_uint d = 0; d < ndev; d++) {
        cl_bool img = CL_FALSE;
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL));
        if (!CHECK_TRUE(img == CL_TRUE, "device %u reports no image support", d))
            ct_die("every device must support images");
        size_t w2 = 0, h2 = 0, w3 = 0, h3 = 0, d3 = 0, bufsz = 0, arr = 0;
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE2D_MAX_WIDTH, sizeof w2, &w2, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE2D_MAX_HEIGHT, sizeof h2, &h2, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE3D_MAX_WIDTH, sizeof w3, &w3, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE3D_MAX_HEIGHT, sizeof h3, &h3, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE3D_MAX_DEPTH, sizeof d3, &d3, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE_MAX_BUFFER_SIZE, sizeof bufsz, &bufsz, NULL));
        MUST(clGetDeviceInfo(devs[d], CL_DEVICE_IMAGE_MAX_ARRAY_SIZE, sizeof arr, &arr, NULL));
        cl_uint smp = ct_device_uint(devs[d], CL_DEVICE_MAX_SAMPLERS);
        cl_uint rd = ct_device_uint(devs[d], CL_DEVICE_MAX_READ_IMAGE_ARGS);
        cl_uint wr = ct_device_uint(devs[d], CL_DEVICE_MAX_WRITE_IMAGE_ARGS);
        char *prof = ct_device_str(devs[d], CL_DEVICE_PROFILE);
        if (strcmp(prof, "FULL_PROFILE") == 0) {
            CHECK_TRUE(w2 >= 8192 && h2 >= 8192, "device %u: 2D max %zux%zu", d, w2, h2);
            CHECK_TRUE(w3 >= 2048 && h3 >= 2048 && d3 >= 2048, "device %u: 3D max %zux%zux%zu", d, w3, h3, d3);
            CHECK_TRUE(bufsz >= 65536, "device %u: CL_DEVICE_IMAGE_MAX_BUFFER_SIZE %zu", d, bufsz);
            CHECK_TRUE(arr >= 2048, "device %u: CL_DEVICE_IMAGE_MAX_ARRAY_SIZE %zu", d, arr);
            CHECK_TRUE(smp >= 16 && rd >= 128 && wr >= 8, "device %u: samplers %u, read args %u, write args %u", d,
                       smp, rd, wr);
        }
        free(prof);
    }
}

/* clGetSupportedImageFormats: required formats listed, count-only call, short buffer. */
static void test_formats(void)
{
    static const cl_mem_object_type types[] = {CL_MEM_OBJECT_IMAGE2D, CL_MEM_OBJECT_IMAGE3D,
                                               CL_MEM_OBJECT_IMAGE1D, CL_MEM_OBJECT_IMAGE1D_ARRAY,
                                               CL_MEM_OBJECT_IMAGE2D_ARRAY};
    const cl_image_format *want[] = {&kRGBA8, &kRGBAF, &kR32};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        cl_uint n = 0;
        MUST(clGetSupportedImageFormats(ctx, CL_MEM_READ_WRITE, types[t], 0, NULL, &n));
        CHECK_TRUE(n >= 3, "type 0x%x: %u formats", types[t], n);
        if (n == 0)
            continue;
        cl_image_format *f = calloc(n + 1, sizeof *f);
        cl_uint n2 = 0;
        MUST(clGetSupportedImageFormats(ctx, CL_MEM_READ_WRITE, types[t], n + 1, f, &n2));
        CHECK_EQ(n2, n);
        for (size_t w = 0; w < 3; w++) {
            cl_uint i = 0;
            while (i < n && !(f[i].image_channel_order == want[w]->image_channel_order &&
                              f[i].image_channel_data_type == want[w]->image_channel_data_type))
                i++;
            CHECK_TRUE(i < n, "type 0x%x: format 0x%x/0x%x not listed", types[t], want[w]->image_channel_order,
                       want[w]->image_channel_data_type);
        }
        /* A short buffer gets the first entries; the count is still the total. */
        cl_image_format one[2];
        memset(one, 0xAB, sizeof one);
        cl_image_format sentinel = one[1];
        n2 = 0;
        MUST(clGetSupportedImageFormats(ctx, CL_MEM_READ_WRITE, types[t], 1, one, &n2));
        CHECK_EQ(n2, n);
        CHECK_TRUE(memcmp(&one[0], &f[0], sizeof one[0]) == 0, "type 0x%x: short buffer entry 0", types[t]);
        CHECK_TRUE(memcmp(&one[1], &sentinel, sizeof one[1]) == 0, "type 0x%x: wrote past num_entries", types[t]);
        MUST(clGetSupportedImageFormats(ctx, CL_MEM_READ_ONLY, types[t], 0, NULL, &n2));
        CHECK_TRUE(n2 > 0, "type 0x%x: no READ_ONLY formats", types[t]);
        free(f);
    }
    cl_uint n = 0;
    cl_image_format f[4];
    CHECK(clGetSupportedImageFormats(ctx, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D, 0, f, &n), CL_INVALID_VALUE);
    CHECK(clGetSupportedImageFormats(ctx, CL_MEM_READ_WRITE, CL_MEM_OBJECT_BUFFER, 4, f, &n), CL_INVALID_VALUE);
    CHECK(clGetSupportedImageFormats(NULL, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D, 4, f, &n), CL_INVALID_CONTEXT);
}

/*
 * One image type on device D: create (COPY/USE_HOST_PTR/plain), info, write a
 * sub-region, read whole and region with pitches, fill, copy image-image and
 * image<->buffer, map read/write, a float image fill.  Commands run on device
 * D's queue q; results are read back on the next device's queue q2.
 */
static void test_image_type(cl_uint D, const geom *g, uint32_t seed)
{
    cl_command_queue q = qs[D], q2 = qs[(D + 1) % ndev];
    const size_t el = 4, W = g->w, H = g->h, Z = g->d, n = W * H * Z, bytes = n * el;
    const size_t drp = W * el, dsp = slice_kind(g) == SL_1DARR ? drp : drp * H; /* dense pitches */
    const size_t full[3] = {W, H, Z}, zero[3] = {0, 0, 0};
    const int sl = slice_kind(g) != SL_NONE; /* slice pitches are passed to the API */
    char what[160];
    unsigned char *init = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes), *refb = malloc(bytes);
    fill_pattern(init, bytes, seed);
    cl_event ev[12] = {0};

    /* Create: COPY_HOST_PTR and plain. */
    cl_image_desc desc = mkdesc(g, 0, 0);
    cl_mem a, b, u;
    const cl_mem_flags fc = CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR;
    CREATE(a = clCreateImage(ctx, fc, &kRGBA8, &desc, init, &E));
    CREATE(b = clCreateImage(ctx, CL_MEM_READ_WRITE, &kRGBA8, &desc, NULL, &E));
    check_image_info(a, g, &kRGBA8, el, fc, init);
    check_image_info(b, g, &kRGBA8, el, CL_MEM_READ_WRITE, NULL);
    memcpy(ref, init, bytes);

    /* USE_HOST_PTR with a row pitch larger than width * element size. */
    size_t urp, usp;
    padded_pitches(g, el, full, 3, &urp, &usp);
    size_t usz = host_bytes(g, el, urp, usp, full);
    unsigned char *uh = aligned_alloc(4096, (usz + 4095) / 4096 * 4096);
    memset(uh, 0xEE, usz);
    box_copy(g, el, uh, zero, urp, usp, init, zero, drp, dsp, full);
    cl_image_desc udesc = mkdesc(g, urp, usp);
    const cl_mem_flags fu = CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR;
    CREATE(u = clCreateImage(ctx, fu, &kRGBA8, &udesc, uh, &E));
    check_image_info(u, g, &kRGBA8, el, fu, uh);
    memset(got, 0, bytes);
    MUST(clEnqueueReadImage(q2, u, CL_TRUE, zero, full, 0, 0, got, 0, NULL, NULL));
    snprintf(what, sizeof what, "%s dev %u: USE_HOST_PTR image with padded row pitch", g->name, D);
    /* NVIDIA natively misreads the padded rows of a USE_HOST_PTR 3D image or 2D array. */
    if (!(nvidia && (g->type == CL_MEM_OBJECT_IMAGE3D || g->type == CL_MEM_OBJECT_IMAGE2D_ARRAY)))
        CHECK_MEM(got, init, n, el, what);
    MUST(clEnqueueReadImage(q, a, CL_TRUE, zero, full, 0, 0, got, 0, NULL, NULL));
    snprintf(what, sizeof what, "%s dev %u: COPY_HOST_PTR image", g->name, D);
    CHECK_MEM(got, init, n, el, what);

    /* Write a sub-region from a host layout with padded pitches (non-blocking, q);
     * read the whole image back on q2. */
    size_t worg[3], wreg[3], hrp, hsp;
    sub_box(full, 1, worg, wreg);
    padded_pitches(g, el, wreg, 5, &hrp, &hsp);
    size_t hsz = host_bytes(g, el, hrp, hsp, wreg);
    unsigned char *hsrc = malloc(hsz);
    fill_pattern(hsrc, hsz, seed + 1);
    MUST(clEnqueueWriteImage(q, a, CL_FALSE, worg, wreg, hrp, sl ? hsp : 0, hsrc, 0, NULL, &ev[0]));
    box_copy(g, el, ref, worg, drp, dsp, hsrc, zero, hrp, hsp, wreg);
    MUST(clFlush(q));
    MUST(clEnqueueReadImage(q2, a, CL_FALSE, zero, full, 0, 0, got, 1, &ev[0], &ev[1]));
    MUST(clWaitForEvents(1, &ev[1]));
    CHECK_EQ(ct_event_status(ev[0]), CL_COMPLETE);
    snprintf(what, sizeof what, "%s dev %u: write sub-region with pitches, read whole", g->name, D);
    CHECK_MEM(got, ref, n, el, what);

    /* Read a region into a host layout with padding pitches. */
    size_t rorg[3], rreg[3], prp, psp;
    sub_box(full, 0, rorg, rreg);
    padded_pitches(g, el, rreg, 2, &prp, &psp);
    size_t psz = host_bytes(g, el, prp, psp, rreg);
    unsigned char *pgot = malloc(psz), *pref = malloc(psz);
    memset(pgot, 0x5A, psz);
    memcpy(pref, pgot, psz);
    MUST(clEnqueueReadImage(q, a, CL_TRUE, rorg, rreg, prp, sl ? psp : 0, pgot, 0, NULL, NULL));
    box_copy(g, el, pref, zero, prp, psp, ref, rorg, drp, dsp, rreg);
    snprintf(what, sizeof what, "%s dev %u: read region with padding pitches", g->name, D);
    CHECK_MEM(pgot, pref, psz, 1, what);

    /* Fill b (uint4 colours: whole image, then a region), copy a region of a into b at another origin. */
    const cl_uint4 c1 = {{1, 2, 3, 200}}, c2 = {{9, 8, 7, 255}};
    const unsigned char p1[4] = {1, 2, 3, 200}, p2[4] = {9, 8, 7, 255};
    size_t forg[3], freg[3], sorg[3], dorg[3], creg[3];
    sub_box(full, 1, forg, freg);
    sub_box(full, 1, sorg, creg);
    sub_box(full, 0, dorg, creg);
    for (int i = 0; i < 3; i++)
        if (full[i] > 1)
            sorg[i] = full[i] - creg[i]; /* the far corner */
    MUST(clEnqueueFillImage(q, b, &c1, zero, full, 0, NULL, &ev[2]));
    MUST(clEnqueueFillImage(q, b, &c2, forg, freg, 1, &ev[2], &ev[3]));
    MUST(clEnqueueCopyImage(q, a, b, sorg, dorg, creg, 1, &ev[3], &ev[4]));
    box_fill(g, el, refb, drp, dsp, zero, full, p1);
    box_fill(g, el, refb, drp, dsp, forg, freg, p2);
    box_copy(g, el, refb, dorg, drp, dsp, ref, sorg, drp, dsp, creg);
    MUST(clFlush(q));
    MUST(clEnqueueReadImage(q2, b, CL_TRUE, zero, full, 0, 0, got, 1, &ev[4], NULL));
    snprintf(what, sizeof what, "%s dev %u: fill uint4 + copy image (other origins)", g->name, D);
    CHECK_MEM(got, refb, n, el, what);

    /* Image -> buffer at an offset, buffer at another offset -> image. */
    size_t bsz = bytes + 64;
    unsigned char *binit = malloc(bsz), *bref = malloc(bsz), *bgot = malloc(bsz);
    fill_pattern(binit, bsz, seed + 2);
    memcpy(bref, binit, bsz);
    cl_mem buf;
    CREATE(buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bsz, binit, &E));
    size_t trp = creg[0] * el, tsp = slice_kind(g) == SL_1DARR ? trp : trp * creg[1];
    if (nvidia && slice_kind(g) == SL_1DARR) {
        /* NVIDIA (OpenCL 3.0, CUDA 13.0) fails both copies of a 1D image array with
         * CL_INVALID_VALUE natively: markers keep the order instead. */
        MUST(clEnqueueMarkerWithWaitList(q, 1, &ev[4], &ev[5]));
        MUST(clEnqueueMarkerWithWaitList(q, 1, &ev[5], &ev[6]));
    } else {
        MUST(clEnqueueCopyImageToBuffer(q, b, buf, dorg, creg, 12, 1, &ev[4], &ev[5]));
        box_copy(g, el, bref + 12, zero, trp, tsp, refb, dorg, drp, dsp, creg);
        MUST(clEnqueueCopyBufferToImage(q, buf, a, 40, worg, creg, 1, &ev[5], &ev[6]));
        box_copy(g, el, ref, worg, drp, dsp, bref + 40, zero, trp, tsp, creg);
    }
    MUST(clFlush(q));
    MUST(clEnqueueReadBuffer(q2, buf, CL_FALSE, 0, bsz, bgot, 1, &ev[6], &ev[7]));
    MUST(clEnqueueReadImage(q2, a, CL_TRUE, zero, full, 0, 0, got, 1, &ev[6], NULL));
    MUST(clWaitForEvents(1, &ev[7]));
    snprintf(what, sizeof what, "%s dev %u: clEnqueueCopyImageToBuffer at offset 12", g->name, D);
    CHECK_MEM(bgot, bref, bsz, 1, what);
    snprintf(what, sizeof what, "%s dev %u: clEnqueueCopyBufferToImage from offset 40", g->name, D);
    CHECK_MEM(got, ref, n, el, what);

    /* Map for reading (blocking): read through the returned pitches. */
    size_t mrp = 0, msp = 12345;
    unsigned char *mp;
    CREATE(mp = clEnqueueMapImage(q, a, CL_TRUE, CL_MAP_READ, zero, full, &mrp, &msp, 0, NULL, NULL, &E));
    CHECK_TRUE(mrp >= W * el, "%s: mapped row pitch %zu", g->name, mrp);
    if (!sl)
        CHECK_TRUE(msp == 0, "%s: mapped slice pitch %zu, expected 0", g->name, msp);
    memset(got, 0, bytes);
    box_copy(g, el, got, zero, drp, dsp, mp, zero, mrp, msp, full);
    snprintf(what, sizeof what, "%s dev %u: read map", g->name, D);
    CHECK_MEM(got, ref, n, el, what);
    MUST(clEnqueueUnmapMemObject(q, a, mp, 0, NULL, &ev[8]));
    /* Map a region for writing (non-blocking, event), write, unmap, read back on q2. */
    size_t morg[3], mreg[3];
    sub_box(full, 0, morg, mreg);
    CREATE(mp = clEnqueueMapImage(q, a, CL_FALSE, CL_MAP_WRITE, morg, mreg, &mrp, &msp, 1, &ev[8], &ev[9], &E));
    MUST(clWaitForEvents(1, &ev[9]));
    size_t wsz = mreg[0] * mreg[1] * mreg[2] * el, wrp = mreg[0] * el,
           wsp = slice_kind(g) == SL_1DARR ? wrp : wrp * mreg[1];
    unsigned char *wsrc = malloc(wsz);
    fill_pattern(wsrc, wsz, seed + 3);
    box_copy(g, el, mp, zero, mrp, msp, wsrc, zero, wrp, wsp, mreg);
    box_copy(g, el, ref, morg, drp, dsp, wsrc, zero, wrp, wsp, mreg);
    MUST(clEnqueueUnmapMemObject(q, a, mp, 0, NULL, &ev[10]));
    MUST(clFlush(q));
    MUST(clEnqueueReadImage(q2, a, CL_TRUE, zero, full, 0, 0, got, 1, &ev[10], NULL));
    snprintf(what, sizeof what, "%s dev %u: write map of a region", g->name, D);
    CHECK_MEM(got, ref, n, el, what);

    /* Float image: fill with float4 colours (whole, region), read back on q2. */
    const size_t fel = 16;
    cl_mem fimg;
    CREATE(fimg = clCreateImage(ctx, CL_MEM_READ_WRITE, &kRGBAF, &desc, NULL, &E));
    const cl_float4 f1 = {{1.5f, -2.25f, 0.0f, 1e10f}}, f2 = {{3.0f, 65504.0f, -7.125f, 0.5f}};
    MUST(clEnqueueFillImage(q, fimg, &f1, zero, full, 0, NULL, &ev[11]));
    MUST(clEnqueueFillImage(q, fimg, &f2, forg, freg, 0, NULL, NULL));
    MUST(clFinish(q));
    unsigned char *fgot = malloc(n * fel), *fref = malloc(n * fel);
    box_fill(g, fel, fref, W * fel, dsp / el * fel, zero, full, &f1);
    box_fill(g, fel, fref, W * fel, dsp / el * fel, forg, freg, &f2);
    MUST(clEnqueueReadImage(q2, fimg, CL_TRUE, zero, full, 0, 0, fgot, 0, NULL, NULL));
    snprintf(what, sizeof what, "%s dev %u: float4 fill", g->name, D);
    CHECK_MEM(fgot, fref, n * 4, 4, what);

    release_events(12, ev);
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseMemObject(u));
    MUST(clReleaseMemObject(buf));
    MUST(clReleaseMemObject(fimg));
    MUST(clFinish(q));
    MUST(clFinish(q2));
    free(init), free(ref), free(got), free(refb), free(uh), free(hsrc), free(pgot), free(pref);
    free(binit), free(bref), free(bgot), free(wsrc), free(fgot), free(fref);
}

/* 1D image buffer (CL_MEM_OBJECT_IMAGE1D_BUFFER): shares its buffer's data store. */
static void test_image1d_buffer(cl_uint D)
{
    cl_command_queue q = qs[D], q2 = qs[(D + 1) % ndev], qk = qs[ndev - 1];
    enum { W = 1000, EL = 4 };
    unsigned char *init = malloc(W * EL), *ref = malloc(W * EL), *got = malloc(W * EL);
    fill_pattern(init, W * EL, 500 + D);
    memcpy(ref, init, W * EL);
    cl_mem buf, img;
    CREATE(buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, W * EL, init, &E));
    cl_image_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER;
    desc.image_width = W;
    desc.buffer = buf;
    CREATE(img = clCreateImage(ctx, CL_MEM_READ_WRITE, &kRGBA8, &desc, NULL, &E));
    geom g = {CL_MEM_OBJECT_IMAGE1D_BUFFER, "1D buffer", W, 1, 1};
    check_image_info(img, &g, &kRGBA8, EL, CL_MEM_READ_WRITE, NULL);
    cl_mem ib = NULL;
    MUST(clGetImageInfo(img, CL_IMAGE_BUFFER, sizeof ib, &ib, NULL));
    CHECK_TRUE(ib == buf, "CL_IMAGE_BUFFER %p, expected %p", (void *)ib, (void *)buf);
    /* Image reads see the buffer's data; an image write is seen by buffer reads. */
    const size_t zero[3] = {0, 0, 0}, full[3] = {W, 1, 1}, org[3] = {123, 0, 0}, reg[3] = {456, 1, 1};
    MUST(clEnqueueReadImage(q, img, CL_TRUE, zero, full, 0, 0, got, 0, NULL, NULL));
    CHECK_MEM(got, ref, W, EL, "1D image buffer: read image of the buffer's data");
    unsigned char src[456 * EL];
    fill_pattern(src, sizeof src, 600 + D);
    cl_event ev[3];
    MUST(clEnqueueWriteImage(q, img, CL_FALSE, org, reg, 0, 0, src, 0, NULL, &ev[0]));
    memcpy(ref + 123 * EL, src, sizeof src);
    MUST(clFlush(q));
    MUST(clEnqueueReadBuffer(q2, buf, CL_TRUE, 0, W * EL, got, 1, &ev[0], NULL));
    CHECK_MEM(got, ref, W, EL, "1D image buffer: image write seen by the buffer");
    /* A kernel on the last device reads the image (sampler-less read_imageui). */
    cl_mem out;
    CREATE(out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, W * 16, NULL, &E));
    MUST(clSetKernelArg(k_read1dbuf, 0, sizeof img, &img));
    MUST(clSetKernelArg(k_read1dbuf, 1, sizeof out, &out));
    size_t gws = W;
    MUST(clEnqueueNDRangeKernel(qk, k_read1dbuf, 1, NULL, &gws, NULL, 1, &ev[0], &ev[1]));
    MUST(clFlush(qk));
    cl_uint *o = malloc(W * 16), *oref = malloc(W * 16);
    for (size_t i = 0; i < W * 4; i++)
        oref[i] = ref[i];
    MUST(clEnqueueReadBuffer(q, out, CL_TRUE, 0, W * 16, o, 1, &ev[1], NULL));
    CHECK_MEM(o, oref, W * 4, 4, "1D image buffer: read_imageui in a kernel on the last device");
    /* Not checked: PoCL 3.1 gives CL_INVALID_MEM_OBJECT for a NULL desc.buffer and for a
     * width above the buffer's size (the spec names CL_INVALID_IMAGE_DESCRIPTOR / _SIZE). */
    release_events(2, ev);
    MUST(clReleaseMemObject(img));
    MUST(clReleaseMemObject(buf));
    MUST(clReleaseMemObject(out));
    free(init), free(ref), free(got), free(o), free(oref);
}

/* ------------------------------------------------------------------------ */

/* Reference of shift_*: clamp-to-edge read at (x+dx, y+dy) plus (1,2,3,4) per channel. */
static void ref_shift(unsigned char *dst, const unsigned char *src, size_t w, size_t h, int dx, int dy)
{
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++)
            for (int c = 0; c < 4; c++)
                dst[(y * w + x) * 4 + c] =
                    (unsigned char)(src[(clampz((long)y + dy, h) * w + clampz((long)x + dx, w)) * 4 + c] + c + 1);
}

/* Cross-device kernels: image written on device 0, read/written by a kernel on the last device
 * (constant sampler and clCreateSampler argument), read back on device 0. */
static void test_kernel_cross_device(void)
{
    enum { W = 29, H = 17 };
    cl_command_queue q0 = qs[0], ql = qs[ndev - 1];
    unsigned char in[W * H * 4], got[W * H * 4], ref[W * H * 4];
    fill_pattern(in, sizeof in, 77);
    cl_image_desc desc = mkdesc(&(geom){CL_MEM_OBJECT_IMAGE2D, "2D", W, H, 1}, 0, 0);
    cl_mem img, out;
    CREATE(img = clCreateImage(ctx, CL_MEM_READ_ONLY, &kRGBA8, &desc, NULL, &E));
    CREATE(out = clCreateImage(ctx, CL_MEM_WRITE_ONLY, &kRGBA8, &desc, NULL, &E));
    cl_sampler smp;
    CREATE(smp = clCreateSampler(ctx, CL_FALSE, CL_ADDRESS_CLAMP_TO_EDGE, CL_FILTER_NEAREST, &E));
    const size_t zero[3] = {0, 0, 0}, full[3] = {W, H, 1}, gws[2] = {W, H};
    static const int shifts[][2] = {{-3, 5}, {4, -2}, {0, 0}, {-40, 30}};
    cl_event ev[3];
    MUST(clEnqueueWriteImage(q0, img, CL_FALSE, zero, full, 0, 0, in, 0, NULL, &ev[0]));
    MUST(clFlush(q0));
    for (int k = 0; k < 2; k++) {
        cl_kernel kern = k ? k_shift_arg : k_shift_const;
        for (size_t s = 0; s < sizeof shifts / sizeof shifts[0]; s++) {
            cl_int dx = shifts[s][0], dy = shifts[s][1];
            cl_uint a = 0;
            MUST(clSetKernelArg(kern, a++, sizeof img, &img));
            MUST(clSetKernelArg(kern, a++, sizeof out, &out));
            if (k)
                MUST(clSetKernelArg(kern, a++, sizeof smp, &smp));
            MUST(clSetKernelArg(kern, a++, sizeof dx, &dx));
            MUST(clSetKernelArg(kern, a++, sizeof dy, &dy));
            MUST(clEnqueueNDRangeKernel(ql, kern, 2, NULL, gws, NULL, 1, &ev[0], &ev[1]));
            MUST(clFlush(ql));
            memset(got, 0, sizeof got);
            MUST(clEnqueueReadImage(q0, out, CL_FALSE, zero, full, 0, 0, got, 1, &ev[1], &ev[2]));
            MUST(clWaitForEvents(1, &ev[2]));
            ref_shift(ref, in, W, H, dx, dy);
            char what[128];
            snprintf(what, sizeof what, "%s sampler, shift (%d,%d): device 0 -> kernel on device %u -> device 0",
                     k ? "argument" : "constant", dx, dy, ndev - 1);
            CHECK_MEM(got, ref, W * H, 4, what);
            release_events(2, &ev[1]);
        }
    }
    release_events(1, ev);
    MUST(clReleaseSampler(smp));
    MUST(clReleaseMemObject(img));
    MUST(clReleaseMemObject(out));
}

/* read_only -> write_only image2d kernels on every device in turn: output of i is input of i+1. */
static void test_kernel_chain(void)
{
    enum { W = 33, H = 21 };
    cl_image_desc desc = mkdesc(&(geom){CL_MEM_OBJECT_IMAGE2D, "2D", W, H, 1}, 0, 0);
    cl_mem img[CT_MAX_DEVICES + 1];
    for (cl_uint i = 0; i <= ndev; i++)
        CREATE(img[i] = clCreateImage(ctx, CL_MEM_READ_WRITE, &kR32, &desc, NULL, &E));
    cl_uint in[W * H], ref[W * H], got[W * H];
    fill_pattern(in, sizeof in, 88);
    memcpy(ref, in, sizeof in);
    const size_t zero[3] = {0, 0, 0}, full[3] = {W, H, 1}, gws[2] = {W, H};
    cl_event ev[CT_MAX_DEVICES + 1];
    MUST(clEnqueueWriteImage(qs[0], img[0], CL_FALSE, zero, full, 0, 0, in, 0, NULL, &ev[0]));
    MUST(clFlush(qs[0]));
    for (cl_uint i = 0; i < ndev; i++) {
        cl_uint add = 1000u * (i + 1);
        MUST(clSetKernelArg(k_chain, 0, sizeof img[i], &img[i]));
        MUST(clSetKernelArg(k_chain, 1, sizeof img[i + 1], &img[i + 1]));
        MUST(clSetKernelArg(k_chain, 2, sizeof add, &add));
        MUST(clEnqueueNDRangeKernel(qs[i], k_chain, 2, NULL, gws, NULL, 1, &ev[i], &ev[i + 1]));
        MUST(clFlush(qs[i]));
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < W; x++)
                ref[y * W + x] = ref[y * W + x] * 3u + add + (cl_uint)x;
    }
    MUST(clEnqueueReadImage(qs[0], img[ndev], CL_TRUE, zero, full, 0, 0, got, 1, &ev[ndev], NULL));
    CHECK_MEM(got, ref, W * H, 4, "image chain through every device (CL_R/CL_UNSIGNED_INT32)");
    release_events(ndev + 1, ev);
    for (cl_uint i = 0; i <= ndev; i++)
        MUST(clReleaseMemObject(img[i]));
}

/* image3d read with clamp-to-edge out of bounds on the last device; image written on device 0. */
static void test_kernel_3d(void)
{
    enum { W = 9, H = 7, Z = 5, N = W * H * Z };
    cl_image_desc desc = mkdesc(&(geom){CL_MEM_OBJECT_IMAGE3D, "3D", W, H, Z}, 0, 0);
    cl_mem img, out;
    CREATE(img = clCreateImage(ctx, CL_MEM_READ_ONLY, &kRGBA8, &desc, NULL, &E));
    CREATE(out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, N * 16, NULL, &E));
    unsigned char in[N * 4];
    cl_uint got[N * 4], ref[N * 4];
    fill_pattern(in, sizeof in, 99);
    const size_t zero[3] = {0, 0, 0}, full[3] = {W, H, Z};
    cl_event ev[2];
    MUST(clEnqueueWriteImage(qs[0], img, CL_FALSE, zero, full, 0, 0, in, 0, NULL, &ev[0]));
    MUST(clFlush(qs[0]));
    cl_int4 off = {{-2, 3, -1, 0}};
    MUST(clSetKernelArg(k_read3d, 0, sizeof img, &img));
    MUST(clSetKernelArg(k_read3d, 1, sizeof out, &out));
    MUST(clSetKernelArg(k_read3d, 2, sizeof off, &off));
    MUST(clEnqueueNDRangeKernel(qs[ndev - 1], k_read3d, 3, NULL, full, NULL, 1, &ev[0], &ev[1]));
    MUST(clFlush(qs[ndev - 1]));
    MUST(clEnqueueReadBuffer(qs[0], out, CL_TRUE, 0, sizeof got, got, 1, &ev[1], NULL));
    for (size_t z = 0; z < Z; z++)
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < W; x++) {
                size_t s = (clampz((long)z + off.s[2], Z) * H + clampz((long)y + off.s[1], H)) * W +
                           clampz((long)x + off.s[0], W);
                for (int c = 0; c < 4; c++)
                    ref[((z * H + y) * W + x) * 4 + c] = in[s * 4 + c];
            }
    CHECK_MEM(got, ref, N * 4, 4, "image3d read_imageui clamp-to-edge on the last device");
    release_events(2, ev);
    MUST(clReleaseMemObject(img));
    MUST(clReleaseMemObject(out));
}

/* ------------------------------------------------------------------------ */

/* Samplers: create, every 1.2 clGetSamplerInfo query, retain/release, invalid values. */
static void test_samplers(void)
{
    static const struct {
        cl_bool norm;
        cl_addressing_mode am;
        cl_filter_mode fm;
    } cases[] = {
        {CL_FALSE, CL_ADDRESS_CLAMP_TO_EDGE, CL_FILTER_NEAREST}, {CL_FALSE, CL_ADDRESS_CLAMP, CL_FILTER_LINEAR},
        {CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST},          {CL_TRUE, CL_ADDRESS_REPEAT, CL_FILTER_LINEAR},
        {CL_TRUE, CL_ADDRESS_MIRRORED_REPEAT, CL_FILTER_NEAREST},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cl_sampler s;
        CREATE(s = clCreateSampler(ctx, cases[i].norm, cases[i].am, cases[i].fm, &E));
        cl_uint rc = 0;
        cl_context c = NULL;
        cl_bool norm = 7;
        cl_addressing_mode am = 0;
        cl_filter_mode fm = 0;
        size_t sz = 0;
        MUST(clGetSamplerInfo(s, CL_SAMPLER_REFERENCE_COUNT, sizeof rc, &rc, &sz));
        CHECK_EQ(sz, sizeof rc);
        CHECK_EQ(rc, 1);
        MUST(clGetSamplerInfo(s, CL_SAMPLER_CONTEXT, sizeof c, &c, &sz));
        CHECK_TRUE(c == ctx && sz == sizeof c, "CL_SAMPLER_CONTEXT %p (size %zu)", (void *)c, sz);
        MUST(clGetSamplerInfo(s, CL_SAMPLER_NORMALIZED_COORDS, sizeof norm, &norm, &sz));
        CHECK_EQ(norm, cases[i].norm);
        CHECK_EQ(sz, sizeof norm);
        MUST(clGetSamplerInfo(s, CL_SAMPLER_ADDRESSING_MODE, sizeof am, &am, &sz));
        CHECK_EQ(am, cases[i].am);
        CHECK_EQ(sz, sizeof am);
        MUST(clGetSamplerInfo(s, CL_SAMPLER_FILTER_MODE, sizeof fm, &fm, &sz));
        CHECK_EQ(fm, cases[i].fm);
        CHECK_EQ(sz, sizeof fm);
        sz = 0;
        MUST(clGetSamplerInfo(s, CL_SAMPLER_FILTER_MODE, 0, NULL, &sz));
        CHECK_EQ(sz, sizeof fm);
        MUST(clRetainSampler(s));
        MUST(clGetSamplerInfo(s, CL_SAMPLER_REFERENCE_COUNT, sizeof rc, &rc, NULL));
        CHECK_EQ(rc, 2);
        MUST(clReleaseSampler(s));
        MUST(clGetSamplerInfo(s, CL_SAMPLER_REFERENCE_COUNT, sizeof rc, &rc, NULL));
        CHECK_EQ(rc, 1);
        CHECK(clGetSamplerInfo(s, 0x7777, sizeof rc, &rc, NULL), CL_INVALID_VALUE);
        CHECK(clGetSamplerInfo(s, CL_SAMPLER_CONTEXT, 1, &c, NULL), CL_INVALID_VALUE);
        MUST(clReleaseSampler(s));
    }
    /* Not checked: PoCL 3.1 creates samplers with an unknown addressing or filter mode
     * (the spec names CL_INVALID_VALUE). */
    CHECK_FAILS(clCreateSampler(NULL, CL_FALSE, CL_ADDRESS_CLAMP, CL_FILTER_NEAREST, &E), CL_INVALID_CONTEXT);
    CHECK(clGetSamplerInfo(NULL, CL_SAMPLER_REFERENCE_COUNT, 4, &(cl_uint){0}, NULL), CL_INVALID_SAMPLER);
}

/* Error codes of image creation and image commands. */
static void test_errors(void)
{
    cl_command_queue q = qs[0];
    enum { W = 16, H = 8 };
    unsigned char host[W * H * 4] = {0};
    cl_image_desc desc = mkdesc(&(geom){CL_MEM_OBJECT_IMAGE2D, "2D", W, H, 1}, 0, 0);
    const cl_mem_flags rw = CL_MEM_READ_WRITE;
    /*
     * PoCL 3.1 deviates from the 1.2 spec on most image creation errors, so those are not
     * checked (natively they would fail, and MirrorCL returns the vendor's codes):
     *  - a bad channel order/type combination (CL_RGBA/CL_UNORM_SHORT_565, unknown values)
     *    gives CL_INVALID_OPERATION, not CL_INVALID_IMAGE_FORMAT_DESCRIPTOR;
     *  - a bad image_type gives CL_INVALID_VALUE, not CL_INVALID_IMAGE_DESCRIPTOR;
     *  - a 0 width/height/depth/array size gives CL_INVALID_BUFFER_SIZE and a dimension
     *    above the device maximum CL_INVALID_OPERATION: PoCL never returns
     *    CL_INVALID_IMAGE_SIZE (clCreateImage2D neither);
     *  - image_row_pitch != 0 without host_ptr, or smaller than width * element size, is
     *    accepted; a row pitch that is not a multiple of the element size gives
     *    CL_INVALID_VALUE, not CL_INVALID_IMAGE_DESCRIPTOR;
     *  - num_mip_levels != 0 aborts the process ("unimplemented").
     */
    CHECK_FAILS(clCreateImage(ctx, rw, NULL, &desc, NULL, &E), CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
    CHECK_FAILS(clCreateImage(ctx, rw, &kRGBA8, NULL, NULL, &E), CL_INVALID_IMAGE_DESCRIPTOR);
    CHECK_FAILS(clCreateImage2D(ctx, rw, NULL, W, H, 0, NULL, &E), CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
    /* Host pointers and flags. */
    CHECK_FAILS(clCreateImage(ctx, rw, &kRGBA8, &desc, host, &E), CL_INVALID_HOST_PTR);
    CHECK_FAILS(clCreateImage(ctx, rw | CL_MEM_COPY_HOST_PTR, &kRGBA8, &desc, NULL, &E), CL_INVALID_HOST_PTR);
    CHECK_FAILS(clCreateImage(ctx, rw | CL_MEM_USE_HOST_PTR, &kRGBA8, &desc, NULL, &E), CL_INVALID_HOST_PTR);
    if (!nvidia) /* NVIDIA accepts USE_HOST_PTR with COPY_HOST_PTR */
        CHECK_FAILS(clCreateImage(ctx, CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR, &kRGBA8, &desc, host, &E),
                    CL_INVALID_VALUE);
    CHECK_FAILS(clCreateImage(ctx, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, &kRGBA8, &desc, NULL, &E),
                CL_INVALID_VALUE);
    CHECK_FAILS(clCreateImage(NULL, rw, &kRGBA8, &desc, NULL, &E), CL_INVALID_CONTEXT);

    /* Enqueue errors. */
    cl_mem img, img32, buf;
    CREATE(img = clCreateImage(ctx, rw, &kRGBA8, &desc, NULL, &E));
    CREATE(img32 = clCreateImage(ctx, rw, &kR32, &desc, NULL, &E));
    CREATE(buf = clCreateBuffer(ctx, rw, sizeof host, NULL, &E));
    const size_t zero[3] = {0, 0, 0}, full[3] = {W, H, 1}, o1[3] = {1, 0, 0}, o2[3] = {0, 1, 0}, oz[3] = {0, 0, 1};
    const size_t r2[3] = {W, H, 2};
    CHECK(clEnqueueReadImage(q, img, CL_TRUE, o1, full, 0, 0, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueWriteImage(q, img, CL_TRUE, o2, full, 0, 0, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueReadImage(q, img, CL_TRUE, oz, o1, 0, 0, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueReadImage(q, img, CL_TRUE, zero, r2, 0, 0, host, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueReadImage(q, img, CL_TRUE, zero, full, 0, 0, NULL, 0, NULL, NULL), CL_INVALID_VALUE);
    /* Not checked, PoCL 3.1 accepts them: a non-zero slice_pitch for a 2D image (the spec
     * names CL_INVALID_VALUE); clEnqueueReadBuffer/WriteBuffer on an image and
     * clGetImageInfo on a buffer (CL_INVALID_MEM_OBJECT). */
    CHECK(clEnqueueCopyImage(q, img, img32, zero, zero, full, 0, NULL, NULL), CL_IMAGE_FORMAT_MISMATCH);
    CHECK(clEnqueueCopyImage(q, img, img, zero, o1, full, 0, NULL, NULL), CL_INVALID_VALUE);
    const cl_uint4 col = {{0, 0, 0, 0}};
    CHECK(clEnqueueFillImage(q, img, &col, o1, full, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueFillImage(q, img, NULL, zero, full, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueCopyImageToBuffer(q, img, buf, zero, full, 4, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clEnqueueCopyBufferToImage(q, buf, img, 4, zero, full, 0, NULL, NULL), CL_INVALID_VALUE);
    /* Buffers where images are expected, and a NULL row pitch for a map (NVIDIA answers
     * CL_INVALID_VALUE for a buffer, and other codes for the NULL pitch, natively). */
    if (!nvidia) {
        CHECK(clEnqueueReadImage(q, buf, CL_TRUE, zero, full, 0, 0, host, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
        CHECK(clEnqueueWriteImage(q, buf, CL_TRUE, zero, full, 0, 0, host, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
        CHECK(clEnqueueFillImage(q, buf, &col, zero, full, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
        CHECK(clEnqueueCopyImage(q, buf, img, zero, zero, full, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
        CHECK_FAILS(clEnqueueMapImage(q, buf, CL_TRUE, CL_MAP_READ, zero, full, &(size_t){0}, NULL, 0, NULL, NULL, &E),
                    CL_INVALID_MEM_OBJECT);
        CHECK_FAILS(clEnqueueMapImage(q, img, CL_TRUE, CL_MAP_READ, zero, full, NULL, NULL, 0, NULL, NULL, &E),
                    CL_INVALID_VALUE); /* image_row_pitch NULL */
    }
    size_t v = 0;
    CHECK(clGetImageInfo(img, 0x7777, sizeof v, &v, NULL), CL_INVALID_VALUE);
    CHECK(clGetImageInfo(img, CL_IMAGE_WIDTH, 1, &v, NULL), CL_INVALID_VALUE);
    MUST(clFinish(q));
    MUST(clReleaseMemObject(img));
    MUST(clReleaseMemObject(img32));
    MUST(clReleaseMemObject(buf));
}

/* Deprecated OpenCL 1.1 clCreateImage2D / clCreateImage3D with padded host pitches. */
static void test_deprecated(void)
{
    enum { W = 13, H = 9, Z = 4, RP = (W + 2) * 4, SP = RP * (H + 1) };
    static unsigned char host[SP * Z], dense[W * H * Z * 4], got[W * H * Z * 4];
    fill_pattern(host, sizeof host, 111);
    const geom g3 = {CL_MEM_OBJECT_IMAGE3D, "3D", W, H, Z};
    const size_t zero[3] = {0, 0, 0}, full2[3] = {W, H, 1}, full3[3] = {W, H, Z};
    cl_mem i2, i3;
    CREATE(i2 = clCreateImage2D(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &kRGBA8, W, H, RP, host, &E));
    CREATE(i3 = clCreateImage3D(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &kRGBA8, W, H, Z, RP, SP, host, &E));
    cl_mem_object_type t = 0;
    MUST(clGetMemObjectInfo(i2, CL_MEM_TYPE, sizeof t, &t, NULL));
    CHECK_EQ(t, CL_MEM_OBJECT_IMAGE2D);
    MUST(clGetMemObjectInfo(i3, CL_MEM_TYPE, sizeof t, &t, NULL));
    CHECK_EQ(t, CL_MEM_OBJECT_IMAGE3D);
    CHECK_EQ(img_size(i3, CL_IMAGE_DEPTH), Z);
    box_copy(&g3, 4, dense, zero, W * 4, W * H * 4, host, zero, RP, SP, full3);
    MUST(clEnqueueReadImage(qs[ndev - 1], i2, CL_TRUE, zero, full2, 0, 0, got, 0, NULL, NULL));
    CHECK_MEM(got, dense, W * H, 4, "clCreateImage2D with row pitch");
    MUST(clEnqueueReadImage(qs[ndev - 1], i3, CL_TRUE, zero, full3, 0, 0, got, 0, NULL, NULL));
    CHECK_MEM(got, dense, W * H * Z, 4, "clCreateImage3D with row and slice pitch");
    MUST(clReleaseMemObject(i2));
    MUST(clReleaseMemObject(i3));
}

int main(void)
{
    ct_init("images");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++) {
        qs[d] = ct_queue(ctx, devs[d], 0);
        char *vendor = ct_device_str(devs[d], CL_DEVICE_VENDOR);
        nvidia |= strstr(vendor, "NVIDIA") != NULL;
        free(vendor);
    }

    test_device_limits();
    cl_program prog = ct_build(ctx, kSrc, NULL);
    k_shift_const = ct_kernel(prog, "shift_const");
    k_shift_arg = ct_kernel(prog, "shift_arg");
    k_chain = ct_kernel(prog, "chain");
    k_read3d = ct_kernel(prog, "read3d");
    k_read1dbuf = ct_kernel(prog, "read1dbuf");

    test_formats();
    static const geom geoms[] = {
        {CL_MEM_OBJECT_IMAGE2D, "2D", 37, 23, 1},       {CL_MEM_OBJECT_IMAGE3D, "3D", 19, 13, 7},
        {CL_MEM_OBJECT_IMAGE2D_ARRAY, "2D array", 21, 11, 5}, {CL_MEM_OBJECT_IMAGE1D, "1D", 301, 1, 1},
        {CL_MEM_OBJECT_IMAGE1D_ARRAY, "1D array", 57, 6, 1},
    };
    for (cl_uint d = 0; d < ndev; d++) {
        for (size_t i = 0; i < sizeof geoms / sizeof geoms[0]; i++)
            test_image_type(d, &geoms[i], 1000 * (d + 1) + 10 * (uint32_t)i);
        test_image1d_buffer(d);
    }
    test_kernel_cross_device();
    test_kernel_chain();
    test_kernel_3d();
    test_samplers();
    test_errors();
    test_deprecated();

    clReleaseKernel(k_shift_const);
    clReleaseKernel(k_shift_arg);
    clReleaseKernel(k_chain);
    clReleaseKernel(k_read3d);
    clReleaseKernel(k_read1dbuf);
    clReleaseProgram(prog);
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
