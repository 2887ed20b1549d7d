/*
 * platform_device.c - clGetPlatformIDs / clGetPlatformInfo / clGetDeviceIDs /
 * clGetDeviceInfo (every OpenCL 1.2 parameter) / clCreateSubDevices /
 * clRetainDevice / clReleaseDevice.
 */
#include "check.h"

enum kind { K_UINT, K_BOOL, K_ULONG, K_SIZE, K_BITFIELD, K_STRING, K_SIZE_ARRAY, K_PTR, K_PROPS };

struct param {
    cl_device_info id;
    const char *name;
    enum kind kind;
};

#define P(x, k) {x, #x, k}
static const struct param kDeviceParams[] = {
    P(CL_DEVICE_TYPE, K_BITFIELD),
    P(CL_DEVICE_VENDOR_ID, K_UINT),
    P(CL_DEVICE_MAX_COMPUTE_UNITS, K_UINT),
    P(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, K_UINT),
    P(CL_DEVICE_MAX_WORK_ITEM_SIZES, K_SIZE_ARRAY),
    P(CL_DEVICE_MAX_WORK_GROUP_SIZE, K_SIZE),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR, K_UINT),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT, K_UINT),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT, K_UINT),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG, K_UINT),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, K_UINT),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, K_UINT),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF, K_UINT),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_CHAR, K_UINT),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_SHORT, K_UINT),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_INT, K_UINT),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_LONG, K_UINT),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, K_UINT),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE, K_UINT),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_HALF, K_UINT),
    P(CL_DEVICE_MAX_CLOCK_FREQUENCY, K_UINT),
    P(CL_DEVICE_ADDRESS_BITS, K_UINT),
    P(CL_DEVICE_MAX_MEM_ALLOC_SIZE, K_ULONG),
    P(CL_DEVICE_IMAGE_SUPPORT, K_BOOL),
    P(CL_DEVICE_MAX_READ_IMAGE_ARGS, K_UINT),
    P(CL_DEVICE_MAX_WRITE_IMAGE_ARGS, K_UINT),
    P(CL_DEVICE_IMAGE2D_MAX_WIDTH, K_SIZE),
    P(CL_DEVICE_IMAGE2D_MAX_HEIGHT, K_SIZE),
    P(CL_DEVICE_IMAGE3D_MAX_WIDTH, K_SIZE),
    P(CL_DEVICE_IMAGE3D_MAX_HEIGHT, K_SIZE),
    P(CL_DEVICE_IMAGE3D_MAX_DEPTH, K_SIZE),
    P(CL_DEVICE_IMAGE_MAX_BUFFER_SIZE, K_SIZE),
    P(CL_DEVICE_IMAGE_MAX_ARRAY_SIZE, K_SIZE),
    P(CL_DEVICE_MAX_SAMPLERS, K_UINT),
    P(CL_DEVICE_MAX_PARAMETER_SIZE, K_SIZE),
    P(CL_DEVICE_MEM_BASE_ADDR_ALIGN, K_UINT),
    P(CL_DEVICE_MIN_DATA_TYPE_ALIGN_SIZE, K_UINT),
    P(CL_DEVICE_SINGLE_FP_CONFIG, K_BITFIELD),
    P(CL_DEVICE_DOUBLE_FP_CONFIG, K_BITFIELD),
    P(CL_DEVICE_GLOBAL_MEM_CACHE_TYPE, K_UINT),
    P(CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE, K_UINT),
    P(CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, K_ULONG),
    P(CL_DEVICE_GLOBAL_MEM_SIZE, K_ULONG),
    P(CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, K_ULONG),
    P(CL_DEVICE_MAX_CONSTANT_ARGS, K_UINT),
    P(CL_DEVICE_LOCAL_MEM_TYPE, K_UINT),
    P(CL_DEVICE_LOCAL_MEM_SIZE, K_ULONG),
    P(CL_DEVICE_ERROR_CORRECTION_SUPPORT, K_BOOL),
    P(CL_DEVICE_HOST_UNIFIED_MEMORY, K_BOOL),
    P(CL_DEVICE_PROFILING_TIMER_RESOLUTION, K_SIZE),
    P(CL_DEVICE_ENDIAN_LITTLE, K_BOOL),
    P(CL_DEVICE_AVAILABLE, K_BOOL),
    P(CL_DEVICE_COMPILER_AVAILABLE, K_BOOL),
    P(CL_DEVICE_LINKER_AVAILABLE, K_BOOL),
    P(CL_DEVICE_EXECUTION_CAPABILITIES, K_BITFIELD),
    P(CL_DEVICE_QUEUE_PROPERTIES, K_BITFIELD),
    P(CL_DEVICE_BUILT_IN_KERNELS, K_STRING),
    P(CL_DEVICE_PLATFORM, K_PTR),
    P(CL_DEVICE_NAME, K_STRING),
    P(CL_DEVICE_VENDOR, K_STRING),
    P(CL_DRIVER_VERSION, K_STRING),
    P(CL_DEVICE_PROFILE, K_STRING),
    P(CL_DEVICE_VERSION, K_STRING),
    P(CL_DEVICE_OPENCL_C_VERSION, K_STRING),
    P(CL_DEVICE_EXTENSIONS, K_STRING),
    P(CL_DEVICE_PRINTF_BUFFER_SIZE, K_SIZE),
    P(CL_DEVICE_PREFERRED_INTEROP_USER_SYNC, K_BOOL),
    P(CL_DEVICE_PARENT_DEVICE, K_PTR),
    P(CL_DEVICE_PARTITION_MAX_SUB_DEVICES, K_UINT),
    P(CL_DEVICE_PARTITION_PROPERTIES, K_PROPS),
    P(CL_DEVICE_PARTITION_AFFINITY_DOMAIN, K_BITFIELD),
    P(CL_DEVICE_PARTITION_TYPE, K_PROPS),
    P(CL_DEVICE_REFERENCE_COUNT, K_UINT),
};
#undef P

