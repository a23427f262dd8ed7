// huffman_tree on the CPU: the host algorithm of csrc/common/huffman_tree.h on the counts.
#include "../common/huffman_tree.h"

namespace fastsoftmax {
namespace {

std::tuple<Tensor, Tensor> huffman_tree_cpu(const Tensor& counts, bool sort) {
  return huffman::tree_on_host(counts, sort);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("huffman_tree", TORCH_BOX(&huffman_tree_cpu));
}

}  // namespace fastsoftmax
