// The Huffman tree of the hierarchical softmax, built as word2vec.c's CreateBinaryTree builds it,
// so that a vocabulary gets the same codes and inner-node ids as there.
//
// word2vec.c keeps the leaves in an array sorted by falling count (position 0 = most frequent)
// and appends each new inner node after them. Both runs are then sorted by count (leaves read
// from the end, inner nodes created in non-decreasing order), so the two smallest nodes are
// always found among the two run heads: a two-pointer merge, O(V) after the sort. At a tie
// between the leaf head and the inner head the inner node is taken (word2vec.c compares
// `count[leaf] < count[inner]`). Of the two nodes merged, the second gets branch bit 1. Inner
// node i (0-based creation order) is the node word2vec.c stores at vocab_size + i; the root is
// inner node V - 2.
//
// Output, in class-id space: links int32 [2V - 1]. Nodes 0..V-1 are the classes (leaves),
// node V + i is inner node i; links[x] = 2 * parent_inner_id + branch_bit, and -1 at the root.
// lengths int64 [V]: the code length (number of inner nodes on the path) of every class.
//
// A host algorithm (sequential by nature: each merge depends on the previous one), shared by
// csrc/cpu/huffman_tree.cpp and csrc/cuda/huffman_tree.cu, which runs it on a host copy.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "stable.h"

namespace fastsoftmax {
namespace huffman {

template <class count_t>
void check_counts(const count_t* c, int64_t V) {
  for (int64_t v = 0; v < V; ++v) {
    FS_CHECK_VALUE(c[v] >= count_t(0) && !std::isinf(static_cast<double>(c[v])),
                   "class counts must be finite and non-negative; class ", v, " has count ",
                   static_cast<double>(c[v]));
  }
  if constexpr (std::is_integral<count_t>::value) {
    // Every inner count is a partial sum of the total, so only the total can overflow.
    count_t total = 0;
    for (int64_t v = 0; v < V; ++v) {
      FS_CHECK_VALUE(c[v] <= std::numeric_limits<count_t>::max() - total,
                     "the class counts sum to more than 2^63 - 1; scale them down");
      total += c[v];
    }
  }
}

template <class count_t>
void build(const count_t* counts_by_id, int64_t V, bool sort, int32_t* links, int64_t* lengths) {
  // order[k]: the class at word2vec.c's vocabulary position k.
  std::vector<int64_t> order(V);
  for (int64_t v = 0; v < V; ++v) order[v] = v;
  if (sort) {
    // Falling count, ties by rising class id: a total order, as a stable sort would give.
    std::vector<std::pair<count_t, int64_t>> keyed(V);
    for (int64_t v = 0; v < V; ++v) keyed[v] = {counts_by_id[v], v};
    std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (int64_t k = 0; k < V; ++k) order[k] = keyed[k].second;
  }
  // Positions 0..V-1 leaves in vocabulary order, V..2V-2 inner nodes in creation order.
  std::vector<count_t> count(2 * V - 1);
  std::vector<int64_t> parent(2 * V - 1, -1);
  std::vector<uint8_t> bit(2 * V - 1, 0);
  for (int64_t k = 0; k < V; ++k) count[k] = counts_by_id[order[k]];
  int64_t leaf = V - 1, inner = V;
  // The next node to merge. `created` inner nodes exist; an inner head not yet created counts
  // as +infinity (word2vec.c's 1e15 placeholder, which this also makes right for counts above
  // 1e15).
  auto take = [&](int64_t created) {
    const bool inner_ready = inner < V + created;
    if (leaf >= 0 && (!inner_ready || count[leaf] < count[inner])) return leaf--;
    return inner++;
  };
  for (int64_t a = 0; a < V - 1; ++a) {
    const int64_t first = take(a);
    const int64_t second = take(a);
    count[V + a] = count[first] + count[second];
    parent[first] = V + a;
    parent[second] = V + a;
    bit[second] = 1;
  }
  // Depth of every inner node: the root (last created) has depth 0 and a parent is always
  // created after its children, so one downward sweep over the creation order suffices.
  std::vector<int64_t> depth(V - 1, 0);
  for (int64_t i = V - 3; i >= 0; --i) depth[i] = depth[parent[V + i] - V] + 1;
  for (int64_t i = 0; i < V - 1; ++i) {
    const int64_t p = parent[V + i];
    links[V + i] = p < 0 ? -1 : static_cast<int32_t>(2 * (p - V) + bit[V + i]);
  }
  for (int64_t k = 0; k < V; ++k) {
    const int64_t p = parent[k];
    links[order[k]] = static_cast<int32_t>(2 * (p - V) + bit[k]);
    lengths[order[k]] = depth[p - V] + 1;
  }
}

// The checks a device file makes before copying counts to the host: dtype and shape.
inline void check_counts_tensor(const Tensor& counts) {
  FS_CHECK_TYPE(counts.scalar_type() == kLong || counts.scalar_type() == kDouble,
                "counts must be an int64 or float64 tensor, got ", counts.scalar_type());
  FS_CHECK_VALUE(counts.dim() == 1, "counts must be 1-D (one count per class), got shape ",
                 counts.sizes());
  const int64_t V = counts.numel();
  FS_CHECK_VALUE(V >= 2, "a hierarchical softmax needs at least 2 classes, got ", V);
  FS_CHECK_VALUE(V <= (int64_t(1) << 30),
                 "at most 2^30 classes are supported (links are int32), got ", V);
}

// (links, lengths) of CPU counts, on the CPU.
inline std::tuple<Tensor, Tensor> tree_on_host(const Tensor& counts_, bool sort) {
  check_counts_tensor(counts_);
  const int64_t V = counts_.numel();
  const Device cpu(torch::headeronly::DeviceType::CPU);
  const Tensor counts = contiguous(counts_);
  Tensor links = empty({2 * V - 1}, kInt, cpu);
  Tensor lengths = empty({V}, kLong, cpu);
  if (counts.scalar_type() == kLong) {
    check_counts(data<int64_t>(counts), V);
    build(data<int64_t>(counts), V, sort, data<int32_t>(links), data<int64_t>(lengths));
  } else {
    check_counts(data<double>(counts), V);
    build(data<double>(counts), V, sort, data<int32_t>(links), data<int64_t>(lengths));
  }
  return {links, lengths};
}

}  // namespace huffman
}  // namespace fastsoftmax
