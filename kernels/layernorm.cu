// Layer normalisation over the last dimension, one block per row, with learned scale and
// shift: y = (x - mean) / sqrt(var + eps) * gamma + beta.
#ifndef LN_THREADS
#define LN_THREADS 256
#endif

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float scratch[LN_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = 0.0f;
    for (int w = 0; w < LN_THREADS / 32; ++w) v += scratch[w];
    return v;
}

extern "C" __global__ void __launch_bounds__(LN_THREADS)
layernorm_rows(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
               float* __restrict__ y, int cols, float eps) {
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += LN_THREADS) s += row[c];
    const float mean = block_sum(s) / cols;
    float ss = 0.0f;  // two passes: sum of squares about the mean does not cancel catastrophically
    for (int c = threadIdx.x; c < cols; c += LN_THREADS) {
        const float d = row[c] - mean;
        ss += d * d;
    }
    const float rstd = rsqrtf(block_sum(ss) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += LN_THREADS) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}
