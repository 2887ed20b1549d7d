/*
 * program_kernel.c - program objects (source, binaries, compile + link,
 * build callbacks, build failures, every clGetProgramInfo /
 * clGetProgramBuildInfo param) and kernel objects (creation, every
 * clGetKernelInfo / clGetKernelArgInfo / clGetKernelWorkGroupInfo param,
 * clSetKernelArg errors, __local args, NDRange 1D/2D/3D with offsets and
 * local sizes, clEnqueueTask, launch errors).
 */
#include "check.h"

static cl_platform_id platform;
static cl_context ctx;
static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_command_queue qs[CT_MAX_DEVICES];

static const char *kPart1 = "#define SCALE 3\n/* part one */\n";
static const char *kPart2 =
    "__kernel void scale_add(__global const uint *in, __global uint *out, uint add)\n"
    "{ size_t i = get_global_id(0); out[i] = in[i] * SCALE + add + VALUE; }\n";
/* Passed with an explicit length that cuts off the trailing garbage. */
static const char *kPart3 =
    "__kernel void ids(__global uint *g, __global uint *l, __global uint *grp,\n"
    "                  __global uint *meta, uint w, uint h)\n"
    "{\n"
    "  size_t x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);\n"
    "  size_t idx = (z * h + y) * w + x;\n"
    "  g[idx] = (uint)(x | (y << 10) | (z << 20));\n"
    "  l[idx] = (uint)(get_local_id(0) | (get_local_id(1) << 8) | (get_local_id(2) << 16));\n"
    "  grp[idx] = (uint)(get_group_id(0) | (get_group_id(1) << 10) | (get_group_id(2) << 20));\n"
    "  if (x == get_global_offset(0) && y == get_global_offset(1) && z == get_global_offset(2)) {\n"
    "    meta[0] = get_work_dim();\n"
    "    for (uint d = 0; d < 3; d++) {\n"
    "      meta[1 + d] = get_global_size(d); meta[4 + d] = get_local_size(d);\n"
    "      meta[7 + d] = get_num_groups(d); meta[10 + d] = get_global_offset(d);\n"
    "    }\n"
    "  }\n"
    "}\n"
    "#error this line must not be compiled";
static const char *kPart4 =
    "__kernel void argk(__global const float *restrict in, __global volatile int *out,\n"
    "                   __local float4 *tmp, __constant uint *c, uint n, float4 v)\n"
    "{ size_t i = get_global_id(0); tmp[0] = v; out[i] = (int)(in[i] + tmp[0].x) + (int)c[0] + (int)n; }\n"
    "__kernel void reduce(__global const uint *in, __global uint *out, __local uint *scratch)\n"
    "{\n"
    "  size_t l = get_local_id(0), n = get_local_size(0);\n"
    "  scratch[l] = in[get_global_id(0)];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  if (l == 0) { uint s = 0; for (size_t i = 0; i < n; i++) s += scratch[i] * (uint)(i + 1);\n"
    "                out[get_group_id(0)] = s; }\n"
    "}\n"
    "__kernel void task(__global uint *out) { out[0] = 42u + (uint)get_global_size(0) + (uint)get_local_size(0); }\n"
    "__kernel __attribute__((reqd_work_group_size(4, 2, 1))) void reqd(__global uint *out)\n"
    "{ out[get_global_id(1) * get_global_size(0) + get_global_id(0)] =\n"
    "    (uint)(get_local_id(0) + 10 * get_local_id(1) + 100 * get_group_id(0) + 1000 * get_group_id(1)); }\n";

static const char *kOptions = "-DVALUE=7 -cl-kernel-arg-info";
static const char *kKernelNames[] = {"scale_add", "ids", "argk", "reduce", "task", "reqd"};
#define NKERNELS 6

static volatile int build_cb_calls;
static cl_program build_cb_prog;

static void CL_CALLBACK build_cb(cl_program p, void *user)
{
    build_cb_prog = p;
    if (user == (void *)&build_cb_calls)
        __atomic_add_fetch(&build_cb_calls, 1, __ATOMIC_SEQ_CST);
}

/* Runs scale_add from prog on every device and checks the result. */
static void check_scale_add(cl_program prog, const char *what)
{
    enum { N = 4096 };
    uint32_t in[N], out[N], ref[N];
    ct_rng_state = 99;
    for (size_t i = 0; i < N; i++) {
        in[i] = ct_rand();
        ref[i] = in[i] * 3u + 1000u + (uint32_t)i + 7u;
    }
    cl_kernel k = ct_kernel(prog, "scale_add");
    cl_mem bi, bo;
    CREATE(bi = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, in, &E));
    CREATE(bo = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof out, NULL, &E));
    for (cl_uint d = 0; d < ndev; d++) {
        for (size_t i = 0; i < N; i++)
            ref[i] = in[i] * 3u + 1000u + d + 7u;
        cl_uint add = 1000u + d;
        MUST(clSetKernelArg(k, 0, sizeof bi, &bi));
        MUST(clSetKernelArg(k, 1, sizeof bo, &bo));
        MUST(clSetKernelArg(k, 2, sizeof add, &add));
        size_t gws = N;
        MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &gws, NULL, 0, NULL, NULL));
        memset(out, 0, sizeof out);
        MUST(clEnqueueReadBuffer(qs[d], bo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        char msg[128];
        snprintf(msg, sizeof msg, "scale_add from %s on device %u", what, d);
        CHECK_MEM(out, ref, N, 4, msg);
    }
    clReleaseMemObject(bi);
    clReleaseMemObject(bo);
    MUST(clReleaseKernel(k));
}

