// Shared definitions of the k2rpq kernels. NVRTC compiles each .cu file with this text
// prepended (the host concatenates them), so no include path is needed.

typedef unsigned long long u64;
typedef unsigned int u32;

// A frontier slot whose node was pruned by a masked traversal.
#define PRUNED 0xFFFFFFFFFFFFFFFFull

// Everything one traversal step needs. The host fills it per step (tile); the layout is
// mirrored by `StepParams` in src/engine/gpu/launch.rs: every field is 8 bytes except
// the four trailing u32, so both sides agree without padding rules. (A 136-byte variant
// with two more u32 made NVRTC address the parameter block through a register in the
// leaf kernels, and the bit-packed ones measured ~20 % slower: docs/BENCHMARKS.md,
// session 10.)
struct StepParams {
    const u64 *nib;        // signatures, 16 per word
    const u64 *ranks;      // sampled directory: rank every 2^sample_log2 nodes
    const u64 *codes_in;   // Morton codes of this step's nodes (at codes_in[src_off + t])
    u64 *codes_out;        // children codes (expand steps), at codes_out[fc - child0]
    const u32 *offsets;    // per-step exclusive scan of fan-outs, or null: use the directory
    const void *x;         // input vector / batch / bit batch
    void *y;               // output
    const u32 *pyramid;    // masked traversal: active input blocks per level, or null
    u64 node0;             // global index of the step's first node
    u64 count;             // nodes in the step
    u64 child0;            // global index of the first child of node0
    u64 src_off;           // position of node0's code in codes_in
    u64 width;             // leaf steps: batch width B (semiring) or words W (bits);
                           // expand steps: levels expanded at once (1-3)
    u64 inputs;            // input indices x holds (right: columns, left: rows)
    u32 sample_log2;
    u32 level;             // level of the step's nodes
    u32 height;            // tree levels h
    unsigned short dir;    // 0: right (y = A x), 1: left (y^T = x^T A)
    unsigned short narrow; // 1: codes_in holds 32-bit codes (a host-expanded top level of at
                           // most 16 levels, read by expand steps only; see code_at)
};

// Code i of codes_in: 32 bits wide when the step reads a narrow host-expanded top level,
// which halves that level's resident bytes (src/engine/gpu/device_tree.rs, `TopLevel`).
__device__ __forceinline__ u64 code_at(const StepParams &p, u64 i) {
    return p.narrow ? (u64)((const u32 *)p.codes_in)[i] : p.codes_in[i];
}

__device__ __forceinline__ u32 signature(const u64 *nib, u64 j) {
    return (u32)((nib[j >> 4] >> ((j & 15) * 4)) & 15);
}

// Signatures of nodes j, j + 1, .. (n ≤ 16 of them, n ≥ 1), node j in the low nibble;
// the bits above the n-th nibble are whatever follows in the words. One or two loads.
__device__ __forceinline__ u64 signature_run(const u64 *nib, u64 j, u32 n) {
    u64 w = j >> 4;
    u32 sh = (u32)(j & 15) * 4;
    u64 run = nib[w] >> sh;
    if (sh + 4 * n > 64) run |= nib[w + 1] << (64 - sh);
    return run;
}

// rank(j): set bits in the signatures of nodes 0..j, from the sampled directory plus the
// popcount of at most 2^sample_log2 / 16 words.
__device__ __forceinline__ u64 dir_rank(const u64 *nib, const u64 *ranks, u32 sample_log2, u64 j) {
    u64 k = j >> sample_log2;
    u64 r = ranks[k];
    u64 w = (k << sample_log2) >> 4;
    u64 end = j >> 4;
    for (; w < end; ++w) r += __popcll(nib[w]);
    u32 rem = (u32)(j & 15);
    if (rem) r += __popcll(nib[end] & ((1ull << (4 * rem)) - 1));
    return r;
}

// Global index of the first child of the step's node t (global index node0 + t).
__device__ __forceinline__ u64 first_child(const StepParams &p, u64 t) {
    if (p.offsets) return p.child0 + p.offsets[t];
    return 1 + dir_rank(p.nib, p.ranks, p.sample_log2, p.node0 + t);
}

// rank(j) computed by a whole warp (all 32 lanes, the same j): lane i popcounts signature
// words i, i + 32, ... of the sample block, and a warp sum adds them (all lanes get it).
__device__ __forceinline__ u64 warp_dir_rank(const StepParams &p, u64 j, u32 lane) {
    u64 k = j >> p.sample_log2;
    u64 w0 = (k << p.sample_log2) >> 4;
    u64 end = j >> 4;
    u32 c = 0;
    for (u64 w = w0 + lane; w < end; w += 32) c += __popcll(p.nib[w]);
    u32 rem = (u32)(j & 15);
    if (lane == 0 && rem) c += __popcll(p.nib[end] & ((1ull << (4 * rem)) - 1));
    c = __reduce_add_sync(0xffffffffu, c);
    return p.ranks[k] + c;
}

