// huffman_tree for device counts. Each merge of the Huffman construction depends on the one
// before, so the tree is built on the host (csrc/common/huffman_tree.h, the CPU kernel's
// algorithm, so both give the same tree): counts come to the host, links and lengths go back
// to the counts' device. A tree is built once per model, so the two copies do not matter.
#include "../common/huffman_tree.h"
#include "runtime.cuh"

namespace fastsoftmax {
namespace {

std::tuple<Tensor, Tensor> huffman_tree_cuda(const Tensor& counts, bool sort) {
  huffman::check_counts_tensor(counts);  // before any copy
  auto [links, lengths] = huffman::tree_on_host(to_cpu(counts), sort);
  if (counts.is_cpu()) return {links, lengths};  // the emulated build: CPU tensors throughout
  const cuda::DeviceGuard guard(counts.device());
  return {torch::stable::to(links, counts.device()), torch::stable::to(lengths, counts.device())};
}

}  // namespace

FS_CUDA_IMPL(m) { m.impl("huffman_tree", TORCH_BOX(&huffman_tree_cuda)); }

}  // namespace fastsoftmax
