// matmul_tiled of benchmarks/kernels.py in CUDA C++: C (n x m) = A (n x k) @ B (k x m),
// row-major, through TILE x TILE tiles in shared memory; sizes are multiples of TILE.
#define TILE 16

extern "C" __global__ void matmul_tiled(float* c, const float* __restrict__ a,
                                        const float* __restrict__ b, int k, int m)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int li = threadIdx.y;
    int lj = threadIdx.x;
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE];
    float acc = 0.0f;
    for (int start = 0; start < k; start += TILE) {
        a_tile[li][lj] = a[i * k + start + lj];
        b_tile[li][lj] = b[(start + li) * m + j];
        __syncthreads();
        for (int p = 0; p < TILE; p++)
            acc += a_tile[li][p] * b_tile[p][lj];
        __syncthreads();
    }
    c[i * m + j] = acc;
}
