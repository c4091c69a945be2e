// The parameter block of a traversal step.
#ifndef K2RPQ_PARAMS_CUH
#define K2RPQ_PARAMS_CUH

#include "base.cuh"

// Everything one traversal step needs. The host fills it per step (tile); the layout is
// mirrored by `StepParams` in src/engine/gpu/launch.rs: every field is 8 bytes except
// the trailing three u32 and two u16, so both sides agree without padding rules, in 128
// bytes. (A 136-byte block, two u32 more, made NVRTC address the parameter block through
// a register in the leaf kernels, and the bit-packed ones ran ~20 % slower.)
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

#endif
