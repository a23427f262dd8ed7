// Host-side argument checks of the loss ops, shared by the CPU and CUDA files. Every check a
// kernel relies on (ids in range, shapes, dtypes, devices) happens here, before any kernel is
// launched, so a bad id is a Python ValueError on CUDA too, never a device-side assert.
// Tensor expressions on the host go through the dispatcher (stable.h's `call`).
#pragma once

#include "loss_math.h"
#include "stable.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>


namespace fastsoftmax {
namespace loss {

// Named apart from torch::stable's functions, which argument-dependent lookup also finds.
inline Tensor flat(const Tensor& t) { return torch::stable::reshape(t, {-1}); }
inline Tensor equals(const Tensor& ids, int64_t v) {
  return call("aten::eq", "Tensor", ids, cpu_scalar(v, kLong));
}
inline Tensor index_select(const Tensor& t, const Tensor& index) {
  return call("aten::index_select", "", t, int64_t{0}, index);
}
inline Tensor mm(const Tensor& a, const Tensor& b) { return call("aten::mm", "", a, b); }
inline Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  return call("aten::narrow", "", t, dim, start, length);
}
inline Tensor transposed(const Tensor& t) { return torch::stable::transpose(t, 0, 1); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return call("aten::mul", "Tensor", a, b); }
// a + b (sub's alpha is a double in the stable wrapper; a - (-1) b is a + b exactly).
inline Tensor add(const Tensor& a, const Tensor& b) { return torch::stable::subtract(a, b, -1.0); }

// input [N, D] and weight [V, D]: same floating dtype and device; bias [V] likewise.
inline void check_dense(const Tensor& input, const Tensor& weight,
                        const std::optional<Tensor>& bias = std::nullopt) {
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
  if (bias.has_value()) {
    FS_CHECK_TYPE(bias->scalar_type() == input.scalar_type(),
                  "bias and input must have the same dtype, got bias ", bias->scalar_type(),
                  " and input ", input.scalar_type());
    FS_CHECK_VALUE(bias->device() == input.device(), "bias is on ", bias->device(),
                   " but input is on ", input.device());
    FS_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == weight.size(0),
                   "bias must be 1-D with one entry per class (", weight.size(0),
                   "), got shape ", bias->sizes());
  }
}

inline void check_ids_tensor(const Tensor& ids, const char* name, const Tensor& like) {
  FS_CHECK_TYPE(ids.scalar_type() == kLong, name, " must be an int64 tensor, got ",
                ids.scalar_type());
  FS_CHECK_VALUE(ids.device() == like.device(), name, " is on ", ids.device(),
                 " but input is on ", like.device());
}

// The value checks of every id tensor of one call. target [N, T] may hold ignore_index (a
// whole row of it: the row is ignored); others must lie in [0, V). CPU ids are read in
// place, one pass each. On a device each check is a flag tensor, and the flags of the whole
// call come to the host in one device-to-host copy (run()); only a failed check copies its
// ids, to find the offending values for the message.
struct FS_HIDDEN IdChecks {
  int64_t num_classes;
  int64_t ignore_index;
  std::vector<Tensor> flags, tensors;  // device only: a bool per check, and its ids
  std::vector<std::string> names;

  void check_cpu(const Tensor& ids, const std::string& name) const {
    const bool is_target = name == "target";
    const Tensor t = contiguous(ids);
    const int64_t* v = data<int64_t>(t);
    const int64_t n = t.numel();
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (int64_t i = 0; i < n; ++i)
      if ((v[i] < 0 || v[i] >= num_classes) && !(is_target && v[i] == ignore_index))
        lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
    FS_CHECK_VALUE(lo > hi, name, " ids must lie in [0, ", num_classes, ")",
                   is_target ? " or equal ignore_index" : "", "; found ", lo,
                   " (min offending) and ", hi, " (max offending)");
    const int64_t T = is_target ? t.size(1) : 1;
    for (int64_t r = 0; T > 1 && r < n; r += T) {
      int64_t ignored = 0;
      for (int64_t j = 0; j < T; ++j) ignored += v[r + j] == ignore_index;
      FS_CHECK_VALUE(ignored == 0 || ignored == T, "a target row mixes ignore_index (",
                     ignore_index, ") with class ids: with num_true > 1 a row is ignored only "
                     "when all its targets equal ignore_index");
    }
  }

  void ids(const Tensor& t, const std::string& name) {
    if (t.numel() == 0) return;
    if (on_host(t)) return check_cpu(t, name);
    Tensor bad = outside(t, 0, num_classes);
    if (name == "target") {
      const Tensor ignored = equals(t, ignore_index);
      bad = call("aten::logical_and", "", bad, call("aten::logical_not", "", ignored));
      if (t.size(1) > 1) {  // rows mixing ignored and class ids, checked after the range
        flags.push_back(any(bad));
        tensors.push_back(t), names.push_back(name);
        bad = call("aten::ne", "Tensor", call("aten::any", "dim", ignored, int64_t{1}, false),
                   call("aten::all", "dim", ignored, int64_t{1}, false));
      }
    }
    flags.push_back(any(bad));
    tensors.push_back(t), names.push_back(name);
  }
  void target(const Tensor& t) { ids(t, "target"); }