static const char *kSubKernel =
    "__kernel void sq(__global const uint *in, __global uint *out)\n"
    "{ size_t i = get_global_id(0); out[i] = in[i] * in[i] + (uint)i; }\n";

/* Size query, then value query with exactly that size, then a too-small size. */
static void check_device_params(cl_device_id dev, cl_platform_id platform)
{
    for (size_t i = 0; i < sizeof kDeviceParams / sizeof kDeviceParams[0]; i++) {
        const struct param *p = &kDeviceParams[i];
        size_t sz = 0xdeadbeef;
        if (!ct_check_code(clGetDeviceInfo(dev, p->id, 0, NULL, &sz), CL_SUCCESS, p->name, __FILE__,
                           __LINE__, 0))
            continue;
        unsigned char *buf = calloc(sz + 16, 1);
        memset(buf, 0xA5, sz + 16);
        size_t sz2 = 0xdeadbeef;
        ct_check_code(clGetDeviceInfo(dev, p->id, sz, buf, &sz2), CL_SUCCESS, p->name, __FILE__,
                      __LINE__, 0);
        ct_check_true(sz2 == sz, p->name, __FILE__, __LINE__,
                      "size query said %zu, value query returned %zu", sz, sz2);
        ct_check_true(buf[sz] == 0xA5, p->name, __FILE__, __LINE__,
                      "clGetDeviceInfo wrote beyond param_value_size %zu", sz);
        size_t want = 0;
        switch (p->kind) {
        case K_UINT:
        case K_BOOL: want = sizeof(cl_uint); break;
        case K_ULONG:
        case K_BITFIELD: want = sizeof(cl_ulong); break;
        case K_SIZE: want = sizeof(size_t); break;
        case K_PTR: want = sizeof(void *); break;
        case K_SIZE_ARRAY:
            want = ct_device_uint(dev, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS) * sizeof(size_t);
            break;
        case K_STRING:
            want = strnlen((char *)buf, sz) + 1;
            ct_check_true(sz >= 1 && buf[sz - 1] == 0, p->name, __FILE__, __LINE__,
                          "string not NUL-terminated at its reported size %zu", sz);
            break;
        case K_PROPS:
            ct_check_true(sz % sizeof(cl_device_partition_property) == 0, p->name, __FILE__, __LINE__,
                          "size %zu is not a multiple of sizeof(cl_device_partition_property)", sz);
            want = sz;
            break;
        }
        ct_check_true(sz == want, p->name, __FILE__, __LINE__, "param size %zu, expected %zu", sz, want);
        if (p->kind == K_BOOL) {
            cl_bool b;
            memcpy(&b, buf, sizeof b);
            ct_check_true(b == CL_TRUE || b == CL_FALSE, p->name, __FILE__, __LINE__,
                          "cl_bool value %u is neither CL_TRUE nor CL_FALSE", b);
        }
        if (sz > 0) {
            /* A param_value_size smaller than the value must be rejected. */
            ct_check_code(clGetDeviceInfo(dev, p->id, sz - 1, buf, NULL), CL_INVALID_VALUE, p->name,
                          __FILE__, __LINE__, 0);
        }
        free(buf);
    }
    /* Spot checks of values. */
    cl_platform_id dp = NULL;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof dp, &dp, NULL));
    CHECK_TRUE(dp == platform, "CL_DEVICE_PLATFORM %p != platform %p", (void *)dp, (void *)platform);
    cl_device_type t = 0;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof t, &t, NULL));
    CHECK_TRUE(t & (CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR | CL_DEVICE_TYPE_CUSTOM),
               "device type 0x%llx has no base type", (unsigned long long)t);
    CHECK_TRUE(ct_device_uint(dev, CL_DEVICE_MAX_COMPUTE_UNITS) >= 1, "compute units >= 1");
    CHECK_TRUE(ct_device_uint(dev, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS) >= 3, "work item dims >= 3");
    CHECK_TRUE(ct_device_uint(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN) >= 8 * 16,
               "CL_DEVICE_MEM_BASE_ADDR_ALIGN must be at least the size of long16 in bits");
    cl_bool avail = CL_FALSE;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL));
    CHECK_EQ(avail, CL_TRUE);
    cl_bool img = CL_TRUE;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL));
    printf("  CL_DEVICE_IMAGE_SUPPORT = %s\n", img ? "CL_TRUE" : "CL_FALSE");
    char *ver = ct_device_str(dev, CL_DEVICE_VERSION);
    int maj = 0, min = 0;
    CHECK_TRUE(sscanf(ver, "OpenCL %d.%d", &maj, &min) == 2 && (maj > 1 || (maj == 1 && min >= 2)),
               "CL_DEVICE_VERSION \"%s\" is not \"OpenCL 1.2+ ...\"", ver);
    free(ver);
    char *cver = ct_device_str(dev, CL_DEVICE_OPENCL_C_VERSION);
    CHECK_TRUE(strncmp(cver, "OpenCL C ", 9) == 0, "CL_DEVICE_OPENCL_C_VERSION \"%s\"", cver);
    free(cver);
    char *prof = ct_device_str(dev, CL_DEVICE_PROFILE);
    CHECK_TRUE(!strcmp(prof, "FULL_PROFILE") || !strcmp(prof, "EMBEDDED_PROFILE"), "profile \"%s\"", prof);
    free(prof);
    cl_device_id parent = (cl_device_id)1;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_PARENT_DEVICE, sizeof parent, &parent, NULL));
    CHECK_TRUE(parent == NULL, "root device has parent %p", (void *)parent);
    size_t wis[3] = {0, 0, 0};
    size_t wgs = 0;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof wis, wis, NULL));
    MUST(clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wgs, &wgs, NULL));
    CHECK_TRUE(wgs >= 1 && wis[0] >= 1 && wis[1] >= 1 && wis[2] >= 1, "work sizes %zu %zu %zu / %zu",
               wis[0], wis[1], wis[2], wgs);
    cl_command_queue_properties qp = 0;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_QUEUE_PROPERTIES, sizeof qp, &qp, NULL));
    CHECK_TRUE(qp & CL_QUEUE_PROFILING_ENABLE, "CL_DEVICE_QUEUE_PROPERTIES must include profiling");
    cl_device_exec_capabilities ec = 0;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof ec, &ec, NULL));
    CHECK_TRUE(ec & CL_EXEC_KERNEL, "CL_DEVICE_EXECUTION_CAPABILITIES must include CL_EXEC_KERNEL");
    /* Root devices: retain/release succeed. */
    CHECK(clRetainDevice(dev), CL_SUCCESS);
    CHECK(clReleaseDevice(dev), CL_SUCCESS);
    /* Bad parameter name. */
    cl_uint dummy;
    CHECK(clGetDeviceInfo(dev, 0x7fff, sizeof dummy, &dummy, NULL), CL_INVALID_VALUE);
    CHECK(clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, 0, NULL, NULL), CL_SUCCESS);
}

