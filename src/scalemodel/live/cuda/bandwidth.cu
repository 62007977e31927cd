// Bandwidth probes: a grid-stride vector copy (16-byte accesses) and a read-only sum, sized far
// beyond L2 so the traffic goes to DRAM. Achieved bytes/s = bytes moved / kernel time.
extern "C" __global__ void copy_vec4(float4 *out, const float4 *in, long long n4) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) out[i] = in[i];
}

extern "C" __global__ void read_vec4(const float4 *in, long long n4, float *sink) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    float acc = 0.f;
    for (; i < n4; i += stride) { float4 v = in[i]; acc += v.x + v.y + v.z + v.w; }
    if (acc == 1234.5f) sink[0] = acc;  // keeps the loads alive, almost never writes
}
