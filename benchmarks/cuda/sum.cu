// The sums of benchmarks/kernels.py (group_sums, tree_sums), line for line in CUDA C++.
// Indices are int, as CUDA C++ is written; kernelkit's are 64-bit.
#define REDUCTION_GROUP 256  // work-group size of the sums; a power of two

// scratch[0] = the sum of scratch (one element per thread of the block), by a tree: each
// step, the first half of the threads add the second half's elements.
__device__ void add_up_in_place(float* scratch, int local)
{
    __syncthreads();
    for (int active = REDUCTION_GROUP / 2; active > 0; active /= 2) {
        if (local < active)
            scratch[local] += scratch[local + active];
        __syncthreads();
    }
}

// Each thread sums x[i], x[i + stride], ... (the grid-stride loop), then the block adds
// up its threads' sums; thread 0 writes partial[group].
extern "C" __global__ void group_sums(float* partial, const float* __restrict__ x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int local = threadIdx.x;
    int group = blockIdx.x;
    int stride = gridDim.x * blockDim.x;
    float acc = 0.0f;
    for (int p = i; p < n; p += stride)
        acc += x[p];
    __shared__ float scratch[REDUCTION_GROUP];
    scratch[local] = acc;
    add_up_in_place(scratch, local);
    if (local == 0)
        partial[group] = scratch[0];
}

// One element per thread, a tree in shared memory; thread 0 writes its block's sum.
extern "C" __global__ void tree_sums(float* partial, const float* __restrict__ x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int local = threadIdx.x;
    int group = blockIdx.x;
    __shared__ float scratch[REDUCTION_GROUP];
    float value = 0.0f;
    if (i < n)
        value = x[i];
    scratch[local] = value;
    add_up_in_place(scratch, local);
    if (local == 0)
        partial[group] = scratch[0];
}
