// softplus and sigmoid of a block of scores, eight floats at a time.
//
// A loss kernel's epilogue calls them once per score (six per row of negative sampling):
// through libm's scalar expf and log1pf that was a fifth of a negative-sampling step. The
// float versions here take e = exp(-|x|) once and share it:
//   softplus(x) = max(x, 0) + log1p(e),   sigmoid(x) = x >= 0 ? 1 / (1 + e) : e / (1 + e)
// exp: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial in r, scaled by 2^n through the
// exponent bits. log1p(e) for e in [0, 1]: 2 atanh(s) with s = e / (2 + e) in [0, 1/3], a
// series in s^2 that stays accurate to the last bits as e goes to 0 (no 1 + e is formed).
// Both are within a few ulp of libm (tests/test_vec_math.py checks it against float64).
// Other types take loss_math.h's scalar functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../common/loss_math.h"
#include "vec.h"

// Every v8f function here is forced inline, so GCC's note that returning a 32-byte vector
// without AVX changes the calling convention does not apply.

#pragma GCC diagnostic ignored "-Wpsabi"

namespace fastsoftmax {
namespace vec {

typedef int32_t v8i __attribute__((vector_size(32), aligned(4)));

FS_ALWAYS_INLINE v8f splat(float a) { return v8f{} + a; }

// mask ? a : b lane by lane (mask from a comparison: all ones or zero), as bit operations:
// GCC turns a vector ?: into a branch per lane where the ISA has no blend (the baseline SSE2).
FS_ALWAYS_INLINE v8f select(v8i mask, v8f a, v8f b) {
  return (v8f)(((v8i)a & mask) | ((v8i)b & ~mask));
}

// exp(x) for x <= 0; below -87 (where expf leaves the normal range) it returns 0.
FS_ALWAYS_INLINE v8f exp_nonpositive(v8f x) {
  const v8f lo = splat(-87.0f);
  const v8i underflow = x < lo;
  x = select(underflow, lo, x);
  const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  const v8f n = __builtin_convertvector(
      __builtin_convertvector(x * log2e - 0.5f, v8i), v8f);  // round (x < 0)
  const v8f r = (x - n * ln2_hi) - n * ln2_lo;
  // exp(r) on [-ln2/2, ln2/2]: Taylor to r^7 (its error there is below 2^-27 relative).
  v8f p = splat(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const v8i scale = (__builtin_convertvector(n, v8i) + 127) << 23;  // 2^n, n >= -126
  v8f two_n;
  std::memcpy(&two_n, &scale, sizeof scale);
  const v8f out = p * two_n;
  return (v8f)((v8i)out & ~underflow);
}

// log1p(e) for e in [0, 1].
FS_ALWAYS_INLINE v8f log1p_unit(v8f e) {
  const v8f s = e / (2.0f + e);
  const v8f z = s * s;  // <= 1/9: the terms z^k / (2k + 1) fall by 9x each
  v8f q = splat(1.0f / 17.0f);
  q = q * z + 1.0f / 15.0f;
  q = q * z + 1.0f / 13.0f;
  q = q * z + 1.0f / 11.0f;
  q = q * z + 1.0f / 9.0f;
  q = q * z + 1.0f / 7.0f;
  q = q * z + 1.0f / 5.0f;
  q = q * z + 1.0f / 3.0f;
  q = q * z + 1.0f;
  return 2.0f * s * q;
}

// max(init, x[0], ..., x[n - 1]); a NaN x[i] is passed over, as std::max(m, NaN) would.
template <class acc_t>
FS_ALWAYS_INLINE acc_t max_of(const acc_t* x, int64_t n, acc_t init) {
  int64_t i = 0;
  acc_t m = init;
  if constexpr (std::is_same<acc_t, float>::value) {
    if (n >= 8) {
      v8f best = splat(init);
      for (; i + 8 <= n; i += 8) {
        const v8f xi = load8(x + i);
        best = select(xi > best, xi, best);
      }
      for (int l = 0; l < 8; ++l) m = std::max(m, best[l]);
    }
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// x[i] = exp(x[i] - m) for x[i] <= m (x[i] = -inf gives 0); returns their sum.
template <class acc_t>
FS_ALWAYS_INLINE acc_t exp_shifted(acc_t* x, int64_t n, acc_t m) {
  int64_t i = 0;
  acc_t sum = 0;
  if constexpr (std::is_same<acc_t, float>::value) {
    v8f total{};
    for (; i + 8 <= n; i += 8) {
      const v8f e = exp_nonpositive(load8(x + i) - m);
      std::memcpy(x + i, &e, sizeof e);
      total += e;
    }
    sum = ((total[0] + total[4]) + (total[1] + total[5])) +
          ((total[2] + total[6]) + (total[3] + total[7]));
  }
  for (; i < n; ++i) {
    x[i] = loss::fs_exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

// softplus[i] = softplus(x[i]) and sigmoid[i] = sigmoid(x[i]) for i < n; either output may
// be nullptr.
template <class acc_t>
FS_ALWAYS_INLINE void softplus_sigmoid(const acc_t* x, int64_t n, acc_t* softplus, acc_t* sigmoid) {
  int64_t i = 0;
  if constexpr (std::is_same<acc_t, float>::value) {
    for (; i + 8 <= n; i += 8) {
      const v8f xi = load8(x + i);
      const v8f e = exp_nonpositive(select(xi < 0.0f, xi, -xi));
      if (softplus) {
        const v8f sp = (v8f)((v8i)xi & (xi > 0.0f)) + log1p_unit(e);
        std::memcpy(softplus + i, &sp, sizeof sp);
      }
      if (sigmoid) {
        const v8f sg = select(xi >= 0.0f, splat(1.0f), e) / (1.0f + e);
        std::memcpy(sigmoid + i, &sg, sizeof sg);
      }
    }
  }
  for (; i < n; ++i) {
    if (softplus) softplus[i] = loss::softplus(x[i]);
    if (sigmoid) sigmoid[i] = loss::sigmoid(x[i]);
  }
}

}  // namespace vec
}  // namespace fastsoftmax

