// Types, thread indices and overlapped launches: what every kernel file uses.
#ifndef K2RPQ_BASE_CUH
#define K2RPQ_BASE_CUH

typedef unsigned long long u64;
typedef unsigned int u32;

// Every lane of a warp.
#define FULL_MASK 0xffffffffu

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

// This thread's index in the grid, and the grid's threads (the stride of grid-stride loops).
__device__ __forceinline__ u64 global_thread() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ u64 thread_stride() {
    return (u64)gridDim.x * blockDim.x;
}

#endif
