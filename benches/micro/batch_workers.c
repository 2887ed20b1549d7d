/* An LD_PRELOAD library that gives a native run what MirrorCL does to a CPU vendor's
 * threads (runtime/src/vendor/threads.rs): the threads the vendor starts inside
 * clGetDeviceIDs (PoCL's workers) are put under SCHED_BATCH, so a worker woken by an
 * enqueue does not preempt the thread that enqueued. benches/run-cg.sh runs native CG with
 * it besides the plain native run, to tell MirrorCL's own cost from the policy's gain.
 *
 *   cc -O2 -shared -fPIC -o batch_workers.so batch_workers.c -ldl
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>

#define MAX_THREADS 1024

static int threads(int *ids)
{
    int n = 0;
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return 0;
    for (struct dirent *e; (e = readdir(dir)) && n < MAX_THREADS;)
        if (e->d_name[0] != '.')
            ids[n++] = atoi(e->d_name);
    closedir(dir);
    return n;
}

cl_int clGetDeviceIDs(cl_platform_id platform, cl_device_type type, cl_uint num_entries,
                      cl_device_id *devices, cl_uint *num_devices)
{
    static cl_int (*real)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "clGetDeviceIDs");
    static int before[MAX_THREADS], after[MAX_THREADS];
    int nb = threads(before);
    cl_int rc = real(platform, type, num_entries, devices, num_devices);
    int na = threads(after);
    for (int i = 0; i < na; i++) {
        int seen = 0;
        for (int j = 0; j < nb && !seen; j++)
            seen = after[i] == before[j];
        if (!seen) {
            struct sched_param param = {0};
            sched_setscheduler(after[i], SCHED_BATCH, &param);
        }
    }
    return rc;
}
