// CPU building blocks of the loss kernels: the row arithmetic of vec.h, stores from a wide
// accumulator, and the weight-gradient scatter.
//
// The scatter is deterministic: pairs are pushed in pair order, each into its class's row of
// the gradient (see scatter_pairs_cpu), so the result does not depend on the thread count.
#pragma once

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../common/loss_math.h"
#include "../common/stable.h"
#include "vec.h"
#include "zero_pages.h"

namespace fastsoftmax {
namespace loss {

using vec::axpy;
using vec::dot;
using vec::prefetch_row;

template <class scalar_t, class acc_t>
inline void store(scalar_t* out, const acc_t* acc, int64_t D) {
  for (int64_t d = 0; d < D; ++d) out[d] = static_cast<scalar_t>(acc[d]);
}

// Classes [first, last) of the range one thread owns in the scatter below.
struct ClassRange {
  int64_t first = 0, last = 0;
};

// Cuts [0, V) into `parts` contiguous ranges holding about the same number of pairs each
// (counts[v]: the pairs of class v), so that a hot class does not leave one thread with most
// of the work.
inline std::vector<ClassRange> balanced_ranges(const std::vector<int32_t>& counts, int64_t total,
                                               int64_t parts) {
  std::vector<ClassRange> out;
  const int64_t V = static_cast<int64_t>(counts.size());
  int64_t v = 0, seen = 0;
  for (int64_t r = 1; r <= parts && v < V; ++r) {
    const int64_t target = total * r / parts;
    ClassRange range;
    range.first = v;
    while (v < V && (seen < target || r == parts)) seen += counts[v++];
    range.last = v;
    if (range.last > range.first) out.push_back(range);
  }
  return out;
}

// Adds every pair of a class in `range` to its accumulator row, row by row: row n's pairs of
// group 0, then of group 1, n ascending (so negative sampling's inputs, the source of both
// groups, are read once). The accumulator row of class v is row_of[v] of `acc` (nullptr:
// row v); started[v]: whether it holds a value yet.
template <class scalar_t>
FS_ALWAYS_INLINE void push_pairs_body(const PairGroups<scalar_t, opmath_t<scalar_t>>& groups,
                                      ClassRange range, int64_t D, opmath_t<scalar_t>* acc,
                                      const int64_t* row_of, uint8_t* started) {
  using acc_t = opmath_t<scalar_t>;
  const int64_t first = range.first, last = range.last;
  const int64_t row_bytes = D * static_cast<int64_t>(sizeof(acc_t));
  int64_t rows = 0;
  for (int k = 0; k < groups.num; ++k) rows = std::max(rows, groups.g[k].rows);
  for (int64_t n = 0; n < rows; ++n) {
    for (int k = 0; k < groups.num; ++k) {
      const auto& g = groups.g[k];
      if (n >= g.rows) continue;
      if (n + 2 < g.rows)  // the rows of the pairs two rows on, for writing
        for (int64_t j = 0; j < g.per_row; ++j) {
          const int64_t later = g.id(n + 2, j);
          if (later >= first && later < last)
            prefetch_row(acc + (row_of ? row_of[later] : later) * D, row_bytes, true);
        }
      const scalar_t* x = g.src + n * g.src_row_stride;
      for (int64_t j = 0; j < g.per_row; ++j) {
        const int64_t v = g.id(n, j);
        if (v < first || v >= last) continue;
        acc_t* y = acc + (row_of ? row_of[v] : v) * D;
        const acc_t c = g.weight(n, j);
        if (started[v]) {
          axpy(y, c, x, D);
        } else {
          started[v] = 1;
          vec::scale(y, c, x, D);
        }
      }
    }
  }
}

// grad_W from pairs (see PairGroup). Dense: [V, D] zeros except touched rows. Sparse: the
// touched rows only, [U, D], with their ids [U] ascending. A pair whose id is V (padding,
// as the hierarchical softmax's short paths) is left out.
//
// Each thread owns a contiguous range of classes and walks every pair in a fixed order (row
// by row, see push_pairs_body), adding those of its classes to their rows: a class's row is
// the sum of its pairs in that order, accumulated in acc_t from zero, whatever the thread
// count.
// The source rows are read in order and the gradient rows are the random accesses, the
// reverse of gathering each class's pairs: the gradient (V rows) is smaller than the source
// (N rows) and its hot rows stay in cache, where a gather reads a random source row per pair.
// A row's first pair stores instead of adding, so a fresh page is only ever written, never
// read first (a read would map the zero page and fault again on the write).
template <class scalar_t>
std::tuple<Tensor, Tensor> scatter_pairs_cpu(const PairGroups<scalar_t, opmath_t<scalar_t>>& groups,
                                             int64_t V, int64_t D, bool sparse, ScalarType dtype) {
  using acc_t = opmath_t<scalar_t>;
  constexpr bool in_place = std::is_same<scalar_t, acc_t>::value;
  const int64_t P = groups.size();
  const int64_t threads = P >= 4096 ? std::max<int64_t>(1, torch::stable::get_num_threads()) : 1;
  const Device cpu(torch::headeronly::DeviceType::CPU);

  // Pairs per class: which rows are touched (how many: the huge-page hint of a dense output;
  // which: the rows of a sparse or compact acc_t result) and the balance of the threads'
  // ranges.
  const bool direct = in_place && !sparse;
  std::vector<int32_t> counts(V, 0);
  int64_t total = 0;
  for (int k = 0; k < groups.num; ++k) {
    const auto& g = groups.g[k];
    for (int64_t n = 0; n < g.rows; ++n)
      for (int64_t j = 0; j < g.per_row; ++j) {
        const int64_t v = g.id(n, j);
        if (v < V) ++counts[v], ++total;
      }
  }
  // The rows touched: a sparse or compact acc_t result has one row each (row_of: class ->
  // row); a dense one only needs their number.
  std::vector<int64_t> row_of, touched;
  int64_t U = 0;
  if (!direct) row_of.assign(V, -1);
  for (int64_t v = 0; v < V; ++v)
    if (counts[v] > 0) {
      if (!direct) {
        row_of[v] = U;
        touched.push_back(v);
      }
      ++U;
    }
  const std::vector<ClassRange> ranges = balanced_ranges(counts, total, threads);

  // The accumulator: the dense output itself (float, double), or U compact acc_t rows, every
  // one of them written by its first pair.
  Tensor out = sparse && in_place ? empty_for_writing({U, D}, dtype)
               : direct           ? lazy_zeros<scalar_t>(V, D, dtype, U)
                                  : empty_for_writing({U, D}, to_opmath(dtype));
  acc_t* acc = data<acc_t>(out);
  std::vector<uint8_t> started(V, 0);
  torch::stable::parallel_for(0, static_cast<int64_t>(ranges.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      vec::with_best_isa([&]() FS_INLINE_LAMBDA {
        push_pairs_body(groups, ranges[r], D, acc, direct ? nullptr : row_of.data(),
                        started.data());
      });
  });
  if (in_place) {
    Tensor ids = empty({sparse ? U : 0}, kLong, cpu);  // touched is filled when sparse
    if (sparse) std::copy(touched.begin(), touched.end(), data<int64_t>(ids));
    return {out, ids};
  }
  // half and bfloat16: round the float rows into the output.
  Tensor result =
      sparse ? empty_for_writing({U, D}, dtype) : lazy_zeros<scalar_t>(V, D, dtype, U);
  Tensor ids = empty({sparse ? U : 0}, kLong, cpu);
  scalar_t* o = data<scalar_t>(result);
  if (sparse) std::copy(touched.begin(), touched.end(), data<int64_t>(ids));
  torch::stable::parallel_for(0, U, 64, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) store(o + (sparse ? u : touched[u]) * D, acc + u * D, D);
  });
  return {result, ids};
}

}  // namespace loss
}  // namespace fastsoftmax
