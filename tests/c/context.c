/*
 * context.c - clCreateContext / clCreateContextFromType / clGetContextInfo /
 * clRetainContext / clReleaseContext and their error codes.
 */
#include "check.h"

static volatile int notify_calls;

static void CL_CALLBACK notify(const char *errinfo, const void *private_info, size_t cb, void *user_data)
{
    (void)errinfo;
    (void)private_info;
    (void)cb;
    (void)user_data;
    __atomic_add_fetch(&notify_calls, 1, __ATOMIC_SEQ_CST);
}

static cl_uint refcount(cl_context ctx)
{
    cl_uint r = 0;
    CHECK(clGetContextInfo(ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof r, &r, NULL), CL_SUCCESS);
    return r;
}

/* Every clGetContextInfo param: size query, exact-size value query, too small. */
static void check_context_info(cl_context ctx, cl_uint ndev, const cl_device_id *devs,
                               const cl_context_properties *props, size_t nprops)
{
    static const struct {
        cl_context_info id;
        const char *name;
    } params[] = {
        {CL_CONTEXT_REFERENCE_COUNT, "CL_CONTEXT_REFERENCE_COUNT"},
        {CL_CONTEXT_DEVICES, "CL_CONTEXT_DEVICES"},
        {CL_CONTEXT_PROPERTIES, "CL_CONTEXT_PROPERTIES"},
        {CL_CONTEXT_NUM_DEVICES, "CL_CONTEXT_NUM_DEVICES"},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        size_t sz = 0xdeadbeef;
        if (!ct_check_code(clGetContextInfo(ctx, params[i].id, 0, NULL, &sz), CL_SUCCESS, params[i].name,
                           __FILE__, __LINE__, 0))
            continue;
        unsigned char *buf = calloc(sz + 16, 1);
        size_t sz2 = 0;
        ct_check_code(clGetContextInfo(ctx, params[i].id, sz, buf, &sz2), CL_SUCCESS, params[i].name,
                      __FILE__, __LINE__, 0);
        ct_check_true(sz == sz2, params[i].name, __FILE__, __LINE__, "size %zu vs %zu", sz, sz2);
        if (sz > 0)
            ct_check_code(clGetContextInfo(ctx, params[i].id, sz - 1, buf, NULL), CL_INVALID_VALUE,
                          params[i].name, __FILE__, __LINE__, 0);
        switch (params[i].id) {
        case CL_CONTEXT_REFERENCE_COUNT:
        case CL_CONTEXT_NUM_DEVICES:
            ct_check_true(sz == sizeof(cl_uint), params[i].name, __FILE__, __LINE__, "size %zu", sz);
            if (params[i].id == CL_CONTEXT_NUM_DEVICES)
                CHECK_EQ(*(cl_uint *)(void *)buf, ndev);
            break;
        case CL_CONTEXT_DEVICES:
            CHECK_EQ(sz, ndev * sizeof(cl_device_id));
            if (devs) {
                for (cl_uint d = 0; d < ndev && sz == ndev * sizeof(cl_device_id); d++)
                    CHECK_TRUE(((cl_device_id *)(void *)buf)[d] == devs[d], "CL_CONTEXT_DEVICES[%u]", d);
            }
            break;
        case CL_CONTEXT_PROPERTIES:
            if (props) {
                CHECK_EQ(sz, nprops * sizeof(cl_context_properties));
                if (sz == nprops * sizeof(cl_context_properties))
                    CHECK_TRUE(!memcmp(buf, props, sz), "CL_CONTEXT_PROPERTIES differ from creation properties");
            } else {
                /* NULL properties: size 0 (or implementation may return a list). */
                CHECK_TRUE(sz == 0 || sz % sizeof(cl_context_properties) == 0, "props size %zu", sz);
            }
            break;
        }
        free(buf);
    }
    cl_uint v;
    CHECK(clGetContextInfo(ctx, 0x7fff, sizeof v, &v, NULL), CL_INVALID_VALUE);
    CHECK(clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, 2, &v, NULL), CL_INVALID_VALUE);
}

