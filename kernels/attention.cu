// Attention forward, flash style: O = softmax(Q K^T * scale [+ causal mask]) V for each of
// BH (batch x head) slices of [S, D] fp32 tensors, without materialising the S x S scores.
// One thread owns one query row; key/value tiles of ATT_BKV rows are staged in shared memory
// and folded in with an online softmax (running max and sum, rescaled once per tile).
// Templated on the head dimension and on causality: the recipe names the instantiation.
#ifndef INFINITY  // NVRTC has no math.h
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef ATT_BQ
#define ATT_BQ 64
#endif
#ifndef ATT_BKV
#define ATT_BKV 16
#endif

template <int D, bool CAUSAL>
__global__ void __launch_bounds__(ATT_BQ)
attention_fwd(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
              float* __restrict__ O, int S, float scale) {
    __shared__ float Ks[ATT_BKV][D];
    __shared__ float Vs[ATT_BKV][D];
    const size_t base = (size_t)blockIdx.y * S * D;
    const int qi = blockIdx.x * ATT_BQ + threadIdx.x;
    const bool live = qi < S;
    float q[D], acc[D];
#pragma unroll
    for (int d = 0; d < D; ++d) {
        q[d] = live ? Q[base + (size_t)qi * D + d] * scale : 0.0f;
        acc[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int kv_end = CAUSAL ? min(S, (int)(blockIdx.x + 1) * ATT_BQ) : S;
    for (int k0 = 0; k0 < kv_end; k0 += ATT_BKV) {
        for (int i = threadIdx.x; i < ATT_BKV * D; i += ATT_BQ) {
            const int r = i / D, c = i % D, kr = k0 + r;
            Ks[r][c] = kr < S ? K[base + (size_t)kr * D + c] : 0.0f;
            Vs[r][c] = kr < S ? V[base + (size_t)kr * D + c] : 0.0f;
        }
        __syncthreads();
        if (live) {
            float s[ATT_BKV];
            float tile_max = -INFINITY;
#pragma unroll
            for (int j = 0; j < ATT_BKV; ++j) {
                const int kj = k0 + j;
                float dot = 0.0f;
#pragma unroll
                for (int d = 0; d < D; ++d) dot = fmaf(q[d], Ks[j][d], dot);
                const bool masked = kj >= S || (CAUSAL && kj > qi);
                s[j] = masked ? -INFINITY : dot;
                tile_max = fmaxf(tile_max, s[j]);
            }
            const float m_new = fmaxf(m, tile_max);
            if (m_new != -INFINITY) {  // a tile wholly masked for this row changes nothing
                const float corr = __expf(m - m_new);
                l *= corr;
#pragma unroll
                for (int d = 0; d < D; ++d) acc[d] *= corr;
#pragma unroll
                for (int j = 0; j < ATT_BKV; ++j) {
                    const float p = __expf(s[j] - m_new);
                    l += p;
#pragma unroll
                    for (int d = 0; d < D; ++d) acc[d] = fmaf(p, Vs[j][d], acc[d]);
                }
                m = m_new;
            }
        }
        __syncthreads();
    }
    if (live) {
        const float inv = 1.0f / l;
#pragma unroll
        for (int d = 0; d < D; ++d) O[base + (size_t)qi * D + d] = acc[d] * inv;
    }
}
