// AVX-512 alias and uniform draws: eight Philox4x32-10 streams per register, the bucket and
// coin arithmetic of philox.h done lane-wise, and the alias table read with gathers (a
// uniform draw is the bucket alone). Bit-identical to alias_draw() and uniform_index() for
// every draw (the sampler tests compare both with the scalar reference).
//
// Why by hand: the compiler vectorises the 32x32->64 multiplies of the rounds with shuffles
// between even and odd lanes and leaves the table lookup scalar, where `coin < prob ? bucket
// : alias[bucket]` becomes a branch that mispredicts on a large share of draws. Here each
// draw keeps its four Philox words in the low halves of 64-bit lanes, so one vpmuludq gives
// the whole product (the high halves carry garbage that no later step reads), and the choice
// between bucket and alias is a blend.
//
// Compiled for AVX-512F/DQ through a target attribute, called only when the running CPU has
// them (alias_simd_supported()), so the library still runs on any x86-64.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "../common/philox.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FS_ALIAS_SIMD 1
#endif

namespace fastsoftmax {

#ifdef FS_ALIAS_SIMD

// FASTSOFTMAX_NO_AVX512=1 forces the portable path, so that a test can run it on a CPU that
// has AVX-512 and hold both paths to the same draws.
inline bool alias_simd_supported() {
  static const bool ok = [] {
    const char* off = std::getenv("FASTSOFTMAX_NO_AVX512");
    if (off && *off && *off != '0') return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return ok;
}

// GCC 12 warns inside its own AVX-512 headers (their _mm512_undefined_* placeholders) when
// they are inlined here; the warning is about the header, not this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// What the draws read: the alias table as two arrays, interleaved (prob and alias adjacent,
// one 8-byte gather a draw instead of two 4-byte ones), or nothing (uniform draws).
enum TableLayout { kTwoArrays, kInterleaved, kNoTable };

// The round keys of Philox4x32-10 for one seed, in every lane: the same for every draw, so
// made once a call (philox_keys_avx512).
struct PhiloxKeys512 {
  __m512i k0[10], k1[10];
};
__attribute__((target("avx512f,avx512dq"))) inline PhiloxKeys512 philox_keys_avx512(
    uint64_t key) {
  PhiloxKeys512 keys;
  uint32_t key0 = static_cast<uint32_t>(key), key1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    keys.k0[round] = _mm512_set1_epi64(key0);
    keys.k1[round] = _mm512_set1_epi64(key1);
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  return keys;
}

// The ten Philox rounds of eight draws at counters `index` (philox_at()'s index; one stream):
// c[0..3] end holding the four words of each draw in the low halves of their lanes.
__attribute__((target("avx512f,avx512dq"), always_inline)) inline void philox_rounds8(
    const PhiloxKeys512& keys, uint32_t stream, __m512i index, __m512i c[4]) {
  const __m512i mul0 = _mm512_set1_epi64(0xD2511F53u), mul1 = _mm512_set1_epi64(0xCD9E8D57u);
  // Counter words (index low, index high, stream, 0), as philox_at().
  __m512i c0 = index, c1 = _mm512_srli_epi64(index, 32), c2 = _mm512_set1_epi64(stream);
  __m512i c3 = _mm512_setzero_si512();
  for (int round = 0; round < 10; ++round) {
    const __m512i p0 = _mm512_mul_epu32(c0, mul0), p1 = _mm512_mul_epu32(c2, mul1);
    // 0x96: three-way xor.
    c0 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1, keys.k0[round], 0x96);
    c2 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3, keys.k1[round], 0x96);
    c1 = p1;  // low word of the product; its high half is never read
    c3 = p0;
  }
  c[0] = c0;
  c[1] = c1;
  c[2] = c2;
  c[3] = c3;
}

