// 16-bit GEMM on the tensor cores through mma.sync.m16n8k16 (fp32 accumulate):
// C[M,N] (fp32) = A[M,K] * B[N,K]^T, A and B row-major fp16 or bf16 (the "TN" layout of a
// linear layer's weight). 64x64x32 block tile, 4 warps of 32x32, operands staged in shared
// memory with SMEM_PAD halves of padding per row. With the default padding the fragment
// loads are free of bank conflicts; SMEM_PAD 0 makes them 4-way conflicts. K must be a
// multiple of 32; M and N may be anything.
//
// A kernel library under test can retune it: define ATTRIB_TILE_HEADER as a quoted header
// name and put the header on the include path (`include_dirs` in the recipe).
#ifdef ATTRIB_TILE_HEADER
#include ATTRIB_TILE_HEADER
#endif
#ifndef SMEM_PAD
#define SMEM_PAD 8
#endif
#if defined(GEMM_BF16)
#define MMA_AB "bf16"
#else
#define MMA_AB "f16"
#endif

#define MBM 64
#define MBN 64
#define MBK 32
#define LDS (MBK + SMEM_PAD)  // halves per shared-memory row

typedef unsigned short half_bits;  // raw fp16/bf16 storage: no cuda_fp16.h needed under NVRTC

__device__ __forceinline__ void mma_16816(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                          unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_AB "." MMA_AB ".f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(128)
gemm_mma(const half_bits* __restrict__ A, const half_bits* __restrict__ B, float* __restrict__ C, int M, int N,
         int K) {
    __shared__ __align__(16) half_bits As[MBM * LDS];
    __shared__ __align__(16) half_bits Bs[MBN * LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;  // mma fragment coordinates
    const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
    const int row0 = blockIdx.y * MBM, col0 = blockIdx.x * MBN;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    const unsigned* As32 = reinterpret_cast<const unsigned*>(As);
    const unsigned* Bs32 = reinterpret_cast<const unsigned*>(Bs);
    const int ld32 = LDS / 2;
    for (int k0 = 0; k0 < K; k0 += MBK) {
        // 64 rows x 32 halves = 256 chunks of 8 halves per operand; 128 threads take 2 each.
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int idx = tid + j * 128, r = idx >> 2, c8 = (idx & 3) * 8;
            uint4 va = make_uint4(0, 0, 0, 0), vb = make_uint4(0, 0, 0, 0);
            if (row0 + r < M) va = *reinterpret_cast<const uint4*>(A + (size_t)(row0 + r) * K + k0 + c8);
            if (col0 + r < N) vb = *reinterpret_cast<const uint4*>(B + (size_t)(col0 + r) * K + k0 + c8);
            *reinterpret_cast<uint4*>(As + r * LDS + c8) = va;
            *reinterpret_cast<uint4*>(Bs + r * LDS + c8) = vb;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MBK; kk += 16) {
            const int kw = kk / 2 + t;
            unsigned a[2][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int r = wm + i * 16 + g;
                a[i][0] = As32[r * ld32 + kw];
                a[i][1] = As32[(r + 8) * ld32 + kw];
                a[i][2] = As32[r * ld32 + kw + 4];
                a[i][3] = As32[(r + 8) * ld32 + kw + 4];
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = wn + j * 8 + g;
                b[j][0] = Bs32[n * ld32 + kw];
                b[j][1] = Bs32[n * ld32 + kw + 4];
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_16816(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3], b[j][0], b[j][1]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r = row0 + wm + i * 16 + g, c = col0 + wn + j * 8 + 2 * t;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int rr = r + h * 8;
                if (rr >= M) continue;
                if (c < N) C[(size_t)rr * N + c] = acc[i][j][2 * h];
                if (c + 1 < N) C[(size_t)rr * N + c + 1] = acc[i][j][2 * h + 1];
            }
        }
}