static void check_platform_params(cl_platform_id p)
{
    static const struct {
        cl_platform_info id;
        const char *name;
    } params[] = {
        {CL_PLATFORM_PROFILE, "CL_PLATFORM_PROFILE"},
        {CL_PLATFORM_VERSION, "CL_PLATFORM_VERSION"},
        {CL_PLATFORM_NAME, "CL_PLATFORM_NAME"},
        {CL_PLATFORM_VENDOR, "CL_PLATFORM_VENDOR"},
        {CL_PLATFORM_EXTENSIONS, "CL_PLATFORM_EXTENSIONS"},
        {CL_PLATFORM_ICD_SUFFIX_KHR, "CL_PLATFORM_ICD_SUFFIX_KHR"},
    };
    char *ext = ct_platform_str(p, CL_PLATFORM_EXTENSIONS);
    int has_icd = strstr(ext, "cl_khr_icd") != NULL;
    if (ct_mirrorcl())
        CHECK_TRUE(has_icd, "MirrorCL must report cl_khr_icd in CL_PLATFORM_EXTENSIONS (\"%s\")", ext);
    free(ext);
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        if (params[i].id == CL_PLATFORM_ICD_SUFFIX_KHR && !has_icd && !ct_mirrorcl())
            continue;
        size_t sz = 0;
        if (!ct_check_code(clGetPlatformInfo(p, params[i].id, 0, NULL, &sz), CL_SUCCESS, params[i].name,
                           __FILE__, __LINE__, 0))
            continue;
        char *buf = calloc(sz + 8, 1);
        memset(buf, 'Z', sz + 8);
        size_t sz2 = 0;
        ct_check_code(clGetPlatformInfo(p, params[i].id, sz, buf, &sz2), CL_SUCCESS, params[i].name,
                      __FILE__, __LINE__, 0);
        ct_check_true(sz2 == sz && sz >= 1 && buf[sz - 1] == 0 && strlen(buf) + 1 == sz, params[i].name,
                      __FILE__, __LINE__, "size %zu / %zu, string \"%.*s\"", sz, sz2, (int)sz, buf);
        ct_check_code(clGetPlatformInfo(p, params[i].id, sz - 1, buf, NULL), CL_INVALID_VALUE,
                      params[i].name, __FILE__, __LINE__, 0);
        printf("  %s = \"%s\"\n", params[i].name, buf);
        free(buf);
    }
    char *prof = ct_platform_str(p, CL_PLATFORM_PROFILE);
    CHECK_TRUE(!strcmp(prof, "FULL_PROFILE") || !strcmp(prof, "EMBEDDED_PROFILE"), "profile \"%s\"", prof);
    free(prof);
    char *ver = ct_platform_str(p, CL_PLATFORM_VERSION);
    int maj = 0, min = 0;
    CHECK_TRUE(sscanf(ver, "OpenCL %d.%d", &maj, &min) == 2 && (maj > 1 || (maj == 1 && min >= 2)),
               "CL_PLATFORM_VERSION \"%s\" is not \"OpenCL 1.2+ ...\"", ver);
    free(ver);
    if (ct_mirrorcl()) {
        char *name = ct_platform_str(p, CL_PLATFORM_NAME);
        CHECK_TRUE(!strcmp(name, "MirrorCL"), "platform name \"%s\"", name);
        free(name);
    }
    char c;
    CHECK(clGetPlatformInfo(p, 0x7fff, sizeof c, &c, NULL), CL_INVALID_VALUE);
}