// One alias (or uniform) draw a lane from counters `index`: the bucket, or the bucket's alias
// where the coin says so (kNoTable: the bucket).
template <TableLayout kLayout>
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __m512i philox_draw8(
    const PhiloxKeys512& keys, uint32_t stream, __m512i index, const float* prob,
    const int32_t* alias, int64_t num_classes) {
  const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFFu);
  __m512i w[4];
  philox_rounds8(keys, stream, index, w);
  const __m512i c0 = w[0], c1 = w[1], c2 = w[2], c3 = w[3];
  // uniform_index(c0, c1, V): the high 64 bits of ((c0 << 32) | c1) * V, exact in two
  // 32x32 products because V < 2^32.
  const __m512i classes = _mm512_set1_epi64(num_classes);
  const __m512i hi = _mm512_mul_epu32(c0, classes), lo = _mm512_mul_epu32(c1, classes);
  const __m512i bucket = _mm512_srli_epi64(_mm512_add_epi64(hi, _mm512_srli_epi64(lo, 32)), 32);
  if constexpr (kLayout == kNoTable) {
    return bucket;
  } else {
    // uniform_double(c2, c3) < prob[bucket]: the 53-bit integer converts exactly, and
    // scaling by 2^-53 is exact, so this is the scalar comparison bit for bit.
    const __m512i bits = _mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(c2, low32), 21),
                                         _mm512_srli_epi64(_mm512_and_si512(c3, low32), 11));
    const __m512d coin =
        _mm512_mul_pd(_mm512_cvtepu64_pd(bits), _mm512_set1_pd(1.0 / 9007199254740992.0));
    __m512d p;
    __m512i other;
    if constexpr (kLayout == kInterleaved) {
      // One 8-byte entry a class: prob's bits in the low half, alias in the high half.
      const __m512i entry = _mm512_i64gather_epi64(bucket, static_cast<const void*>(prob), 8);
      // The low halves, as float bits.
      p = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_cvtepi64_epi32(entry)));
      other = _mm512_srai_epi64(entry, 32);
    } else {
      p = _mm512_cvtps_pd(_mm512_i64gather_ps(bucket, prob, 4));
      other = _mm512_cvtepi32_epi64(_mm512_i64gather_epi32(bucket, alias, 4));
    }
    const __mmask8 keep = _mm512_cmp_pd_mask(coin, p, _CMP_LT_OQ);
    return _mm512_mask_blend_epi64(keep, other, bucket);
  }
}

// Draws first..first+count-1 of the alias table (prob, alias) with num_classes < 2^31, or
// of the uniform distribution (kNoTable: prob and alias unread), into out[0, count); count is
// a multiple of 8.
template <TableLayout kLayout>
__attribute__((target("avx512f,avx512dq"))) inline void philox_draws_avx512(
    uint64_t key, uint32_t stream, uint64_t first, int64_t count, const float* prob,
    const int32_t* alias, int64_t num_classes, int64_t* out) {
  const PhiloxKeys512 keys = philox_keys_avx512(key);  // the same for every draw
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t j = 0; j < count; j += 8) {
    const __m512i index = _mm512_add_epi64(_mm512_set1_epi64(first + j), lane);
    _mm512_storeu_si512(out + j, philox_draw8<kLayout>(keys, stream, index, prob, alias,
                                                       num_classes));
  }
}

// The four words of the draws first..first+count-1 (philox_at()'s), word q of draw j at
// out[q * stride + j]; count is a multiple of 8.
__attribute__((target("avx512f,avx512dq"))) inline void philox_words_avx512(
    uint64_t key, uint32_t stream, uint64_t first, int64_t count, uint32_t* out,
    int64_t stride) {
  const PhiloxKeys512 keys = philox_keys_avx512(key);
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t j = 0; j < count; j += 8) {
    __m512i words[4];
    philox_rounds8(keys, stream, _mm512_add_epi64(_mm512_set1_epi64(first + j), lane), words);
    for (int q = 0; q < 4; ++q)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + q * stride + j),
                          _mm512_cvtepi64_epi32(words[q]));
  }
}

// The draws at counters index[0, count) of an alias table (num_classes < 2^31), as int32
// class ids; count is a multiple of 8.
template <TableLayout kLayout>
__attribute__((target("avx512f,avx512dq"))) inline void philox_draws_at_avx512(
    uint64_t key, uint32_t stream, const uint64_t* index, int64_t count, const float* prob,
    const int32_t* alias, int64_t num_classes, int32_t* out) {
  const PhiloxKeys512 keys = philox_keys_avx512(key);
  for (int64_t j = 0; j < count; j += 8) {
    const __m512i drawn = philox_draw8<kLayout>(keys, stream, _mm512_loadu_si512(index + j),
                                                prob, alias, num_classes);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), _mm512_cvtepi64_epi32(drawn));
  }
}

#pragma GCC diagnostic pop

#else

inline bool alias_simd_supported() { return false; }
enum TableLayout { kTwoArrays, kInterleaved, kNoTable };
template <TableLayout kLayout>
inline void philox_draws_avx512(uint64_t, uint32_t, uint64_t, int64_t, const float*,
                                const int32_t*, int64_t, int64_t*) {}
template <TableLayout kLayout>
inline void philox_draws_at_avx512(uint64_t, uint32_t, const uint64_t*, int64_t, const float*,
                                   const int32_t*, int64_t, int32_t*) {}
inline void philox_words_avx512(uint64_t, uint32_t, uint64_t, int64_t, uint32_t*, int64_t) {}

#endif

}  // namespace fastsoftmax
