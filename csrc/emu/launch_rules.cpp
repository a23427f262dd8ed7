// Launch limits, the dynamic shared memory opt-in and the occupancy calculator.
#include "launch_rules.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace fastsoftmax {
namespace emu {
namespace {

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes): a
// process-wide attribute of the function, as on a device.
std::mutex g_optin_mutex;
std::unordered_map<const void*, size_t>& optins() {
  static auto* map = new std::unordered_map<const void*, size_t>();
  return *map;
}

[[noreturn]] void invalid(const std::string& message) {
  throw std::runtime_error("invalid launch: " + message);
}

}  // namespace

size_t max_dynamic_smem(const void* kernel) {
  const std::lock_guard<std::mutex> lock(g_optin_mutex);
  const auto it = optins().find(kernel);
  return it == optins().end() ? kDefaultSmemPerBlock : it->second;
}

cudaError_t set_max_dynamic_smem(const void* kernel, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxSmemPerBlockOptin) return cudaErrorInvalidValue;
  const std::lock_guard<std::mutex> lock(g_optin_mutex);
  optins()[kernel] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

void check_launch(const char* name, const void* kernel, dim3 grid, dim3 block,
                  size_t dynamic_smem, size_t static_smem) {
  std::ostringstream s;
  s << name << " with grid (" << grid.x << "," << grid.y << "," << grid.z << "), block ("
    << block.x << "," << block.y << "," << block.z << ")";
  const std::string what = s.str();
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads < 1 || threads > kMaxThreadsPerBlock || block.z > kMaxBlockDimZ)
    invalid(what + ": a block has 1 to 1024 threads, z at most 64");
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > kMaxGridX || grid.y > kMaxGridYZ ||
      grid.z > kMaxGridYZ)
    invalid(what + ": grid x is 1 to 2^31 - 1, y and z 1 to 65535");
  const size_t limit = max_dynamic_smem(kernel);
  if (dynamic_smem > limit) {
    invalid(what + " asks for " + std::to_string(dynamic_smem) +
            " bytes of dynamic shared memory, above the kernel's " + std::to_string(limit) +
            (limit == kDefaultSmemPerBlock
                 ? " (48 KiB without the opt-in cudaFuncSetAttribute("
                   "cudaFuncAttributeMaxDynamicSharedMemorySize))"
                 : " (its opt-in)"));
  }
  if (static_smem > kDefaultSmemPerBlock || static_smem + dynamic_smem > kMaxSmemPerBlockOptin)
    invalid(what + " uses " + std::to_string(static_smem) + " bytes of static and " +
            std::to_string(dynamic_smem) + " of dynamic shared memory: static is at most 48 "
            "KiB, both together at most 227 KiB");
}

cudaError_t occupancy(int* blocks, const void* kernel, int threads, size_t dynamic_smem) {
  if (blocks == nullptr || threads <= 0) return cudaErrorInvalidValue;
  *blocks = 0;
  // A configuration that cannot launch has no resident blocks (CUDA answers 0, no error).
  if (threads > static_cast<int>(kMaxThreadsPerBlock) || dynamic_smem > max_dynamic_smem(kernel))
    return cudaSuccess;
  const int warps = (threads + 31) / 32;
  const int by_threads = kMaxThreadsPerSm / (warps * 32);
  const size_t per_block = dynamic_smem + kReservedSmemPerBlock;
  const int by_smem = static_cast<int>(kSmemPerSm / per_block);
  *blocks = std::min({kMaxBlocksPerSm, by_threads, by_smem});
  return cudaSuccess;
}

int resident_blocks_per_sm(const void* kernel, int threads, size_t dynamic_smem) {
  int blocks = 0;
  TORCH_CHECK(occupancy(&blocks, kernel, threads, dynamic_smem) == cudaSuccess,
              "CUDA emulator: occupancy query with ", threads, " threads");
  // fastsoftmax's CUDA build reads 0 as 1; a query whose answer is 0 asked about a launch
  // that cannot happen, so the grid it sizes is sized for something else.
  TORCH_CHECK(blocks > 0, "CUDA emulator: an occupancy query asks about ", threads,
              " threads and ", dynamic_smem, " bytes of dynamic shared memory per block, which "
              "cannot launch (the kernel's limit is ", max_dynamic_smem(kernel),
              " bytes of dynamic shared memory and 1024 threads): ask about the launch made");
  return blocks;
}

}  // namespace emu
}  // namespace fastsoftmax
