// Row arithmetic shared by the CPU kernels (losses, hierarchical softmax, word2vec): dot
// products, y += c x, and cache prefetches of rows. D is the row length.
//
// float rows go through eight-float vectors (one AVX register; two SSE registers in the
// baseline build) with unaligned loads; other dtypes (float64 for gradcheck, half and
// bfloat16 accumulated in float) take the scalar loop. Both keep several independent partial
// sums: strict IEEE order forbids the compiler to reassociate a single running sum, which
// would make each addition wait on the previous one's latency.
#pragma once

#include <cstdint>
#include <type_traits>

// Hot helpers are forced inline: a kernel compiled for AVX2 (word2vec's train_sentences_avx2)
// only gets AVX2 code for what is inlined into it; a helper the compiler keeps out of line
// is compiled once, for the baseline ISA.
#define FS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace fastsoftmax {
namespace vec {

typedef float v8f __attribute__((vector_size(32), aligned(4)));
typedef float v4f __attribute__((vector_size(16), aligned(4)));  // the four left of D = 100

FS_ALWAYS_INLINE const v8f& load8(const float* p) { return *reinterpret_cast<const v8f*>(p); }

// The sum of a vector's eight lanes, pairwise.
FS_ALWAYS_INLINE float hsum(const v8f& s) {
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// Whether this CPU runs AVX2 with FMA.
inline bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

// Hot loops are compiled twice, for AVX2 with FMA and for the baseline, and pick at run time
// by the CPU's features (target_clones("arch=...") would test for a CPU model). The loop is a
// lambda marked FS_INLINE_LAMBDA around FS_ALWAYS_INLINE helpers, so that everything in it
// is compiled into each copy: with_best_isa([&]() FS_INLINE_LAMBDA { loop(...); }).
#define FS_INLINE_LAMBDA __attribute__((always_inline))
template <class F>
__attribute__((target("avx2,fma"), noinline)) void run_avx2_fma(const F& f) {
  f();
}
template <class F>
__attribute__((noinline)) void run_baseline(const F& f) {
  f();
}
template <class F>
inline void with_best_isa(const F& f) {
  if (has_avx2_fma()) run_avx2_fma(f);
  else run_baseline(f);
}

// sum_d a[d] b[d], accumulated in acc_t.
template <class scalar_t, class acc_t>
FS_ALWAYS_INLINE acc_t dot(const scalar_t* __restrict a, const scalar_t* __restrict b, int64_t D) {
  int64_t d = 0;
  if constexpr (std::is_same<scalar_t, float>::value && std::is_same<acc_t, float>::value) {
    // Four vectors of partial sums: rows are ~100 floats, so latency, not width, bounds it.
    v8f s0 = {}, s1 = {}, s2 = {}, s3 = {};
    for (; d + 32 <= D; d += 32) {
      s0 += load8(a + d) * load8(b + d);
      s1 += load8(a + d + 8) * load8(b + d + 8);
      s2 += load8(a + d + 16) * load8(b + d + 16);
      s3 += load8(a + d + 24) * load8(b + d + 24);
    }
    for (; d + 8 <= D; d += 8) s0 += load8(a + d) * load8(b + d);
    float r = hsum((s0 + s1) + (s2 + s3));
    for (; d < D; ++d) r += a[d] * b[d];
    return r;
  } else {
    acc_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (; d + 8 <= D; d += 8)
      for (int l = 0; l < 8; ++l)
        s[l] += static_cast<acc_t>(a[d + l]) * static_cast<acc_t>(b[d + l]);
    acc_t r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; d < D; ++d) r += static_cast<acc_t>(a[d]) * static_cast<acc_t>(b[d]);
    return r;
  }
}

// y[d] += c x[d] (y and x never overlap).
template <class scalar_t, class acc_t>
FS_ALWAYS_INLINE void axpy(acc_t* __restrict y, acc_t c, const scalar_t* __restrict x, int64_t D) {
  int64_t d = 0;
  if constexpr (std::is_same<scalar_t, float>::value && std::is_same<acc_t, float>::value) {
    for (; d + 8 <= D; d += 8) *reinterpret_cast<v8f*>(y + d) += c * load8(x + d);
    if (d + 4 <= D) {
      *reinterpret_cast<v4f*>(y + d) += c * *reinterpret_cast<const v4f*>(x + d);
      d += 4;
    }
  }
  for (; d < D; ++d) y[d] += c * static_cast<acc_t>(x[d]);
}

// y[d] = c x[d] (y and x never overlap): the first term of a sum, stored rather than added
// to zeros.
template <class scalar_t, class acc_t>
FS_ALWAYS_INLINE void scale(acc_t* __restrict y, acc_t c, const scalar_t* __restrict x, int64_t D) {
  int64_t d = 0;
  if constexpr (std::is_same<scalar_t, float>::value && std::is_same<acc_t, float>::value) {
    for (; d + 8 <= D; d += 8) *reinterpret_cast<v8f*>(y + d) = c * load8(x + d);
  }
  for (; d < D; ++d) y[d] = c * static_cast<acc_t>(x[d]);
}

// Asks for the cache lines of a row of `bytes` ahead of its use: the rows a kernel gathers
// are random rows of a large table, so without this every gather waits on DRAM latency.
// for_write: the row is about to be updated (word2vec's in-place SGD).
FS_ALWAYS_INLINE void prefetch_row(const void* row, int64_t bytes, bool for_write = false) {
  const char* p = static_cast<const char*>(row);
  if (for_write)
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 1);
  else
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
}

}  // namespace vec
}  // namespace fastsoftmax
