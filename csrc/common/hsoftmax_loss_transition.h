// TRANSITION, to delete when the loss helpers' stable port (loss_host.h, loss_cuda.cuh)
// merges: hsoftmax_host.h then includes "loss_host.h" in place of this file.
//
// The hierarchical softmax calls three loss helpers with stable tensors:
//   loss::check_dense(const Tensor& input, const Tensor& weight)
//   loss::check_ids_tensor(const Tensor& ids, const char* name, const Tensor& like)
//   loss::scatter_pairs_sorted_cuda<scalar_t>(const PairGroups<scalar_t, opmath_t<scalar_t>>&,
//                                             const Tensor& keys, int64_t V, int64_t D,
//                                             bool sparse, ScalarType dtype)
// Until the stable versions land, this file stands in for them on top of the ATen ones, so
// that the hierarchical softmax builds and is tested alone. Nothing else includes it.
#pragma once

#include <ATen/OpMathType.h>  // which the ATen loss_host.h expects included before it

#include "loss_host.h"
#include "stable.h"

namespace fastsoftmax {
namespace loss {

// The same checks and messages as loss_host.h's check_dense (bias-less) and check_ids_tensor.
inline void check_dense(const Tensor& input, const Tensor& weight) {
  FS_CHECK_TYPE(is_floating(input.scalar_type()),
                "input must be a floating-point tensor, got ", input.scalar_type());
  FS_CHECK_TYPE(weight.scalar_type() == input.scalar_type(),
                "weight and input must have the same dtype, got weight ", weight.scalar_type(),
                " and input ", input.scalar_type(),
                " (cast one of them, or run under torch.autocast)");
  FS_CHECK_VALUE(weight.device() == input.device(), "weight is on ", weight.device(),
                 " but input is on ", input.device());
  FS_CHECK_VALUE(input.dim() == 2, "input must be 2-D [N, D], got shape ", input.sizes());
  FS_CHECK_VALUE(weight.dim() == 2, "weight must be 2-D [V, D], got shape ", weight.sizes());
  FS_CHECK_VALUE(weight.size(1) == input.size(1), "weight has ", weight.size(1),
                 " features per class but input has ", input.size(1));
  FS_CHECK_VALUE(weight.size(0) > 0, "weight must have at least one class (row)");
}

inline void check_ids_tensor(const Tensor& ids, const char* name, const Tensor& like) {
  FS_CHECK_TYPE(ids.scalar_type() == kLong, name, " must be an int64 tensor, got ",
                ids.scalar_type());
  FS_CHECK_VALUE(ids.device() == like.device(), name, " is on ", ids.device(),
                 " but input is on ", like.device());
}

}  // namespace loss
}  // namespace fastsoftmax

#if defined(FASTSOFTMAX_EMULATE_CUDA) || defined(__CUDACC__)
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "../cuda/loss_cuda.cuh"

namespace fastsoftmax {
namespace loss {

// The stable signature of the sorted scatter, run by the ATen one on views of the same
// tensors (the .cu files still include ATen through runtime.cuh).
template <class scalar_t>
std::tuple<Tensor, Tensor> scatter_pairs_sorted_cuda(
    const PairGroups<scalar_t, opmath_t<scalar_t>>& groups, const Tensor& keys, int64_t V,
    int64_t D, bool sparse, ScalarType dtype) {
  const at::Tensor& aten_keys = *torch::aot_inductor::tensor_handle_to_tensor_pointer(keys.get());
  const auto out = scatter_pairs_sorted_cuda<scalar_t>(
      groups, aten_keys, V, D, sparse,
      aten_keys.options().dtype(static_cast<c10::ScalarType>(dtype)));
  auto stable = [](const at::Tensor& t) {
    return Tensor(torch::aot_inductor::new_tensor_handle(at::Tensor(t)));
  };
  return {stable(std::get<0>(out)), stable(std::get<1>(out))};
}

}  // namespace loss
}  // namespace fastsoftmax
#endif
