// The one door from fastsoftmax's C++ to torch: LibTorch's stable ABI (torch/csrc/stable and
// torch/headeronly), so that one compiled wheel loads under every torch from the target
// version (TORCH_TARGET_VERSION, set by setup.py) on. Nothing here links against ATen's C++
// symbols: tensors are torch::stable::Tensor, ops that the stable headers do not wrap are
// called by name through the dispatcher (`call`), and errors are std::runtime_error.
//
// Error types: a stable kernel can only raise RuntimeError in Python. The checks below tag
// their message ("ValueError: ...", "TypeError: ..."), and fastsoftmax/ops/ re-raises a
// tagged RuntimeError as the promised type with the tag removed.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <array>
#include <atomic>
#include <cstring>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// torch::stable's types have hidden visibility (an extension built against another torch
// must not share them); a struct holding one is marked hidden too, or GCC warns.
#define FS_HIDDEN __attribute__((visibility("hidden")))

namespace fastsoftmax {

using Tensor = torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using Device = torch::stable::Device;
using IntArrayRef = torch::headeronly::IntHeaderOnlyArrayRef;
using Half = torch::headeronly::Half;
using BFloat16 = torch::headeronly::BFloat16;

constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kDouble = ScalarType::Double;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr ScalarType kLong = ScalarType::Long;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kBool = ScalarType::Bool;

// The accumulation type of a storage type: float for the 16-bit floats, else itself
// (ATen's opmath_type).
template <class T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <class T>
using opmath_t = typename OpMath<T>::type;

inline ScalarType to_opmath(ScalarType t) {
  return t == kHalf || t == kBFloat16 ? kFloat : t;
}
inline bool is_floating(ScalarType t) {
  return t == kFloat || t == kDouble || t == kHalf || t == kBFloat16;
}

namespace detail {

// As ATen streams them (messages keep their wording across the port): Float, Long, ...
inline std::ostream& print(std::ostream& os, ScalarType t) {
  return os << torch::headeronly::toString(t);
}
inline std::ostream& print(std::ostream& os, const Device& d) {
  os << (d.is_cuda() ? "cuda" : d.is_cpu() ? "cpu" : "meta");
  if (d.is_cuda()) os << ":" << static_cast<int>(d.index());
  return os;
}
inline std::ostream& print(std::ostream& os, IntArrayRef sizes) {
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  return os << "]";
}
template <class T>
std::ostream& print(std::ostream& os, const T& v) {
  return os << v;
}

template <class... Args>
std::string message(const char* tag, const Args&... args) {
  std::ostringstream os;
  os << tag;
  (print(os, args), ...);
  return os.str();
}

}  // namespace detail

// Checks: FS_CHECK_VALUE raises ValueError, FS_CHECK_TYPE TypeError (through the Python
// wrappers' translation of the tag). Arguments are streamed; dtypes, devices and
// size lists print as ATen prints them.
#define FS_CHECK_TAGGED(tag, cond, ...)                                                \
  do {                                                                                 \
    if (!(cond))                                                                       \
      throw std::runtime_error(::fastsoftmax::detail::message(tag, ##__VA_ARGS__));   \
  } while (0)
#define FS_CHECK_VALUE(cond, ...) FS_CHECK_TAGGED("ValueError: ", cond, __VA_ARGS__)
#define FS_CHECK_TYPE(cond, ...) FS_CHECK_TAGGED("TypeError: ", cond, __VA_ARGS__)

// Calls the ATen op `name.overload` through the stable dispatcher and returns its first R
// results. The arguments are anything torch::stable::detail::from takes (tensors, int64_t,
// double, bool, optional, vectors of tensors or ints, ScalarType, Device).
inline void count_if_sized_by_data(const char* name);
template <size_t R = 1, class... Args>
std::array<Tensor, R> call_n(const char* name, const char* overload, const Args&... args) {
  count_if_sized_by_data(name);
  constexpr size_t n = sizeof...(Args) > R ? sizeof...(Args) : R;
  std::array<StableIValue, n> stack{torch::stable::detail::from(args)...};
  TORCH_ERROR_CODE_CHECK(torch_call_dispatcher(name, overload, stack.data(), TORCH_ABI_VERSION));
  std::array<Tensor, R> out;
  for (size_t i = 0; i < R; ++i) out[i] = torch::stable::detail::to<Tensor>(stack[i]);
  return out;
}
template <class... Args>
Tensor call(const char* name, const char* overload, const Args&... args) {
  return call_n<1>(name, overload, args...)[0];
}

// Tensor factories and conversions used across the kernels.
inline Tensor empty(IntArrayRef size, ScalarType dtype, Device device) {
  return torch::stable::empty(size, dtype, std::nullopt, device);
}
inline Tensor zeros(IntArrayRef size, ScalarType dtype, Device device) {
  return torch::stable::full(size, 0.0, dtype, std::nullopt, device);
}
inline Tensor full(IntArrayRef size, double value, ScalarType dtype, Device device) {
  return torch::stable::full(size, value, dtype, std::nullopt, device);
}
// A 0-dim tensor of `value` (ATen ops that take a Scalar are called with their .Tensor
// overload and such a tensor: the stable ABI has no Scalar).
inline Tensor scalar(double value, ScalarType dtype, Device device) {
  return full({}, value, dtype, device);
}
inline Tensor to(const Tensor& t, ScalarType dtype) {
  return t.scalar_type() == dtype ? t : torch::stable::to(t, dtype);
}
// ---- reads from the device -----------------------------------------------------------------
// Every copy of device data to the host waits for the device: a training step must make
// none. The emulated CUDA build (FASTSOFTMAX_EMULATE_CUDA, tests only) keeps its "device"
// tensors on the CPU but takes the device paths (on_host is false) and counts each read
// (host_reads), so that the tests see every synchronisation a GPU would make.
inline std::atomic<int64_t> host_reads{0};
inline bool on_host(const Tensor& t) {
#ifdef FASTSOFTMAX_EMULATE_CUDA
  (void)t;
  return false;
#else
  return t.is_cpu();
#endif
}
inline Tensor to_cpu(const Tensor& t) {
  if (on_host(t)) return t;
  host_reads.fetch_add(1, std::memory_order_relaxed);
  return t.is_cpu() ? t : torch::stable::to(t, Device(torch::headeronly::DeviceType::CPU));
}

// An op whose output size depends on the data (masked_select, nonzero, unique) reads that
// size back before it can allocate: on a GPU, a synchronisation as real as to_cpu's. The
// emulated build counts it as one read, so that the tests see it too.
inline void count_if_sized_by_data(const char* name) {
#ifdef FASTSOFTMAX_EMULATE_CUDA
  for (const char* op : {"aten::masked_select", "aten::nonzero", "aten::unique",
                         "aten::_unique", "aten::_unique2", "aten::unique_consecutive",
                         "aten::unique_dim", "aten::item",
                         "aten::_local_scalar_dense"})
    if (std::strcmp(name, op) == 0) host_reads.fetch_add(1, std::memory_order_relaxed);
#else
  (void)name;
#endif
}

// Deferred device checks (fastsoftmax.deferred_checks, set through the op device_reads):
// while set, the value checks of device ids (ranges, unique sampling's give-up) read nothing
// back. The Python op wrappers then keep the checks' flags on the device, replace bad ids by
// valid ones before any kernel sees them, and raise the same errors when the flags are read.
inline std::atomic<bool> deferred_checks{false};
inline bool checks_read_back() { return !deferred_checks.load(std::memory_order_relaxed); }

// A 0-dim CPU operand: ATen's elementwise ops take it next to tensors of any device, as a
// Python number would be, with no device allocation or copy.
inline Tensor cpu_scalar(double value, ScalarType dtype) {
  return scalar(value, dtype, Device(torch::headeronly::DeviceType::CPU));
}
inline Tensor any(const Tensor& t) { return call("aten::any", "", t); }
// The bool tensor t < lo or t >= hi (ids outside [lo, hi)).
inline Tensor outside(const Tensor& t, int64_t lo, int64_t hi) {
  return call("aten::logical_or", "", call("aten::lt", "Tensor", t, cpu_scalar(lo, kLong)),
              call("aten::ge", "Tensor", t, cpu_scalar(hi, kLong)));
}

// Typed data pointers (ATen's data_ptr<T>).
template <class T>
T* data(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// Dispatch over the floating dtypes the kernels take, binding scalar_t (ATen's
// AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, ...)).
template <class F>
void dispatch_floating(ScalarType t, const char* name, F&& f) {
  switch (t) {
    case kFloat: f(float{}); break;
    case kDouble: f(double{}); break;
    case kHalf: f(Half{}); break;
    case kBFloat16: f(BFloat16{}); break;
    default: FS_CHECK_TYPE(false, name, ": unsupported dtype ", t);
  }
}

}  // namespace fastsoftmax

// FS_DISPATCH_FLOATING(dtype, "name", [&] { ... scalar_t ... }).
#define FS_DISPATCH_FLOATING(TYPE, NAME, ...)                                          \
  ::fastsoftmax::dispatch_floating(TYPE, NAME, [&](auto fs_dispatch_tag) {             \
    using scalar_t = decltype(fs_dispatch_tag);                                        \
    (__VA_ARGS__)();                                                                   \
  })
