// Divergence probes: the same arithmetic under branches that do or do not split warps.
// Each thread runs `iters` dependent FMAs on one side of the branch and a different chain on the
// other; time per launch shows whether the warp had to run both sides.
extern "C" __global__ void branch_warp_uniform(float *out, int iters) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float a = t * 1e-7f, b = 1.0001f;
    if ((threadIdx.x / 32) % 2 == 0) { for (int i = 0; i < iters; ++i) a = a * b + 1e-7f; }
    else { for (int i = 0; i < iters; ++i) a = a * b - 1e-7f; }
    out[t] = a;
}

extern "C" __global__ void branch_first_warp(float *out, int iters) {
    // threadIdx.x < 32: in a 64-thread block warp 0 takes one side, warp 1 the other: no split
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float a = t * 1e-7f, b = 1.0001f;
    if (threadIdx.x < 32) { for (int i = 0; i < iters; ++i) a = a * b + 1e-7f; }
    else { for (int i = 0; i < iters; ++i) a = a * b - 1e-7f; }
    out[t] = a;
}

extern "C" __global__ void branch_odd_even(float *out, int iters) {
    // threadIdx.x % 2: every warp holds both sides and runs them one after the other
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float a = t * 1e-7f, b = 1.0001f;
    if (threadIdx.x % 2 == 0) { for (int i = 0; i < iters; ++i) a = a * b + 1e-7f; }
    else { for (int i = 0; i < iters; ++i) a = a * b - 1e-7f; }
    out[t] = a;
}

extern "C" __global__ void loop_lane_trips(float *out, int iters) {
    // data-dependent trip count: lane k runs (k % 4 + 1) * iters / 4 steps; the warp runs the max
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int trips = ((threadIdx.x % 4) + 1) * (iters / 4);
    float a = t * 1e-7f, b = 1.0001f;
    for (int i = 0; i < trips; ++i) a = a * b + 1e-7f;
    out[t] = a;
}
