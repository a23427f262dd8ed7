// Static __shared__ memory per block: see static_shared.h.
#include "static_shared.h"

#include <link.h>

#include <algorithm>
#include <cstring>

namespace fastsoftmax {
namespace emu {
namespace {

struct TlsSearch {
  uintptr_t anchor;
  uintptr_t low = 0;
  size_t size = 0;
};

// The calling thread's instance of the PT_TLS segment that holds `anchor`.
int find_tls(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<TlsSearch*>(data);
  if (info->dlpi_tls_data == nullptr) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_TLS) continue;
    const auto low = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
    if (s->anchor - low < info->dlpi_phdr[i].p_memsz) {
      s->low = low;
      s->size = info->dlpi_phdr[i].p_memsz;
      return 1;
    }
  }
  return 0;
}

}  // namespace

bool StaticShared::begin(const void* anchor) {
  const auto a = reinterpret_cast<uintptr_t>(anchor);
  if (a == 0) {
    low_ = size_ = 0;
  } else if (!contains(a)) {  // the first launch on this OS thread: look it up once
    TlsSearch s{a};
    dl_iterate_phdr(&find_tls, &s);
    low_ = s.low;
    size_ = s.size;
    touched_.assign((size_ + 63) / 64, 0);
    spans_.clear();
  }
  for (const auto& [offset, length] : spans_)
    for (size_t i = offset; i < offset + length; ++i) touched_[i / 64] &= ~(uint64_t{1} << (i % 64));
  spans_.clear();
  total_ = 0;
  return size_ != 0;
}

void StaticShared::touch(uintptr_t address, unsigned bytes) {
  const size_t first = address - low_;
  const size_t end = std::min(first + bytes, size_);
  for (size_t i = first; i < end; ++i) {
    uint64_t& word = touched_[i / 64];
    const uint64_t bit = uint64_t{1} << (i % 64);
    if (word & bit) continue;
    word |= bit;
    // Before the access itself: a read of a byte never written this launch sees poison.
    *reinterpret_cast<unsigned char*>(low_ + i) = kPoison;
    if (!spans_.empty() && spans_.back().first + spans_.back().second == i) {
      ++spans_.back().second;
    } else {
      spans_.emplace_back(i, 1);
    }
    ++total_;
  }
}

void StaticShared::save(std::vector<unsigned char>& image) const {
  image.resize(total_);
  size_t at = 0;
  for (const auto& [offset, length] : spans_) {
    std::memcpy(image.data() + at, reinterpret_cast<const void*>(low_ + offset), length);
    at += length;
  }
}

void StaticShared::restore(const std::vector<unsigned char>& image) {
  size_t at = 0;
  for (const auto& [offset, length] : spans_) {
    auto* live = reinterpret_cast<unsigned char*>(low_ + offset);
    const size_t saved = image.size() > at ? std::min(length, image.size() - at) : 0;
    if (saved != 0) std::memcpy(live, image.data() + at, saved);
    std::memset(live + saved, kPoison, length - saved);
    at += length;
  }
}

}  // namespace emu
}  // namespace fastsoftmax
