// The launch limits of an H100/H200-like device (compute capability 9.0), enforced by the
// emulated launches and answered by its occupancy queries.
#pragma once

#include <cstddef>

#include "cuda_emu.h"

namespace fastsoftmax {
namespace emu {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridX = 2147483647u, kMaxGridYZ = 65535;
constexpr size_t kDefaultSmemPerBlock = 48 * 1024;    // without an opt-in
constexpr size_t kMaxSmemPerBlockOptin = 227 * 1024;  // cudaFuncSetAttribute's ceiling
constexpr size_t kSmemPerSm = 228 * 1024;
constexpr size_t kReservedSmemPerBlock = 1024;  // the system's share of every block
constexpr int kMaxThreadsPerSm = 2048;
constexpr int kMaxBlocksPerSm = 32;

// Throws (std::runtime_error) unless a real launch of this configuration would start.
// `static_smem`: the static __shared__ bytes the kernel was seen to use (0 if not known).
void check_launch(const char* name, const void* kernel, dim3 grid, dim3 block,
                  size_t dynamic_smem, size_t static_smem = 0);
// The kernel's ceiling on dynamic shared memory: 48 KiB unless raised by the opt-in.
size_t max_dynamic_smem(const void* kernel);

}  // namespace emu
}  // namespace fastsoftmax
