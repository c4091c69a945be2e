// The semirings of the engine (the paper's Table 1, exact counts and bit-packed Boolean
// batches), one definition each, for every kernel that applies one. Every edge has the
// weight 1 of its semiring; the host's definitions (src/engine/semiring.rs) are the CPU
// engine's, and a product's `y` starts at the semiring's zero there.
//
// A semiring here is its accumulator:
//   T, identity()        the element of y and the additive identity;
//   Raw, convert(v)      the element of x and the contribution of an entry through an edge;
//   zero_input(v)        whether entry v contributes nothing, so that a kernel updating y
//                        cell by cell skips it;
//   combine(a, b)        the addition;
//   is_identity(a)       whether a sum changes no entry of y when added to it;
//   update(p, at, v)     the atomic addition of v to element `at` of y (output index x
//                        width + vector);
//   local(w, v)          the same into a shared-memory entry (the `window` kernel);
//   IDEMPOTENT           y only grows: a kernel may read y first (`seen`, through
//                        LOAD_SEEN) and skip an update that `changes` nothing, and a skip
//                        is never wrong, whatever other threads do meanwhile;
//   QUAD_UPDATE          update_quad(p, at, v) adds four consecutive entries at once.
#ifndef K2RPQ_SEMIRINGS_CUH
#define K2RPQ_SEMIRINGS_CUH

#include "params.cuh"

// How idempotent semirings read y before an update: through L1 (`ld.global.ca`). A line
// in L1 may be stale (other SMs' atomics go to L2), but y only grows, so a stale value
// can only cost an atomic that a fresh one would have skipped, never skip a needed one.
// Hot output entries (a web graph's navigation pages) are then read from L1: bit-packed
// left products took 12 % (a 200M-edge web graph) and 25 % (cnr-2000) less time than
// with reads from L2.
#define LOAD_SEEN __ldca

// (+, ×) over f32.
struct PlusTimes {
    typedef float T;
    typedef float Raw;
    __device__ __forceinline__ static T identity() { return 0.0f; }
    __device__ __forceinline__ static T convert(Raw v) { return v; }
    __device__ __forceinline__ static bool zero_input(Raw v) { return v == 0.0f; }
    __device__ __forceinline__ static T combine(T a, T b) { return a + b; }
    // Adding a zero sum changes nothing.
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0.0f; }
    static const bool IDEMPOTENT = false;
    __device__ __forceinline__ static T seen(const StepParams &, u64) { return identity(); }
    __device__ __forceinline__ static bool changes(T, T) { return true; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) {
        atomicAdd(&((float *)p.y)[at], v);
    }
    __device__ __forceinline__ static void local(T *w, T v) { atomicAdd(w, v); }
    // The four entries at..at + 3 of a single vector's y (at a multiple of 4: 16-byte
    // aligned, inside y's allocation, which the host pads to whole quads) in one vector
    // atomic from sm_90 on (`REDG.E.ADD.F32x4`): one request instead of up to four.
    // Adding 0 to an entry without cells leaves it as it is: y starts at +0, so it never
    // holds -0, and only a subnormal sum would change (float atomics flush those to zero,
    // the scalar ones too). Octet steps took 13-27 % less time.
    static const bool QUAD_UPDATE = true;
    __device__ __forceinline__ static void update_quad(const StepParams &p, u64 at, const T v[4]) {
#if __CUDA_ARCH__ >= 900
        atomicAdd((float4 *)((float *)p.y + at), make_float4(v[0], v[1], v[2], v[3]));
#else
#pragma unroll
        for (u32 i = 0; i < 4; ++i)
            if (!is_identity(v[i])) update(p, at + i, v[i]);
#endif
    }
};

// (+, ×) over u32, wrapping: exact path counts.
struct Counting {
    typedef u32 T;
    typedef u32 Raw;
    __device__ __forceinline__ static T identity() { return 0u; }
    __device__ __forceinline__ static T convert(Raw v) { return v; }
    __device__ __forceinline__ static bool zero_input(Raw v) { return v == 0u; }
    __device__ __forceinline__ static T combine(T a, T b) { return a + b; }
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0u; }
    static const bool IDEMPOTENT = false;
    __device__ __forceinline__ static T seen(const StepParams &, u64) { return identity(); }
    __device__ __forceinline__ static bool changes(T, T) { return true; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) {
        atomicAdd(&((u32 *)p.y)[at], v);
    }
    __device__ __forceinline__ static void local(T *w, T v) { atomicAdd(w, v); }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};

