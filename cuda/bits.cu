// Element-wise kernels: bit-batch operations of the fixed-point loop, the fill of a
// product's output with its semiring's zero, and the active-block pyramid of masked
// traversals.

#include "base.cuh"

// dst |= src over n words.
extern "C" __global__ void bits_or(u64 *dst, const u64 *src, u64 n) {
    for (u64 i = global_thread(); i < n; i += thread_stride()) dst[i] |= src[i];
}

// One fixed-point step: next &= ~visited; visited |= next; *count += popcount(next).
extern "C" __global__ void bits_advance(u64 *next, u64 *visited, u64 n, u64 *count) {
    u64 local = 0;
    for (u64 i = global_thread(); i < n; i += thread_stride()) {
        u64 v = visited[i];
        u64 x = next[i] & ~v;
        next[i] = x;
        visited[i] = v | x;
        local += __popcll(x);
    }
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
    __shared__ u64 s_sum[32];
    u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) s_sum[warp] = local;
    __syncthreads();
    if (warp == 0) {
        u64 v = lane < (blockDim.x >> 5) ? s_sum[lane] : 0;
#pragma unroll
        for (u32 o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0 && v) atomicAdd(count, v);
    }
}

// y[i] = value for n 32-bit words (the tropical zero is +inf, not all-zero bits).
// The first kernel of a product: the traversal step after it may start early (it waits
// before touching y).
extern "C" __global__ void fill_u32(u32 *y, u32 value, u64 n) {
    start_dependents();
    for (u64 i = global_thread(); i < n; i += thread_stride()) y[i] = value;
}

// Pyramid level 0 of a masked traversal: bit r set when input row r (< rows) of the bit
// batch x (W words per row) has a set bit. One thread per 32 rows.
extern "C" __global__ void pyramid_base(const u64 *x, u64 rows, u64 words, u32 *level0, u64 level0_words) {
    for (u64 w = global_thread(); w < level0_words; w += thread_stride()) {
        u32 bits = 0;
        for (u32 k = 0; k < 32; ++k) {
            u64 r = w * 32 + k;
            if (r >= rows) break;
            u64 any = 0;
            for (u64 j = 0; j < words; ++j) any |= x[r * words + j];
            if (any) bits |= 1u << k;
        }
        level0[w] = bits;
    }
}

// Pyramid level g from level g - 1: bit i = bit 2i | bit 2i + 1 below.
extern "C" __global__ void pyramid_up(const u32 *below, u64 below_words, u32 *above, u64 above_words) {
    for (u64 w = global_thread(); w < above_words; w += thread_stride()) {
        u32 out = 0;
        for (u32 half = 0; half < 2; ++half) {
            u64 src = 2 * w + half;
            u32 a = src < below_words ? below[src] : 0;
            u32 t = (a | (a >> 1)) & 0x55555555u;  // OR of each pair, at the even bits
            t = (t | (t >> 1)) & 0x33333333u;
            t = (t | (t >> 2)) & 0x0F0F0F0Fu;
            t = (t | (t >> 4)) & 0x00FF00FFu;
            t = (t | (t >> 8)) & 0x0000FFFFu;
            out |= t << (16 * half);
        }
        above[w] = out;
    }
}

