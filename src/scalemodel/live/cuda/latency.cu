// Pointer-chasing latency probe: one thread follows a chain of dependent loads through an array
// whose size picks the memory level (L1-sized, L2-sized, larger than L2 -> DRAM). The host builds
// the chain (a random cyclic permutation with a stride of at least one cache line) so hardware
// prefetching cannot help. Cycles per load come from clock64() around the chase.
extern "C" __global__ void chase_global(const unsigned int *next, int steps,
                                        unsigned long long *cycles, unsigned int *sink) {
    unsigned int p = 0;
    for (int i = 0; i < 64; ++i) p = next[p];  // warm the TLB and caches on the path
    long long t0 = clock64();
    for (int i = 0; i < steps; ++i) p = __ldcg(&next[p]);  // cache-global: skip L1 for L2/DRAM
    long long t1 = clock64();
    cycles[0] = (unsigned long long)(t1 - t0);
    sink[0] = p;
}

extern "C" __global__ void chase_l1(const unsigned int *next, int steps,
                                    unsigned long long *cycles, unsigned int *sink) {
    unsigned int p = 0;
    for (int i = 0; i < 1024; ++i) p = next[p];
    long long t0 = clock64();
    for (int i = 0; i < steps; ++i) p = __ldca(&next[p]);  // cache at all levels: L1 hits
    long long t1 = clock64();
    cycles[0] = (unsigned long long)(t1 - t0);
    sink[0] = p;
}

extern "C" __global__ void chase_shared(const unsigned int *next, int n, int steps,
                                        unsigned long long *cycles, unsigned int *sink) {
    __shared__ unsigned int s[4096];
    for (int i = threadIdx.x; i < n && i < 4096; i += blockDim.x) s[i] = next[i];
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned int p = 0;
    long long t0 = clock64();
    for (int i = 0; i < steps; ++i) p = s[p];
    long long t1 = clock64();
    cycles[0] = (unsigned long long)(t1 - t0);
    sink[0] = p;
}