static void check_program_info(cl_program prog, const char *expect_src, int built)
{
    static const struct {
        cl_program_info id;
        const char *name;
    } params[] = {
        {CL_PROGRAM_REFERENCE_COUNT, "CL_PROGRAM_REFERENCE_COUNT"},
        {CL_PROGRAM_CONTEXT, "CL_PROGRAM_CONTEXT"},
        {CL_PROGRAM_NUM_DEVICES, "CL_PROGRAM_NUM_DEVICES"},
        {CL_PROGRAM_DEVICES, "CL_PROGRAM_DEVICES"},
        {CL_PROGRAM_SOURCE, "CL_PROGRAM_SOURCE"},
        {CL_PROGRAM_BINARY_SIZES, "CL_PROGRAM_BINARY_SIZES"},
        {CL_PROGRAM_BINARIES, "CL_PROGRAM_BINARIES"},
        {CL_PROGRAM_NUM_KERNELS, "CL_PROGRAM_NUM_KERNELS"},
        {CL_PROGRAM_KERNEL_NAMES, "CL_PROGRAM_KERNEL_NAMES"},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        cl_program_info id = params[i].id;
        size_t sz = 0;
        cl_int err = clGetProgramInfo(prog, id, 0, NULL, &sz);
        if (!built && (id == CL_PROGRAM_NUM_KERNELS || id == CL_PROGRAM_KERNEL_NAMES)) {
            ct_check_code(err, CL_INVALID_PROGRAM_EXECUTABLE, params[i].name, __FILE__, __LINE__, 0);
            continue;
        }
        if (!built && (id == CL_PROGRAM_BINARY_SIZES || id == CL_PROGRAM_BINARIES)) {
            /* Spec: size 0 for devices without a binary.  PoCL 3.1: CL_INVALID_PROGRAM. */
            if (!CHECK_NATIVE_DEVIATES(err, CL_SUCCESS, CL_INVALID_PROGRAM) || err != CL_SUCCESS)
                continue;
        }
        if (!ct_check_code(err, CL_SUCCESS, params[i].name, __FILE__, __LINE__, 0))
            continue;
        size_t want = 0;
        switch (id) {
        case CL_PROGRAM_REFERENCE_COUNT:
        case CL_PROGRAM_NUM_DEVICES: want = sizeof(cl_uint); break;
        case CL_PROGRAM_CONTEXT: want = sizeof(cl_context); break;
        case CL_PROGRAM_DEVICES: want = ndev * sizeof(cl_device_id); break;
        case CL_PROGRAM_BINARY_SIZES: want = ndev * sizeof(size_t); break;
        case CL_PROGRAM_BINARIES: want = ndev * sizeof(unsigned char *); break;
        case CL_PROGRAM_NUM_KERNELS: want = sizeof(size_t); break;
        default: want = sz; break; /* strings */
        }
        ct_check_true(sz == want, params[i].name, __FILE__, __LINE__, "size %zu, expected %zu", sz, want);
        if (id == CL_PROGRAM_BINARIES)
            continue; /* needs caller-allocated buffers: see test_binaries() */
        char *buf = calloc(sz + 16, 1);
        size_t sz2 = 0;
        ct_check_code(clGetProgramInfo(prog, id, sz, buf, &sz2), CL_SUCCESS, params[i].name, __FILE__, __LINE__, 0);
        ct_check_true(sz2 == sz, params[i].name, __FILE__, __LINE__, "size %zu vs %zu", sz, sz2);
        if (sz > 0)
            ct_check_code(clGetProgramInfo(prog, id, sz - 1, buf, NULL), CL_INVALID_VALUE, params[i].name, __FILE__,
                          __LINE__, 0);
        if (id == CL_PROGRAM_SOURCE && expect_src)
            CHECK_TRUE(!strcmp(buf, expect_src), "CL_PROGRAM_SOURCE differs:\n---- got ----\n%s\n---- expected ----\n%s",
                       buf, expect_src);
        if (id == CL_PROGRAM_CONTEXT)
            CHECK_TRUE(*(cl_context *)(void *)buf == ctx, "CL_PROGRAM_CONTEXT");
        if (id == CL_PROGRAM_NUM_DEVICES)
            CHECK_EQ(*(cl_uint *)(void *)buf, ndev);
        if (id == CL_PROGRAM_DEVICES && sz == ndev * sizeof(cl_device_id))
            CHECK_TRUE(!memcmp(buf, devs, sz), "CL_PROGRAM_DEVICES differ from the context's devices");
        if (id == CL_PROGRAM_BINARY_SIZES)
            for (cl_uint d = 0; d < ndev; d++)
                CHECK_TRUE(built ? ((size_t *)(void *)buf)[d] > 0 : ((size_t *)(void *)buf)[d] == 0,
                           "binary size %zu for device %u of a %s program", ((size_t *)(void *)buf)[d], d,
                           built ? "built" : "unbuilt");
        if (id == CL_PROGRAM_NUM_KERNELS)
            CHECK_EQ(*(size_t *)(void *)buf, NKERNELS);
        if (id == CL_PROGRAM_KERNEL_NAMES) {
            for (int k = 0; k < NKERNELS; k++) {
                int found = 0;
                char *copy = strdup(buf), *save = NULL;
                for (char *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save))
                    if (!strcmp(t, kKernelNames[k]))
                        found = 1;
                free(copy);
                CHECK_TRUE(found, "kernel %s missing from CL_PROGRAM_KERNEL_NAMES \"%s\"", kKernelNames[k], buf);
            }
        }
        free(buf);
    }
    cl_uint v;
    CHECK(clGetProgramInfo(prog, 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
}

static void check_build_info(cl_program prog, cl_build_status want_status, const char *want_opts,
                             cl_program_binary_type want_type)
{
    for (cl_uint d = 0; d < ndev; d++) {
        size_t sz = 0;
        cl_build_status st = 99;
        MUST(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_STATUS, 0, NULL, &sz));
        CHECK_EQ(sz, sizeof(cl_build_status));
        MUST(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL));
        CHECK_EQ(st, want_status);
        CHECK(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_STATUS, 2, &st, NULL), CL_INVALID_VALUE);
        cl_program_binary_type bt = 99;
        MUST(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BINARY_TYPE, 0, NULL, &sz));
        CHECK_EQ(sz, sizeof(cl_program_binary_type));
        MUST(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BINARY_TYPE, sizeof bt, &bt, NULL));
        CHECK_EQ(bt, want_type);
        MUST(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_OPTIONS, 0, NULL, &sz));
        char *opts = calloc(sz + 1, 1);
        size_t sz2 = 0;
        MUST(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_OPTIONS, sz, opts, &sz2));
        CHECK_EQ(sz2, sz);
        CHECK_TRUE(sz >= 1 && opts[sz - 1] == 0, "options not NUL terminated");
        if (want_opts)
            CHECK_TRUE(strstr(opts, want_opts) != NULL, "CL_PROGRAM_BUILD_OPTIONS \"%s\", expected \"%s\"", opts,
                       want_opts);
        if (sz > 1)
            CHECK(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_OPTIONS, sz - 1, opts, NULL), CL_INVALID_VALUE);
        free(opts);
        /* Spec: empty string for CL_BUILD_NONE.  PoCL 3.1: CL_INVALID_PROGRAM. */
        cl_int lerr = clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_LOG, 0, NULL, &sz);
        if (want_status == CL_BUILD_NONE)
            CHECK_NATIVE_DEVIATES(lerr, CL_SUCCESS, CL_INVALID_PROGRAM);
        else
            CHECK(lerr, CL_SUCCESS);
        if (lerr != CL_SUCCESS)
            continue;
        CHECK_TRUE(sz >= 1, "build log size %zu", sz);
        char *log = calloc(sz + 1, 1);
        MUST(clGetProgramBuildInfo(prog, devs[d], CL_PROGRAM_BUILD_LOG, sz, log, &sz2));
        CHECK_EQ(sz2, sz);
        CHECK_TRUE(log[sz - 1] == 0, "build log not NUL terminated");
        free(log);
        cl_uint v;
        CHECK(clGetProgramBuildInfo(prog, devs[d], 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
    }
    cl_build_status st;
    CHECK(clGetProgramBuildInfo(prog, NULL, CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL), CL_INVALID_DEVICE);
}

static void test_build_failure(void)
{
    const char *bad = "__kernel void broken(__global int *p) { p[0] = undeclared_identifier_xyz; }\n";
    cl_program p;
    CREATE(p = clCreateProgramWithSource(ctx, 1, &bad, NULL, &E));
    CHECK(clBuildProgram(p, 0, NULL, NULL, NULL, NULL), CL_BUILD_PROGRAM_FAILURE);
    /*
     * At least one device's log must mention the error.  (PoCL 3.1 stops at
     * the first failing device and leaves the other logs empty, which the
     * spec does not forbid.)
     */
    int mentioned = 0;
    for (cl_uint d = 0; d < ndev; d++) {
        cl_build_status st = 99;
        MUST(clGetProgramBuildInfo(p, devs[d], CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL));
        CHECK_EQ(st, CL_BUILD_ERROR);
        size_t sz = 0;
        MUST(clGetProgramBuildInfo(p, devs[d], CL_PROGRAM_BUILD_LOG, 0, NULL, &sz));
        char *log = calloc(sz + 1, 1);
        MUST(clGetProgramBuildInfo(p, devs[d], CL_PROGRAM_BUILD_LOG, sz, log, NULL));
        if (strstr(log, "undeclared_identifier_xyz"))
            mentioned++;
        else
            printf("  note: build log of device %u does not mention the error: \"%s\"\n", d, log);
        free(log);
    }
    CHECK_TRUE(mentioned > 0, "no device's build log mentions undeclared_identifier_xyz");
    CHECK_FAILS(clCreateKernel(p, "broken", &E), CL_INVALID_PROGRAM_EXECUTABLE);
    cl_uint n = 0;
    CHECK(clCreateKernelsInProgram(p, 0, NULL, &n), CL_INVALID_PROGRAM_EXECUTABLE);
    MUST(clReleaseProgram(p));
}

