// stencil5 of benchmarks/kernels.py in CUDA C++: one explicit heat step on the interior of
// a rows x cols array (row-major); the grid covers the interior, (rows - 2) x (cols - 2),
// with threadIdx.x along the rows' elements.

extern "C" __global__ void stencil5(float* out, const float* __restrict__ u, int rows,
                                    int cols, float alpha)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows - 2 || j >= cols - 2)
        return;
    int r = i + 1;
    int c = j + 1;
    float laplacian = u[(r - 1) * cols + c] + u[(r + 1) * cols + c] + u[r * cols + c - 1]
                      + u[r * cols + c + 1] - 4.0f * u[r * cols + c];
    out[r * cols + c] = u[r * cols + c] + alpha * laplacian;
}
