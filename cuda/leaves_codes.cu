// Leaf steps over the codes of a descent (or of a cached frontier of codes): a thread per
// node of the last internal level (and vector) visits the node's leaves in place and
// updates y. The paper's kernel (`leaves`: one atomic per cell), the `rows` family
// (include/leaf_rows.cuh) and the `window` kernel; which one runs is the host's choice
// (kernels.def).

#include "leaf_rows.cuh"

// One cell's update of the paper's kernel: entry `in` of x (vector b) through the cell
// into entry `out` of y; an input that contributes nothing is skipped.
template <typename Op>
__device__ __forceinline__ void cell_update(const StepParams &p, u64 in, u64 out, u64 b) {
    typename Op::Raw v = ((const typename Op::Raw *)p.x)[in * p.width + b];
    if (!Op::zero_input(v)) Op::update(p, out * p.width + b, Op::convert(v));
}

// The paper's kernel (`cells`): thread (t, b) owns vector b (or word b) of node t and
// visits the node's leaves in place (leaf signatures are contiguous from first_child(t)),
// one atomic per cell.
template <typename Op>
__device__ __forceinline__ void leaves(const StepParams &p) {
    start_dependents();
    wait_prerequisites();
    u64 total = p.count * p.width;
    for (u64 g = global_thread(); g < total; g += thread_stride()) {
        u64 t = g / p.width;
        u64 b = g - t * p.width;
        u64 code = p.codes_in[p.src_off + t];
        if (!live(p, code != PRUNED, code, p.level)) continue;
        u32 s = signature(p.nib, p.node0 + t);
        u64 leaf = first_child(p, t);
#pragma unroll
        for (u32 q = 0; q < 4; ++q) {
            if (s & (1u << q)) {
                u32 lam = signature(p.nib, leaf++);
                u64 base = ((code << 2) | q) << 2;
                u64 r0 = compact_bits(base >> 1);
                u64 c0 = compact_bits(base);
#pragma unroll
                for (u32 e = 0; e < 4; ++e) {
                    if (lam & (1u << e)) {
                        u64 r = r0 + (e >> 1), c = c0 + (e & 1);
                        if (p.dir == 0) cell_update<Op>(p, c, r, b);
                        else cell_update<Op>(p, r, c, b);
                    }
                }
            }
        }
    }
}

// The `rows` family over codes: plain, with warp ranks, with warp aggregation.
template <typename Op>
__device__ __forceinline__ void leaves_rows(const StepParams &p) { rows_step<Op, false, false, false>(p); }
template <typename Op>
__device__ __forceinline__ void leaves_wrank(const StepParams &p) { rows_step<Op, true, false, false>(p); }
template <typename Op>
__device__ __forceinline__ void leaves_agg(const StepParams &p) { rows_step<Op, true, true, false>(p); }

// The `window` kernel: a CTA takes a chunk of WINDOW_ITEMS x blockDim consecutive items
// (nodes x vectors) of the step. In Morton order such a chunk covers a few aligned squares
// of the matrix, so its output entries (right: rows, left: columns) mostly fall in a short
// range: the CTA accumulates them in a shared-memory window that starts at the chunk's
// lowest output index (semiring add, min or OR), sends an output beyond the window to y
// directly, and at the end flushes the window with one global update per touched entry.
// Where `rows` issues one global atomic per non-empty block row, this issues one per
// distinct output entry per chunk: 2.8-3x fewer on cnr-2000 and a 200M-edge web graph,
// yet it ran slower than `rows` there: the global atomics were not what bounds `rows`. It
// stays as a measured baseline.
// Blocks are 1-D with a multiple of 32 threads; the host launches at most one block per
// chunk, and the block loops over chunks with the grid stride.
#define WINDOW_ITEMS 2
#define WINDOW_BYTES 16384

__device__ __forceinline__ u64 output_block(const StepParams &p, u64 code) {
    return p.dir == 0 ? code_row0(code) : code_col0(code);
}

