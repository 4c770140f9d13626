// Row softmax, one block per row: max, sum of exponentials, normalise (three passes over the
// row, the first two reduced across the block).
#ifndef INFINITY  // NVRTC has no math.h
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef SOFTMAX_THREADS
#define SOFTMAX_THREADS 256
#endif

__device__ __forceinline__ float block_reduce(float v, bool take_max) {
    __shared__ float scratch[SOFTMAX_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = take_max ? fmaxf(v, other) : v + other;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // scratch may still be read by the previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < SOFTMAX_THREADS / 32; ++w) v = take_max ? fmaxf(v, scratch[w]) : v + scratch[w];
    return v;
}

extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += SOFTMAX_THREADS) m = fmaxf(m, row[c]);
    m = block_reduce(m, true);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += SOFTMAX_THREADS) s += __expf(row[c] - m);
    s = block_reduce(s, false);
    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += SOFTMAX_THREADS) out[c] = __expf(row[c] - m) * inv;
}
