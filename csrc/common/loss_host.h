// Host-side argument checks of the loss ops, shared by the CPU and CUDA files. Every check a
// kernel relies on (ids in range, shapes, dtypes, devices) happens here, before any kernel is
// launched, so a bad id is a Python ValueError on CUDA too, never a device-side assert.
#pragma once

#include <ATen/ATen.h>

#include "loss_math.h"

#include <string>
#include <tuple>
#include <vector>

namespace fastsoftmax {
namespace loss {

// input [N, D] and weight [V, D]: same floating dtype and device; bias [V] likewise.
inline void check_dense(const at::Tensor& input, const at::Tensor& weight,
                        const c10::optional<at::Tensor>& bias = c10::nullopt) {
  TORCH_CHECK_TYPE(at::isFloatingType(input.scalar_type()),
                   "input must be a floating-point tensor, got ", input.scalar_type());
  TORCH_CHECK_TYPE(weight.scalar_type() == input.scalar_type(),
                   "weight and input must have the same dtype, got weight ",
                   weight.scalar_type(), " and input ", input.scalar_type(),
                   " (cast one of them, or run under torch.autocast)");
  TORCH_CHECK_VALUE(weight.device() == input.device(), "weight is on ", weight.device(),
                    " but input is on ", input.device());
  TORCH_CHECK_VALUE(input.dim() == 2, "input must be 2-D [N, D], got shape ", input.sizes());
  TORCH_CHECK_VALUE(weight.dim() == 2, "weight must be 2-D [V, D], got shape ", weight.sizes());
  TORCH_CHECK_VALUE(weight.size(1) == input.size(1), "weight has ", weight.size(1),
                    " features per class but input has ", input.size(1));
  TORCH_CHECK_VALUE(weight.size(0) > 0, "weight must have at least one class (row)");
  if (bias.has_value()) {
    TORCH_CHECK_TYPE(bias->scalar_type() == input.scalar_type(),
                     "bias and input must have the same dtype, got bias ", bias->scalar_type(),
                     " and input ", input.scalar_type());
    TORCH_CHECK_VALUE(bias->device() == input.device(), "bias is on ", bias->device(),
                      " but input is on ", input.device());
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == weight.size(0),
                      "bias must be 1-D with one entry per class (", weight.size(0),
                      "), got shape ", bias->sizes());
  }
}

inline void check_ids_tensor(const at::Tensor& ids, const char* name, const at::Tensor& like) {
  TORCH_CHECK_TYPE(ids.scalar_type() == at::kLong, name, " must be an int64 tensor, got ",
                   ids.scalar_type());
  TORCH_CHECK_VALUE(ids.device() == like.device(), name, " is on ", ids.device(),
                    " but input is on ", like.device());
}

// The value checks of every id tensor of one call, evaluated with a single device-to-host
// copy. target [N, T] may hold ignore_index (a whole row of it: the row is ignored); others
// must lie in [0, V).
struct IdChecks {
  int64_t num_classes;
  int64_t ignore_index;
  std::vector<at::Tensor> flags;
  std::vector<std::string> messages;
  std::vector<at::Tensor> tensors;

  void ids(const at::Tensor& t, const std::string& name) {
    if (t.numel() == 0) return;
    flags.push_back(((t < 0) | (t >= num_classes)).any());
    messages.push_back(name);
    tensors.push_back(t);
  }

  void target(const at::Tensor& t) {
    if (t.numel() == 0) return;
    const at::Tensor ignored = t == ignore_index;
    flags.push_back((((t < 0) | (t >= num_classes)) & ignored.logical_not()).any());
    messages.push_back("target");
    tensors.push_back(at::where(ignored, at::zeros_like(t), t));
    if (t.size(1) > 1) {
      flags.push_back((ignored.any(1) != ignored.all(1)).any());
      messages.push_back("");
      tensors.push_back(t);
    }
  }