template <typename Op>
__device__ __forceinline__ void leaves_window(const StepParams &p) {
    typedef typename Op::T T;
    __shared__ u64 raw[WINDOW_BYTES / 8];
    __shared__ u32 red[2][32];
    T *win = (T *)raw;
    const u32 entries = WINDOW_BYTES / sizeof(T);
    // Output indices the window holds (each `width` entries); 0 when one output index
    // needs more entries than the window has: every update then goes to y.
    const u32 width = p.width < entries ? (u32)p.width : entries + 1;
    const u32 span_max = entries / width;
    const u64 total = p.count * p.width;
    const u64 chunk = (u64)WINDOW_ITEMS * blockDim.x;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    start_dependents();
    wait_prerequisites();
    // The window is the identity at the start of every chunk: cleared once here, and the
    // flush puts back the identity in each entry it reads.
    for (u32 e = threadIdx.x; e < entries; e += blockDim.x) win[e] = Op::identity();
    for (u64 c0 = (u64)blockIdx.x * chunk; c0 < total; c0 += (u64)gridDim.x * chunk) {
        // The chunk's lowest and highest output blocks (output indices fit u32: the
        // matrix side does; 0xFFFFFFFF, not a multiple of 4, marks "none").
        u64 code[WINDOW_ITEMS];
        u32 lo = 0xFFFFFFFFu, hi = 0;
#pragma unroll
        for (u32 j = 0; j < WINDOW_ITEMS; ++j) {
            u64 g = c0 + (u64)j * blockDim.x + threadIdx.x;
            code[j] = g < total ? p.codes_in[p.src_off + g / p.width] : PRUNED;
            if (code[j] != PRUNED) {
                u32 o0 = (u32)output_block(p, code[j]);
                lo = min(lo, o0);
                hi = max(hi, o0);
            }
        }
        lo = __reduce_min_sync(FULL_MASK, lo);
        hi = __reduce_max_sync(FULL_MASK, hi);
        if (lane == 0) {
            red[0][warp] = lo;
            red[1][warp] = hi;
        }
        // Also orders the previous chunk's flush before this chunk's updates.
        __syncthreads();
        for (u32 w = 0; w < warps; ++w) {
            lo = min(lo, red[0][w]);
            hi = max(hi, red[1][w]);
        }
        // Window: output indices base .. base + span (all of the chunk's when they fit).
        const u64 base = lo;
        const u32 span = lo == 0xFFFFFFFFu ? 0u : (u32)min((u64)hi + 4 - lo, (u64)span_max);
#pragma unroll
        for (u32 j = 0; j < WINDOW_ITEMS; ++j) {
            u64 g = c0 + (u64)j * blockDim.x + threadIdx.x;
            u64 cd = code[j];
            if (!live(p, cd != PRUNED, cd, p.level)) continue;
            u64 t = g / p.width;
            u64 b = g - t * p.width;
            u32 s = signature(p.nib, p.node0 + t);
            u32 bm = block_bitmap(p.nib, s, first_child(p, t));
            if (!bm) continue;
            u64 r0 = code_row0(cd);
            u64 c0b = code_col0(cd);
            u64 o0 = p.dir == 0 ? r0 : c0b;
            T acc[4];
            block_sums<Op>(p, bm, r0, c0b, b, acc);
#pragma unroll
            for (u32 i = 0; i < 4; ++i) {
                if (Op::is_identity(acc[i])) continue;
                u64 rel = o0 + i - base;
                if (rel < span) Op::local(&win[(u32)rel * width + (u32)b], acc[i]);
                else send_update<Op>(p, (o0 + i) * p.width + b, acc[i]);
            }
        }
        __syncthreads();
        const u32 used = span * width;
        for (u32 e = threadIdx.x; e < used; e += blockDim.x) {
            T v = win[e];
            if (!Op::is_identity(v)) {
                win[e] = Op::identity();
                u32 r = width == 1 ? e : e / width;
                send_update<Op>(p, (base + r) * p.width + e - r * width, v);
            }
        }
    }
}

#define K2RPQ_IN_leaves_codes K2RPQ_FAMILIES
#include "kernels.cuh"
