// saxpy and copy of benchmarks/kernels.py in CUDA C++. A kernelkit kernel returns at once
// in work-items outside its ndrange; here that is the test against n.

extern "C" __global__ void saxpy(float* y, float a, const float* __restrict__ x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

extern "C" __global__ void copy(float* y, const float* __restrict__ x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i];
}
