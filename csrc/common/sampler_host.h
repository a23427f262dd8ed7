// Host-side pieces of the sampler ops shared by the CPU and CUDA implementations:
// argument checks (with messages a user can act on) and the device-generic steps of the
// alias-table build. Device files supply only the loops (see Backend below).
#pragma once

#include <ATen/ATen.h>

#include <tuple>

#include "alias_table.h"

namespace fastsoftmax {

inline void check_seed(const at::Tensor& seed, const at::Tensor& like) {
  TORCH_CHECK_TYPE(seed.scalar_type() == at::kLong && seed.numel() == 1,
                   "seed must be an int64 tensor with one element");
  TORCH_CHECK_VALUE(seed.device() == like.device(), "seed must be on ", like.device(),
                    ", got ", seed.device());
}

inline void check_sample_args(const at::Tensor& prob, const at::Tensor& alias,
                              const at::Tensor& seed, int64_t num_classes, int64_t kind) {
  TORCH_CHECK_VALUE(kind == kAlias || kind == kUniform || kind == kLogUniform,
                    "unknown sampler kind ", kind);
  TORCH_CHECK_VALUE(num_classes > 0, "num_classes must be positive, got ", num_classes);
  check_seed(seed, prob);
  if (kind == kAlias) {
    TORCH_CHECK_TYPE(prob.scalar_type() == at::kFloat && alias.scalar_type() == at::kInt,
                     "alias table must be (float32 prob, int32 alias)");
    TORCH_CHECK_VALUE(prob.dim() == 1 && alias.dim() == 1 && prob.numel() == num_classes &&
                          alias.numel() == num_classes,
                      "alias table must be two 1-D tensors of num_classes = ", num_classes,
                      " entries");
    TORCH_CHECK_VALUE(prob.is_contiguous() && alias.is_contiguous(),
                      "alias table must be contiguous");
    TORCH_CHECK_VALUE(alias.device() == prob.device(), "alias table halves on different devices");
  }
}

// Unique sampling gives up after kMaxUniqueTries draws, on both devices, with this error.
inline void check_unique_found(bool found, int64_t num_sampled) {
  TORCH_CHECK_VALUE(found, "could not find ", num_sampled, " distinct candidates in ",
                    kMaxUniqueTries,
                    " draws: too few classes have non-negligible probability");
}

// Raises ValueError/TypeError for weights no distribution can be built from. One host
// synchronisation on CUDA, at construction time only.
inline void check_weights(const at::Tensor& weights) {
  TORCH_CHECK_TYPE(at::isFloatingType(weights.scalar_type()),
                   "weights must be a floating-point tensor, got ", weights.scalar_type());
  TORCH_CHECK_VALUE(weights.dim() == 1, "weights must be 1-D, got shape ", weights.sizes());
  TORCH_CHECK_VALUE(weights.numel() > 0, "weights must not be empty");
  TORCH_CHECK_VALUE(weights.numel() < (int64_t{1} << 31),
                    "at most 2^31 - 1 classes are supported, got ", weights.numel());
  const at::Tensor flags =
      at::stack({at::isfinite(weights).logical_not().any(), (weights < 0).any(),
                 (weights > 0).any().logical_not()})
          .cpu();
  const bool* f = flags.data_ptr<bool>();
  TORCH_CHECK_VALUE(!f[0], "weights must be finite (found NaN or infinity)");
  TORCH_CHECK_VALUE(!f[1], "weights must be non-negative (found a negative weight)");
  TORCH_CHECK_VALUE(!f[2], "weights must not all be zero");
}

// Backend provides, on its device:
//   static at::Tensor fixed_scan(const at::Tensor& x, at::Tensor* exclusive);
//       fixed-order float64 scan (see alias_table.h); returns the total as a 0-dim tensor
//   static void build(scaled, is_light, light_start, light_end, heavy_end, lights_through,
//                     prob, alias);
//       compacts lights and heavies and writes every class's table entry (AliasSweep)
template <class Backend>
std::tuple<at::Tensor, at::Tensor> build_alias_table(const at::Tensor& weights) {
  check_weights(weights);
  const int64_t n = weights.numel();
  // Divide by the max first so the sum can neither overflow nor underflow; elementwise IEEE
  // operations give the same bits on every device.
  at::Tensor w = weights.to(at::kDouble).contiguous();
  w = w / w.max();
  const at::Tensor total = Backend::fixed_scan(w, nullptr);
  const at::Tensor scaled = w * (static_cast<double>(n) / total);

  const at::Tensor is_light = scaled < 1.0;
  const at::Tensor deficit = at::where(is_light, 1.0 - scaled, at::zeros_like(scaled));
  const at::Tensor surplus = at::where(is_light, at::zeros_like(scaled), scaled - 1.0);
  at::Tensor light_start = at::empty_like(deficit), heavy_start = at::empty_like(surplus);
  Backend::fixed_scan(deficit, &light_start);
  Backend::fixed_scan(surplus, &heavy_start);
  // A fold is monotone inside its chunk, but a chunk's offset comes from a separate fold of
  // the chunk totals, so a prefix can dip by an ulp at a chunk boundary. The donor searches
  // need monotone prefixes (the CPU walks cursors from a per-block binary search, CUDA
  // searches every element: on a dip they disagree, and the CPU with the thread count), so
  // take running maxima. A maximum is exact in any order: same bits on every device.
  light_start = std::get<0>(at::cummax(light_start, 0));
  // Inclusive prefix = exclusive + own term: the very addition the fold performed.
  const at::Tensor light_end = light_start + deficit;
  const at::Tensor heavy_end = std::get<0>(at::cummax(heavy_start + surplus, 0));
  const at::Tensor lights_through = at::cumsum(is_light, 0, at::kLong);  // exact integers

  at::Tensor prob = at::empty({n}, weights.options().dtype(at::kFloat));
  at::Tensor alias = at::empty({n}, weights.options().dtype(at::kInt));
  Backend::build(scaled, is_light, light_start, light_end, heavy_end, lights_through, prob,
                 alias);
  return {prob, alias};
}

}  // namespace fastsoftmax