  void run() const {
    if (flags.empty() || !checks_read_back()) return;
    const Tensor f = to_cpu(call("aten::stack", "", flags, int64_t{0}));
    const bool* is_bad = data<bool>(f);
    for (size_t i = 0; i < flags.size(); ++i)
      if (is_bad[i]) check_cpu(to_cpu(tensors[i]), names[i]);  // throws the check's error
  }
};

// target [N, T] with ignored rows' ids replaced by 0: safe to gather with, and a row is
// recognised as ignored by its (zero) coefficients in the backward.
inline Tensor safe_target(const Tensor& target, int64_t ignore_index) {
  return contiguous(call("aten::masked_fill", "Tensor", target, equals(target, ignore_index),
                     cpu_scalar(0, kLong)));
}

inline void check_target(const Tensor& target, const Tensor& input) {
  check_ids_tensor(target, "target", input);
  FS_CHECK_VALUE(target.dim() == 2 && target.size(0) == input.size(0) && target.size(1) > 0,
                 "target must be [N, num_true] with N = ", input.size(0), " rows, got shape ",
                 target.sizes());
}

// negative_sampling_*: input [N, D], weight [V, D], target [N, T], negatives [N, K] (per
// row) or [K] (shared by every row).
inline void check_negative_sampling(const Tensor& input, const Tensor& weight,
                                    const Tensor& target, const Tensor& negatives,
                                    int64_t ignore_index) {
  check_dense(input, weight);
  check_target(target, input);
  check_ids_tensor(negatives, "negatives", input);
  FS_CHECK_VALUE(negatives.dim() == 1 ||
                     (negatives.dim() == 2 && negatives.size(0) == input.size(0)),
                 "negatives must be [N, K] (per row) or [K] (shared) with N = ", input.size(0),
                 ", got shape ", negatives.sizes());
  IdChecks checks{weight.size(0), ignore_index};
  checks.target(target);
  checks.ids(negatives, "negatives");
  checks.run();
}

// sampled_logits_*: sampled [S] shared by the batch, its expected counts [S], the true
// classes' expected counts [N, T] (float, positive).
inline void check_sampled_logits(const Tensor& input, const Tensor& weight,
                                 const std::optional<Tensor>& bias, const Tensor& target,
                                 const Tensor& sampled, const Tensor& true_expected,
                                 const Tensor& sampled_expected, const Tensor& log_z,
                                 int64_t mode, int64_t ignore_index) {
  check_dense(input, weight, bias);
  check_target(target, input);
  check_ids_tensor(sampled, "sampled", input);
  FS_CHECK_VALUE(mode == kSoftmax || mode == kNce, "unknown sampled-logits mode ", mode);
  FS_CHECK_VALUE(sampled.dim() == 1 && sampled.size(0) > 0,
                 "sampled candidates must be a non-empty 1-D tensor [S], got shape ",
                 sampled.sizes());
  FS_CHECK_TYPE(is_floating(true_expected.scalar_type()) &&
                    is_floating(sampled_expected.scalar_type()),
                "expected counts must be floating-point tensors");
  FS_CHECK_VALUE(true_expected.device() == input.device() &&
                     sampled_expected.device() == input.device() &&
                     log_z.device() == input.device(),
                 "expected counts and log_z must be on the input's device (", input.device(),
                 ")");
  FS_CHECK_VALUE(true_expected.sizes() == target.sizes(),
                 "true_expected_count must have the target's shape ", target.sizes(), ", got ",
                 true_expected.sizes());
  FS_CHECK_VALUE(sampled_expected.sizes() == sampled.sizes(),
                 "sampled_expected_count must have the shape of sampled ", sampled.sizes(),
                 ", got ", sampled_expected.sizes());
  FS_CHECK_VALUE(log_z.numel() == 1 && is_floating(log_z.scalar_type()),
                 "log_z must be a floating-point tensor with one element");
  IdChecks checks{weight.size(0), ignore_index};
  checks.target(target);
  checks.ids(sampled, "sampled");
  checks.run();
}

