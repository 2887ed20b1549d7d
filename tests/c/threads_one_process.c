/*
 * threads_one_process.c - several host threads of one process, one context.
 *
 * Four host threads share one context, one program and one parent buffer. Each thread
 * works on its own sub-buffers of that parent (an input, an output and a copy per
 * device) through queues of its own on every device, round after round: a write, a
 * kernel, a copy to the next device's queue (the bytes move between devices), reads
 * from both queues. Then it releases its queues while their commands may still be
 * queued or being flushed (a release implies only a flush), waits for its reads through
 * their events and checks them bit-exactly against a CPU reference; the next round
 * creates new queues. The bug this caught: MirrorCL's issuer flushed a vendor queue the
 * application had already released (SIGSEGV in 6 of 10 runs).
 *
 * check.h's counters are not thread-safe: a thread records its first failure and the
 * main thread reports it.
 */
#include "check.h"

#include <pthread.h>

#define THREADS 4
#define ROUNDS 24
/* Elements per sub-buffer (a multiple of every device's base address alignment). */
#define SEG (1u << 14)

static const char *kSrc =
    "__kernel void scale(__global const int *in, __global int *out, int add)\n"
    "{ size_t i = get_global_id(0); out[i] = in[i] * 3 + add; }\n";

static cl_uint ndev;
static cl_device_id devs[CT_MAX_DEVICES];
static cl_context ctx;
static cl_program prog;
static cl_mem parent;

struct thread_arg {
    unsigned t;
    cl_int err;
    int line;
    /* The first element that differed from the reference, if any. */
    int mismatch_round, mismatch_dev;
    size_t mismatch_at;
    int32_t expected, got;
};

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        cl_int e_ = (expr);                                                                        \
        if (e_ != CL_SUCCESS) {                                                                    \
            ta->err = e_;                                                                          \
            ta->line = __LINE__;                                                                   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* Sub-buffer `seg` of device d in thread t's region of the parent. */
static cl_mem segment(unsigned t, cl_uint d, unsigned seg, cl_int *err)
{
    size_t index = ((size_t)t * ndev + d) * 3 + seg;
    cl_buffer_region r = {index * SEG * sizeof(int32_t), SEG * sizeof(int32_t)};
    return clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, err);
}

static int compare(struct thread_arg *ta, int round, cl_uint d, const int32_t *got,
                   const int32_t *exp)
{
    for (size_t i = 0; i < SEG; i++) {
        if (got[i] != exp[i]) {
            ta->mismatch_round = round;
            ta->mismatch_dev = (int)d;
            ta->mismatch_at = i;
            ta->expected = exp[i];
            ta->got = got[i];
            return 0;
        }
    }
    return 1;
}

