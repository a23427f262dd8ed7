// What the sampler kernels of sampler.cu and sample_unique.cu share: the table pointers an op
// passes to its kernels (none for the samplers without a table) and the dispatch of the
// sampler kind to a kernel instantiated for it.
#pragma once

#include <type_traits>

#include "../common/philox.h"
#include "../common/stable.h"

namespace fastsoftmax {
namespace {

const float* prob_ptr(const Tensor& t, int64_t kind) {
  return kind == kAlias ? data<float>(t) : nullptr;
}
const int32_t* alias_ptr(const Tensor& t, int64_t kind) {
  return kind == kAlias ? data<int32_t>(t) : nullptr;
}

// Calls launch(std::integral_constant<int64_t, kind>{}): each kind gets a kernel of its own,
// so a draw does not branch on the kind. check_sample_args has refused any other kind.
template <class Launch>
void with_kind(int64_t kind, const Launch& launch) {
  if (kind == kAlias) {
    launch(std::integral_constant<int64_t, kAlias>{});
  } else if (kind == kLogUniform) {
    launch(std::integral_constant<int64_t, kLogUniform>{});
  } else {
    launch(std::integral_constant<int64_t, kUniform>{});
  }
}

}  // namespace
}  // namespace fastsoftmax