static void test_binaries(cl_program prog)
{
    size_t sizes[CT_MAX_DEVICES];
    MUST(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, ndev * sizeof(size_t), sizes, NULL));
    unsigned char *bins[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++) {
        CHECK_TRUE(sizes[d] > 0, "binary size of device %u is 0", d);
        bins[d] = malloc(sizes[d] + 1);
    }
    size_t sz = 0;
    MUST(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, ndev * sizeof(unsigned char *), bins, &sz));
    CHECK_EQ(sz, ndev * sizeof(unsigned char *));
    CHECK(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, ndev * sizeof(unsigned char *) - 1, bins, NULL),
          CL_INVALID_VALUE);
    cl_int status[CT_MAX_DEVICES];
    for (cl_uint d = 0; d < ndev; d++)
        status[d] = 12345;
    cl_program bp;
    CREATE(bp = clCreateProgramWithBinary(ctx, ndev, devs, sizes, (const unsigned char **)bins, status, &E));
    for (cl_uint d = 0; d < ndev; d++)
        CHECK_EQ(status[d], CL_SUCCESS);
    check_build_info(bp, CL_BUILD_NONE, NULL, CL_PROGRAM_BINARY_TYPE_EXECUTABLE);
    MUST(clBuildProgram(bp, 0, NULL, NULL, NULL, NULL));
    check_build_info(bp, CL_BUILD_SUCCESS, NULL, CL_PROGRAM_BINARY_TYPE_EXECUTABLE);
    check_program_info(bp, NULL, 1);
    check_scale_add(bp, "clCreateProgramWithBinary");
    MUST(clReleaseProgram(bp));
    /* Binary on a single device (the last one). */
    CREATE(bp = clCreateProgramWithBinary(ctx, 1, &devs[ndev - 1], &sizes[ndev - 1],
                                          (const unsigned char **)&bins[ndev - 1], NULL, &E));
    MUST(clBuildProgram(bp, 1, &devs[ndev - 1], NULL, NULL, NULL));
    MUST(clReleaseProgram(bp));

    /* Errors. */
    size_t zero[CT_MAX_DEVICES] = {0};
    CHECK_FAILS(clCreateProgramWithBinary(ctx, ndev, devs, zero, (const unsigned char **)bins, NULL, &E),
                CL_INVALID_VALUE);
    if (ct_mirrorcl()) { /* PoCL 3.1 crashes on a NULL binaries array. */
        CHECK_FAILS(clCreateProgramWithBinary(ctx, ndev, devs, sizes, NULL, NULL, &E), CL_INVALID_VALUE);
        CHECK_FAILS(clCreateProgramWithBinary(ctx, ndev, NULL, sizes, (const unsigned char **)bins, NULL, &E),
                    CL_INVALID_VALUE);
    }
    CHECK_FAILS(clCreateProgramWithBinary(ctx, 0, devs, sizes, (const unsigned char **)bins, NULL, &E),
                CL_INVALID_VALUE);
    {
        cl_device_id nulldev = NULL;
        CHECK_FAILS(clCreateProgramWithBinary(ctx, 1, &nulldev, sizes, (const unsigned char **)bins, NULL, &E),
                    CL_INVALID_DEVICE);
    }
    /* Garbage binary: CL_INVALID_BINARY with a per-device status. */
    unsigned char garbage[256];
    memset(garbage, 0x3C, sizeof garbage);
    const unsigned char *gp = garbage;
    size_t gsz = sizeof garbage;
    cl_int gst = 12345;
    E = ERR_SENTINEL;
    cl_program g = clCreateProgramWithBinary(ctx, 1, devs, &gsz, &gp, &gst, &E);
    /*
     * A binary's format is the vendor's: some (NVIDIA) only find it invalid when
     * building it, which 1.2 allows too ("clBuildProgram: CL_INVALID_BINARY if program
     * is created with clCreateProgramWithBinary and devices listed in device_list do
     * not have a valid program binary loaded").
     */
    if (E == CL_SUCCESS && g) {
        CHECK_EQ(gst, CL_SUCCESS);
        cl_int b = clBuildProgram(g, 1, devs, NULL, NULL, NULL);
        CHECK_TRUE(b == CL_INVALID_BINARY || b == CL_BUILD_PROGRAM_FAILURE,
                   "garbage binary accepted at creation, then clBuildProgram returned %d", b);
    } else {
        CHECK_EQ(E, CL_INVALID_BINARY);
        CHECK_EQ(gst, CL_INVALID_BINARY);
    }
    if (g)
        clReleaseProgram(g);
    for (cl_uint d = 0; d < ndev; d++)
        free(bins[d]);
}