static void *thread_main(void *p)
{
    struct thread_arg *ta = p;
    unsigned t = ta->t;
    cl_int err = CL_SUCCESS;
    cl_kernel k = NULL;
    cl_mem in[CT_MAX_DEVICES] = {0}, outb[CT_MAX_DEVICES] = {0}, cp[CT_MAX_DEVICES] = {0};
    int32_t *src = malloc(ndev * SEG * sizeof *src), *exp = malloc(ndev * SEG * sizeof *exp);
    int32_t *got_out = malloc(ndev * SEG * sizeof *got_out);
    int32_t *got_cp = malloc(ndev * SEG * sizeof *got_cp);
    if (!src || !exp || !got_out || !got_cp) {
        ta->err = CL_OUT_OF_HOST_MEMORY;
        ta->line = __LINE__;
        goto out;
    }
    k = clCreateKernel(prog, "scale", &err);
    TRY(err);
    for (cl_uint d = 0; d < ndev; d++) {
        in[d] = segment(t, d, 0, &err);
        TRY(err);
        outb[d] = segment(t, d, 1, &err);
        TRY(err);
        cp[d] = segment(t, d, 2, &err);
        TRY(err);
    }
    uint32_t rng = 0x9E3779B9u * (t + 1);
    for (int round = 0; round < ROUNDS; round++) {
        cl_command_queue q[CT_MAX_DEVICES];
        for (cl_uint d = 0; d < ndev; d++) {
            q[d] = clCreateCommandQueue(ctx, devs[d], 0, &err);
            TRY(err);
        }
        int32_t add = (int32_t)(round * 7 + t);
        for (size_t i = 0; i < (size_t)ndev * SEG; i++) {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            src[i] = (int32_t)(rng % 2000001u) - 1000000;
            exp[i] = src[i] * 3 + add;
        }
        memset(got_out, 0xAB, ndev * SEG * sizeof *got_out);
        memset(got_cp, 0xCD, ndev * SEG * sizeof *got_cp);
        cl_event reads[2 * CT_MAX_DEVICES];
        size_t gws = SEG, bytes = SEG * sizeof(int32_t);
        for (cl_uint d = 0; d < ndev; d++) {
            cl_command_queue next = q[(d + 1) % ndev];
            cl_event kev, cev;
            TRY(clEnqueueWriteBuffer(q[d], in[d], CL_FALSE, 0, bytes, src + d * SEG, 0, NULL,
                                     NULL));
            TRY(clSetKernelArg(k, 0, sizeof(cl_mem), &in[d]));
            TRY(clSetKernelArg(k, 1, sizeof(cl_mem), &outb[d]));
            TRY(clSetKernelArg(k, 2, sizeof add, &add));
            TRY(clEnqueueNDRangeKernel(q[d], k, 1, NULL, &gws, NULL, 0, NULL, &kev));
            /* The copy runs on the next device's queue, after the kernel. */
            TRY(clEnqueueCopyBuffer(next, outb[d], cp[d], 0, 0, bytes, 1, &kev, &cev));
            TRY(clEnqueueReadBuffer(q[d], outb[d], CL_FALSE, 0, bytes, got_out + d * SEG, 0,
                                    NULL, &reads[2 * d]));
            TRY(clEnqueueReadBuffer(next, cp[d], CL_FALSE, 0, bytes, got_cp + d * SEG, 1, &cev,
                                    &reads[2 * d + 1]));
            TRY(clReleaseEvent(kev));
            TRY(clReleaseEvent(cev));
        }
        /* Released with commands still pending: half the rounds flush first. */
        for (cl_uint d = 0; d < ndev; d++) {
            if (round % 2)
                TRY(clFlush(q[d]));
            TRY(clReleaseCommandQueue(q[d]));
        }
        TRY(clWaitForEvents(2 * ndev, reads));
        for (cl_uint i = 0; i < 2 * ndev; i++) {
            cl_int st = 1;
            TRY(clGetEventInfo(reads[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
            TRY(st == CL_COMPLETE ? CL_SUCCESS : st);
            TRY(clReleaseEvent(reads[i]));
        }
        for (cl_uint d = 0; d < ndev; d++) {
            if (!compare(ta, round, d, got_out + d * SEG, exp + d * SEG) ||
                !compare(ta, round, d, got_cp + d * SEG, exp + d * SEG))
                goto out;
        }
    }
out:
    for (cl_uint d = 0; d < ndev; d++) {
        if (in[d])
            clReleaseMemObject(in[d]);
        if (outb[d])
            clReleaseMemObject(outb[d]);
        if (cp[d])
            clReleaseMemObject(cp[d]);
    }
    if (k)
        clReleaseKernel(k);
    free(src);
    free(exp);
    free(got_out);
    free(got_cp);
    return NULL;
}

int main(void)
{
    ct_init("threads_one_process");
    cl_platform_id platform = ct_platform();
    ndev = ct_devices(platform, devs);
    if (ndev > 3)
        ndev = 3;
    CHECK_TRUE(ct_max_align(ndev, devs) <= SEG * sizeof(int32_t),
               "sub-buffer offsets must be aligned for every device");
    ctx = ct_context(platform, ndev, devs);
    prog = ct_build(ctx, kSrc, NULL);
    CREATE(parent = clCreateBuffer(ctx, CL_MEM_READ_WRITE,
                                   (size_t)THREADS * ndev * 3 * SEG * sizeof(int32_t), NULL, &E));
    printf("%d threads x %d rounds on %u device(s)\n", THREADS, ROUNDS, ndev);

    pthread_t th[THREADS];
    struct thread_arg args[THREADS];
    for (unsigned t = 0; t < THREADS; t++) {
        args[t] = (struct thread_arg){.t = t, .err = CL_SUCCESS, .mismatch_round = -1};
        if (pthread_create(&th[t], NULL, thread_main, &args[t]) != 0)
            ct_die("pthread_create failed");
    }
    for (unsigned t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        struct thread_arg *a = &args[t];
        if (a->err != CL_SUCCESS) {
            char what[128];
            snprintf(what, sizeof what, "host thread %u: call at threads_one_process.c:%d", t,
                     a->line);
            ct_check_code(a->err, CL_SUCCESS, what, __FILE__, __LINE__, 0);
        }
        CHECK_TRUE(a->mismatch_round < 0,
                   "thread %u, round %d, device %d: element %zu expected %d, got %d", t,
                   a->mismatch_round, a->mismatch_dev, a->mismatch_at, (int)a->expected,
                   (int)a->got);
    }
    MUST(clReleaseMemObject(parent));
    MUST(clReleaseProgram(prog));
    MUST(clReleaseContext(ctx));
    return ct_finish();
}