/* The context must actually work: a tiny copy on each device. */
static void smoke(cl_context ctx)
{
    cl_uint nd = 0;
    MUST(clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof nd, &nd, NULL));
    cl_device_id ds[CT_MAX_DEVICES];
    MUST(clGetContextInfo(ctx, CL_CONTEXT_DEVICES, nd * sizeof ds[0], ds, NULL));
    cl_uint src[64], dst[64];
    for (int i = 0; i < 64; i++)
        src[i] = ct_rand();
    cl_mem a, b;
    CREATE(a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof src, src, &E));
    CREATE(b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof src, NULL, &E));
    for (cl_uint d = 0; d < nd; d++) {
        cl_command_queue q = ct_queue(ctx, ds[d], 0);
        memset(dst, 0, sizeof dst);
        MUST(clEnqueueCopyBuffer(q, a, b, 0, 0, sizeof src, 0, NULL, NULL));
        MUST(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof dst, dst, 0, NULL, NULL));
        CHECK_MEM(dst, src, 64, 4, "copy in new context");
        MUST(clReleaseCommandQueue(q));
    }
    MUST(clReleaseMemObject(a));
    MUST(clReleaseMemObject(b));
}

/* OpenCL 3.0 / 2.2 entry points MirrorCL offers: declared here, the file targets 1.2. */
extern CL_API_ENTRY cl_int CL_API_CALL clSetContextDestructorCallback(
    cl_context, void(CL_CALLBACK *)(cl_context, void *), void *);
extern CL_API_ENTRY cl_int CL_API_CALL clSetProgramReleaseCallback(
    cl_program, void(CL_CALLBACK *)(cl_program, void *), void *);

static int destroyed[4];
static int destroy_order[4];
static int destroy_count;

static void CL_CALLBACK on_context_gone(cl_context c, void *user)
{
    (void)c;
    int i = *(int *)user;
    destroyed[i]++;
    destroy_order[destroy_count++] = i;
}

static void CL_CALLBACK on_program_gone(cl_program p, void *user)
{
    (void)p;
    int i = *(int *)user;
    destroyed[i]++;
    destroy_order[destroy_count++] = i;
}

/* Destructor callbacks of contexts and programs run once, when the object is deleted,
 * the last registered first; they are MirrorCL-only here (a 1.2 platform need not
 * offer them). */
static void test_destructor_callbacks(cl_device_id dev)
{
    static int ids[4] = {0, 1, 2, 3};
    cl_context c;
    CREATE(c = clCreateContext(NULL, 1, &dev, NULL, NULL, &E));
    const char *src = "__kernel void k(__global int* a) { a[0] = 1; }";
    cl_program p;
    CREATE(p = clCreateProgramWithSource(c, 1, &src, NULL, &E));
    MUST(clSetProgramReleaseCallback(p, on_program_gone, &ids[2]));
    MUST(clSetContextDestructorCallback(c, on_context_gone, &ids[0]));
    MUST(clSetContextDestructorCallback(c, on_context_gone, &ids[1]));
    CHECK(clSetContextDestructorCallback(c, NULL, NULL), CL_INVALID_VALUE);
    MUST(clReleaseProgram(p));
    CHECK_EQ(destroyed[2], 1);
    CHECK_EQ(destroyed[0] + destroyed[1], 0);
    MUST(clReleaseContext(c));
    CHECK_EQ(destroyed[0], 1);
    CHECK_EQ(destroyed[1], 1);
    CHECK_EQ(destroy_count, 3);
    CHECK_EQ(destroy_order[1], 1); /* the last registered runs first */
    CHECK_EQ(destroy_order[2], 0);
}

