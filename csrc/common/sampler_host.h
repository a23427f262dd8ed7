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

// In-place running maximum of a fixed-order prefix (alias_table.h). Inside a kScanChunk
// chunk the fold only adds non-negative terms, so it never decreases; but a chunk's offset
// comes from a separate fold of the chunk totals, so the prefix can dip by an ulp at a chunk
// boundary, and the donor searches need monotone prefixes (the CPU walks cursors, CUDA
// searches every element: on a dip they would disagree). Raising each chunk to the last value
// of the chunks before it is therefore the running maximum, with O(V / kScanChunk)
// temporaries; a maximum is exact in any order, so every device gets the same bits.
inline void running_max_(at::Tensor& a) {
  const int64_t n = a.numel(), chunks = num_chunks(n), full = n / kScanChunk;
  if (chunks <= 1) return;
  const at::Tensor chunk_last =
      a.as_strided({chunks - 1}, {kScanChunk}, a.storage_offset() + kScanChunk - 1);
  const at::Tensor before = std::get<0>(at::cummax(chunk_last, 0));  // [chunks - 1]
  if (full >= 2) {
    a.narrow(0, kScanChunk, (full - 1) * kScanChunk)
        .view({full - 1, kScanChunk})
        .clamp_min_(before.narrow(0, 0, full - 1).unsqueeze(1));
  }
  if (n > full * kScanChunk) a.narrow(0, full * kScanChunk, n - full * kScanChunk).clamp_min_(before[full - 1]);
}

// Backend provides, on its device:
//   static at::Tensor fixed_scan(const at::Tensor& x, at::Tensor* prefix, bool inclusive);
//       fixed-order float64 scan (see alias_table.h) writing the exclusive or inclusive
//       prefixes to *prefix (which may be x itself); returns the total as a 0-dim tensor
//   static void pack(const at::Tensor& values, const at::Tensor& scaled,
//                    const at::Tensor& lights_through, bool lights, at::Tensor& packed_values,
//                    at::Tensor& packed_ids);
//       copies values[i] and i of every light (or every heavy) class to its packed_position
//   static void finalize(scaled, packed_values, packed_ids, lights_through, prob, alias);
//       writes every class's table entry (AliasSweep)
//
// Memory: besides the inputs and the 8-byte table, the build holds the scaled weights, one
// prefix buffer, the packed values and ids and the light counts: 8 + 8 + 8 + 4 + 4 = 32
// bytes per class (plus a 1-byte mask while the lights are counted), so V = 10^9 classes fit
// in 40 GB.
template <class Backend>
std::tuple<at::Tensor, at::Tensor> build_alias_table(const at::Tensor& weights) {
  check_weights(weights);
  const int64_t n = weights.numel();
  // Divide by the max first so the sum can neither overflow nor underflow; elementwise IEEE
  // operations give the same bits on every device.
  at::Tensor scaled = weights.to(at::kDouble, /*non_blocking=*/false, /*copy=*/true).contiguous();
  scaled.div_(scaled.max());
  const at::Tensor total = Backend::fixed_scan(scaled, nullptr, false);
  scaled.mul_(static_cast<double>(n) / total);

  const at::Tensor lights_through = at::cumsum(scaled < 1.0, 0, at::kInt);  // exact integers
  at::Tensor packed_values = at::empty({n}, scaled.options());
  at::Tensor packed_ids = at::empty({n}, scaled.options().dtype(at::kInt));
  {
    // Lights: exclusive prefix of the deficits 1 - s (0 for heavies). Heavies: inclusive
    // prefix of the surpluses s - 1 (0 for lights). One buffer serves both in turn.
    at::Tensor prefix = scaled.neg();
    prefix.add_(1.0).clamp_min_(0.0);
    Backend::fixed_scan(prefix, &prefix, /*inclusive=*/false);
    running_max_(prefix);
    Backend::pack(prefix, scaled, lights_through, /*lights=*/true, packed_values, packed_ids);
    prefix.copy_(scaled).sub_(1.0).clamp_min_(0.0);
    Backend::fixed_scan(prefix, &prefix, /*inclusive=*/true);
    running_max_(prefix);
    Backend::pack(prefix, scaled, lights_through, /*lights=*/false, packed_values, packed_ids);
  }
  at::Tensor prob = at::empty({n}, weights.options().dtype(at::kFloat));
  at::Tensor alias = at::empty({n}, weights.options().dtype(at::kInt));
  Backend::finalize(scaled, packed_values, packed_ids, lights_through, prob, alias);
  return {prob, alias};
}

}  // namespace fastsoftmax
