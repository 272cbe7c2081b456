// Reverse-mode adjoints of three benchmark kernels, written by hand as a CUDA C++
// programmer would: one kernel each, the derivative fused into it. They do what
// `autodiff(Reverse, ...)` does after the primal has run: each shadow takes the adjoint
// of its array's initial contents, and the derivative of an Active scalar is left as one
// partial sum (a double) per block, which the caller adds up.
#define GROUP 256  // threads per block

// The sum of each thread's `share` over the block, in thread 0 (a tree in shared memory).
__device__ double block_sum(double share, int local)
{
    __shared__ double scratch[GROUP];
    scratch[local] = share;
    __syncthreads();
    for (int active = GROUP / 2; active > 0; active /= 2) {
        if (local < active)
            scratch[local] += scratch[local + active];
        __syncthreads();
    }
    return scratch[0];
}

// y = sin(x) * x: dx += dy * (cos(x) * x + sin(x)), and dy = 0 (y was overwritten).
extern "C" __global__ void sin_times_x_reverse(float* dy, const float* __restrict__ x,
                                               float* dx, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float xi = x[i];
        dx[i] += dy[i] * (cosf(xi) * xi + sinf(xi));
        dy[i] = 0.0f;
    }
}

// y = a * x + y: dx += a * dy, da = sum(x * dy), and dy stays dy.
extern "C" __global__ void saxpy_reverse(const float* __restrict__ dy, float a,
                                         const float* __restrict__ x, float* dx,
                                         double* da_partial, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int local = threadIdx.x;
    double share = 0.0;
    if (i < n) {
        dx[i] += a * dy[i];
        share = x[i] * dy[i];
    }
    double total = block_sum(share, local);
    if (local == 0)
        da_partial[blockIdx.x] = total;
}

// out = u + alpha * laplacian(u) on the interior (stencil.cu): each interior point's
// adjoint goes back to u's five points (atomically: neighbours share them), into
// dalpha as its share times the laplacian, and dout = 0 there (out was overwritten).
extern "C" __global__ void stencil5_reverse(float* dout, const float* __restrict__ u,
                                            float* du, float alpha, double* dalpha_partial,
                                            int rows, int cols)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int local = threadIdx.y * blockDim.x + threadIdx.x;
    double share = 0.0;
    if (i < rows - 2 && j < cols - 2) {
        int at = (i + 1) * cols + j + 1;
        float g = dout[at];
        dout[at] = 0.0f;
        float laplacian = u[at - cols] + u[at + cols] + u[at - 1] + u[at + 1] - 4.0f * u[at];
        share = g * laplacian;
        atomicAdd(&du[at], g * (1.0f - 4.0f * alpha));
        atomicAdd(&du[at - cols], alpha * g);
        atomicAdd(&du[at + cols], alpha * g);
        atomicAdd(&du[at - 1], alpha * g);
        atomicAdd(&du[at + 1], alpha * g);
    }
    double total = block_sum(share, local);
    if (local == 0)
        dalpha_partial[blockIdx.y * gridDim.x + blockIdx.x] = total;
}