static void check_device_ids(cl_platform_id p, cl_uint ndev)
{
    static const struct {
        cl_device_type t;
        const char *name;
    } types[] = {
        {CL_DEVICE_TYPE_DEFAULT, "DEFAULT"}, {CL_DEVICE_TYPE_CPU, "CPU"},
        {CL_DEVICE_TYPE_GPU, "GPU"},         {CL_DEVICE_TYPE_ACCELERATOR, "ACCELERATOR"},
        {CL_DEVICE_TYPE_CUSTOM, "CUSTOM"},   {CL_DEVICE_TYPE_ALL, "ALL"},
    };
    cl_uint sum = 0;
    cl_uint absent = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        cl_uint n = 0xdead;
        cl_int err = clGetDeviceIDs(p, types[i].t, 0, NULL, &n);
        printf("  clGetDeviceIDs(%s): %s, %u devices\n", types[i].name, cl_err_name(err), err ? 0 : n);
        if (err == CL_DEVICE_NOT_FOUND) {
            CHECK_TRUE(types[i].t != CL_DEVICE_TYPE_ALL && types[i].t != CL_DEVICE_TYPE_DEFAULT,
                       "no device for type %s", types[i].name);
            absent |= (cl_uint)types[i].t;
            /* With entries requested, still CL_DEVICE_NOT_FOUND. */
            cl_device_id d;
            CHECK(clGetDeviceIDs(p, types[i].t, 1, &d, NULL), CL_DEVICE_NOT_FOUND);
            continue;
        }
        if (!CHECK(err, CL_SUCCESS))
            continue;
        CHECK_TRUE(n >= 1, "%s: %u devices", types[i].name, n);
        if (types[i].t == CL_DEVICE_TYPE_ALL)
            CHECK_EQ(n, ndev);
        else if (types[i].t != CL_DEVICE_TYPE_DEFAULT)
            sum += n;
        cl_device_id ds[CT_MAX_DEVICES];
        cl_uint n2 = 0;
        MUST(clGetDeviceIDs(p, types[i].t, n, ds, &n2));
        CHECK_EQ(n2, n);
        for (cl_uint k = 0; k < n && k < CT_MAX_DEVICES; k++) {
            cl_device_type dt = 0;
            MUST(clGetDeviceInfo(ds[k], CL_DEVICE_TYPE, sizeof dt, &dt, NULL));
            /* (the default device need not carry the DEFAULT bit) */
            CHECK_TRUE(types[i].t == CL_DEVICE_TYPE_ALL || types[i].t == CL_DEVICE_TYPE_DEFAULT ||
                           (dt & types[i].t),
                       "device of type 0x%llx returned for %s", (unsigned long long)dt, types[i].name);
        }
        /* Fewer entries than available: only num_entries written, count still total. */
        cl_device_id one[2] = {NULL, (cl_device_id)0x1};
        cl_uint n3 = 0;
        MUST(clGetDeviceIDs(p, types[i].t, 1, one, &n3));
        CHECK_EQ(n3, n);
        CHECK_TRUE(one[0] == ds[0], "first device differs between calls");
        CHECK_TRUE(one[1] == (cl_device_id)0x1, "clGetDeviceIDs wrote beyond num_entries");
    }
    CHECK_EQ(sum, ndev);
    /* Errors. */
    cl_device_id d[2];
    cl_uint n = 0;
    /* PoCL 3.1 answers CL_DEVICE_NOT_FOUND for unknown type bits. */
    CHECK_NATIVE_DEVIATES(clGetDeviceIDs(p, (cl_device_type)1 << 40, 1, d, &n), CL_INVALID_DEVICE_TYPE,
                          CL_DEVICE_NOT_FOUND);
    CHECK_NATIVE_DEVIATES(clGetDeviceIDs(p, 0, 1, d, &n), CL_INVALID_DEVICE_TYPE, CL_DEVICE_NOT_FOUND);
    CHECK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, d, &n), CL_INVALID_VALUE);
    CHECK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, NULL), CL_INVALID_VALUE);
    if (absent & CL_DEVICE_TYPE_ACCELERATOR)
        CHECK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ACCELERATOR, 0, NULL, &n), CL_DEVICE_NOT_FOUND);
}

