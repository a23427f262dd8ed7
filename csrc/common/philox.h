// Philox4x32-10 counter-based generator and the draw functions built on it.
//
// Shared verbatim by the CPU and CUDA kernels: a draw is a pure function of
// (seed, stream, draw index), so the same seed gives the same ids on every device
// and any draw can be recomputed without replaying a generator.
// Torch-free on purpose: nvcc compiles it on a machine without a GPU.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FS_HOST_DEVICE inline
#endif

namespace fastsoftmax {

struct Philox4 {
  uint32_t x[4];
};

FS_HOST_DEVICE uint32_t mulhi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

FS_HOST_DEVICE uint64_t mulhi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11), Philox4x32 with
// 10 rounds; the constants are those of the paper.
FS_HOST_DEVICE Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                     uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mulhi32(kMul0, c0), lo0 = kMul0 * c0;
    const uint32_t hi1 = mulhi32(kMul1, c2), lo1 = kMul1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Streams keep different uses of one seed apart.
enum Stream : uint32_t {
  kStreamSample = 0,
  kStreamUnique = 1,
  // word2vec: one draw per corpus token (subsampling coin + window shrink), and the
  // negatives of each prediction (see csrc/common/word2vec_math.h for the counter layout).
  kStreamW2vToken = 2,
  kStreamW2vNegative = 3,
};

// Unique sampling gives up after this many draws (the distribution then has fewer than
// num_sampled classes of non-negligible probability) and raises, on every device.
// The emulated CUDA build lowers it (FASTSOFTMAX_MAX_UNIQUE_TRIES) so a test can reach it.
#ifndef FASTSOFTMAX_MAX_UNIQUE_TRIES
#define FASTSOFTMAX_MAX_UNIQUE_TRIES (uint64_t{1} << 32)
#endif
constexpr uint64_t kMaxUniqueTries = FASTSOFTMAX_MAX_UNIQUE_TRIES;

// Kinds of distribution a draw can come from.
enum SamplerKind : int64_t { kAlias = 0, kUniform = 1, kLogUniform = 2 };

FS_HOST_DEVICE Philox4 philox_at(uint64_t seed, uint32_t stream, uint64_t index) {
  return philox4x32_10(static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream,
                       0u, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// 64 random bits -> uniform integer in [0, n) by multiply-high; the bias is n / 2^64,
// far below float32 resolution for any vocabulary.
FS_HOST_DEVICE int64_t uniform_index(uint32_t hi, uint32_t lo, int64_t n) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<int64_t>(mulhi64(bits, static_cast<uint64_t>(n)));
}

// 53 random bits -> double in [0, 1), exact multiples of 2^-53.
FS_HOST_DEVICE double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 21) | (lo >> 11);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// Walker/Vose alias draw: pick a bucket uniformly, keep it with probability prob[bucket],
// otherwise take its alias. Words 0-1 choose the bucket, words 2-3 the coin, so the two
// are independent. The halves may be strided (TableStrides, sampler_host.h): interleaved,
// one 8-byte entry (prob, alias) a class, a draw reads one place, not two.
struct TableStrides {
  int64_t prob = 1, alias = 1;
};
FS_HOST_DEVICE int64_t alias_draw(const Philox4& r, const float* prob, const int32_t* alias,
                                  int64_t num_classes, TableStrides stride = {}) {
  const int64_t bucket = uniform_index(r.x[0], r.x[1], num_classes);
  const double coin = uniform_double(r.x[2], r.x[3]);
  return coin < static_cast<double>(prob[bucket * stride.prob])
             ? bucket
             : static_cast<int64_t>(alias[bucket * stride.alias]);
}

// Log-uniform (Zipfian) draw by inversion, as TensorFlow's LogUniformSampler:
// P(c) = log((c + 2) / (c + 1)) / log(V + 1), so c = floor(exp(u * log(V + 1))) - 1.
FS_HOST_DEVICE int64_t log_uniform_draw(const Philox4& r, int64_t num_classes) {
  const double u = uniform_double(r.x[0], r.x[1]);
  const double log_range = log1p(static_cast<double>(num_classes));
  int64_t c = static_cast<int64_t>(floor(exp(u * log_range))) - 1;
  // exp() may round up to V + 1 when u is within an ulp of 1.
  if (c < 0) c = 0;
  if (c >= num_classes) c = num_classes - 1;
  return c;
}

FS_HOST_DEVICE int64_t draw_class(int64_t kind, uint64_t seed, uint32_t stream, uint64_t index,
                                  const float* prob, const int32_t* alias, int64_t num_classes,
                                  TableStrides stride = {}) {
  const Philox4 r = philox_at(seed, stream, index);
  if (kind == kAlias) return alias_draw(r, prob, alias, num_classes, stride);
  if (kind == kLogUniform) return log_uniform_draw(r, num_classes);
  return uniform_index(r.x[0], r.x[1], num_classes);
}

}  // namespace fastsoftmax
