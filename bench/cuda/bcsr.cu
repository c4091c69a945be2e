// Boolean CSR (bCSR) baseline kernels: row pointers and column indices, no values.
// Every stored cell has weight 1, so the products below are plus-times over f32 with
// unit weights - the same result as cuSPARSE CSR with all values 1.0f and as the
// k2-tree engines' PlusTimes products. Compiled at run time by NVRTC (sm_90).
//
// Each kernel exists for 32-bit and 64-bit row pointers (P = unsigned int or
// unsigned long long); the host picks 64-bit only when nnz does not fit in 32 bits.
// Batches are n x B row-major: entry (i, b) at i * B + b.

template <typename P>
__device__ void right_thread(const P *row_ptr, const unsigned int *col, const float *x,
                             float *y, unsigned long long rows) {
    unsigned long long r = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (P k = row_ptr[r]; k < row_ptr[r + 1]; ++k) acc += __ldg(&x[col[k]]);
    y[r] = acc;
}

// One warp per row: lanes stride over the row's columns, then a shuffle reduction.
template <typename P>
__device__ void right_warp(const P *row_ptr, const unsigned int *col, const float *x,
                           float *y, unsigned long long rows) {
    unsigned long long w = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / 32;
    unsigned int lane = threadIdx.x % 32;
    if (w >= rows) return;
    float acc = 0.0f;
    for (P k = row_ptr[w] + lane; k < row_ptr[w + 1]; k += 32) acc += __ldg(&x[col[k]]);
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) y[w] = acc;
}

// Left product: row r scatters x[r] into y[c] for each of its columns (y zeroed first).
template <typename P>
__device__ void left_thread(const P *row_ptr, const unsigned int *col, const float *x,
                            float *y, unsigned long long rows) {
    unsigned long long r = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float v = x[r];
    if (v == 0.0f) return;
    for (P k = row_ptr[r]; k < row_ptr[r + 1]; ++k) atomicAdd(&y[col[k]], v);
}

template <typename P>
__device__ void left_warp(const P *row_ptr, const unsigned int *col, const float *x,
                          float *y, unsigned long long rows) {
    unsigned long long w = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / 32;
    unsigned int lane = threadIdx.x % 32;
    if (w >= rows) return;
    float v = x[w];
    if (v == 0.0f) return;
    for (P k = row_ptr[w] + lane; k < row_ptr[w + 1]; k += 32) atomicAdd(&y[col[k]], v);
}

// Batches: one thread per (row, vector); consecutive threads read consecutive vectors
// of the same column, so the gathers are coalesced for B >= 32.
template <typename P>
__device__ void right_batch(const P *row_ptr, const unsigned int *col, const float *x,
                            float *y, unsigned long long rows, unsigned int batch) {
    unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (t >= rows * batch) return;
    unsigned long long r = t / batch;
    unsigned int b = t % batch;
    float acc = 0.0f;
    for (P k = row_ptr[r]; k < row_ptr[r + 1]; ++k)
        acc += __ldg(&x[(unsigned long long)col[k] * batch + b]);
    y[t] = acc;
}

template <typename P>
__device__ void left_batch(const P *row_ptr, const unsigned int *col, const float *x,
                           float *y, unsigned long long rows, unsigned int batch) {
    unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (t >= rows * batch) return;
    unsigned long long r = t / batch;
    unsigned int b = t % batch;
    float v = x[t];
    if (v == 0.0f) return;
    for (P k = row_ptr[r]; k < row_ptr[r + 1]; ++k)
        atomicAdd(&y[(unsigned long long)col[k] * batch + b], v);
}

#define BCSR_SINGLE(NAME, P, SUFFIX)                                                          \
    extern "C" __global__ void bcsr_##NAME##_##SUFFIX(const P *row_ptr,                      \
                                                      const unsigned int *col,               \
                                                      const float *x, float *y,              \
                                                      unsigned long long rows) {             \
        NAME<P>(row_ptr, col, x, y, rows);                                                    \
    }
#define BCSR_BATCH(NAME, P, SUFFIX)                                                           \
    extern "C" __global__ void bcsr_##NAME##_##SUFFIX(const P *row_ptr,                      \
                                                      const unsigned int *col,               \
                                                      const float *x, float *y,              \
                                                      unsigned long long rows,               \
                                                      unsigned int batch) {                  \
        NAME<P>(row_ptr, col, x, y, rows, batch);                                             \
    }

BCSR_SINGLE(right_thread, unsigned int, p32)
BCSR_SINGLE(right_thread, unsigned long long, p64)
BCSR_SINGLE(right_warp, unsigned int, p32)
BCSR_SINGLE(right_warp, unsigned long long, p64)
BCSR_SINGLE(left_thread, unsigned int, p32)
BCSR_SINGLE(left_thread, unsigned long long, p64)
BCSR_SINGLE(left_warp, unsigned int, p32)
BCSR_SINGLE(left_warp, unsigned long long, p64)
BCSR_BATCH(right_batch, unsigned int, p32)
BCSR_BATCH(right_batch, unsigned long long, p64)
BCSR_BATCH(left_batch, unsigned int, p32)
BCSR_BATCH(left_batch, unsigned long long, p64)
