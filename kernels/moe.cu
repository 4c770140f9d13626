// Mixture-of-experts layer, one expert GEMM deep, as five launches:
//   moe_zero       clear the per-expert counters
//   moe_gate       softmax over E expert logits per token, top-k (MOE_TOPK), weights
//                  renormalised over the chosen k, tokens counted per expert
//   moe_offsets    exclusive scan of the counts (E is small: one thread)
//   moe_scatter    permute token rows into expert-contiguous order
//   moe_grouped_gemm  Y_e = X_e W_e^T for every expert e over its rows (fp32, tiled)
//   moe_combine    y[t] = sum over the token's k slots of weight * its expert's output row
// The order of rows inside one expert depends on atomics, but every row is mapped back to
// its (token, slot), so the result does not.
#ifndef INFINITY  // NVRTC has no math.h
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef MOE_TOPK
#define MOE_TOPK 2
#endif
#define MOE_BM 64
#define MOE_BN 64
#define MOE_BK 8

extern "C" __global__ void moe_zero(int* counts, int E) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
}

extern "C" __global__ void moe_gate(const float* __restrict__ logits, int* __restrict__ topk_idx,
                                    float* __restrict__ topk_w, int* __restrict__ counts, int T, int E) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float* row = logits + (size_t)t * E;
    float m = -INFINITY;
    for (int e = 0; e < E; ++e) m = fmaxf(m, row[e]);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += __expf(row[e] - m);
    int chosen[MOE_TOPK];
    float w[MOE_TOPK], wsum = 0.0f;
    for (int k = 0; k < MOE_TOPK; ++k) {
        int best = -1;
        float best_v = -INFINITY;
        for (int e = 0; e < E; ++e) {
            bool taken = false;
            for (int j = 0; j < k; ++j) taken |= chosen[j] == e;
            if (!taken && (best < 0 || row[e] > best_v)) {
                best = e;
                best_v = row[e];
            }
        }
        chosen[k] = best;
        w[k] = __expf(best_v - m) / sum;
        wsum += w[k];
    }
    for (int k = 0; k < MOE_TOPK; ++k) {
        topk_idx[t * MOE_TOPK + k] = chosen[k];
        topk_w[t * MOE_TOPK + k] = w[k] / wsum;
        atomicAdd(&counts[chosen[k]], 1);
    }
}

extern "C" __global__ void moe_offsets(const int* __restrict__ counts, int* __restrict__ offsets,
                                       int* __restrict__ cursor, int E) {
    if (threadIdx.x != 0) return;
    int run = 0;
    for (int e = 0; e < E; ++e) {
        offsets[e] = run;
        cursor[e] = run;
        run += counts[e];
    }
    offsets[E] = run;
}

extern "C" __global__ void moe_scatter(const float* __restrict__ x, const int* __restrict__ topk_idx,
                                       int* __restrict__ cursor, float* __restrict__ xp, int* __restrict__ pos_of,
                                       int H) {
    __shared__ int pos;
    const int slot = blockIdx.x;  // token * MOE_TOPK + k
    if (threadIdx.x == 0) {
        pos = atomicAdd(&cursor[topk_idx[slot]], 1);
        pos_of[slot] = pos;
    }
    __syncthreads();
    const float* src = x + (size_t)(slot / MOE_TOPK) * H;
    float* dst = xp + (size_t)pos * H;
    for (int h = threadIdx.x; h < H; h += blockDim.x) dst[h] = src[h];
}

extern "C" __global__ void __launch_bounds__(256)
moe_grouped_gemm(const float* __restrict__ xp, const float* __restrict__ W, const int* __restrict__ offsets,
                 float* __restrict__ yp, int H, int F) {
    __shared__ float As[MOE_BK][MOE_BM];
    __shared__ float Bs[MOE_BK][MOE_BN];
    const int e = blockIdx.z;
    const int first = offsets[e], rows = offsets[e + 1] - first;
    const int row0 = blockIdx.y * MOE_BM, col0 = blockIdx.x * MOE_BN;
    if (row0 >= rows) return;  // the grid is sized for the worst case: every row on one expert
    const float* X = xp + (size_t)first * H;
    const float* We = W + (size_t)e * F * H;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < H; k0 += MOE_BK) {
        for (int i = threadIdx.x; i < MOE_BM * MOE_BK; i += 256) {
            const int r = i / MOE_BK, c = i % MOE_BK;
            As[c][r] = (row0 + r < rows && k0 + c < H) ? X[(size_t)(row0 + r) * H + k0 + c] : 0.0f;
            Bs[c][r] = (col0 + r < F && k0 + c < H) ? We[(size_t)(col0 + r) * H + k0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < MOE_BK; ++k)
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(As[k][ty * 4 + i], Bs[k][tx * 4 + j], acc[i][j]);
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        const int r = row0 + ty * 4 + i;
        if (r >= rows) continue;
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx * 4 + j;
            if (c < F) yp[(size_t)(first + r) * F + c] = acc[i][j];
        }
    }
}

extern "C" __global__ void moe_combine(const float* __restrict__ yp, const int* __restrict__ pos_of,
                                       const float* __restrict__ topk_w, float* __restrict__ y, int F) {
    const int t = blockIdx.x;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        float v = 0.0f;
#pragma unroll
        for (int k = 0; k < MOE_TOPK; ++k)
            v += topk_w[t * MOE_TOPK + k] * yp[(size_t)pos_of[t * MOE_TOPK + k] * F + f];
        y[(size_t)t * F + f] = v;
    }
}
