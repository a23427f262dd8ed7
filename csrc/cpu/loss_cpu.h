// CPU building blocks of the loss kernels: the row arithmetic of vec.h, stores from a wide
// accumulator, and the weight-gradient scatter.
//
// The scatter is always deterministic on the CPU: pairs are counting-sorted by class id
// (stable, so pair order is kept within a class), then each touched class sums its pairs in
// that order, one class per task. The result does not depend on the thread count.
#pragma once

#include <tuple>
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

// grad_W from pairs (see PairGroup). Dense: [V, D] zeros except touched rows. Sparse: the
// touched rows only, [U, D], with their ids [U] ascending.
template <class scalar_t>
std::tuple<Tensor, Tensor> scatter_pairs_cpu(const PairGroups<scalar_t, opmath_t<scalar_t>>& groups,
                                             int64_t V, int64_t D, bool sparse, ScalarType dtype) {
  using acc_t = opmath_t<scalar_t>;
  const int64_t P = groups.size();
  // Counting sort by id: start[id] .. start[id + 1] indexes `order`, pairs in pair order.
  std::vector<int64_t> start(V + 1, 0);
  std::vector<int64_t> key(P);
  for (int64_t p = 0; p < P; ++p) {
    int which;
    int64_t n, j;
    groups.locate(p, which, n, j);
    key[p] = groups.g[which].id(n, j);
    ++start[key[p] + 1];
  }
  std::vector<int64_t> touched;
  for (int64_t v = 0; v < V; ++v) {
    if (start[v + 1] > 0) touched.push_back(v);
    start[v + 1] += start[v];
  }
  std::vector<int64_t> order(P), fill(start.begin(), start.end() - 1);
  for (int64_t p = 0; p < P; ++p) order[fill[key[p]]++] = p;

  // Sparse: one output row per touched class. Dense: [V, D] zeros (lazy_zeros: a large one
  // costs only the pages of the rows written), the touched rows then written.
  const int64_t U = static_cast<int64_t>(touched.size());
  const Device cpu(torch::headeronly::DeviceType::CPU);
  Tensor out = sparse ? empty({U, D}, dtype, cpu) : lazy_zeros<scalar_t>(V, D, dtype);
  Tensor ids = empty({sparse ? U : 0}, kLong, cpu);
  scalar_t* o = data<scalar_t>(out);
  if (sparse) std::copy(touched.begin(), touched.end(), data<int64_t>(ids));
  torch::stable::parallel_for(0, U, 16, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(D);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t v = touched[u];
      const int64_t row = sparse ? u : v;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t q = start[v]; q < start[v + 1]; ++q) {
        int which;
        int64_t n, j;
        if (q + 2 < P) {  // the source row two pairs ahead (pairs of a class are scattered)
          groups.locate(order[q + 2], which, n, j);
          prefetch_row(groups.g[which].src + n * groups.g[which].src_row_stride,
                       D * static_cast<int64_t>(sizeof(scalar_t)));
        }
        groups.locate(order[q], which, n, j);
        const auto& g = groups.g[which];
        axpy(acc.data(), g.weight(n, j), g.src + n * g.src_row_stride, D);
      }
      store(o + row * D, acc.data(), D);
    }
  });
  return {out, ids};
}

}  // namespace loss
}  // namespace fastsoftmax