static void check_sub_devices(cl_platform_id platform, cl_device_id dev)
{
    size_t sz = 0;
    MUST(clGetDeviceInfo(dev, CL_DEVICE_PARTITION_PROPERTIES, 0, NULL, &sz));
    cl_device_partition_property pp[16] = {0};
    MUST(clGetDeviceInfo(dev, CL_DEVICE_PARTITION_PROPERTIES, sizeof pp, pp, NULL));
    int equally = 0;
    for (size_t i = 0; i < sz / sizeof pp[0] && i < 16; i++)
        if (pp[i] == CL_DEVICE_PARTITION_EQUALLY)
            equally = 1;
    cl_uint cu = ct_device_uint(dev, CL_DEVICE_MAX_COMPUTE_UNITS);
    cl_uint maxsub = ct_device_uint(dev, CL_DEVICE_PARTITION_MAX_SUB_DEVICES);
    printf("  sub-devices: EQUALLY %s, %u compute units, max %u sub-devices\n",
           equally ? "supported" : "not supported", cu, maxsub);

    /* An unknown partition property is always rejected. */
    cl_device_partition_property bad[] = {0x4321, 1, 0};
    cl_device_id out[64];
    cl_uint nout = 0;
    CHECK(clCreateSubDevices(dev, bad, 64, out, &nout), CL_INVALID_VALUE);
    CHECK(clCreateSubDevices(dev, NULL, 64, out, &nout), CL_INVALID_VALUE);

    cl_device_partition_property eq[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
    if (!equally) {
        CHECK(clCreateSubDevices(dev, eq, 64, out, &nout), CL_INVALID_VALUE);
        return;
    }
    /* EQUALLY by all the units is no partition, by more is a wrong count (the CTS api
       negative_create_sub_devices; PoCL 3.1 creates one sub-device for the first and
       answers CL_INVALID_VALUE to the second). */
    {
        cl_device_partition_property whole[] = {CL_DEVICE_PARTITION_EQUALLY, (cl_device_partition_property)cu, 0};
        cl_int rc = clCreateSubDevices(dev, whole, 64, out, &nout);
        CHECK_NATIVE_DEVIATES(rc, CL_DEVICE_PARTITION_FAILED, CL_SUCCESS);
        if (rc == CL_SUCCESS)
            for (cl_uint i = 0; i < nout; i++)
                MUST(clReleaseDevice(out[i]));
        whole[1] = (cl_device_partition_property)cu + 1;
        rc = clCreateSubDevices(dev, whole, 64, out, &nout);
        CHECK_NATIVE_DEVIATES(rc, CL_INVALID_DEVICE_PARTITION_COUNT, CL_INVALID_VALUE);
        if (rc == CL_SUCCESS)
            for (cl_uint i = 0; i < nout; i++)
                MUST(clReleaseDevice(out[i]));
    }
    if (cu < 2 || maxsub < 2) {
        printf("  (device has %u compute units: not partitioned)\n", cu);
        return;
    }
    cl_uint units = cu / 2;
    eq[1] = (cl_device_partition_property)units;
    cl_uint expected = cu / units;
    if (expected > maxsub)
        expected = maxsub;
    MUST(clCreateSubDevices(dev, eq, 0, NULL, &nout));
    CHECK_EQ(nout, expected);
    if (nout == 0 || nout > 64)
        return;
    /* num_devices smaller than the partition -> CL_INVALID_VALUE. */
    if (nout > 1)
        CHECK(clCreateSubDevices(dev, eq, 1, out, NULL), CL_INVALID_VALUE);
    cl_uint nout2 = 0;
    MUST(clCreateSubDevices(dev, eq, nout, out, &nout2));
    CHECK_EQ(nout2, nout);
    for (cl_uint i = 0; i < nout; i++) {
        cl_device_id parent = NULL;
        MUST(clGetDeviceInfo(out[i], CL_DEVICE_PARENT_DEVICE, sizeof parent, &parent, NULL));
        CHECK_TRUE(parent == dev, "sub-device %u parent %p, expected %p", i, (void *)parent, (void *)dev);
        cl_platform_id sp = NULL;
        MUST(clGetDeviceInfo(out[i], CL_DEVICE_PLATFORM, sizeof sp, &sp, NULL));
        CHECK_TRUE(sp == platform, "sub-device platform %p", (void *)sp);
        CHECK_EQ(ct_device_uint(out[i], CL_DEVICE_MAX_COMPUTE_UNITS), units);
        cl_device_partition_property pt[8] = {0};
        size_t ptsz = 0;
        MUST(clGetDeviceInfo(out[i], CL_DEVICE_PARTITION_TYPE, sizeof pt, pt, &ptsz));
        CHECK_TRUE(ptsz >= 2 * sizeof pt[0] && pt[0] == CL_DEVICE_PARTITION_EQUALLY && pt[1] == (cl_device_partition_property)units,
                   "CL_DEVICE_PARTITION_TYPE of sub-device: size %zu, {%ld, %ld}", ptsz, (long)pt[0], (long)pt[1]);
        CHECK_EQ(ct_device_uint(out[i], CL_DEVICE_REFERENCE_COUNT), 1);
        MUST(clRetainDevice(out[i]));
        CHECK_EQ(ct_device_uint(out[i], CL_DEVICE_REFERENCE_COUNT), 2);
        MUST(clReleaseDevice(out[i]));
        CHECK_EQ(ct_device_uint(out[i], CL_DEVICE_REFERENCE_COUNT), 1);
    }

    /* Run a small kernel on the first sub-device. */
    cl_context ctx;
    CREATE(ctx = clCreateContext(NULL, 1, &out[0], NULL, NULL, &E));
    cl_command_queue q = ct_queue(ctx, out[0], 0);
    cl_program prog = ct_build(ctx, kSubKernel, NULL);
    cl_kernel k = ct_kernel(prog, "sq");
    enum { M = 4096 };
    cl_uint in[M], res[M], ref[M];
    for (cl_uint i = 0; i < M; i++) {
        in[i] = ct_rand();
        ref[i] = in[i] * in[i] + i;
    }
    cl_mem bi, bo;
    CREATE(bi = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, in, &E));
    CREATE(bo = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof res, NULL, &E));
    MUST(clSetKernelArg(k, 0, sizeof bi, &bi));
    MUST(clSetKernelArg(k, 1, sizeof bo, &bo));
    size_t gws = M;
    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
    MUST(clEnqueueReadBuffer(q, bo, CL_TRUE, 0, sizeof res, res, 0, NULL, NULL));
    CHECK_MEM(res, ref, M, 4, "kernel on sub-device");
    clReleaseMemObject(bi);
    clReleaseMemObject(bo);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);

    /* One context of the sub-devices and their parent (the CTS device_partition
       suite): a build for all of them succeeds on each, a failing one leaves a log on
       each. */
    cl_device_id family[65];
    for (cl_uint i = 0; i < nout; i++)
        family[i] = out[i];
    family[nout] = dev;
    CREATE(ctx = clCreateContext(NULL, nout + 1, family, NULL, NULL, &E));
    static const char *kBroken = "__kernel void broken(__global int *p) { p[0] = undefined_name; }\n";
    const char *sources[2] = {kSubKernel, kBroken};
    for (int s = 0; s < 2; s++) {
        CREATE(prog = clCreateProgramWithSource(ctx, 1, &sources[s], NULL, &E));
        CHECK(clBuildProgram(prog, 0, NULL, NULL, NULL, NULL), s == 0 ? CL_SUCCESS : CL_BUILD_PROGRAM_FAILURE);
        for (cl_uint i = 0; i <= nout; i++) {
            cl_build_status st = CL_BUILD_NONE;
            MUST(clGetProgramBuildInfo(prog, family[i], CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL));
            CHECK_EQ(st, s == 0 ? CL_BUILD_SUCCESS : CL_BUILD_ERROR);
            if (s == 1) {
                char log[4096] = {0};
                MUST(clGetProgramBuildInfo(prog, family[i], CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL));
                CHECK_TRUE(strstr(log, "undefined_name") != NULL, "build log of device %u: '%s'", i, log);
            }
        }
        clReleaseProgram(prog);
    }
    /* Built for the parent only: the sub-devices answer from the parent's build and
       run its kernels (as PoCL does; the CTS device_partition suite relies on it). */
    CREATE(prog = clCreateProgramWithSource(ctx, 1, &kBroken, NULL, &E));
    CHECK(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL), CL_BUILD_PROGRAM_FAILURE);
    for (cl_uint i = 0; i <= nout; i++) {
        char log[4096] = {0};
        MUST(clGetProgramBuildInfo(prog, family[i], CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL));
        CHECK_TRUE(strstr(log, "undefined_name") != NULL, "parent-only build log of device %u: '%s'", i, log);
    }
    clReleaseProgram(prog);
    CREATE(prog = clCreateProgramWithSource(ctx, 1, &kSubKernel, NULL, &E));
    MUST(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
    for (cl_uint i = 0; i <= nout; i++) {
        cl_build_status st = CL_BUILD_NONE;
        MUST(clGetProgramBuildInfo(prog, family[i], CL_PROGRAM_BUILD_STATUS, sizeof st, &st, NULL));
        CHECK_EQ(st, CL_BUILD_SUCCESS);
    }
    CREATE(k = clCreateKernel(prog, "sq", &E));
    CREATE(q = clCreateCommandQueue(ctx, out[nout - 1], 0, &E));
    CREATE(bi = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, in, &E));
    CREATE(bo = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof res, NULL, &E));
    MUST(clSetKernelArg(k, 0, sizeof bi, &bi));
    MUST(clSetKernelArg(k, 1, sizeof bo, &bo));
    memset(res, 0, sizeof res);
    MUST(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
    MUST(clEnqueueReadBuffer(q, bo, CL_TRUE, 0, sizeof res, res, 0, NULL, NULL));
    CHECK_MEM(res, ref, M, 4, "parent's kernel on a sub-device");
    clReleaseMemObject(bi);
    clReleaseMemObject(bo);
    clReleaseKernel(k);
    clReleaseCommandQueue(q);
    clReleaseProgram(prog);
    clReleaseContext(ctx);
    for (cl_uint i = 0; i < nout; i++)
        MUST(clReleaseDevice(out[i]));
    printf("  sub-device kernel checked on %u sub-devices of %u units\n", nout, units);
}

