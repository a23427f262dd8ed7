// Stand-in for the header that CUDA builds of torch generate; CPU wheels lack it. Used only
// by tools/compile_cuda.sh to compile CUDA sources against CPU-only torch headers.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
