// SL_HD marks small functions shared verbatim by CPU code and CUDA kernels.
#pragma once
#ifdef __CUDACC__
#define SL_HD __host__ __device__
#else
#define SL_HD
#endif
