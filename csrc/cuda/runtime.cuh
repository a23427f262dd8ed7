// The only door from csrc/cuda/*.cu to the CUDA runtime and torch's CUDA state. Kernel files launch
// with FS_LAUNCH, guard devices with DeviceGuard, register with FS_CUDA_IMPL and declare
// dynamic shared memory with FS_DYNAMIC_SHARED; nothing else of theirs names the runtime.
//
// Built two ways from the same sources:
//  - by nvcc (the product): the macros expand to <<<...>>>, the stable ABI's device guard
//    and current stream, and STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CUDA, ...);
//  - by the host compiler with FASTSOFTMAX_EMULATE_CUDA (tests only, never shipped): every
//    kernel runs on the CPU through csrc/emu/cuda_emu.h, and the ops are registered as
//    fastsoftmax_emu::* on CPU tensors (see tests/cuda_emulator.py).
#pragma once

#include "../common/stable.h"

#ifdef FASTSOFTMAX_EMULATE_CUDA
#include "../emu/cuda_emu.h"
#else
#include <cuda_runtime.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>
#endif

namespace fastsoftmax {
namespace cuda {

#ifdef FASTSOFTMAX_EMULATE_CUDA
using DeviceGuard = emu::DeviceGuard;
inline cudaStream_t current_stream() { return emu::current_stream(); }
inline int multiprocessor_count() { return emu::multiprocessor_count(); }
template <class Kernel>
int resident_blocks_per_sm(Kernel kernel, int threads, size_t smem) {
  return emu::resident_blocks_per_sm(emu::kernel_id(kernel), threads, smem);
}
#else
// Makes the device of `device` (a stable Device) current for the guard's lifetime.
class DeviceGuard {
 public:
  template <class D>
  explicit DeviceGuard(const D& device) : guard_(static_cast<int32_t>(device.index())) {}

 private:
  torch::stable::accelerator::DeviceGuard guard_;
};
inline cudaStream_t current_stream() {
  int device = 0;
  STD_CUDA_CHECK(cudaGetDevice(&device));
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  return static_cast<cudaStream_t>(stream);
}
inline int multiprocessor_count() {
  int device = 0, sms = 1;
  STD_CUDA_CHECK(cudaGetDevice(&device));
  STD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}
// Blocks of `kernel` at `threads` threads and `smem` dynamic shared bytes that fit on one SM
// at once (registers, shared memory and thread limits), at least 1.
template <class Kernel>
int resident_blocks_per_sm(Kernel kernel, int threads, size_t smem) {
  int blocks = 1;
  STD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  return blocks > 0 ? blocks : 1;
}
#endif

}  // namespace cuda
}  // namespace fastsoftmax

// FS_LAUNCH(kernel, grid, block, dynamic_smem_bytes, args...): launch on the current stream
// and check the launch. A kernel name with template commas goes in parentheses:
// FS_LAUNCH((k<float, double>), grid, block, 0, p).
#ifdef FASTSOFTMAX_EMULATE_CUDA
#define FS_LAUNCH(kernel, grid, block, smem, ...) \
  ::fastsoftmax::emu::launch(#kernel, kernel, grid, block, smem, __VA_ARGS__)
#define FS_CUDA_IMPL(m) STABLE_TORCH_LIBRARY_IMPL(fastsoftmax_emu, CPU, m)
#define FS_DYNAMIC_SHARED(type, name) \
  type* name = ::fastsoftmax::emu::dynamic_shared<type>()
#else
#define FS_LAUNCH(kernel, grid, block, smem, ...)                                         \
  do {                                                                                   \
    kernel<<<grid, block, smem, ::fastsoftmax::cuda::current_stream()>>>(__VA_ARGS__);   \
    STD_CUDA_KERNEL_LAUNCH_CHECK();                                                      \
  } while (0)
#define FS_CUDA_IMPL(m) STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CUDA, m)
// 16-byte aligned so that it may hold doubles and vector types.
#define FS_DYNAMIC_SHARED(type, name)                    \
  extern __shared__ __align__(16) unsigned char name##_raw[]; \
  type* name = reinterpret_cast<type*>(name##_raw)
#endif
