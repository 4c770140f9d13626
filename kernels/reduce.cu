// Sum of N floats in two deterministic passes: per-block partial sums, then one block sums
// the partials (no atomics, so the result does not depend on block scheduling).
#ifndef REDUCE_THREADS
#define REDUCE_THREADS 256
#endif

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_sums[REDUCE_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    v = threadIdx.x < REDUCE_THREADS / 32 ? warp_sums[threadIdx.x] : 0.0f;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_partial(const float* __restrict__ x, float* __restrict__ partial, long long n) {
    float v = 0.0f;
    const long long stride = (long long)gridDim.x * REDUCE_THREADS;
    for (long long i = (long long)blockIdx.x * REDUCE_THREADS + threadIdx.x; i < n; i += stride) v += x[i];
    v = block_sum(v);
    if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_final(const float* __restrict__ partial, float* __restrict__ out, int n) {
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += REDUCE_THREADS) v += partial[i];
    v = block_sum(v);
    if (threadIdx.x == 0) out[0] = v;
}
