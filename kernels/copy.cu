// Device-to-device copy, 16 bytes per thread per step: measures the memory bandwidth the
// other kernels are judged against.
extern "C" __global__ void copy_f4(const float4* __restrict__ src, float4* __restrict__ dst, long long n4) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) dst[i] = src[i];
}