static void test_compile_link(void)
{
    const char *hdr_src = "uint helper(uint x);\n#define OFFSET 100u\n";
    const char *lib_src = "#include \"mylib.h\"\nuint helper(uint x) { return x * 5u + OFFSET; }\n";
    const char *main_src =
        "#include \"mylib.h\"\n"
        "__kernel void use_helper(__global uint *b) { size_t i = get_global_id(0); b[i] = helper(b[i]) + OFFSET; }\n";
    cl_program hdr, lib, mainp;
    CREATE(hdr = clCreateProgramWithSource(ctx, 1, &hdr_src, NULL, &E));
    CREATE(lib = clCreateProgramWithSource(ctx, 1, &lib_src, NULL, &E));
    CREATE(mainp = clCreateProgramWithSource(ctx, 1, &main_src, NULL, &E));
    const char *hname = "mylib.h";
    cl_int err = clCompileProgram(lib, 0, NULL, "", 1, &hdr, &hname, NULL, NULL);
    if (err != CL_SUCCESS)
        ct_print_build_logs(lib);
    MUST(err);
    err = clCompileProgram(mainp, ndev, devs, NULL, 1, &hdr, &hname, build_cb, (void *)&build_cb_calls);
    if (err != CL_SUCCESS)
        ct_print_build_logs(mainp);
    MUST(err);
    CHECK_TRUE(ct_wait_flag(&build_cb_calls, 2, 60000), "clCompileProgram callback not called");
    check_build_info(lib, CL_BUILD_SUCCESS, NULL, CL_PROGRAM_BINARY_TYPE_COMPILED_OBJECT);
    check_build_info(mainp, CL_BUILD_SUCCESS, NULL, CL_PROGRAM_BINARY_TYPE_COMPILED_OBJECT);
    /* Without the header the compile fails. */
    cl_program nohdr;
    CREATE(nohdr = clCreateProgramWithSource(ctx, 1, &main_src, NULL, &E));
    CHECK(clCompileProgram(nohdr, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL), CL_COMPILE_PROGRAM_FAILURE);
    MUST(clReleaseProgram(nohdr));

    /* Library, then executable. */
    cl_program library;
    CREATE(library = clLinkProgram(ctx, 0, NULL, "-create-library", 1, &lib, NULL, NULL, &E));
    check_build_info(library, CL_BUILD_SUCCESS, NULL, CL_PROGRAM_BINARY_TYPE_LIBRARY);
    cl_program parts[2] = {mainp, library};
    cl_program exe;
    CREATE(exe = clLinkProgram(ctx, 0, NULL, NULL, 2, parts, NULL, NULL, &E));
    check_build_info(exe, CL_BUILD_SUCCESS, NULL, CL_PROGRAM_BINARY_TYPE_EXECUTABLE);
    /* Direct link of the two compiled objects, with a callback. */
    cl_program parts2[2] = {mainp, lib};
    cl_program exe2;
    CREATE(exe2 = clLinkProgram(ctx, ndev, devs, NULL, 2, parts2, build_cb, (void *)&build_cb_calls, &E));
    CHECK_TRUE(ct_wait_flag(&build_cb_calls, 3, 60000), "clLinkProgram callback not called");
    CHECK_TRUE(build_cb_prog == exe2, "link callback got program %p, expected %p", (void *)build_cb_prog, (void *)exe2);
    cl_program exes[2] = {exe, exe2};
    enum { N = 2048 };
    uint32_t in[N], got[N], ref[N];
    for (size_t i = 0; i < N; i++) {
        in[i] = ct_rand();
        ref[i] = in[i] * 5u + 100u + 100u;
    }
    for (int e = 0; e < 2; e++) {
        cl_kernel k = ct_kernel(exes[e], "use_helper");
        cl_mem b;
        CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &E));
        MUST(clSetKernelArg(k, 0, sizeof b, &b));
        for (cl_uint d = 0; d < ndev; d++) {
            MUST(clEnqueueWriteBuffer(qs[d], b, CL_FALSE, 0, sizeof in, in, 0, NULL, NULL));
            size_t gws = N;
            MUST(clEnqueueNDRangeKernel(qs[d], k, 1, NULL, &gws, NULL, 0, NULL, NULL));
            MUST(clEnqueueReadBuffer(qs[d], b, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
            CHECK_MEM(got, ref, N, 4, e == 0 ? "linked with library" : "linked objects");
        }
        clReleaseMemObject(b);
        clReleaseKernel(k);
    }
    /* Link errors: unresolved symbol. */
    E = ERR_SENTINEL;
    cl_program bad = clLinkProgram(ctx, 0, NULL, NULL, 1, &mainp, NULL, NULL, &E);
    CHECK_EQ(E, CL_LINK_PROGRAM_FAILURE);
    if (bad)
        clReleaseProgram(bad);
    CHECK_FAILS(clLinkProgram(ctx, 0, NULL, NULL, 0, parts, NULL, NULL, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clLinkProgram(ctx, 0, NULL, NULL, 1, NULL, NULL, NULL, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clLinkProgram(ctx, 0, NULL, NULL, 1, parts, NULL, (void *)1, &E), CL_INVALID_VALUE);
    MUST(clReleaseProgram(exe));
    MUST(clReleaseProgram(exe2));
    MUST(clReleaseProgram(library));
    MUST(clReleaseProgram(hdr));
    MUST(clReleaseProgram(lib));
    MUST(clReleaseProgram(mainp));
}

static void test_kernel_info(cl_program prog)
{
    cl_uint n = 0;
    MUST(clCreateKernelsInProgram(prog, 0, NULL, &n));
    CHECK_EQ(n, NKERNELS);
    cl_kernel ks[16];
    if (n > 1)
        CHECK(clCreateKernelsInProgram(prog, 1, ks, NULL), CL_INVALID_VALUE);
    cl_uint n2 = 0;
    MUST(clCreateKernelsInProgram(prog, n < 16 ? n : 16, ks, &n2));
    CHECK_EQ(n2, n);
    static const struct {
        cl_kernel_info id;
        const char *name;
    } params[] = {
        {CL_KERNEL_FUNCTION_NAME, "CL_KERNEL_FUNCTION_NAME"}, {CL_KERNEL_NUM_ARGS, "CL_KERNEL_NUM_ARGS"},
        {CL_KERNEL_REFERENCE_COUNT, "CL_KERNEL_REFERENCE_COUNT"}, {CL_KERNEL_CONTEXT, "CL_KERNEL_CONTEXT"},
        {CL_KERNEL_PROGRAM, "CL_KERNEL_PROGRAM"}, {CL_KERNEL_ATTRIBUTES, "CL_KERNEL_ATTRIBUTES"},
    };
    static const cl_uint nargs[NKERNELS] = {3, 6, 6, 3, 1, 1};
    int seen[NKERNELS] = {0};
    for (cl_uint i = 0; i < n2 && i < 16; i++) {
        for (size_t p = 0; p < sizeof params / sizeof params[0]; p++) {
            size_t sz = 0;
            if (!ct_check_code(clGetKernelInfo(ks[i], params[p].id, 0, NULL, &sz), CL_SUCCESS, params[p].name,
                               __FILE__, __LINE__, 0))
                continue;
            char *buf = calloc(sz + 8, 1);
            size_t sz2 = 0;
            ct_check_code(clGetKernelInfo(ks[i], params[p].id, sz, buf, &sz2), CL_SUCCESS, params[p].name, __FILE__,
                          __LINE__, 0);
            ct_check_true(sz2 == sz, params[p].name, __FILE__, __LINE__, "size %zu vs %zu", sz, sz2);
            if (sz > 0)
                ct_check_code(clGetKernelInfo(ks[i], params[p].id, sz - 1, buf, NULL), CL_INVALID_VALUE,
                              params[p].name, __FILE__, __LINE__, 0);
            switch (params[p].id) {
            case CL_KERNEL_NUM_ARGS:
            case CL_KERNEL_REFERENCE_COUNT: CHECK_EQ(sz, sizeof(cl_uint)); break;
            case CL_KERNEL_CONTEXT: CHECK_TRUE(*(cl_context *)(void *)buf == ctx, "CL_KERNEL_CONTEXT"); break;
            case CL_KERNEL_PROGRAM: CHECK_TRUE(*(cl_program *)(void *)buf == prog, "CL_KERNEL_PROGRAM"); break;
            default: CHECK_TRUE(sz >= 1 && buf[sz - 1] == 0, "%s not NUL-terminated", params[p].name); break;
            }
            free(buf);
        }
        char name[64] = {0};
        MUST(clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL));
        cl_uint na = 0;
        MUST(clGetKernelInfo(ks[i], CL_KERNEL_NUM_ARGS, sizeof na, &na, NULL));
        int found = -1;
        for (int k = 0; k < NKERNELS; k++)
            if (!strcmp(name, kKernelNames[k]))
                found = k;
        if (CHECK_TRUE(found >= 0, "unexpected kernel \"%s\"", name)) {
            seen[found]++;
            CHECK_EQ(na, nargs[found]);
            if (!strcmp(name, "reqd")) {
                char attrs[256] = {0};
                MUST(clGetKernelInfo(ks[i], CL_KERNEL_ATTRIBUTES, sizeof attrs, attrs, NULL));
                CHECK_TRUE(strstr(attrs, "reqd_work_group_size") != NULL,
                           "CL_KERNEL_ATTRIBUTES of reqd: \"%s\"", attrs);
            }
        }
        cl_uint rc = 0;
        MUST(clGetKernelInfo(ks[i], CL_KERNEL_REFERENCE_COUNT, sizeof rc, &rc, NULL));
        CHECK_EQ(rc, 1);
        MUST(clRetainKernel(ks[i]));
        MUST(clGetKernelInfo(ks[i], CL_KERNEL_REFERENCE_COUNT, sizeof rc, &rc, NULL));
        CHECK_EQ(rc, 2);
        MUST(clReleaseKernel(ks[i]));
        MUST(clReleaseKernel(ks[i]));
    }
    for (int k = 0; k < NKERNELS; k++)
        CHECK_TRUE(seen[k] == 1, "kernel %s returned %d times by clCreateKernelsInProgram", kKernelNames[k], seen[k]);
    cl_kernel k = ct_kernel(prog, "scale_add");
    cl_uint v;
    CHECK(clGetKernelInfo(k, 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
    MUST(clReleaseKernel(k));
}

static void test_arg_info(cl_program prog)
{
    cl_kernel k = ct_kernel(prog, "argk");
    static const struct {
        cl_kernel_arg_address_qualifier aq;
        const char *type;
        cl_kernel_arg_type_qualifier tq; /* (cl_bitfield)-1: not checked */
        const char *name;
    } want[6] = {
        {CL_KERNEL_ARG_ADDRESS_GLOBAL, "float*", CL_KERNEL_ARG_TYPE_CONST | CL_KERNEL_ARG_TYPE_RESTRICT, "in"},
        {CL_KERNEL_ARG_ADDRESS_GLOBAL, "int*", CL_KERNEL_ARG_TYPE_VOLATILE, "out"},
        {CL_KERNEL_ARG_ADDRESS_LOCAL, "float4*", CL_KERNEL_ARG_TYPE_NONE, "tmp"},
        {CL_KERNEL_ARG_ADDRESS_CONSTANT, "uint*", (cl_kernel_arg_type_qualifier)-1, "c"},
        {CL_KERNEL_ARG_ADDRESS_PRIVATE, "uint", CL_KERNEL_ARG_TYPE_NONE, "n"},
        {CL_KERNEL_ARG_ADDRESS_PRIVATE, "float4", CL_KERNEL_ARG_TYPE_NONE, "v"},
    };
    static const struct {
        cl_kernel_arg_info id;
        const char *name;
        size_t size; /* 0: string */
    } params[] = {
        {CL_KERNEL_ARG_ADDRESS_QUALIFIER, "CL_KERNEL_ARG_ADDRESS_QUALIFIER", sizeof(cl_kernel_arg_address_qualifier)},
        {CL_KERNEL_ARG_ACCESS_QUALIFIER, "CL_KERNEL_ARG_ACCESS_QUALIFIER", sizeof(cl_kernel_arg_access_qualifier)},
        {CL_KERNEL_ARG_TYPE_NAME, "CL_KERNEL_ARG_TYPE_NAME", 0},
        {CL_KERNEL_ARG_TYPE_QUALIFIER, "CL_KERNEL_ARG_TYPE_QUALIFIER", sizeof(cl_kernel_arg_type_qualifier)},
        {CL_KERNEL_ARG_NAME, "CL_KERNEL_ARG_NAME", 0},
    };
    for (cl_uint a = 0; a < 6; a++) {
        for (size_t p = 0; p < sizeof params / sizeof params[0]; p++) {
            size_t sz = 0;
            if (!ct_check_code(clGetKernelArgInfo(k, a, params[p].id, 0, NULL, &sz), CL_SUCCESS, params[p].name,
                               __FILE__, __LINE__, 0))
                continue;
            char buf[128] = {0};
            size_t sz2 = 0;
            if (params[p].size)
                ct_check_true(sz == params[p].size, params[p].name, __FILE__, __LINE__, "size %zu", sz);
            if (sz > sizeof buf)
                continue;
            ct_check_code(clGetKernelArgInfo(k, a, params[p].id, sz, buf, &sz2), CL_SUCCESS, params[p].name, __FILE__,
                          __LINE__, 0);
            ct_check_true(sz2 == sz, params[p].name, __FILE__, __LINE__, "size %zu vs %zu", sz, sz2);
            if (sz > 0)
                ct_check_code(clGetKernelArgInfo(k, a, params[p].id, sz - 1, buf, NULL), CL_INVALID_VALUE,
                              params[p].name, __FILE__, __LINE__, 0);
        }
        cl_kernel_arg_address_qualifier aq = 0;
        cl_kernel_arg_access_qualifier acc = 0;
        cl_kernel_arg_type_qualifier tq = 0;
        char type[64] = {0}, name[64] = {0};
        MUST(clGetKernelArgInfo(k, a, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof aq, &aq, NULL));
        MUST(clGetKernelArgInfo(k, a, CL_KERNEL_ARG_ACCESS_QUALIFIER, sizeof acc, &acc, NULL));
        MUST(clGetKernelArgInfo(k, a, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof tq, &tq, NULL));
        MUST(clGetKernelArgInfo(k, a, CL_KERNEL_ARG_TYPE_NAME, sizeof type, type, NULL));
        MUST(clGetKernelArgInfo(k, a, CL_KERNEL_ARG_NAME, sizeof name, name, NULL));
        CHECK_TRUE(aq == want[a].aq, "arg %u address qualifier 0x%x, expected 0x%x", a, aq, want[a].aq);
        CHECK_TRUE(acc == CL_KERNEL_ARG_ACCESS_NONE, "arg %u access qualifier 0x%x", a, acc);
        CHECK_TRUE(!strcmp(type, want[a].type), "arg %u type name \"%s\", expected \"%s\"", a, type, want[a].type);
        CHECK_TRUE(!strcmp(name, want[a].name), "arg %u name \"%s\", expected \"%s\"", a, name, want[a].name);
        if (want[a].tq != (cl_kernel_arg_type_qualifier)-1)
            CHECK_TRUE(tq == want[a].tq, "arg %u type qualifier 0x%llx, expected 0x%llx", a, (unsigned long long)tq,
                       (unsigned long long)want[a].tq);
    }
    cl_uint v;
    CHECK(clGetKernelArgInfo(k, 6, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof v, &v, NULL), CL_INVALID_ARG_INDEX);
    CHECK(clGetKernelArgInfo(k, 0, 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
    MUST(clReleaseKernel(k));
}

static void test_work_group_info(cl_program prog)
{
    cl_kernel kr = ct_kernel(prog, "reqd"), ks = ct_kernel(prog, "scale_add");
    static const struct {
        cl_kernel_work_group_info id;
        const char *name;
        size_t size;
    } params[] = {
        {CL_KERNEL_WORK_GROUP_SIZE, "CL_KERNEL_WORK_GROUP_SIZE", sizeof(size_t)},
        {CL_KERNEL_COMPILE_WORK_GROUP_SIZE, "CL_KERNEL_COMPILE_WORK_GROUP_SIZE", 3 * sizeof(size_t)},
        {CL_KERNEL_LOCAL_MEM_SIZE, "CL_KERNEL_LOCAL_MEM_SIZE", sizeof(cl_ulong)},
        {CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, "CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE", sizeof(size_t)},
        {CL_KERNEL_PRIVATE_MEM_SIZE, "CL_KERNEL_PRIVATE_MEM_SIZE", sizeof(cl_ulong)},
    };
    for (cl_uint d = 0; d < ndev; d++) {
        cl_kernel both[2] = {kr, ks};
        for (int kk = 0; kk < 2; kk++) {
            for (size_t p = 0; p < sizeof params / sizeof params[0]; p++) {
                size_t sz = 0;
                if (!ct_check_code(clGetKernelWorkGroupInfo(both[kk], devs[d], params[p].id, 0, NULL, &sz),
                                   CL_SUCCESS, params[p].name, __FILE__, __LINE__, 0))
                    continue;
                ct_check_true(sz == params[p].size, params[p].name, __FILE__, __LINE__, "size %zu, expected %zu", sz,
                              params[p].size);
                unsigned char buf[64];
                size_t sz2 = 0;
                ct_check_code(clGetKernelWorkGroupInfo(both[kk], devs[d], params[p].id, sz, buf, &sz2), CL_SUCCESS,
                              params[p].name, __FILE__, __LINE__, 0);
                ct_check_true(sz2 == sz, params[p].name, __FILE__, __LINE__, "size %zu vs %zu", sz, sz2);
                ct_check_code(clGetKernelWorkGroupInfo(both[kk], devs[d], params[p].id, sz - 1, buf, NULL),
                              CL_INVALID_VALUE, params[p].name, __FILE__, __LINE__, 0);
            }
            size_t wg = 0, cwg[3] = {9, 9, 9}, mult = 0;
            MUST(clGetKernelWorkGroupInfo(both[kk], devs[d], CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL));
            size_t devmax = 0;
            MUST(clGetDeviceInfo(devs[d], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof devmax, &devmax, NULL));
            CHECK_TRUE(wg >= 1 && wg <= devmax, "CL_KERNEL_WORK_GROUP_SIZE %zu (device max %zu)", wg, devmax);
            MUST(clGetKernelWorkGroupInfo(both[kk], devs[d], CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof cwg, cwg, NULL));
            if (kk == 0)
                CHECK_TRUE(cwg[0] == 4 && cwg[1] == 2 && cwg[2] == 1, "reqd compile wg size %zu,%zu,%zu", cwg[0], cwg[1],
                           cwg[2]);
            else
                CHECK_TRUE(cwg[0] == 0 && cwg[1] == 0 && cwg[2] == 0, "compile wg size %zu,%zu,%zu", cwg[0], cwg[1],
                           cwg[2]);
            MUST(clGetKernelWorkGroupInfo(both[kk], devs[d], CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof mult,
                                          &mult, NULL));
            CHECK_TRUE(mult >= 1, "preferred multiple %zu", mult);
            size_t gs[3];
            CHECK(clGetKernelWorkGroupInfo(both[kk], devs[d], CL_KERNEL_GLOBAL_WORK_SIZE, sizeof gs, gs, NULL),
                  CL_INVALID_VALUE);
            CHECK(clGetKernelWorkGroupInfo(both[kk], devs[d], 0x7fff, sizeof gs, gs, NULL), CL_INVALID_VALUE);
        }
    }
    size_t wg;
    if (ndev > 1)
        CHECK(clGetKernelWorkGroupInfo(ks, NULL, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL), CL_INVALID_DEVICE);
    else
        CHECK(clGetKernelWorkGroupInfo(ks, NULL, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL), CL_SUCCESS);
    MUST(clReleaseKernel(kr));
    MUST(clReleaseKernel(ks));
}

static void test_set_arg_errors(cl_program prog)
{
    cl_kernel k = ct_kernel(prog, "scale_add"), r = ct_kernel(prog, "reduce");
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1024, NULL, &E));
    cl_uint u = 1;
    cl_ulong ul = 1;
    unsigned short us = 1;
    CHECK(clSetKernelArg(k, 3, sizeof u, &u), CL_INVALID_ARG_INDEX);
    CHECK(clSetKernelArg(k, 100, sizeof u, &u), CL_INVALID_ARG_INDEX);
    CHECK(clSetKernelArg(k, 2, sizeof us, &us), CL_INVALID_ARG_SIZE);
    CHECK(clSetKernelArg(k, 2, sizeof ul, &ul), CL_INVALID_ARG_SIZE);
    CHECK(clSetKernelArg(k, 0, 4, &b), CL_INVALID_ARG_SIZE);
    CHECK(clSetKernelArg(k, 2, sizeof u, NULL), CL_INVALID_ARG_VALUE);
    if (ct_mirrorcl()) {
        /* A handle that is not a memory object (a command queue).  PoCL 3.1
         * does not validate buffer arguments (accepts it: not tested natively). */
        cl_mem notmem = (cl_mem)(void *)qs[0];
        CHECK(clSetKernelArg(k, 0, sizeof notmem, &notmem), CL_INVALID_MEM_OBJECT);
    }
    CHECK(clSetKernelArg(r, 2, 256, &u), CL_INVALID_ARG_VALUE);
    CHECK(clSetKernelArg(r, 2, 0, NULL), CL_INVALID_ARG_SIZE);
    /* NULL buffer arguments are legal for global pointers. */
    CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), NULL), CL_SUCCESS);
    cl_mem nullmem = NULL;
    CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &nullmem), CL_SUCCESS);
    CHECK(clSetKernelArg(k, 2, sizeof u, &u), CL_SUCCESS);
    CHECK(clSetKernelArg(NULL, 0, sizeof b, &b), CL_INVALID_KERNEL);
    /* Unset args at enqueue. */
    cl_kernel fresh = ct_kernel(prog, "scale_add");
    MUST(clSetKernelArg(fresh, 0, sizeof b, &b));
    size_t gws = 16;
    CHECK(clEnqueueNDRangeKernel(qs[0], fresh, 1, NULL, &gws, NULL, 0, NULL, NULL), CL_INVALID_KERNEL_ARGS);
    CHECK(clEnqueueTask(qs[0], fresh, 0, NULL, NULL), CL_INVALID_KERNEL_ARGS);
    MUST(clReleaseKernel(fresh));
    MUST(clReleaseKernel(k));
    MUST(clReleaseKernel(r));
    MUST(clReleaseMemObject(b));
}

