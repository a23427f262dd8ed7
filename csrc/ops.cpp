// The one place every fastsoftmax op schema is declared. Each device file registers its
// own implementation with TORCH_LIBRARY_IMPL; Python adds fake (meta) kernels and
// autograd in fastsoftmax/ops.py.
#include <torch/library.h>

TORCH_LIBRARY(fastsoftmax, m) {
  // Samplers. `seed` is an int64 tensor of one element on the sampler's device; `kind` is
  // 0 alias table, 1 uniform, 2 log-uniform (prob and alias are ignored unless 0).
  m.def("alias_build(Tensor weights) -> (Tensor prob, Tensor alias)");
  m.def(
      "sample(Tensor prob, Tensor alias, Tensor seed, int num_classes, int kind, SymInt[] size)"
      " -> Tensor");
  m.def(
      "sample_unique(Tensor prob, Tensor alias, Tensor seed, int num_classes, int kind,"
      " int num_sampled) -> (Tensor sampled, Tensor num_tries)");
}
