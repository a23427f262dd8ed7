// Scalar maths shared by the CPU and CUDA loss kernels, and the description of a weight
// gradient as a list of (id, coefficient, source row) pairs.
// Torch-free on purpose: nvcc compiles it on a machine without a GPU.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FS_LOSS_HD __host__ __device__ __forceinline__
#else
#define FS_LOSS_HD inline
#endif

namespace fastsoftmax {
namespace loss {

// Sampled-logits modes (the `mode` argument of sampled_logits_forward).
constexpr int64_t kSoftmax = 0;
constexpr int64_t kNce = 1;

FS_LOSS_HD float fs_exp(float x) { return expf(x); }
FS_LOSS_HD double fs_exp(double x) { return exp(x); }
FS_LOSS_HD float fs_log(float x) { return logf(x); }
FS_LOSS_HD double fs_log(double x) { return log(x); }
FS_LOSS_HD float fs_log1p(float x) { return log1pf(x); }
FS_LOSS_HD double fs_log1p(double x) { return log1p(x); }
FS_LOSS_HD float fs_abs(float x) { return fabsf(x); }
FS_LOSS_HD double fs_abs(double x) { return fabs(x); }

// softplus(x) = log(1 + e^x) = -log sigmoid(-x), written as max(x, 0) + log1p(e^{-|x|}) so
// that neither tail overflows: exact for |x| large (e^{-|x|} underflows to 0 harmlessly).
template <class T>
FS_LOSS_HD T softplus(T x) {
  return (x > T(0) ? x : T(0)) + fs_log1p(fs_exp(-fs_abs(x)));
}

// sigmoid(x) = 1 / (1 + e^{-x}), evaluated through e^{-|x|} <= 1 so it never overflows.
template <class T>
FS_LOSS_HD T sigmoid(T x) {
  const T e = fs_exp(-fs_abs(x));
  return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

// A weight gradient written as pairs: grad_W[id(n, j)] += coef(n, j) * scale(n) * src[n, :],
// for n < rows and j < per_row. One group describes e.g. "every (row, negative) pair" or
// "every sampled class, its row of grad_Ws". A backward passes one or two groups; the pair
// index p runs over group 0 then group 1, row-major. The deterministic kernels sum a class's
// pairs in a fixed order: the CUDA one in that pair order, the CPU one row by row (row n's
// pairs of group 0, then of group 1).
template <class scalar_t, class acc_t>
struct PairGroup {
  int64_t rows = 0;
  int64_t per_row = 0;
  const int64_t* ids = nullptr;  // id(n, j) = ids[n * ids_row_stride + j]
  int64_t ids_row_stride = 0;    // 0: every row shares the same ids (shared negatives)
  const acc_t* coef = nullptr;   // coef(n, j) = coef[n * coef_row_stride + j]; nullptr: 1
  int64_t coef_row_stride = 0;
  const acc_t* scale = nullptr;  // scale(n) = scale[n]; nullptr: 1
  const scalar_t* src = nullptr;  // source row n = src + n * src_row_stride
  int64_t src_row_stride = 0;

  // Named builders: PairGroup::of(rows, per_row, ids, ids_row_stride)
  //   .weighted_by(coef, coef_row_stride).scaled_by(scale).rows_of(src, src_row_stride)
  FS_LOSS_HD static PairGroup of(int64_t rows, int64_t per_row, const int64_t* ids,
                                 int64_t ids_row_stride) {
    PairGroup g;
    g.rows = rows;
    g.per_row = per_row;
    g.ids = ids;
    g.ids_row_stride = ids_row_stride;
    return g;
  }
  FS_LOSS_HD PairGroup weighted_by(const acc_t* c, int64_t row_stride) const {
    PairGroup g = *this;
    g.coef = c;
    g.coef_row_stride = row_stride;
    return g;
  }
  FS_LOSS_HD PairGroup scaled_by(const acc_t* s) const {
    PairGroup g = *this;
    g.scale = s;
    return g;
  }
  FS_LOSS_HD PairGroup rows_of(const scalar_t* s, int64_t row_stride) const {
    PairGroup g = *this;
    g.src = s;
    g.src_row_stride = row_stride;
    return g;
  }

  FS_LOSS_HD int64_t size() const { return rows * per_row; }
  FS_LOSS_HD int64_t id(int64_t n, int64_t j) const { return ids[n * ids_row_stride + j]; }
  FS_LOSS_HD acc_t weight(int64_t n, int64_t j) const {
    acc_t c = coef ? coef[n * coef_row_stride + j] : acc_t(1);
    return scale ? c * scale[n] : c;
  }
};

template <class scalar_t, class acc_t>
struct PairGroups {
  PairGroup<scalar_t, acc_t> g[2];
  int num = 0;
  FS_LOSS_HD int64_t size() const { return (num > 0 ? g[0].size() : 0) + (num > 1 ? g[1].size() : 0); }
  // Pair p -> (group, row n, column j).
  FS_LOSS_HD void locate(int64_t p, int& which, int64_t& n, int64_t& j) const {
    which = 0;
    if (p >= g[0].size()) {
      p -= g[0].size();
      which = 1;
    }
    n = p / g[which].per_row;
    j = p - n * g[which].per_row;
  }
};

}  // namespace loss
}  // namespace fastsoftmax