static void test_local_arg(cl_program prog)
{
    cl_kernel r = ct_kernel(prog, "reduce");
    size_t lws = 64;
    for (cl_uint d = 0; d < ndev; d++) {
        size_t kwg = 0;
        MUST(clGetKernelWorkGroupInfo(r, devs[d], CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL));
        while (lws > kwg)
            lws /= 2;
    }
    enum { GROUPS = 32 };
    size_t n = lws * GROUPS;
    uint32_t *in = malloc(n * 4), got[GROUPS], ref[GROUPS];
    for (size_t i = 0; i < n; i++)
        in[i] = ct_rand();
    for (size_t g = 0; g < GROUPS; g++) {
        uint32_t s = 0;
        for (size_t i = 0; i < lws; i++)
            s += in[g * lws + i] * (uint32_t)(i + 1);
        ref[g] = s;
    }
    cl_mem bi, bo;
    CREATE(bi = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, in, &E));
    CREATE(bo = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof got, NULL, &E));
    MUST(clSetKernelArg(r, 0, sizeof bi, &bi));
    MUST(clSetKernelArg(r, 1, sizeof bo, &bo));
    MUST(clSetKernelArg(r, 2, lws * 4, NULL));
    for (cl_uint d = 0; d < ndev; d++) {
        cl_ulong lm = 0;
        MUST(clGetKernelWorkGroupInfo(r, devs[d], CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL));
        CHECK_TRUE(lm >= lws * 4, "CL_KERNEL_LOCAL_MEM_SIZE %llu < __local arg size %zu", (unsigned long long)lm, lws * 4);
        memset(got, 0, sizeof got);
        MUST(clEnqueueNDRangeKernel(qs[d], r, 1, NULL, &n, &lws, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], bo, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        CHECK_MEM(got, ref, GROUPS, 4, "work-group reduction with a __local argument");
    }
    printf("  __local reduction with %zu work-items per group\n", lws);
    free(in);
    clReleaseMemObject(bi);
    clReleaseMemObject(bo);
    MUST(clReleaseKernel(r));
}

