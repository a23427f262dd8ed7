// Host-side checks and shared pieces of the hierarchical-softmax ops (CPU and CUDA).
//
// Tree encoding (csrc/ops.cpp): links int32 [2V - 1]; node x < V is class x, node V + i is
// inner node i; links[x] = 2 * parent_inner_id + branch_bit, -1 at the root. The weight has
// one row per inner node, [V - 1, D]. A path is walked from the class up to the root, at most
// max_depth steps; the forward records it as nodes [N, max_depth] (inner ids, padded with
// the sentinel V - 1, one past the last weight row) and coef [N, max_depth] (dloss/dscore,
// padded with 0).
#pragma once

#include <ATen/ATen.h>

#include "loss_host.h"

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
  TORCH_CHECK_VALUE(!bad_value, "links values must lie in [-1, ", 2 * (V - 1),
                    "): build the tree with fastsoftmax.ClassTree");
  TORCH_CHECK_VALUE(!class_is_root, "links of a class (the first V entries) must not be -1: a "
                                    "class is a leaf, never the root");
}

// Forward: shapes, dtypes and devices, then one host synchronisation for the value checks
// of target and, with check_link_values (CUDA), of links. Only ranges: links from
// fastsoftmax.ClassTree are fully validated when the tree is built; these checks keep every
// read in bounds for any input. The CPU kernel checks each link it reads instead (through
// check_link_flags), which saves two passes over 2V - 1 entries per call.
inline void check_forward(const at::Tensor& input, const at::Tensor& weight,
                          const at::Tensor& target, const at::Tensor& links, int64_t max_depth,
                          int64_t ignore_index, bool check_link_values) {
  loss::check_dense(input, weight);
  loss::check_ids_tensor(target, "target", input);
  TORCH_CHECK_VALUE(target.dim() == 1 && target.size(0) == input.size(0),
                    "target must be 1-D [N] with N = ", input.size(0), " rows, got shape ",
                    target.sizes());
  TORCH_CHECK_TYPE(links.scalar_type() == at::kInt, "links must be an int32 tensor, got ",
                   links.scalar_type());
  TORCH_CHECK_VALUE(links.device() == input.device(), "links is on ", links.device(),
                    " but input is on ", input.device());
  const int64_t V = weight.size(0) + 1;
  TORCH_CHECK_VALUE(links.dim() == 1 && links.numel() == 2 * V - 1,
                    "links must be 1-D with 2V - 1 = ", 2 * V - 1,
                    " entries for a weight of V - 1 = ", V - 1, " inner-node rows, got shape ",
                    links.sizes());
  TORCH_CHECK_VALUE(max_depth >= 1 && max_depth <= V - 1, "max_depth must lie in [1, ", V - 1,
                    "] for ", V, " classes, got ", max_depth);
  std::vector<at::Tensor> flags;
  const bool has_target = target.numel() > 0;
  if (has_target)
    flags.push_back((((target < 0) | (target >= V)) & (target != ignore_index)).any());
  if (check_link_values) {
    flags.push_back(((links < -1) | (links >= 2 * (V - 1))).any());
    flags.push_back((links.narrow(0, 0, V) < 0).any());
  }
  if (flags.empty()) return;
  const at::Tensor bad = at::stack(flags).cpu();
  const bool* b = bad.data_ptr<bool>();
  if (check_link_values) check_link_flags(b[has_target], b[has_target + 1], V);
  if (has_target && b[0]) {
    const at::Tensor out = target.masked_select(((target < 0) | (target >= V)) &
                                                (target != ignore_index));
    TORCH_CHECK_VALUE(false, "target ids must lie in [0, ", V, ") or equal ignore_index (",
                      ignore_index, "); found ", out.min().item<int64_t>(),
                      " (min offending) and ", out.max().item<int64_t>(), " (max offending)");
  }
}

// Backward: nodes and coef must be the forward's.
inline void check_backward(const at::Tensor& grad_loss, const at::Tensor& input,
                           const at::Tensor& weight, const at::Tensor& nodes,
                           const at::Tensor& coef) {
  loss::check_dense(input, weight);
  const int64_t N = input.size(0);
  const auto acc_type = at::toOpMathType(input.scalar_type());
  TORCH_CHECK_VALUE(nodes.scalar_type() == at::kLong && nodes.dim() == 2 &&
                        nodes.size(0) == N && nodes.device() == input.device(),
                    "nodes must be the forward's int64 [N, max_depth] path ids");
  TORCH_CHECK_VALUE(coef.scalar_type() == acc_type && coef.sizes() == nodes.sizes() &&
                        coef.device() == input.device(),
                    "coef must be the forward's [N, max_depth] coefficients");
  TORCH_CHECK_VALUE(grad_loss.numel() == N && grad_loss.device() == input.device(),
                    "grad_loss must have one entry per row, on the input's device");
}

// The backward's prologue on both devices: checked inputs made contiguous, grad_loss in the
// accumulation dtype, and the sizes N rows, D, num_inner = V - 1, L = max_depth.
struct BackwardInputs {
  at::Tensor input, weight, nodes, coef, grad_loss;
  int64_t N, D, num_inner, L;
};

inline BackwardInputs prepare_backward(const at::Tensor& grad_loss, const at::Tensor& input,
                                       const at::Tensor& weight, const at::Tensor& nodes,
                                       const at::Tensor& coef) {
  check_backward(grad_loss, input, weight, nodes, coef);
  BackwardInputs b{input.contiguous(), weight.contiguous(), nodes.contiguous(),
                   coef.contiguous(), grad_loss.to(at::toOpMathType(input.scalar_type()))
                                          .contiguous(),
                   input.size(0), input.size(1), weight.size(0), nodes.size(1)};
  return b;
}

}  // namespace hsoftmax
}  // namespace fastsoftmax
