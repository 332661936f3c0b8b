/* The benchmarks' timer (bench.cu, bench_attn_vae.cu): `warm` untimed calls of fn, then the
 * median of `reps` CUDA-event timings on the default stream. fn returns nonzero on failure,
 * which sets *err (and after one, nothing more is measured: the context may be gone). */
#ifndef VDN_BENCH_TIME_CUH
#define VDN_BENCH_TIME_CUH

#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <vector>

template <class Fn> double time_ms(Fn fn, int warm, int reps, int *err) {
    if (*err) return NAN; /* after a failure the context is gone: measure nothing more */
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < warm; i++)
        if (fn()) *err = 1;
    std::vector<double> ts;
    for (int i = 0; i < reps; i++) {
        cudaEventRecord(a);
        if (fn()) *err = 1;
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        ts.push_back(ms);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "vdn bench: CUDA error: %s\n", cudaGetErrorString(e));
        *err = 1;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

#endif