struct ndr_cfg {
    cl_uint dim;
    size_t g[3], off[3], l[3];
    int has_off, has_local;
};

static void test_ndrange(cl_program prog)
{
    static const struct ndr_cfg cfgs[] = {
        {1, {1000, 1, 1}, {0, 0, 0}, {0, 0, 0}, 0, 0},
        {1, {1024, 1, 1}, {37, 0, 0}, {64, 1, 1}, 1, 1},
        {1, {600, 1, 1}, {1000, 0, 0}, {20, 1, 1}, 1, 1},
        {2, {64, 30, 1}, {0, 0, 0}, {8, 3, 1}, 0, 1},
        {2, {48, 20, 1}, {5, 7, 0}, {0, 0, 0}, 1, 0},
        {2, {33, 17, 1}, {0, 0, 0}, {0, 0, 0}, 0, 0},
        {3, {16, 8, 6}, {2, 3, 1}, {4, 2, 3}, 1, 1},
        {3, {20, 6, 4}, {0, 0, 0}, {0, 0, 0}, 0, 0},
        {3, {12, 10, 8}, {0, 0, 0}, {2, 5, 2}, 0, 1},
    };
    cl_kernel k = ct_kernel(prog, "ids");
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        const struct ndr_cfg *cf = &cfgs[c];
        cl_uint d = (cl_uint)(c % ndev);
        size_t g[3] = {1, 1, 1}, o[3] = {0, 0, 0}, l[3] = {1, 1, 1};
        for (cl_uint i = 0; i < cf->dim; i++) {
            g[i] = cf->g[i];
            o[i] = cf->has_off ? cf->off[i] : 0;
            l[i] = cf->has_local ? cf->l[i] : 1;
        }
        size_t w = o[0] + g[0], h = o[1] + g[1], dd = o[2] + g[2], n = w * h * dd;
        uint32_t *gg = malloc(n * 4), *ll = malloc(n * 4), *gr = malloc(n * 4), meta[13];
        uint32_t *rg = malloc(n * 4), *rl = malloc(n * 4), *rgr = malloc(n * 4);
        cl_mem bg, bl, bgr, bm;
        CREATE(bg = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &E));
        CREATE(bl = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &E));
        CREATE(bgr = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &E));
        CREATE(bm = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof meta, NULL, &E));
        uint32_t sentinel = 0xFFFFFFFFu;
        MUST(clEnqueueFillBuffer(qs[d], bg, &sentinel, 4, 0, n * 4, 0, NULL, NULL));
        MUST(clEnqueueFillBuffer(qs[d], bl, &sentinel, 4, 0, n * 4, 0, NULL, NULL));
        MUST(clEnqueueFillBuffer(qs[d], bgr, &sentinel, 4, 0, n * 4, 0, NULL, NULL));
        MUST(clEnqueueFillBuffer(qs[d], bm, &sentinel, 4, 0, sizeof meta, 0, NULL, NULL));
        cl_uint cw = (cl_uint)w, ch = (cl_uint)h;
        MUST(clSetKernelArg(k, 0, sizeof bg, &bg));
        MUST(clSetKernelArg(k, 1, sizeof bl, &bl));
        MUST(clSetKernelArg(k, 2, sizeof bgr, &bgr));
        MUST(clSetKernelArg(k, 3, sizeof bm, &bm));
        MUST(clSetKernelArg(k, 4, sizeof cw, &cw));
        MUST(clSetKernelArg(k, 5, sizeof ch, &ch));
        MUST(clEnqueueNDRangeKernel(qs[d], k, cf->dim, cf->has_off ? cf->off : NULL, cf->g,
                                    cf->has_local ? cf->l : NULL, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], bg, CL_FALSE, 0, n * 4, gg, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], bl, CL_FALSE, 0, n * 4, ll, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], bgr, CL_FALSE, 0, n * 4, gr, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], bm, CL_TRUE, 0, sizeof meta, meta, 0, NULL, NULL));
        for (size_t z = 0; z < dd; z++)
            for (size_t y = 0; y < h; y++)
                for (size_t x = 0; x < w; x++) {
                    size_t idx = (z * h + y) * w + x;
                    int in = x >= o[0] && y >= o[1] && z >= o[2];
                    rg[idx] = in ? (uint32_t)(x | (y << 10) | (z << 20)) : 0xFFFFFFFFu;
                    size_t lx = (x - o[0]) % l[0], ly = (y - o[1]) % l[1], lz = (z - o[2]) % l[2];
                    size_t gx = (x - o[0]) / l[0], gy = (y - o[1]) / l[1], gz = (z - o[2]) / l[2];
                    rl[idx] = in ? (uint32_t)(lx | (ly << 8) | (lz << 16)) : 0xFFFFFFFFu;
                    rgr[idx] = in ? (uint32_t)(gx | (gy << 10) | (gz << 20)) : 0xFFFFFFFFu;
                }
        char what[160];
        snprintf(what, sizeof what, "NDRange %uD global {%zu,%zu,%zu} offset %s local %s on device %u", cf->dim, g[0],
                 g[1], g[2], cf->has_off ? "yes" : "NULL", cf->has_local ? "yes" : "NULL", d);
        CHECK_MEM(gg, rg, n, 4, what);
        if (cf->has_local) {
            CHECK_MEM(ll, rl, n, 4, what);
            CHECK_MEM(gr, rgr, n, 4, what);
        }
        CHECK_TRUE(meta[0] == cf->dim, "%s: get_work_dim %u", what, meta[0]);
        for (int i = 0; i < 3; i++) {
            CHECK_TRUE(meta[1 + i] == g[i], "%s: get_global_size(%d) = %u", what, i, meta[1 + i]);
            CHECK_TRUE(meta[10 + i] == o[i], "%s: get_global_offset(%d) = %u", what, i, meta[10 + i]);
            if (cf->has_local) {
                CHECK_TRUE(meta[4 + i] == l[i], "%s: get_local_size(%d) = %u", what, i, meta[4 + i]);
                CHECK_TRUE(meta[7 + i] == g[i] / l[i], "%s: get_num_groups(%d) = %u", what, i, meta[7 + i]);
            } else {
                CHECK_TRUE(meta[4 + i] >= 1 && g[i] % meta[4 + i] == 0 && meta[7 + i] * meta[4 + i] == g[i],
                           "%s: implementation-chosen local size %u, groups %u (dim %d)", what, meta[4 + i],
                           meta[7 + i], i);
            }
        }
        clReleaseMemObject(bg);
        clReleaseMemObject(bl);
        clReleaseMemObject(bgr);
        clReleaseMemObject(bm);
        free(gg);
        free(ll);
        free(gr);
        free(rg);
        free(rl);
        free(rgr);
    }
    printf("  %zu NDRange configurations checked\n", sizeof cfgs / sizeof cfgs[0]);

    /* Launch errors. */
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &E));
    cl_uint one = 1;
    for (int a = 0; a < 4; a++)
        MUST(clSetKernelArg(k, (cl_uint)a, sizeof b, &b));
    MUST(clSetKernelArg(k, 4, sizeof one, &one));
    MUST(clSetKernelArg(k, 5, sizeof one, &one));
    size_t g10 = 10, l3 = 3, g3[3] = {4, 4, 4};
    CHECK(clEnqueueNDRangeKernel(qs[0], k, 1, NULL, &g10, &l3, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
    CHECK(clEnqueueNDRangeKernel(qs[0], k, 0, NULL, &g10, NULL, 0, NULL, NULL), CL_INVALID_WORK_DIMENSION);
    CHECK(clEnqueueNDRangeKernel(qs[0], k, 4, NULL, g3, NULL, 0, NULL, NULL), CL_INVALID_WORK_DIMENSION);
    if (ct_mirrorcl()) /* PoCL 3.1 accepts a NULL global_work_size (and then crashes) */
        CHECK(clEnqueueNDRangeKernel(qs[0], k, 1, NULL, NULL, NULL, 0, NULL, NULL), CL_INVALID_GLOBAL_WORK_SIZE);
    size_t g0 = 0;
    /* OpenCL 1.2: a zero global size is an error (PoCL 3.x follows 2.1+ and accepts it). */
    CHECK_NATIVE_DEVIATES(clEnqueueNDRangeKernel(qs[0], k, 1, NULL, &g0, NULL, 0, NULL, NULL),
                          CL_INVALID_GLOBAL_WORK_SIZE, CL_SUCCESS);
    CHECK(clEnqueueNDRangeKernel(NULL, k, 1, NULL, &g10, NULL, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    if (ct_mirrorcl()) /* PoCL 3.1 crashes on a NULL kernel */
        CHECK(clEnqueueNDRangeKernel(qs[0], NULL, 1, NULL, &g10, NULL, 0, NULL, NULL), CL_INVALID_KERNEL);
    MUST(clFinish(qs[0]));
    MUST(clReleaseMemObject(b));
    MUST(clReleaseKernel(k));
}

static void test_reqd_and_task(cl_program prog)
{
    cl_kernel kr = ct_kernel(prog, "reqd"), kt = ct_kernel(prog, "task");
    enum { W = 16, H = 6 };
    uint32_t got[W * H], ref[W * H];
    cl_mem b;
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof got, NULL, &E));
    MUST(clSetKernelArg(kr, 0, sizeof b, &b));
    MUST(clSetKernelArg(kt, 0, sizeof b, &b));
    size_t g[3] = {W, H, 1}, lbad[3] = {2, 2, 1}, lok[3] = {4, 2, 1};
    CHECK(clEnqueueNDRangeKernel(qs[0], kr, 2, NULL, g, NULL, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
    CHECK(clEnqueueNDRangeKernel(qs[0], kr, 2, NULL, g, lbad, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++)
            ref[y * W + x] = (uint32_t)(x % 4 + 10 * (y % 2) + 100 * (x / 4) + 1000 * (y / 2));
    for (cl_uint d = 0; d < ndev; d++) {
        memset(got, 0, sizeof got);
        MUST(clEnqueueNDRangeKernel(qs[d], kr, 2, NULL, g, lok, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], b, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        CHECK_MEM(got, ref, W * H, 4, "reqd_work_group_size(4,2,1) kernel");
        uint32_t t = 0, tref = 44;
        MUST(clEnqueueTask(qs[d], kt, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(qs[d], b, CL_TRUE, 0, 4, &t, 0, NULL, NULL));
        CHECK_MEM(&t, &tref, 1, 4, "clEnqueueTask");
    }
    MUST(clReleaseMemObject(b));
    MUST(clReleaseKernel(kr));
    MUST(clReleaseKernel(kt));
}

int main(void)
{
    ct_init("program_kernel");
    platform = ct_platform();
    ndev = ct_devices(platform, devs);
    ctx = ct_context(platform, ndev, devs);
    for (cl_uint d = 0; d < ndev; d++)
        qs[d] = ct_queue(ctx, devs[d], 0);

    /* Source in 4 strings: lengths NULL, then explicit (0 = NUL-terminated). */
    size_t p3len = (size_t)(strstr(kPart3, "#error") - kPart3);
    const char *parts[4] = {kPart1, kPart2, kPart3, kPart4};
    size_t lens[4] = {strlen(kPart1), 0, p3len, strlen(kPart4)};
    size_t total = strlen(kPart1) + strlen(kPart2) + p3len + strlen(kPart4);
    char *full = calloc(total + 1, 1);
    strcat(full, kPart1);
    strcat(full, kPart2);
    memcpy(full + strlen(full), kPart3, p3len);
    strcat(full, kPart4);
    cl_program prog;
    CREATE(prog = clCreateProgramWithSource(ctx, 4, parts, lens, &E));
    check_program_info(prog, full, 0);
    check_build_info(prog, CL_BUILD_NONE, NULL, CL_PROGRAM_BINARY_TYPE_NONE);
    CHECK_FAILS(clCreateKernel(prog, "scale_add", &E), CL_INVALID_PROGRAM_EXECUTABLE);
    /* Build with options and a callback. */
    cl_int err = clBuildProgram(prog, ndev, devs, kOptions, build_cb, (void *)&build_cb_calls);
    if (err != CL_SUCCESS)
        ct_print_build_logs(prog);
    MUST(err);
    CHECK_TRUE(ct_wait_flag(&build_cb_calls, 1, 60000), "build callback not called within 60 s");
    CHECK_TRUE(build_cb_prog == prog, "build callback got program %p, expected %p", (void *)build_cb_prog, (void *)prog);
    check_build_info(prog, CL_BUILD_SUCCESS, "-DVALUE=7", CL_PROGRAM_BINARY_TYPE_EXECUTABLE);
    check_program_info(prog, full, 1);
    check_scale_add(prog, "source (4 strings)");

    /* The same source as one string with lengths == NULL. */
    cl_program prog1;
    const char *fullp = full;
    CREATE(prog1 = clCreateProgramWithSource(ctx, 1, &fullp, NULL, &E));
    MUST(clBuildProgram(prog1, 0, NULL, "-DVALUE=7", NULL, NULL));
    check_scale_add(prog1, "source (1 string)");
    /* Kernels attached: rebuilding is an error. */
    cl_kernel attached = ct_kernel(prog1, "task");
    CHECK(clBuildProgram(prog1, 0, NULL, "-DVALUE=7", NULL, NULL), CL_INVALID_OPERATION);
    MUST(clReleaseKernel(attached));
    MUST(clReleaseProgram(prog1));
    /*
     * Reference counting on a fresh program (kernels that ran keep internal
     * references for a while, so prog1's count is not exact).
     */
    cl_program fresh;
    CREATE(fresh = clCreateProgramWithSource(ctx, 1, &fullp, NULL, &E));
    cl_uint rc = 0;
    MUST(clGetProgramInfo(fresh, CL_PROGRAM_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 1);
    MUST(clRetainProgram(fresh));
    MUST(clGetProgramInfo(fresh, CL_PROGRAM_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 2);
    MUST(clReleaseProgram(fresh));
    MUST(clGetProgramInfo(fresh, CL_PROGRAM_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK_EQ(rc, 1);
    MUST(clReleaseProgram(fresh));

    /* clCreateProgramWithSource / clBuildProgram errors. */
    CHECK_FAILS(clCreateProgramWithSource(ctx, 0, parts, NULL, &E), CL_INVALID_VALUE);
    if (ct_mirrorcl()) { /* PoCL 3.1 dereferences NULL strings and crashes. */
        CHECK_FAILS(clCreateProgramWithSource(ctx, 1, NULL, NULL, &E), CL_INVALID_VALUE);
        const char *withnull[2] = {kPart1, NULL};
        CHECK_FAILS(clCreateProgramWithSource(ctx, 2, withnull, NULL, &E), CL_INVALID_VALUE);
    }
    CHECK_FAILS(clCreateProgramWithSource(NULL, 1, parts, NULL, &E), CL_INVALID_CONTEXT);
    {
        cl_program p2;
        CREATE(p2 = clCreateProgramWithSource(ctx, 1, &fullp, NULL, &E));
        CHECK(clBuildProgram(p2, 0, devs, NULL, NULL, NULL), CL_INVALID_VALUE);
        CHECK(clBuildProgram(p2, 1, NULL, NULL, NULL, NULL), CL_INVALID_VALUE);
        CHECK(clBuildProgram(p2, 0, NULL, NULL, NULL, (void *)1), CL_INVALID_VALUE);
        CHECK(clBuildProgram(p2, 0, NULL, "-DVALUE=7 -this-is-not-an-option", NULL, NULL), CL_INVALID_BUILD_OPTIONS);
        CHECK(clBuildProgram(NULL, 0, NULL, NULL, NULL, NULL), CL_INVALID_PROGRAM);
        MUST(clReleaseProgram(p2));
    }
    CHECK_FAILS(clCreateKernel(prog, "no_such_kernel", &E), CL_INVALID_KERNEL_NAME);
    CHECK_FAILS(clCreateKernel(prog, NULL, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clCreateKernel(NULL, "scale_add", &E), CL_INVALID_PROGRAM);

    printf("-- build failure\n");
    test_build_failure();
    printf("-- binaries\n");
    test_binaries(prog);
    printf("-- compile + link\n");
    test_compile_link();
    printf("-- kernel info\n");
    test_kernel_info(prog);
    printf("-- kernel arg info\n");
    test_arg_info(prog);
    printf("-- work-group info\n");
    test_work_group_info(prog);
    printf("-- clSetKernelArg errors\n");
    test_set_arg_errors(prog);
    printf("-- __local argument\n");
    test_local_arg(prog);
    printf("-- NDRange\n");
    test_ndrange(prog);
    printf("-- reqd_work_group_size and clEnqueueTask\n");
    test_reqd_and_task(prog);

    CHECK(clUnloadPlatformCompiler(platform), CL_SUCCESS);
    MUST(clReleaseProgram(prog));
    for (cl_uint d = 0; d < ndev; d++)
        MUST(clReleaseCommandQueue(qs[d]));
    MUST(clReleaseContext(ctx));
    free(full);
    return ct_finish();
}
