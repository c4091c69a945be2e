// Child offsets by a scan: the exclusive prefix sum of the fan-outs (popcounts of the
// signatures) of a step's nodes, read straight from the tree, in one pass with the
// decoupled look-back of Merrill & Garland.
//
// Tiles of SCAN_THREADS * SCAN_ITEMS nodes take their index from an atomic counter (so a
// tile only waits for tiles that have started), publish their aggregate, look back over
// their predecessors' published aggregates / inclusive prefixes, then publish their own
// inclusive prefix. status[k] = flag << 32 | value, flag 1 = aggregate, 2 = inclusive
// prefix; status and the counter (status[tiles]) are zeroed before each scan.

#include "tree.cuh"

#define SCAN_THREADS 256
#define SCAN_ITEMS 8
#define FLAG_AGGREGATE 1ull
#define FLAG_PREFIX 2ull

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
scan_fanout(const u64 *nib, u64 node0, u64 count, u32 *offsets, u64 *status, u64 tiles) {
    __shared__ u32 s_tile;
    __shared__ u32 s_warp[SCAN_THREADS / 32];
    __shared__ u32 s_prefix;
    if (threadIdx.x == 0) s_tile = (u32)atomicAdd(&status[tiles], 1ull);
    __syncthreads();
    u64 tile = s_tile;
    u64 base = tile * (SCAN_THREADS * SCAN_ITEMS) + (u64)threadIdx.x * SCAN_ITEMS;

    u32 f[SCAN_ITEMS];
    u32 sum = 0;
#pragma unroll
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        u64 t = base + i;
        f[i] = t < count ? __popc(signature(nib, node0 + t)) : 0;
        sum += f[i];
    }

    // Block-wide exclusive scan of the per-thread sums: warp shuffles, then the warp totals.
    u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 incl = warp_inclusive_sum(sum);
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        u32 w = lane < SCAN_THREADS / 32 ? s_warp[lane] : 0;
        u32 wi = warp_inclusive_sum(w);
        if (lane < SCAN_THREADS / 32) s_warp[lane] = wi - w;  // exclusive warp offsets
        if (lane == SCAN_THREADS / 32 - 1) {
            // wi is the tile's aggregate: publish it, then look back.
            u32 total = wi;
            u32 prefix = 0;
            if (tile == 0) {
                atomicExch(&status[0], (FLAG_PREFIX << 32) | total);
            } else {
                atomicExch(&status[tile], (FLAG_AGGREGATE << 32) | total);
                __threadfence();
                u64 k = tile - 1;
                while (true) {
                    u64 v = *((volatile u64 *)&status[k]);
                    u64 flag = v >> 32;
                    if (flag == 0) continue;  // predecessor has not published yet
                    prefix += (u32)v;
                    if (flag == FLAG_PREFIX) break;
                    --k;
                }
                __threadfence();
                atomicExch(&status[tile], (FLAG_PREFIX << 32) | (u64)(prefix + total));
            }
            s_prefix = prefix;
        }
    }
    __syncthreads();
    u32 run = s_prefix + s_warp[warp] + (incl - sum);
#pragma unroll
    for (int i = 0; i < SCAN_ITEMS; ++i) {
        u64 t = base + i;
        if (t < count) offsets[t] = run;
        run += f[i];
    }
}

