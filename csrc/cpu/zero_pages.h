// Large dense gradients that are zero except for a few touched rows, without writing the
// zeros.
//
// A dense [V, D] weight gradient of a sampled or hierarchical loss has a few thousand
// nonzero rows among 10^5 or more. Allocated from the heap it must be zero-filled: every
// page is faulted in, cleared by the kernel and written with zeros again (at V = 10^5,
// D = 256 a 100 MB fill, most of a sampled-softmax backward). Anonymous mmap memory is
// already zero and costs nothing until touched, so only the pages holding touched rows are
// faulted in; the others map the shared zero page when someone reads them.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#include "../common/stable.h"

namespace fastsoftmax {

// A [rows, D] CPU tensor of zeros in which only the rows written later cost anything. Small
// tensors (a mapping per call would cost more than the fill), and any platform without
// anonymous mmap, take zeros().
template <class scalar_t>
Tensor lazy_zeros(int64_t rows, int64_t D, ScalarType dtype) {
  const Device cpu(torch::headeronly::DeviceType::CPU);
  const size_t bytes = static_cast<size_t>(rows * D) * sizeof(scalar_t);
#if defined(MAP_ANONYMOUS)
  if (bytes >= (size_t(1) << 22)) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
      return torch::stable::from_blob(p, {rows, D}, {D, 1}, cpu, dtype,
                                      [bytes](void* q) { munmap(q, bytes); });
  }
#endif
  return zeros({rows, D}, dtype, cpu);
}

}  // namespace fastsoftmax