// (∨, ∧) over {0, 1} held in u32: any non-zero input counts as 1.
struct Boolean {
    typedef u32 T;
    typedef u32 Raw;
    __device__ __forceinline__ static T identity() { return 0u; }
    __device__ __forceinline__ static T convert(Raw v) { return v != 0u ? 1u : 0u; }
    __device__ __forceinline__ static bool zero_input(Raw v) { return v == 0u; }
    __device__ __forceinline__ static T combine(T a, T b) { return a | b; }
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0u; }
    static const bool IDEMPOTENT = true;
    __device__ __forceinline__ static T seen(const StepParams &p, u64 at) { return LOAD_SEEN(&((const u32 *)p.y)[at]); }
    __device__ __forceinline__ static bool changes(T old, T) { return old == 0u; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T) {
        atomicMax(&((u32 *)p.y)[at], 1u);
    }
    // Every writer stores the same 1: racing plain stores are enough.
    __device__ __forceinline__ static void local(T *w, T v) { *(volatile T *)w = 1u; }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};

// (min, +) over f32 with unit edges: inputs are non-negative or +inf, so their bit
// patterns order like unsigned integers and the integer atomicMin is the float minimum.
// The combine is the unsigned minimum of the bit patterns, exactly what that atomicMin
// computes, so a kernel that combines in registers gives the result of one that updates
// cell by cell for every input (even a negative or NaN one).
struct Tropical {
    typedef float T;
    typedef float Raw;
    __device__ __forceinline__ static T identity() { return __int_as_float(0x7f800000); }
    __device__ __forceinline__ static T convert(Raw v) {
        return v != __int_as_float(0x7f800000) ? 1.0f + v : identity();
    }
    __device__ __forceinline__ static bool zero_input(Raw v) { return v == __int_as_float(0x7f800000); }
    __device__ __forceinline__ static T combine(T a, T b) {
        return __uint_as_float(min(__float_as_uint(a), __float_as_uint(b)));
    }
    __device__ __forceinline__ static bool is_identity(T a) {
        return __float_as_uint(a) >= 0x7f800000u;
    }
    static const bool IDEMPOTENT = true;
    __device__ __forceinline__ static T seen(const StepParams &p, u64 at) {
        return __uint_as_float(LOAD_SEEN(&((const u32 *)p.y)[at]));
    }
    __device__ __forceinline__ static bool changes(T old, T v) { return __float_as_uint(old) > __float_as_uint(v); }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) {
        atomicMin(&((u32 *)p.y)[at], __float_as_uint(v));
    }
    __device__ __forceinline__ static void local(T *w, T v) {
        if (changes(__uint_as_float(*(volatile u32 *)w), v)) atomicMin((u32 *)w, __float_as_uint(v));
    }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};

// Bit-packed Boolean batches: 64 sources per u64 word, OR-ed.
struct Bits {
    typedef u64 T;
    typedef u64 Raw;
    __device__ __forceinline__ static T identity() { return 0ull; }
    __device__ __forceinline__ static T convert(Raw v) { return v; }
    __device__ __forceinline__ static bool zero_input(Raw v) { return v == 0ull; }
    __device__ __forceinline__ static T combine(T a, T b) { return a | b; }
    __device__ __forceinline__ static bool is_identity(T a) { return a == 0ull; }
    static const bool IDEMPOTENT = true;
    __device__ __forceinline__ static T seen(const StepParams &p, u64 at) { return LOAD_SEEN(&((const u64 *)p.y)[at]); }
    __device__ __forceinline__ static bool changes(T old, T v) { return (old | v) != old; }
    __device__ __forceinline__ static void update(const StepParams &p, u64 at, T v) { atomicOr(&((u64 *)p.y)[at], v); }
    __device__ __forceinline__ static void local(T *w, T v) {
        if (changes(*(volatile T *)w, v)) atomicOr(w, v);
    }
    static const bool QUAD_UPDATE = false;  // no vector atomic for this element
};

#endif
