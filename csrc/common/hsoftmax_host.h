// Host-side checks and shared pieces of the hierarchical-softmax ops (CPU and CUDA).
//
// Tree encoding (csrc/ops.cpp): links int32 [2V - 1]; node x < V is class x, node V + i is
// inner node i; links[x] = 2 * parent_inner_id + branch_bit, -1 at the root. The weight has
// one row per inner node, [V - 1, D]. A path is walked from the class up to the root, at most
// max_depth steps; the forward records it as nodes [N, max_depth] (inner ids, padded with
// the sentinel V - 1, one past the last weight row) and coef [N, max_depth] (dloss/dscore,
// padded with 0).
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "loss_host.h"
#include "loss_math.h"
#include "stable.h"

namespace fastsoftmax {
namespace hsoftmax {

// Per-path-step maths, shared by both devices. Score s = w_i.h; branch bit b. word2vec.c's
// convention: bit 0 is the side of sigmoid(s), bit 1 that of sigmoid(-s), so
//   loss term = -log sigmoid((1 - 2b) s) = softplus(b ? s : -s),
//   dterm/ds  = sigmoid(s) - (1 - b).
template <class T>
FS_LOSS_HD T step_loss(T s, int bit) {
  return loss::softplus(bit ? s : -s);
}
template <class T>
FS_LOSS_HD T step_coef(T s, int bit) {
  return loss::sigmoid(s) - (bit ? T(0) : T(1));
}

// Messages of a links tensor whose values are out of range (bad_value) or that marks a
// class as the root (class_is_root).
inline void check_link_flags(bool bad_value, bool class_is_root, int64_t V) {
  FS_CHECK_VALUE(!bad_value, "links values must lie in [-1, ", 2 * (V - 1),
                 "): build the tree with fastsoftmax.ClassTree");
  FS_CHECK_VALUE(!class_is_root, "links of a class (the first V entries) must not be -1: a "
                                 "class is a leaf, never the root");
}

inline void fail_target(int64_t V, int64_t ignore_index, int64_t lo, int64_t hi) {
  FS_CHECK_VALUE(false, "target ids must lie in [0, ", V, ") or equal ignore_index (",
                 ignore_index, "); found ", lo, " (min offending) and ", hi,
                 " (max offending)");
}

// Value checks of CPU tensors, read in place: one pass each, no tensor temporaries.
inline void check_values_cpu(const Tensor& target_, const Tensor& links_, int64_t V,
                             int64_t ignore_index, bool check_link_values) {
  if (check_link_values) {
    const Tensor links = contiguous(links_);
    const int32_t* l = data<int32_t>(links);
    bool bad_value = false, class_is_root = false;
    for (int64_t x = 0; x < links.numel(); ++x) {
      bad_value |= l[x] < -1 || l[x] >= 2 * (V - 1);
      class_is_root |= x < V && l[x] < 0;
    }
    check_link_flags(bad_value, class_is_root, V);
  }
  const Tensor target = contiguous(target_);
  const int64_t* t = data<int64_t>(target);
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (int64_t n = 0; n < target.numel(); ++n)
    if ((t[n] < 0 || t[n] >= V) && t[n] != ignore_index)
      lo = std::min(lo, t[n]), hi = std::max(hi, t[n]);
  if (lo <= hi) fail_target(V, ignore_index, lo, hi);
}

// Value checks of device tensors: every check a bool flag on the device, and all of them come
// to the host in one copy. The bounds are 0-dim CPU tensors, which ATen takes as scalars.
inline void check_values_device(const Tensor& target, const Tensor& links, int64_t V,
                                int64_t ignore_index, bool check_link_values) {
  std::vector<Tensor> flags;
  const bool has_target = target.numel() > 0;
  Tensor bad_target;
  if (has_target) {
    bad_target = call("aten::logical_and", "", outside(target, 0, V),
                      call("aten::ne", "Tensor", target, cpu_scalar(ignore_index, kLong)));
    flags.push_back(any(bad_target));
  }
  if (check_link_values) {
    flags.push_back(any(outside(links, -1, 2 * (V - 1))));
    const Tensor classes = call("aten::narrow", "", links, int64_t{0}, int64_t{0}, V);
    flags.push_back(any(call("aten::lt", "Tensor", classes, cpu_scalar(0, kLong))));
  }
  if (flags.empty()) return;
  const Tensor bad = to_cpu(call("aten::stack", "", flags, int64_t{0}));
  const bool* b = data<bool>(bad);
  if (check_link_values) check_link_flags(b[has_target], b[has_target + 1], V);
  if (has_target && b[0]) {
    // Only on failure: masked_select synchronises with the device.
    const Tensor out = to_cpu(call("aten::masked_select", "", target, bad_target));
    const int64_t* v = data<int64_t>(out);
    fail_target(V, ignore_index, *std::min_element(v, v + out.numel()),
                *std::max_element(v, v + out.numel()));
  }
}

// Forward: shapes, dtypes and devices, then the value checks of target and, with
// check_link_values (CUDA), of links. Only ranges: links from fastsoftmax.ClassTree are
// fully validated when the tree is built; these checks keep every read in bounds for any
// input. The CPU kernel checks each link it reads instead (through check_link_flags), which
// saves a pass over 2V - 1 entries per call.
inline void check_forward(const Tensor& input, const Tensor& weight, const Tensor& target,
                          const Tensor& links, int64_t max_depth, int64_t ignore_index,
                          bool check_link_values) {
  loss::check_dense(input, weight);
  loss::check_ids_tensor(target, "target", input);
  FS_CHECK_VALUE(target.dim() == 1 && target.size(0) == input.size(0),
                 "target must be 1-D [N] with N = ", input.size(0), " rows, got shape ",
                 target.sizes());
  FS_CHECK_TYPE(links.scalar_type() == kInt, "links must be an int32 tensor, got ",
                links.scalar_type());
  FS_CHECK_VALUE(links.device() == input.device(), "links is on ", links.device(),
                 " but input is on ", input.device());
  const int64_t V = weight.size(0) + 1;
  FS_CHECK_VALUE(links.dim() == 1 && links.numel() == 2 * V - 1,
                 "links must be 1-D with 2V - 1 = ", 2 * V - 1,
                 " entries for a weight of V - 1 = ", V - 1, " inner-node rows, got shape ",
                 links.sizes());
  FS_CHECK_VALUE(max_depth >= 1 && max_depth <= V - 1, "max_depth must lie in [1, ", V - 1,
                 "] for ", V, " classes, got ", max_depth);
  if (on_host(input))
    check_values_cpu(target, links, V, ignore_index, check_link_values);
  else if (checks_read_back())
    check_values_device(target, links, V, ignore_index, check_link_values);
}

// Backward: nodes and coef must be the forward's.
inline void check_backward(const Tensor& grad_loss, const Tensor& input, const Tensor& weight,
                           const Tensor& nodes, const Tensor& coef) {
  loss::check_dense(input, weight);
  const int64_t N = input.size(0);
  const ScalarType acc_type = to_opmath(input.scalar_type());
  FS_CHECK_VALUE(nodes.scalar_type() == kLong && nodes.dim() == 2 && nodes.size(0) == N &&
                     nodes.device() == input.device(),
                 "nodes must be the forward's int64 [N, max_depth] path ids");
  FS_CHECK_VALUE(coef.scalar_type() == acc_type && coef.sizes() == nodes.sizes() &&
                     coef.device() == input.device(),
                 "coef must be the forward's [N, max_depth] coefficients");
  FS_CHECK_VALUE(grad_loss.numel() == N && grad_loss.device() == input.device(),
                 "grad_loss must have one entry per row, on the input's device");
}

// The backward's prologue on both devices: checked inputs made contiguous, grad_loss in the
// accumulation dtype, and the sizes N rows, D, num_inner = V - 1, L = max_depth.
struct FS_HIDDEN BackwardInputs {
  Tensor input, weight, nodes, coef, grad_loss;
  int64_t N, D, num_inner, L;
};

inline BackwardInputs prepare_backward(const Tensor& grad_loss, const Tensor& input,
                                       const Tensor& weight, const Tensor& nodes,
                                       const Tensor& coef) {
  check_backward(grad_loss, input, weight, nodes, coef);
  const Tensor g = contiguous(to(grad_loss, to_opmath(input.scalar_type())));
  return BackwardInputs{contiguous(input), contiguous(weight), contiguous(nodes),
                        contiguous(coef), g,
                        input.size(0), input.size(1), weight.size(0), nodes.size(1)};
}

}  // namespace hsoftmax
}  // namespace fastsoftmax
