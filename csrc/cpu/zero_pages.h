// Fresh memory for large outputs: huge pages for what will be written whole, and dense
// gradients that are zero except for a few touched rows, without writing the zeros.
//
// A dense [V, D] weight gradient of a sampled or hierarchical loss has a few thousand
// nonzero rows among 10^5 or more. Allocated from the heap it must be zero-filled: every
// page is faulted in, cleared by the kernel and written with zeros again (at V = 10^5,
// D = 256 a 100 MB fill, most of a sampled-softmax backward). Anonymous mmap memory is
// already zero and costs nothing until touched, so only the pages holding touched rows are
// faulted in; the others map the shared zero page when someone reads them.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../common/stable.h"

namespace fastsoftmax {

// A large output is fresh memory that every call faults in page by page; at 4 KiB pages that
// costs about as much as a streaming pass over it (a 105 MB copy into fresh memory took 47
// ms against 21 with huge pages, one core). Asking for transparent huge pages on its 2
// MiB-aligned interior, before anything touches it, makes it a few faults. Only a hint:
// where THP is off or the call fails, nothing changes. For outputs written whole: a huge
// page is cleared whole on its first touch.
inline void advise_huge_pages(void* ptr, int64_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{1} << 21;
  if (bytes < static_cast<int64_t>(2 * kHuge)) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(ptr) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + bytes) & ~(kHuge - 1);
#ifdef MADV_HUGEPAGE
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
}

// An uninitialised CPU tensor that will be written whole, on huge pages where it is large.
inline Tensor empty_for_writing(IntArrayRef sizes, ScalarType dtype) {
  Tensor t = empty(sizes, dtype, Device(torch::headeronly::DeviceType::CPU));
  advise_huge_pages(t.data_ptr(), t.numel() * static_cast<int64_t>(t.element_size()));
  return t;
}

// A [rows, D] CPU tensor of zeros in which only the rows written later cost anything. Small
// tensors (a mapping per call would cost more than the fill), and any platform without
// anonymous mmap, take zeros(). `touched`: how many distinct rows will be written, when
// known. Enough of them to touch most 4 KiB pages (their count times the rows a page holds
// reaches `rows`: 63 % of the pages for rows spread at random) ask for huge pages too, the
// pages then costing fewer faults than the zeros they save.
template <class scalar_t>
Tensor lazy_zeros(int64_t rows, int64_t D, ScalarType dtype, int64_t touched = 0) {
  const Device cpu(torch::headeronly::DeviceType::CPU);
  const size_t bytes = static_cast<size_t>(rows * D) * sizeof(scalar_t);
#if defined(MAP_ANONYMOUS)
  if (bytes >= (size_t(1) << 22)) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      const int64_t rows_per_page = std::max<int64_t>(1, 4096 / (D * int64_t(sizeof(scalar_t))));
      if (touched * rows_per_page >= rows) advise_huge_pages(p, static_cast<int64_t>(bytes));
      return torch::stable::from_blob(p, {rows, D}, {D, 1}, cpu, dtype,
                                      [bytes](void* q) { munmap(q, bytes); });
    }
  }
#endif
  return zeros({rows, D}, dtype, cpu);
}

}  // namespace fastsoftmax
