#pragma once
// MT_HD marks math that a CUDA kernel and its CPU reference share, so the CPU tests check the
// very arithmetic the GPU runs.
#ifdef __CUDACC__
#define MT_HD __host__ __device__
#else
#define MT_HD
#endif
