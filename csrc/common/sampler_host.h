// Host-side pieces of the sampler ops shared by the CPU and CUDA implementations:
// argument checks (with messages a user can act on) and the device-generic steps of the
// alias-table build. Device files supply only the loops (see Backend below). Tensor
// expressions on the host go through the dispatcher (stable.h's `call`).
#pragma once

#include <cmath>
#include <tuple>

#include "alias_table.h"
#include "stable.h"

namespace fastsoftmax {
namespace sampler {

inline Tensor logical_not(const Tensor& t) { return call("aten::logical_not", "", t); }
inline Tensor lt(const Tensor& t, double v) {
  return call("aten::lt", "Tensor", t, cpu_scalar(v, kDouble));
}
inline Tensor gt(const Tensor& t, double v) {
  return call("aten::gt", "Tensor", t, cpu_scalar(v, kDouble));
}
inline void clamp_min_(const Tensor& t, const Tensor& min) {
  call("aten::clamp_min_", "Tensor", t, min);
}
// The one value of a CPU tensor of one element (ATen's item()).
template <class T>
T item(const Tensor& t) {
  return *data<T>(to_cpu(t));
}

}  // namespace sampler

inline void check_seed(const Tensor& seed, const Tensor& like) {
  FS_CHECK_TYPE(seed.scalar_type() == kLong && seed.numel() == 1,
                "seed must be an int64 tensor with one element");
  FS_CHECK_VALUE(seed.device() == like.device(), "seed must be on ", like.device(), ", got ",
                 seed.device());
}

// The strides of an alias table's two halves (1-D, any non-negative stride). AliasSampler
// builds them as the two columns of one [V, 2] buffer of 4-byte words, so that a draw reads
// one 8-byte entry (interleaved() below); flat halves have stride 1.
inline TableStrides alias_table_strides(const Tensor& prob, const Tensor& alias,
                                        const char* what) {
  FS_CHECK_VALUE(prob.dim() == 1 && alias.dim() == 1 && prob.stride(0) >= 0 &&
                     alias.stride(0) >= 0,
                 what, " must be two 1-D tensors");
  TableStrides s;
  s.prob = prob.numel() > 1 ? prob.stride(0) : 1;
  s.alias = alias.numel() > 1 ? alias.stride(0) : 1;
  return s;
}
inline bool interleaved(const float* prob, const int32_t* alias, TableStrides s) {
  return s.prob == 2 && s.alias == 2 &&
         reinterpret_cast<const char*>(alias) == reinterpret_cast<const char*>(prob) + 4;
}

// Returns the table's strides (alias_table_strides; unit for the samplers without a table).
inline TableStrides check_sample_args(const Tensor& prob, const Tensor& alias, const Tensor& seed,
                                 int64_t num_classes, int64_t kind) {
  FS_CHECK_VALUE(kind == kAlias || kind == kUniform || kind == kLogUniform,
                 "unknown sampler kind ", kind);
  FS_CHECK_VALUE(num_classes > 0, "num_classes must be positive, got ", num_classes);
  check_seed(seed, prob);
  if (kind == kAlias) {
    FS_CHECK_TYPE(prob.scalar_type() == kFloat && alias.scalar_type() == kInt,
                  "alias table must be (float32 prob, int32 alias)");
    FS_CHECK_VALUE(prob.dim() == 1 && alias.dim() == 1 && prob.numel() == num_classes &&
                       alias.numel() == num_classes,
                   "alias table must be two 1-D tensors of num_classes = ", num_classes,
                   " entries");
    FS_CHECK_VALUE(alias.device() == prob.device(), "alias table halves on different devices");
    return alias_table_strides(prob, alias, "alias table");
  }
  return {};
}

inline void check_num_sampled(int64_t num_sampled, int64_t num_classes) {
  FS_CHECK_VALUE(num_sampled > 0 && num_sampled <= num_classes,
                 "num_sampled must be in [1, num_classes], got ", num_sampled);
}

// Unique sampling gives up after kMaxUniqueTries draws, on both devices, with this error.
inline void check_unique_found(bool found, int64_t num_sampled) {
  FS_CHECK_VALUE(found, "could not find ", num_sampled, " distinct candidates in ",
                 kMaxUniqueTries, " draws: too few classes have non-negligible probability");
}

// Raises ValueError/TypeError for weights no distribution can be built from. CPU weights
// are read in place in one pass; device weights cost one host synchronisation (three flags
// in one copy), at construction time only.
inline void check_weights(const Tensor& weights) {
  FS_CHECK_TYPE(is_floating(weights.scalar_type()),
                "weights must be a floating-point tensor, got ", weights.scalar_type());
  FS_CHECK_VALUE(weights.dim() == 1, "weights must be 1-D, got shape ", weights.sizes());
  FS_CHECK_VALUE(weights.numel() > 0, "weights must not be empty");
  FS_CHECK_VALUE(weights.numel() < (int64_t{1} << 31),
                 "at most 2^31 - 1 classes are supported, got ", weights.numel());
  bool f[3] = {false, false, true};  // non-finite, negative, all zero
  if (on_host(weights)) {
    const Tensor w = contiguous(weights);
    FS_DISPATCH_FLOATING(w.scalar_type(), "alias_build", [&] {
      const scalar_t* v = data<scalar_t>(w);
      for (int64_t i = 0, n = w.numel(); i < n; ++i) {
        const double x = static_cast<double>(v[i]);
        f[0] |= !std::isfinite(x), f[1] |= x < 0, f[2] &= !(x > 0);
      }
    });
  } else {
    using namespace sampler;
    const Tensor flags = to_cpu(call(
        "aten::stack", "",
        std::vector<Tensor>{any(logical_not(call("aten::isfinite", "", weights))),
                            any(lt(weights, 0.0)), logical_not(any(gt(weights, 0.0)))},
        int64_t{0}));
    const bool* b = data<bool>(flags);
    f[0] = b[0], f[1] = b[1], f[2] = b[2];
  }
  FS_CHECK_VALUE(!f[0], "weights must be finite (found NaN or infinity)");
  FS_CHECK_VALUE(!f[1], "weights must be non-negative (found a negative weight)");
  FS_CHECK_VALUE(!f[2], "weights must not all be zero");
}

// In-place running maximum of a fixed-order prefix (alias_table.h). Inside a kScanChunk
// chunk the fold only adds non-negative terms, so it never decreases; but a chunk's offset
// comes from a separate fold of the chunk totals, so the prefix can dip by an ulp at a chunk
// boundary, and the donor searches need monotone prefixes (the CPU walks cursors, CUDA
// searches every element: on a dip they would disagree). Raising each chunk to the last value
// of the chunks before it is therefore the running maximum, with O(V / kScanChunk)
// temporaries; a maximum is exact in any order, so every device gets the same bits.
inline void running_max_(Tensor& a) {
  using torch::stable::narrow, torch::stable::select, torch::stable::view;
  const int64_t n = a.numel(), chunks = num_chunks(n), full = n / kScanChunk;
  if (chunks <= 1) return;
  // The last element of each chunk but the last: column kScanChunk - 1 of the whole chunks.
  const Tensor whole = view(narrow(a, 0, 0, (chunks - 1) * kScanChunk), {chunks - 1, kScanChunk});
  const Tensor chunk_last = select(whole, 1, kScanChunk - 1);
  Tensor before = call_n<2>("aten::cummax", "", chunk_last, int64_t{0})[0];  // [chunks - 1]
  if (full >= 2) {
    const Tensor rest = view(narrow(a, 0, kScanChunk, (full - 1) * kScanChunk),
                             {full - 1, kScanChunk});
    sampler::clamp_min_(rest, torch::stable::unsqueeze(narrow(before, 0, 0, full - 1), 1));
  }
  if (n > full * kScanChunk) {
    sampler::clamp_min_(narrow(a, 0, full * kScanChunk, n - full * kScanChunk),
                        select(before, 0, full - 1));
  }
}

// Backend provides, on its device:
//   static Tensor fixed_scan(const Tensor& x, Tensor* prefix, bool inclusive);
//       fixed-order float64 scan (see alias_table.h) writing the exclusive or inclusive
//       prefixes to *prefix (which may be x itself); returns the total as a 0-dim tensor
//   static void pack(const Tensor& values, const Tensor& scaled, const Tensor& lights_through,
//                    bool lights, Tensor& packed_values, Tensor& packed_ids);
//       copies values[i] and i of every light (or every heavy) class to its packed_position
//   static void finalize(scaled, packed_values, packed_ids, lights_through, prob, alias);
//       writes every class's table entry (AliasSweep)
//
// Memory: besides the inputs and the 8-byte table, the build holds the scaled weights, one
// prefix buffer, the packed values and ids and the light counts: 8 + 8 + 8 + 4 + 4 = 32
// bytes per class (plus a 1-byte mask while the lights are counted), so V = 10^9 classes fit
// in 40 GB.
template <class Backend>
std::tuple<Tensor, Tensor> build_alias_table(const Tensor& weights) {
  using namespace sampler;
  check_weights(weights);
  const int64_t n = weights.numel();
  const Device device = weights.device();
  // On the weights' device: aten::clamp_min_ takes no CPU scalar tensor beside a CUDA one.
  const Tensor one = scalar(1.0, kDouble, device), zero = scalar(0.0, kDouble, device);
  // Divide by the max first so the sum can neither overflow nor underflow; elementwise IEEE
  // operations give the same bits on every device.
  Tensor scaled = torch::stable::to(weights, kDouble, std::nullopt, std::nullopt, std::nullopt,
                                    /*non_blocking=*/false, /*copy=*/true,
                                    torch::headeronly::MemoryFormat::Contiguous);
  call("aten::div_", "Tensor", scaled, call("aten::max", "", scaled));
  const Tensor total = Backend::fixed_scan(scaled, nullptr, false);
  // n / total as ATen's Scalar / Tensor computes it: a filled tensor divided by total.
  call("aten::mul_", "Tensor", scaled,
       call("aten::div", "Tensor", scalar(static_cast<double>(n), kDouble, total.device()), total));

  const Tensor lights_through = call("aten::cumsum", "", lt(scaled, 1.0), int64_t{0},
                                     std::optional<ScalarType>(kInt));  // exact integers
  Tensor packed_values = empty({n}, kDouble, device);
  Tensor packed_ids = empty({n}, kInt, device);
  {
    // Lights: exclusive prefix of the deficits 1 - s (0 for heavies). Heavies: inclusive
    // prefix of the surpluses s - 1 (0 for lights). One buffer at a time: the first is
    // released before the second is made (1 - s is -s + 1 to the bit).
    Tensor prefix = torch::stable::subtract(one, scaled);
    clamp_min_(prefix, zero);
    Backend::fixed_scan(prefix, &prefix, /*inclusive=*/false);
    running_max_(prefix);
    Backend::pack(prefix, scaled, lights_through, /*lights=*/true, packed_values, packed_ids);
    prefix = Tensor();
    prefix = torch::stable::subtract(scaled, one);
    clamp_min_(prefix, zero);
    Backend::fixed_scan(prefix, &prefix, /*inclusive=*/true);
    running_max_(prefix);
    Backend::pack(prefix, scaled, lights_through, /*lights=*/false, packed_values, packed_ids);
  }
  Tensor prob = empty({n}, kFloat, device);
  Tensor alias = empty({n}, kInt, device);
  Backend::finalize(scaled, packed_values, packed_ids, lights_through, prob, alias);
  return {prob, alias};
}

// The op device_reads (csrc/ops.cpp): the deferred-checks switch and the host-read counter.
inline int64_t device_reads(const Tensor& /*like*/, int64_t defer_checks) {
  FS_CHECK_VALUE(defer_checks >= -1 && defer_checks <= 1,
                 "defer_checks must be -1 (unchanged), 0 or 1, got ", defer_checks);
  if (defer_checks >= 0) deferred_checks.store(defer_checks == 1);
  return host_reads.load();
}

}  // namespace fastsoftmax
