// Static __shared__ memory per block. The kernels' __shared__ variables are thread_local in
// their library, so all blocks of a launch (run by one OS thread) share one copy; the blocks
// resident at once take turns with it. The instrumentation reports every byte of it a kernel
// touches: the first touch in a launch poisons the byte (0xCD, as shared memory starts
// undefined), and when another block's threads run, the touched bytes are swapped with that
// block's saved image (bytes it never saved are poison).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace fastsoftmax {
namespace emu {

constexpr unsigned char kPoison = 0xCD;

class StaticShared {
 public:
  // A new launch; `anchor` is a thread_local of the kernels' library. Returns false when its
  // thread-local block could not be found (then nothing is tracked).
  bool begin(const void* anchor);
  bool contains(uintptr_t address) const { return address - low_ < size_; }
  void touch(uintptr_t address, unsigned bytes);
  void save(std::vector<unsigned char>& image) const;
  void restore(const std::vector<unsigned char>& image);
  size_t touched_bytes() const { return total_; }

 private:
  uintptr_t low_ = 0;
  size_t size_ = 0;
  std::vector<uint64_t> touched_;                   // a bit per byte of the block
  std::vector<std::pair<size_t, size_t>> spans_;    // (offset, length), first touch order
  size_t total_ = 0;
};

}  // namespace emu
}  // namespace fastsoftmax