int main(void)
{
    ct_init("platform_device");

    /* clGetPlatformIDs argument checking. */
    cl_platform_id dummy;
    CHECK(clGetPlatformIDs(0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clGetPlatformIDs(0, &dummy, NULL), CL_INVALID_VALUE);
    cl_uint nplat = 0;
    MUST(clGetPlatformIDs(0, NULL, &nplat));
    CHECK_TRUE(nplat >= 1, "no platforms");
    cl_platform_id plats[16];
    cl_uint nplat2 = 0;
    MUST(clGetPlatformIDs(16, plats, &nplat2));
    CHECK_EQ(nplat2, nplat);
    int mirror_present = 0;
    for (cl_uint i = 0; i < nplat && i < 16; i++) {
        char *name = ct_platform_str(plats[i], CL_PLATFORM_NAME);
        printf("platform %u: %s\n", i, name);
        if (!strcmp(name, "MirrorCL"))
            mirror_present = 1;
        free(name);
    }
    if (ct_mirrorcl())
        CHECK_TRUE(mirror_present, "MIRRORCL_EXPECT=1 but no platform named MirrorCL");
    if (mirror_present)
        CHECK_EQ(nplat, 1);
    cl_platform_id platform = ct_platform();
    CHECK_TRUE(platform == plats[0], "platform handle not stable across calls");

    check_platform_params(platform);

    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    check_device_ids(platform, ndev);
    for (cl_uint d = 0; d < ndev; d++) {
        char *name = ct_device_str(devs[d], CL_DEVICE_NAME);
        printf("device %u: %s\n", d, name);
        free(name);
        check_device_params(devs[d], platform);
        for (cl_uint e = 0; e < d; e++)
            CHECK_TRUE(devs[e] != devs[d], "devices %u and %u have the same handle", e, d);
    }
    check_sub_devices(platform, devs[ndev - 1]);

    /* Device handles are stable across clGetDeviceIDs calls. */
    cl_device_id again[CT_MAX_DEVICES];
    MUST(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, ndev, again, NULL));
    CHECK_TRUE(!memcmp(again, devs, ndev * sizeof devs[0]), "device handles changed between calls");
    return ct_finish();
}
