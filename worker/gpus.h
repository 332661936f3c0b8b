/* GPU inventory for the worker's READY message: which GPUs this worker drives and how much memory
 * each has. Read from nvidia-smi (the one tool present wherever the NVIDIA driver is); a machine
 * without it reports no GPUs and the worker runs the CPU backend. */
#ifndef VDN_WORKER_GPUS_H
#define VDN_WORKER_GPUS_H

#include <stddef.h>
#include <stdint.h>

#define VDN_MAX_GPUS 64

typedef struct {
    int index;           /* as nvidia-smi numbers it (and CUDA_VISIBLE_DEVICES takes it) */
    char name[96];       /* e.g. "NVIDIA H200" */
    uint64_t memory_mib; /* total memory */
} vdn_gpu;

typedef struct {
    int n;
    vdn_gpu gpu[VDN_MAX_GPUS];
} vdn_gpu_list;

/* "0-7", "0,2,5", "1-3,6", "" or "none" (= no GPUs). Fills sel[] (sorted, no duplicates).
 * Returns the count, or -1 with an error naming the spec and what was expected. */
int vdn_parse_gpu_spec(const char *spec, int *sel, int cap, char *err, size_t errlen);

/* Parse nvidia-smi's "--query-gpu=index,name,memory.total --format=csv,noheader,nounits"
 * output. -1 with an error naming the line on malformed text. */
int vdn_parse_nvidia_smi(const char *text, vdn_gpu_list *out, char *err, size_t errlen);

/* Run nvidia-smi ($VDN_NVIDIA_SMI overrides the program, for tests) and keep the GPUs in sel.
 * No nvidia-smi or no driver: 0 GPUs and a log line saying why (not an error). A selected GPU
 * that does not exist is an error. nsel < 0: every GPU listed. */
int vdn_gpu_inventory(const int *sel, int nsel, vdn_gpu_list *out, char *err, size_t errlen);

#endif