// The logit offsets of sampled logits, in the accumulation dtype: per candidate column
// bias[s_j] - log Q(s_j) - log_z  [S], and per true class bias[t] - log Q(t) - log_z  [N, T].
inline std::tuple<Tensor, Tensor> logit_offsets(
    const std::optional<Tensor>& bias, const Tensor& safe_target, const Tensor& sampled,
    const Tensor& true_expected, const Tensor& sampled_expected, const Tensor& log_z,
    ScalarType acc_type) {
  const Tensor shift = torch::stable::reshape(to(log_z, acc_type), {});
  auto minus_log = [&](const Tensor& q) {
    return torch::stable::subtract(
        call("aten::neg", "", call("aten::log", "", to(q, acc_type))), shift);
  };
  Tensor col = minus_log(sampled_expected), row = minus_log(true_expected);
  if (bias.has_value()) {
    const Tensor b = to(*bias, acc_type);
    col = add(col, index_select(b, sampled));
    const Tensor b_true = index_select(b, flat(safe_target));
    row = add(row, torch::stable::reshape(b_true, safe_target.sizes()));
  }
  return {contiguous(col), contiguous(row)};
}

// The device-independent part of sampled_logits_forward: checks, contiguous operands, the
// per-column and per-true-class offsets (bias - log Q - log_z), the [N, S] logits H Ws^T and
// the outputs the device epilogue fills.
struct FS_HIDDEN SampledForward {
  Tensor input, weight, target, sampled, col, row_true, logits, loss, grad_true;
  int64_t N, D, T, S;
};

inline SampledForward sampled_forward_prologue(
    const Tensor& input_, const Tensor& weight_, const std::optional<Tensor>& bias,
    const Tensor& target_, const Tensor& sampled_, const Tensor& true_expected,
    const Tensor& sampled_expected, const Tensor& log_z, int64_t mode, int64_t ignore_index) {
  check_sampled_logits(input_, weight_, bias, target_, sampled_, true_expected, sampled_expected,
                       log_z, mode, ignore_index);
  SampledForward f;
  f.input = contiguous(input_), f.weight = contiguous(weight_);
  f.target = contiguous(target_), f.sampled = contiguous(sampled_);
  f.N = f.input.size(0), f.D = f.input.size(1), f.T = f.target.size(1), f.S = f.sampled.size(0);
  const ScalarType acc_type = to_opmath(f.input.scalar_type());
  const Device device = f.input.device();
  std::tie(f.col, f.row_true) = logit_offsets(bias, safe_target(f.target, ignore_index),
                                              f.sampled, true_expected, sampled_expected, log_z,
                                              acc_type);
  f.logits = contiguous(mm(f.input, transposed(index_select(f.weight, f.sampled))));  // [N, S]
  f.loss = empty({f.N}, acc_type, device);
  f.grad_true = empty({f.N, f.T}, acc_type, device);
  return f;
}

// sampled_logits_forward's outputs (loss, grad_logits, grad_true). Without need_grad the
// gradient pieces were not written: they come back with 0 rows, so that nothing of [N, S]
// outlives the call.
inline std::tuple<Tensor, Tensor, Tensor> without_grad_unless(bool need_grad,
                                                             const SampledForward& f) {
  if (need_grad) return {f.loss, f.logits, f.grad_true};
  const Device device = f.input.device();
  return {f.loss, empty({0, f.S}, f.input.scalar_type(), device),
          empty({0, f.T}, f.grad_true.scalar_type(), device)};
}

// The device-independent part of sampled_logits_backward: checks, contiguous operands and
// the two gradient matmuls, grad_input = G Ws [N, D] (the true-class terms are added by the
// device kernel) and grad_Ws = G^T (g * H) [S, D] (scattered into grad_W by the device).
struct FS_HIDDEN SampledBackward {
  Tensor input, weight, target, sampled, G, grad_true, grad_loss, grad_input, grad_Ws;
  int64_t N, D, V, T, S;
};

inline SampledBackward sampled_backward_prologue(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& target_,
    const Tensor& sampled_, const Tensor& grad_logits_, const Tensor& grad_true_,
    int64_t ignore_index) {
  check_dense(input_, weight_);
  check_target(target_, input_);
  SampledBackward b;
  b.input = contiguous(input_), b.weight = contiguous(weight_);
  b.target = safe_target(target_, ignore_index), b.sampled = contiguous(sampled_);
  b.N = b.input.size(0), b.D = b.input.size(1), b.V = b.weight.size(0), b.T = b.target.size(1);
  b.S = b.sampled.size(0);
  const ScalarType dtype = b.input.scalar_type(), acc_type = to_opmath(dtype);
  const int64_t logits_shape[] = {b.N, b.S}, true_shape[] = {b.N, b.T};
  FS_CHECK_VALUE(grad_logits_.sizes() == IntArrayRef(logits_shape) &&
                     grad_logits_.scalar_type() == dtype,
                 "grad_logits must be the forward's [N, S] logit gradient");
  FS_CHECK_VALUE(grad_true_.sizes() == IntArrayRef(true_shape) &&
                     grad_true_.scalar_type() == acc_type,
                 "grad_true must be the forward's [N, T] true-logit gradient");
  FS_CHECK_VALUE(grad_loss_.numel() == b.N, "grad_loss must have one entry per row");
  b.G = contiguous(grad_logits_);
  b.grad_true = contiguous(grad_true_);
  b.grad_loss = contiguous(to(grad_loss_, acc_type));
  const Tensor Ws = index_select(b.weight, b.sampled);                                 // [S, D]
  b.grad_input = contiguous(mm(b.G, Ws));                                             // [N, D]
  const Tensor g = to(torch::stable::unsqueeze(b.grad_loss, 1), dtype);
  b.grad_Ws = contiguous(mm(transposed(b.G), mul(b.input, g)));               // G^T (g * H)
  return b;
}

