#include "blame.h"

#include <ctype.h>
#include <string.h>

/* "(cuda:N): " anywhere: the CUDA backend's own failures (OPC, OPK, cuBLAS statuses) carry the
 * device's name in parentheses after the op's; its refusals of calls ("op X: ... on cuda") and
 * the front end's ("op X: w is ...") never do. */
static int names_cuda_device(const char *msg) {
    for (const char *p = strstr(msg, "(cuda:"); p; p = strstr(p + 1, "(cuda:")) {
        const char *q = p + 6;
        if (!isdigit((unsigned char)*q)) continue;
        while (isdigit((unsigned char)*q))
            q++;
        if (q[0] == ')' && q[1] == ':') return 1;
    }
    return 0;
}

vdn_engine_fault vdn_blame_message(const char *msg) {
    static const char *memory[] = {"out of memory",
                                   "out of device memory",
                                   "Cannot allocate memory",
                                   "cudaErrorMemoryAllocation",
                                   "CUBLAS_STATUS_ALLOC_FAILED",
                                   "ENOMEM"};
    static const char *device[] = {"comm nccl",
                                   "CUDA error",
                                   "cudaError",
                                   "CUBLAS_STATUS",
                                   "illegal memory access",
                                   "unspecified launch failure",
                                   "uncorrectable ECC",
                                   "cuda: cudaMalloc",
                                   "cuda: freeing scratch",
                                   "cuda: scratch of"};
    if (!msg) return VDN_ENGINE_FAULT_NONE;
    for (size_t i = 0; i < sizeof memory / sizeof *memory; i++)
        if (strstr(msg, memory[i])) return VDN_ENGINE_FAULT_MEMORY;
    if (names_cuda_device(msg)) return VDN_ENGINE_FAULT_DEVICE;
    for (size_t i = 0; i < sizeof device / sizeof *device; i++)
        if (strstr(msg, device[i])) return VDN_ENGINE_FAULT_DEVICE;
    return VDN_ENGINE_FAULT_NONE;
}

vdn_fault vdn_blame_render(vdn_engine_fault dev, const char *msg, int *gpu_fault) {
    /* the record is the truth; the words count only where the record has nothing (a failure
     * outside the op layer's devices, or a backend path that does not type its failures yet) */
    vdn_engine_fault f = dev != VDN_ENGINE_FAULT_NONE ? dev : vdn_blame_message(msg);
    *gpu_fault = f == VDN_ENGINE_FAULT_DEVICE;
    return f == VDN_ENGINE_FAULT_NONE ? VDN_FAULT_JOB : VDN_FAULT_WORKER;
}