int main(void)
{
    ct_init("context");
    cl_platform_id platform = ct_platform();
    cl_device_id devs[CT_MAX_DEVICES];
    cl_uint ndev = ct_devices(platform, devs);
    cl_context ctx;

    /* clCreateContext, no properties. */
    CREATE(ctx = clCreateContext(NULL, ndev, devs, NULL, NULL, &E));
    check_context_info(ctx, ndev, devs, NULL, 0);
    CHECK_EQ(refcount(ctx), 1);
    MUST(clRetainContext(ctx));
    CHECK_EQ(refcount(ctx), 2);
    MUST(clRetainContext(ctx));
    CHECK_EQ(refcount(ctx), 3);
    MUST(clReleaseContext(ctx));
    MUST(clReleaseContext(ctx));
    CHECK_EQ(refcount(ctx), 1);
    smoke(ctx);
    MUST(clReleaseContext(ctx));

    if (ct_mirrorcl())
        test_destructor_callbacks(devs[0]);

    /* clCreateContext with CL_CONTEXT_PLATFORM, callback and user data. */
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    int token = 42;
    CREATE(ctx = clCreateContext(props, ndev, devs, notify, &token, &E));
    check_context_info(ctx, ndev, devs, props, 3);
    smoke(ctx);
    MUST(clReleaseContext(ctx));

    /* Single-device contexts, one per device; errcode_ret may be NULL. */
    for (cl_uint d = 0; d < ndev; d++) {
        ctx = clCreateContext(props, 1, &devs[d], NULL, NULL, NULL);
        CHECK_TRUE(ctx != NULL, "clCreateContext(device %u) with NULL errcode_ret", d);
        if (ctx) {
            check_context_info(ctx, 1, &devs[d], props, 3);
            MUST(clReleaseContext(ctx));
        }
    }

    /* clCreateContextFromType: with and without CL_CONTEXT_PLATFORM. */
    CREATE(ctx = clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, notify, &token, &E));
    check_context_info(ctx, ndev, NULL, props, 3);
    smoke(ctx);
    MUST(clReleaseContext(ctx));
    CREATE(ctx = clCreateContextFromType(NULL, CL_DEVICE_TYPE_ALL, NULL, NULL, &E));
    check_context_info(ctx, ndev, NULL, NULL, 0);
    {
        /* Without properties the (single) platform must be chosen. */
        cl_device_id d0[CT_MAX_DEVICES];
        MUST(clGetContextInfo(ctx, CL_CONTEXT_DEVICES, sizeof d0, d0, NULL));
        cl_platform_id dp = NULL;
        MUST(clGetDeviceInfo(d0[0], CL_DEVICE_PLATFORM, sizeof dp, &dp, NULL));
        CHECK_TRUE(dp == platform, "NULL-properties context uses platform %p, expected %p", (void *)dp,
                   (void *)platform);
    }
    MUST(clReleaseContext(ctx));
    CREATE(ctx = clCreateContextFromType(props, CL_DEVICE_TYPE_DEFAULT, NULL, NULL, &E));
    check_context_info(ctx, 1, NULL, props, 3);
    MUST(clReleaseContext(ctx));
    /* By the type of device 0. */
    cl_device_type t0 = 0;
    MUST(clGetDeviceInfo(devs[0], CL_DEVICE_TYPE, sizeof t0, &t0, NULL));
    t0 &= ~(cl_device_type)CL_DEVICE_TYPE_DEFAULT;
    cl_uint nt0 = 0;
    MUST(clGetDeviceIDs(platform, t0, 0, NULL, &nt0));
    CREATE(ctx = clCreateContextFromType(props, t0, NULL, NULL, &E));
    check_context_info(ctx, nt0, NULL, props, 3);
    MUST(clReleaseContext(ctx));
    /*
     * A type that is not present.  (PoCL 3.1 deviation: it sets
     * CL_DEVICE_NOT_FOUND but returns a non-NULL context; the NULL return is
     * only required under MirrorCL.)
     */
    static const cl_device_type others[] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CUSTOM};
    for (size_t i = 0; i < 3; i++) {
        cl_uint n = 0;
        if (clGetDeviceIDs(platform, others[i], 0, NULL, &n) == CL_DEVICE_NOT_FOUND) {
            CHECK_CREATE(ctx = clCreateContextFromType(props, others[i], NULL, NULL, &E), CL_DEVICE_NOT_FOUND);
            if (ct_mirrorcl())
                CHECK_TRUE(ctx == NULL, "context %p returned on error", (void *)ctx);
        }
    }
    /* Invalid device type (PoCL 3.1 answers CL_DEVICE_NOT_FOUND). */
    E = ERR_SENTINEL;
    ctx = clCreateContextFromType(props, (cl_device_type)1 << 40, NULL, NULL, &E);
    CHECK_NATIVE_DEVIATES(E, CL_INVALID_DEVICE_TYPE, CL_DEVICE_NOT_FOUND);
    if (ct_mirrorcl())
        CHECK_TRUE(ctx == NULL, "context %p returned on error", (void *)ctx);

    /* Errors of clCreateContext. */
    CHECK_FAILS(clCreateContext(props, ndev, NULL, NULL, NULL, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clCreateContext(props, 0, devs, NULL, NULL, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clCreateContext(props, ndev, devs, NULL, &token, &E), CL_INVALID_VALUE);
    CHECK_FAILS(clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, NULL, &token, &E), CL_INVALID_VALUE);
    {
        cl_context_properties bad[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0x7777, 1, 0};
        CHECK_FAILS(clCreateContext(bad, ndev, devs, NULL, NULL, &E), CL_INVALID_PROPERTY);
        CHECK_FAILS(clCreateContextFromType(bad, CL_DEVICE_TYPE_ALL, NULL, NULL, &E), CL_INVALID_PROPERTY);
        cl_context_properties twice[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform,
                                         CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
        CHECK_FAILS(clCreateContext(twice, ndev, devs, NULL, NULL, &E), CL_INVALID_PROPERTY);
        /* CL_CONTEXT_INTEROP_USER_SYNC takes a cl_bool (the CTS api
           negative_create_context*; PoCL 3.1 accepts any value). */
        cl_context_properties sync[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform,
                                        CL_CONTEXT_INTEROP_USER_SYNC, -1, 0};
        E = ERR_SENTINEL;
        ctx = clCreateContext(sync, ndev, devs, NULL, NULL, &E);
        CHECK_NATIVE_DEVIATES(E, CL_INVALID_PROPERTY, CL_SUCCESS);
        if (ctx)
            MUST(clReleaseContext(ctx));
        E = ERR_SENTINEL;
        ctx = clCreateContextFromType(sync, CL_DEVICE_TYPE_ALL, NULL, NULL, &E);
        CHECK_NATIVE_DEVIATES(E, CL_INVALID_PROPERTY, CL_SUCCESS);
        if (ctx)
            MUST(clReleaseContext(ctx));
        sync[3] = CL_TRUE;
        CREATE(ctx = clCreateContext(sync, ndev, devs, NULL, NULL, &E));
        MUST(clReleaseContext(ctx));
        cl_context_properties nullplat[] = {CL_CONTEXT_PLATFORM, 0, 0};
        CHECK_FAILS(clCreateContext(nullplat, ndev, devs, NULL, NULL, &E), CL_INVALID_PLATFORM);
        CHECK_FAILS(clCreateContextFromType(nullplat, CL_DEVICE_TYPE_ALL, NULL, NULL, &E), CL_INVALID_PLATFORM);
    }
    {
        cl_device_id withnull[2] = {devs[0], NULL};
        CHECK_FAILS(clCreateContext(props, 2, withnull, NULL, NULL, &E), CL_INVALID_DEVICE);
    }
    if (ct_mirrorcl()) {
        /* A handle of another type where a device is expected. */
        cl_context other;
        CREATE(other = clCreateContext(props, 1, devs, NULL, NULL, &E));
        cl_device_id wrong[2] = {devs[0], (cl_device_id)(void *)other};
        CHECK_FAILS(clCreateContext(props, 2, wrong, NULL, NULL, &E), CL_INVALID_DEVICE);
        MUST(clReleaseContext(other));
    }
    CHECK(clRetainContext(NULL), CL_INVALID_CONTEXT);
    CHECK(clReleaseContext(NULL), CL_INVALID_CONTEXT);
    cl_uint v;
    CHECK(clGetContextInfo(NULL, CL_CONTEXT_NUM_DEVICES, sizeof v, &v, NULL), CL_INVALID_CONTEXT);

    /* A context with a single callback: still works after many contexts. */
    CREATE(ctx = clCreateContext(props, ndev, devs, notify, &token, &E));
    smoke(ctx);
    MUST(clReleaseContext(ctx));
    printf("  pfn_notify calls: %d (errors are not expected)\n", notify_calls);
    return ct_finish();
}