// The device-independent part of negative_sampling_backward: checks of the forward's saved
// coefficients and contiguous operands. neg_stride is 0 for negatives shared by every row.
struct FS_HIDDEN NegativeSamplingBackward {
  Tensor input, weight, target, negatives, coef, grad_loss;
  int64_t N, D, V, T, K, J, neg_stride;
};

inline NegativeSamplingBackward negative_sampling_backward_prologue(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& target_,
    const Tensor& negatives_, const Tensor& coef_, int64_t ignore_index) {
  check_dense(input_, weight_);
  check_target(target_, input_);
  NegativeSamplingBackward b;
  b.input = contiguous(input_), b.weight = contiguous(weight_);
  b.target = safe_target(target_, ignore_index), b.negatives = contiguous(negatives_);
  b.N = b.input.size(0), b.D = b.input.size(1), b.V = b.weight.size(0), b.T = b.target.size(1);
  b.K = b.negatives.size(-1), b.J = b.T + b.K;
  b.neg_stride = b.negatives.dim() == 2 ? b.K : 0;
  const ScalarType acc_type = to_opmath(b.input.scalar_type());
  const int64_t coef_shape[] = {b.N, b.J};
  FS_CHECK_VALUE(coef_.sizes() == IntArrayRef(coef_shape) && coef_.scalar_type() == acc_type &&
                     coef_.device() == b.input.device(),
                 "coef must be the forward's [N, T + K] coefficients");
  FS_CHECK_VALUE(grad_loss_.numel() == b.N && grad_loss_.device() == b.input.device(),
                 "grad_loss must have one entry per row, on the input's device");
  b.coef = contiguous(coef_);
  b.grad_loss = contiguous(to(grad_loss_, acc_type));
  return b;
}

// dL/db[c] of sampled softmax / NCE: the summed gradients of every logit of class c, from
// the sampled logits G [N, S] and the true logits grad_true [N, T]. index_put_ with
// accumulate adds in a fixed order on the CPU and sorts on CUDA: deterministic on both.
inline Tensor sampled_bias_grad(const SampledBackward& b, bool has_bias) {
  const ScalarType dtype = b.input.scalar_type(), acc_type = to_opmath(dtype);
  const Device device = b.input.device();
  if (!has_bias) return empty({0}, dtype, device);
  Tensor gb = zeros({b.V}, acc_type, device);
  auto accumulate = [&](const Tensor& index, const Tensor& values) {
    call("aten::index_put_", "", gb, std::vector<std::optional<Tensor>>{index}, values, true);
  };
  const Tensor per_sampled =
      call("aten::mv", "", transposed(b.G), to(b.grad_loss, b.G.scalar_type()));  // [S]
  accumulate(b.sampled, to(per_sampled, acc_type));
  const Tensor per_true = mul(b.grad_true, torch::stable::unsqueeze(b.grad_loss, 1));  // [N, T]
  accumulate(flat(b.target), flat(per_true));
  return to(gb, dtype);
}

// The weight-gradient rows of sampled logits, for the device's scatter: each sampled class
// adds its row of grad_Ws; each true pair (n, t) adds g_n gt_nt h_n.
template <class scalar_t, class acc_t>
PairGroups<scalar_t, acc_t> sampled_weight_pairs(const SampledBackward& b) {
  using Pairs = PairGroup<scalar_t, acc_t>;
  PairGroups<scalar_t, acc_t> pairs;
  pairs.num = 2;
  pairs.g[0] =
      Pairs::of(b.S, 1, data<int64_t>(b.sampled), 1).rows_of(data<scalar_t>(b.grad_Ws), b.D);
  pairs.g[1] = Pairs::of(b.N, b.T, data<int64_t>(b.target), b.T)
                   .weighted_by(data<acc_t>(b.grad_true), b.T)
                   .scaled_by(data<acc_t>(b.grad_loss))
                   .rows_of(data<scalar_t>(b.input), b.D);
  return pairs;
}

}  // namespace loss
}  // namespace fastsoftmax