// Inclusive sum of v over lanes 0 .. this lane of the warp. All 32 lanes must call it.
__device__ __forceinline__ u32 warp_inclusive_sum(u32 v) {
    const u32 lane = threadIdx.x & 31;
#pragma unroll
    for (u32 o = 1; o < 32; o <<= 1) {
        u32 u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    return v;
}

// Gathers the even bits of x (the column of a Morton code; x >> 1 gives the row).
__device__ __forceinline__ u32 compact_bits(u64 x) {
    x &= 0x5555555555555555ull;
    x = (x | (x >> 1)) & 0x3333333333333333ull;
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFull;
    return (u32)x;
}

// Swaps the bits of x under mask m with those s places above them (a delta swap).
__device__ __forceinline__ u32 delta_swap(u32 x, u32 m, u32 s) {
    u32 t = (x ^ (x >> s)) & m;
    return x ^ t ^ (t << s);
}

// The row (odd bits) and column (even bits) of a Morton code, both at once: an outer
// unshuffle of each 32-bit half (H. S. Warren, Hacker's Delight, 7-2) puts a half's
// column bits in its low 16 bits and its row bits in its high 16, and two byte permutes
// join the halves. 32-bit operations throughout, against two 64-bit `compact_bits`.
__device__ __forceinline__ void morton_row_col(u64 code, u32 &row, u32 &col) {
    u32 h[2] = {(u32)code, (u32)(code >> 32)};
#pragma unroll
    for (u32 i = 0; i < 2; ++i) {
        u32 x = delta_swap(h[i], 0x22222222u, 1);
        x = delta_swap(x, 0x0C0C0C0Cu, 2);
        x = delta_swap(x, 0x00F000F0u, 4);
        h[i] = delta_swap(x, 0x0000FF00u, 8);
    }
    col = __byte_perm(h[0], h[1], 0x5410);
    row = __byte_perm(h[0], h[1], 0x7632);
}

// Words of pyramid level g for a tree of height h: one bit per block of 2^g input indices.
__device__ __forceinline__ u64 pyramid_words(u32 h, u32 g) {
    u64 bits = 1ull << (h - g);
    return (bits + 31) >> 5;
}

__device__ __forceinline__ u64 pyramid_offset(u32 h, u32 g) {
    u64 off = 0;
    for (u32 k = 0; k < g; ++k) off += pyramid_words(h, k);
    return off;
}

// Whether input block `idx` of a node at `level` (its input range, right: columns
// idx·2^g .., left: rows, g = height − level) meets an active input row.
__device__ __forceinline__ bool input_active(const StepParams &p, u32 idx, u32 level) {
    u32 g = p.height - level;
    const u32 *lvl = p.pyramid + pyramid_offset(p.height, g);
    return (lvl[idx >> 5] >> (idx & 31)) & 1;
}

// Whether the node of Morton code `code` at `level` has an input range that meets an
// active input row.
__device__ __forceinline__ bool block_active(const StepParams &p, u64 code, u32 level) {
    return input_active(p, p.dir == 0 ? compact_bits(code) : compact_bits(code >> 1), level);
}

// Whether the node of Morton code `code` at `level` takes part in the step: `alive` (its
// parent is live, or for a step's own nodes, its code is not PRUNED), and in a masked
// traversal its input range meets an active input.
__device__ __forceinline__ bool live(const StepParams &p, bool alive, u64 code, u32 level) {
    return alive && (!p.pyramid || block_active(p, code, level));
}

// Overlapped launches (programmatic dependent launch, sm_90 and later). The host may
// launch a traversal step so that it starts while the previous kernel of the stream is
// still running: such a kernel reads only the resident tree (signatures, directory, top
// codes, cached frontier) before `wait_prerequisites()`, and touches x, y and the scratch
// only after it, which returns once the previous kernels have all completed and their writes
// are visible (each overlapped kernel waits for its own predecessor, so the chain is
// complete). `start_dependents()` lets the next kernel's blocks be scheduled early. Both
// are no-ops for a kernel launched the usual way and on older architectures.
__device__ __forceinline__ void start_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_prerequisites() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ u64 global_thread() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ u64 thread_stride() {
    return (u64)gridDim.x * blockDim.x;
}

// The chunks of 32 consecutive items (nodes) that this warp takes in a row, [c, cend):
// the step's chunks split evenly over the grid's warps (the host launches a lane per few
// items: `launch::chunked_config`, `GpuOptions::warp_chunks`). The descendants of
// consecutive chunks are consecutive too, so a warp ranks the directory for its first
// chunk only and carries the counts on from there (`warp_level`).
__device__ __forceinline__ void warp_chunks(u64 count, u64 &c, u64 &cend) {
    const u64 chunks = (count + 31) >> 5;
    const u64 warps = thread_stride() >> 5;
    const u64 per = (chunks + warps - 1) / warps;
    c = (global_thread() >> 5) * per;
    cend = min(c + per, chunks);
}

// One level of a warp's descent: lane i has n children, the warp's first is `first` (a
// global index on the level below). Returns lane i's first child and advances `first` to
// the first child of the warp's next chunk.
__device__ __forceinline__ u64 warp_level(u64 &first, u32 n) {
    const u32 incl = warp_inclusive_sum(n);
    const u64 mine = first + incl - n;
    first += __shfl_sync(0xffffffffu, incl, 31);
    return mine;
}
