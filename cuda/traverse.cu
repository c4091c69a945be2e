// Level-synchronous k²-tree traversal (the paper's Algorithm 1): one kernel expands a tile
// of an internal level into the next frontier; the last internal level visits its leaves
// in place and applies the semiring's atomic to y.

// Expand: node t of the step writes the codes of its children, in level order, at
// codes_out[first_child(t) - child0]. A masked traversal writes PRUNED for children
// whose input range meets no active input (and for all children of a pruned node), so
// the positions stay those of the static tile plan.
extern "C" __global__ void expand(StepParams p) {
    for (u64 t = global_thread(); t < p.count; t += thread_stride()) {
        u64 code = p.codes_in[p.src_off + t];
        u32 s = signature(p.nib, p.node0 + t);
        u64 out = first_child(p, t) - p.child0;
        bool alive = code != PRUNED && (!p.pyramid || block_active(p, code, p.level));
#pragma unroll
        for (u32 b = 0; b < 4; ++b) {
            if (s & (1u << b)) {
                u64 child = (code << 2) | b;
                if (!alive || (p.pyramid && !block_active(p, child, p.level + 1))) child = PRUNED;
                p.codes_out[out++] = child;
            }
        }
    }
}

// The semirings of Table 1 as one `apply(y, i_in, i_out, b)` each.
struct PlusTimesOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        float v = ((const float *)p.x)[in * p.width + b];
        if (v != 0.0f) atomicAdd(&((float *)p.y)[out * p.width + b], v);
    }
};
struct CountingOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        u32 v = ((const u32 *)p.x)[in * p.width + b];
        if (v != 0) atomicAdd(&((u32 *)p.y)[out * p.width + b], v);
    }
};
struct BooleanOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        u32 v = ((const u32 *)p.x)[in * p.width + b];
        if (v != 0) atomicMax(&((u32 *)p.y)[out * p.width + b], 1u);
    }
};
// (min, +) with unit edges: inputs are non-negative or +inf, so their bit patterns order
// like unsigned integers and the integer atomicMin is the float minimum.
struct TropicalOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        float v = ((const float *)p.x)[in * p.width + b];
        if (v != __int_as_float(0x7f800000)) {
            atomicMin(&((u32 *)p.y)[out * p.width + b], __float_as_uint(1.0f + v));
        }
    }
};
// Bit-packed Boolean batches: word b of row `in`, OR-ed into word b of row `out`.
struct BitsOp {
    __device__ __forceinline__ static void apply(const StepParams &p, u64 in, u64 out, u64 b) {
        u64 v = ((const u64 *)p.x)[in * p.width + b];
        if (v != 0) atomicOr(&((u64 *)p.y)[out * p.width + b], v);
    }
};

// Last internal level: thread (t, b) owns vector b (or word b) of node t and visits the
// node's leaves in place: leaf signatures are contiguous from first_child(t).
template <typename Op>
__device__ __forceinline__ void leaves(const StepParams &p) {
    u64 total = p.count * p.width;
    for (u64 g = global_thread(); g < total; g += thread_stride()) {
        u64 t = g / p.width;
        u64 b = g - t * p.width;
        u64 code = p.codes_in[p.src_off + t];
        if (code == PRUNED) continue;
        if (p.pyramid && !block_active(p, code, p.level)) continue;
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
                        if (p.dir == 0) Op::apply(p, c, r, b);
                        else Op::apply(p, r, c, b);
                    }
                }
            }
        }
    }
}

extern "C" __global__ void leaves_plus_times(StepParams p) { leaves<PlusTimesOp>(p); }
extern "C" __global__ void leaves_counting(StepParams p) { leaves<CountingOp>(p); }
extern "C" __global__ void leaves_boolean(StepParams p) { leaves<BooleanOp>(p); }
extern "C" __global__ void leaves_tropical(StepParams p) { leaves<TropicalOp>(p); }
extern "C" __global__ void leaves_bits(StepParams p) { leaves<BitsOp>(p); }
