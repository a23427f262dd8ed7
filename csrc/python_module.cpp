// The Python module fastsoftmax._C: loading it registers the ops; it also reports how the
// extension was built so that fastsoftmax can refuse a mismatched torch with a clear message.
#include <torch/extension.h>

#ifdef WITH_CUDA
#include <cuda.h>  // CUDA_VERSION
#endif

#ifndef FASTSOFTMAX_TORCH_VERSION
#define FASTSOFTMAX_TORCH_VERSION "unknown"
#endif
#ifndef FASTSOFTMAX_CUDA_ARCH_LIST
#define FASTSOFTMAX_CUDA_ARCH_LIST ""
#endif

namespace {

pybind11::dict build_info() {
  pybind11::dict info;
#ifdef WITH_CUDA
  info["cuda"] = true;
#ifdef CUDA_VERSION
  info["cuda_version"] = std::to_string(CUDA_VERSION / 1000) + "." +
                         std::to_string((CUDA_VERSION % 1000) / 10);
#else
  info["cuda_version"] = "unknown";
#endif
#else
  info["cuda"] = false;
  info["cuda_version"] = pybind11::none();
#endif
  info["cuda_arch_list"] = std::string(FASTSOFTMAX_CUDA_ARCH_LIST);
  info["torch_version"] = std::string(FASTSOFTMAX_TORCH_VERSION);
  info["cxx11_abi"] = static_cast<bool>(_GLIBCXX_USE_CXX11_ABI);
  return info;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "fastsoftmax native ops (registered under torch.ops.fastsoftmax)";
  m.def("build_info", &build_info, "How this extension was built.");
}