  void run() const {
    if (flags.empty()) return;
    const at::Tensor f = at::stack(flags).cpu();
    const bool* bad = f.data_ptr<bool>();
    for (size_t i = 0; i < flags.size(); ++i) {
      if (!bad[i]) continue;
      TORCH_CHECK_VALUE(!messages[i].empty(), "a target row mixes ignore_index (", ignore_index,
                        ") with class ids: with num_true > 1 a row is ignored only when all "
                        "its targets equal ignore_index");
      const at::Tensor& t = tensors[i];
      const at::Tensor out = t.masked_select((t < 0) | (t >= num_classes));
      TORCH_CHECK_VALUE(false, messages[i], " ids must lie in [0, ", num_classes, ")",
                        messages[i] == "target" ? " or equal ignore_index" : "",
                        "; found ", out.min().item<int64_t>(), " (min offending) and ",
                        out.max().item<int64_t>(), " (max offending)");
    }
  }
};

// target [N, T] with ignored rows' ids replaced by 0: safe to gather with, and a row is
// recognised as ignored by its (zero) coefficients in the backward.
inline at::Tensor safe_target(const at::Tensor& target, int64_t ignore_index) {
  return at::where(target == ignore_index, at::zeros_like(target), target).contiguous();
}

inline void check_target(const at::Tensor& target, const at::Tensor& input) {
  check_ids_tensor(target, "target", input);
  TORCH_CHECK_VALUE(target.dim() == 2 && target.size(0) == input.size(0) && target.size(1) > 0,
                    "target must be [N, num_true] with N = ", input.size(0),
                    " rows, got shape ", target.sizes());
}

// negative_sampling_*: input [N, D], weight [V, D], target [N, T], negatives [N, K] (per
// row) or [K] (shared by every row).
inline void check_negative_sampling(const at::Tensor& input, const at::Tensor& weight,
                                    const at::Tensor& target, const at::Tensor& negatives,
                                    int64_t ignore_index) {
  check_dense(input, weight);
  check_target(target, input);
  check_ids_tensor(negatives, "negatives", input);
  TORCH_CHECK_VALUE(negatives.dim() == 1 || (negatives.dim() == 2 && negatives.size(0) == input.size(0)),
                    "negatives must be [N, K] (per row) or [K] (shared) with N = ",
                    input.size(0), ", got shape ", negatives.sizes());
  IdChecks checks{weight.size(0), ignore_index};
  checks.target(target);
  checks.ids(negatives, "negatives");
  checks.run();
}

// sampled_logits_*: sampled [S] shared by the batch, its expected counts [S], the true
// classes' expected counts [N, T] (float, positive).
inline void check_sampled_logits(const at::Tensor& input, const at::Tensor& weight,
                                 const c10::optional<at::Tensor>& bias, const at::Tensor& target,
                                 const at::Tensor& sampled, const at::Tensor& true_expected,
                                 const at::Tensor& sampled_expected, const at::Tensor& log_z,
                                 int64_t mode, int64_t ignore_index) {
  check_dense(input, weight, bias);
  check_target(target, input);
  check_ids_tensor(sampled, "sampled", input);
  TORCH_CHECK_VALUE(mode == kSoftmax || mode == kNce, "unknown sampled-logits mode ", mode);
  TORCH_CHECK_VALUE(sampled.dim() == 1 && sampled.size(0) > 0,
                    "sampled candidates must be a non-empty 1-D tensor [S], got shape ",
                    sampled.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(true_expected.scalar_type()) &&
                       at::isFloatingType(sampled_expected.scalar_type()),
                   "expected counts must be floating-point tensors");
  TORCH_CHECK_VALUE(true_expected.device() == input.device() &&
                        sampled_expected.device() == input.device() &&
                        log_z.device() == input.device(),
                    "expected counts and log_z must be on the input's device (", input.device(),
                    ")");
  TORCH_CHECK_VALUE(true_expected.sizes() == target.sizes(),
                    "true_expected_count must have the target's shape ", target.sizes(),
                    ", got ", true_expected.sizes());
  TORCH_CHECK_VALUE(sampled_expected.sizes() == sampled.sizes(),
                    "sampled_expected_count must have the shape of sampled ", sampled.sizes(),
                    ", got ", sampled_expected.sizes());
  TORCH_CHECK_VALUE(log_z.numel() == 1 && at::isFloatingType(log_z.scalar_type()),
                    "log_z must be a floating-point tensor with one element");
  IdChecks checks{weight.size(0), ignore_index};
  checks.target(target);
  checks.ids(sampled, "sampled");
  checks.run();
}


// The logit offsets of sampled logits, in the accumulation dtype: per candidate column
// bias[s_j] - log Q(s_j) - log_z  [S], and per true class bias[t] - log Q(t) - log_z  [N, T].
inline std::tuple<at::Tensor, at::Tensor> logit_offsets(
    const c10::optional<at::Tensor>& bias, const at::Tensor& safe_target,
    const at::Tensor& sampled, const at::Tensor& true_expected,
    const at::Tensor& sampled_expected, const at::Tensor& log_z, at::ScalarType acc_type) {
  const at::Tensor shift = log_z.to(acc_type).reshape({});
  at::Tensor col = -at::log(sampled_expected.to(acc_type)) - shift;
  at::Tensor row = -at::log(true_expected.to(acc_type)) - shift;
  if (bias.has_value()) {
    const at::Tensor b = bias->to(acc_type);
    col = col + b.index_select(0, sampled);
    row = row + b.index_select(0, safe_target.reshape(-1)).reshape(safe_target.sizes());
  }
  return {col.contiguous(), row.contiguous()};
}

// The device-independent part of sampled_logits_forward: checks, contiguous operands, the
// per-column and per-true-class offsets (bias - log Q - log_z), the [N, S] logits H Ws^T and
// the outputs the device epilogue fills.
struct SampledForward {
  at::Tensor input, weight, target, sampled, col, row_true, logits, loss, grad_true;
  int64_t N, D, T, S;
};

inline SampledForward sampled_forward_prologue(
    const at::Tensor& input_, const at::Tensor& weight_, const c10::optional<at::Tensor>& bias,
    const at::Tensor& target_, const at::Tensor& sampled_, const at::Tensor& true_expected,
    const at::Tensor& sampled_expected, const at::Tensor& log_z, int64_t mode,
    int64_t ignore_index) {
  check_sampled_logits(input_, weight_, bias, target_, sampled_, true_expected, sampled_expected,
                       log_z, mode, ignore_index);
  SampledForward f;
  f.input = input_.contiguous();
  f.weight = weight_.contiguous();
  f.target = target_.contiguous();
  f.sampled = sampled_.contiguous();
  f.N = f.input.size(0), f.D = f.input.size(1), f.T = f.target.size(1), f.S = f.sampled.size(0);
  const auto acc_type = at::toOpMathType(f.input.scalar_type());
  std::tie(f.col, f.row_true) = logit_offsets(bias, safe_target(f.target, ignore_index),
                                              f.sampled, true_expected, sampled_expected, log_z,
                                              acc_type);
  f.logits = at::mm(f.input, f.weight.index_select(0, f.sampled).t()).contiguous();  // [N, S]
  f.loss = at::empty({f.N}, f.input.options().dtype(acc_type));
  f.grad_true = at::empty({f.N, f.T}, f.input.options().dtype(acc_type));
  return f;
}

// The device-independent part of sampled_logits_backward: checks, contiguous operands and
// the two gradient matmuls, grad_input = G Ws [N, D] (the true-class terms are added by the
// device kernel) and grad_Ws = G^T (g * H) [S, D] (scattered into grad_W by the device).
struct SampledBackward {
  at::Tensor input, weight, target, sampled, G, grad_true, grad_loss, grad_input, grad_Ws;
  int64_t N, D, V, T, S;
};

inline SampledBackward sampled_backward_prologue(
    const at::Tensor& grad_loss_, const at::Tensor& input_, const at::Tensor& weight_,
    const at::Tensor& target_, const at::Tensor& sampled_, const at::Tensor& grad_logits_,
    const at::Tensor& grad_true_, int64_t ignore_index) {
  check_dense(input_, weight_);
  check_target(target_, input_);
  SampledBackward b;
  b.input = input_.contiguous();
  b.weight = weight_.contiguous();
  b.target = safe_target(target_, ignore_index);
  b.sampled = sampled_.contiguous();
  b.N = b.input.size(0), b.D = b.input.size(1), b.V = b.weight.size(0), b.T = b.target.size(1);
  b.S = b.sampled.size(0);
  const auto acc_type = at::toOpMathType(b.input.scalar_type());
  TORCH_CHECK_VALUE(grad_logits_.sizes() == at::IntArrayRef({b.N, b.S}) &&
                        grad_logits_.scalar_type() == b.input.scalar_type(),
                    "grad_logits must be the forward's [N, S] logit gradient");
  TORCH_CHECK_VALUE(grad_true_.sizes() == at::IntArrayRef({b.N, b.T}) &&
                        grad_true_.scalar_type() == acc_type,
                    "grad_true must be the forward's [N, T] true-logit gradient");
  TORCH_CHECK_VALUE(grad_loss_.numel() == b.N, "grad_loss must have one entry per row");
  b.G = grad_logits_.contiguous();
  b.grad_true = grad_true_.contiguous();
  b.grad_loss = grad_loss_.to(acc_type).contiguous();
  const at::Tensor Ws = b.weight.index_select(0, b.sampled);                            // [S, D]
  b.grad_input = at::mm(b.G, Ws).contiguous();                                          // [N, D]
  const at::Tensor Hs = b.input * b.grad_loss.unsqueeze(1).to(b.input.scalar_type());  // g * H
  b.grad_Ws = at::mm(b.G.t(), Hs).contiguous();                                         // [S, D]
  return b;
}

// The device-independent part of negative_sampling_backward: checks of the forward's saved
// coefficients and contiguous operands. neg_stride is 0 for negatives shared by every row.
struct NegativeSamplingBackward {
  at::Tensor input, weight, target, negatives, coef, grad_loss;
  int64_t N, D, V, T, K, J, neg_stride;
};

inline NegativeSamplingBackward negative_sampling_backward_prologue(
    const at::Tensor& grad_loss_, const at::Tensor& input_, const at::Tensor& weight_,
    const at::Tensor& target_, const at::Tensor& negatives_, const at::Tensor& coef_,
    int64_t ignore_index) {
  check_dense(input_, weight_);
  check_target(target_, input_);
  NegativeSamplingBackward b;
  b.input = input_.contiguous();
  b.weight = weight_.contiguous();
  b.target = safe_target(target_, ignore_index);
  b.negatives = negatives_.contiguous();
  b.N = b.input.size(0), b.D = b.input.size(1), b.V = b.weight.size(0), b.T = b.target.size(1);
  b.K = b.negatives.size(-1), b.J = b.T + b.K;
  b.neg_stride = b.negatives.dim() == 2 ? b.K : 0;
  const auto acc_type = at::toOpMathType(b.input.scalar_type());
  TORCH_CHECK_VALUE(coef_.sizes() == at::IntArrayRef({b.N, b.J}) &&
                        coef_.scalar_type() == acc_type && coef_.device() == b.input.device(),
                    "coef must be the forward's [N, T + K] coefficients");
  TORCH_CHECK_VALUE(grad_loss_.numel() == b.N && grad_loss_.device() == b.input.device(),
                    "grad_loss must have one entry per row, on the input's device");
  b.coef = coef_.contiguous();
  b.grad_loss = grad_loss_.to(acc_type).contiguous();
  return b;
}

// dL/db[c] of sampled softmax / NCE: the summed gradients of every logit of class c, from
// the sampled logits G [N, S] and the true logits grad_true [N, T]. index_put_ with
// accumulate adds in a fixed order on the CPU and sorts on CUDA: deterministic on both.
inline at::Tensor sampled_bias_grad(const SampledBackward& b, bool has_bias) {
  if (!has_bias) return at::empty({0}, b.input.options());
  const auto acc_type = at::toOpMathType(b.input.scalar_type());
  at::Tensor gb = at::zeros({b.V}, b.input.options().dtype(acc_type));
  gb.index_put_({b.sampled}, at::mv(b.G.t(), b.grad_loss.to(b.G.scalar_type())).to(acc_type),
                true);
  gb.index_put_({b.target.reshape(-1)}, (b.grad_true * b.grad_loss.unsqueeze(1)).reshape(-1),
                true);
  return gb.to(b.input.scalar_type());
}

// The weight-gradient rows of sampled logits, for the device's scatter: each sampled class
// adds its row of grad_Ws; each true pair (n, t) adds g_n gt_nt h_n.
template <class scalar_t, class acc_t>
PairGroups<scalar_t, acc_t> sampled_weight_pairs(const SampledBackward& b) {
  using Pairs = PairGroup<scalar_t, acc_t>;
  PairGroups<scalar_t, acc_t> pairs;
  pairs.num = 2;
  pairs.g[0] = Pairs::of(b.S, 1, b.sampled.data_ptr<int64_t>(), 1)
                   .rows_of(b.grad_Ws.data_ptr<scalar_t>(), b.D);
  pairs.g[1] = Pairs::of(b.N, b.T, b.target.data_ptr<int64_t>(), b.T)
                   .weighted_by(b.grad_true.data_ptr<acc_t>(), b.T)
                   .scaled_by(b.grad_loss.data_ptr<acc_t>())
                   .rows_of(b.input.data_ptr<scalar_t>(), b.D);
  return pairs;
}

}  // namespace loss
}  // namespace fastsoftmax
