// CPU implementations of the sampler ops: alias-table build, draws with replacement and
// TensorFlow-style unique candidate sampling. The arithmetic lives in csrc/common so the
// CUDA file computes the same bits.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../common/philox.h"
#include "../common/sampler_host.h"
#include "alias_simd.h"
#include "zero_pages.h"

namespace fastsoftmax {
namespace {

constexpr int64_t kGrain = 1 << 14;

struct CpuBackend {
  // Fixed-order scan: chunk totals, recursive scan of the totals, chunk prefixes.
  static double scan(const double* x, double* prefix, int64_t n, bool inclusive) {
    if (n <= kScanChunk) return fold_chunk(x, prefix, 0, n, 0.0, inclusive);
    const int64_t chunks = num_chunks(n);
    std::vector<double> totals(chunks), offsets(chunks);
    torch::stable::parallel_for(0, chunks, 16, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k)
        totals[k] = fold_chunk(x, nullptr, k * kScanChunk, std::min(n, (k + 1) * kScanChunk), 0.0);
    });
    const double total = scan(totals.data(), offsets.data(), chunks, false);
    if (prefix) {
      torch::stable::parallel_for(0, chunks, 16, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k)
          fold_chunk(x, prefix, k * kScanChunk, std::min(n, (k + 1) * kScanChunk), offsets[k],
                     inclusive);
      });
    }
    return total;
  }

  static Tensor fixed_scan(const Tensor& x, Tensor* prefix, bool inclusive) {
    const double total =
        scan(data<double>(x), prefix ? data<double>(*prefix) : nullptr, x.numel(), inclusive);
    return scalar(total, kDouble, x.device());
  }

  static void pack(const Tensor& values, const Tensor& scaled,
                   const Tensor& lights_through, bool lights, Tensor& packed_values,
                   Tensor& packed_ids) {
    const int64_t n = scaled.numel();
    const double* v = data<double>(values);
    const double* s = data<double>(scaled);
    const int32_t* through = data<int32_t>(lights_through);
    const int64_t num_light = through[n - 1];
    double* pv = data<double>(packed_values);
    int32_t* pi = data<int32_t>(packed_ids);
    torch::stable::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const bool light = s[i] < 1.0;
        if (light != lights) continue;
        const int64_t pos = packed_position(light, i, through[i], num_light);
        pv[pos] = v[i];
        pi[pos] = static_cast<int32_t>(i);
      }
    });
  }

  static void finalize(const Tensor& scaled, const Tensor& packed_values,
                       const Tensor& packed_ids, const Tensor& lights_through,
                       Tensor& prob, Tensor& alias) {
    const int64_t n = scaled.numel();
    const AliasSweep sweep =
        alias_sweep(data<double>(packed_values), data<int32_t>(packed_ids),
                    data<double>(scaled), n, data<int32_t>(lights_through)[n - 1]);
    float* p = data<float>(prob);
    int32_t* a = data<int32_t>(alias);
    // Donors and served counts only grow along the packed order: one binary search per
    // block, then cursors (O(V) instead of O(V log V) cache-missing searches).
    torch::stable::parallel_for(0, sweep.num_light, kGrain, [&](int64_t begin, int64_t end) {
      int64_t donor = -1;
      for (int64_t l = begin; l < end; ++l) {
        const double start = sweep.light_start[l];
        if (sweep.num_heavy == 0) {
          donor = 0;
        } else if (donor < 0) {
          donor = light_donor(sweep, start);
        } else {
          while (donor < sweep.num_heavy - 1 && sweep.heavy_end[donor] < start) ++donor;
        }
        const int32_t i = sweep.light_id[l];
        light_entry(sweep, i, sweep.scaled[i], donor, p, a);
      }
    });
    torch::stable::parallel_for(0, sweep.num_heavy, kGrain, [&](int64_t begin, int64_t end) {
      int64_t served = -1;
      for (int64_t h = begin; h < end; ++h) {
        if (served < 0) {
          served = lights_served(sweep, h);
        } else {
          while (served < sweep.num_light && sweep.light_start[served] <= sweep.heavy_end[h])
            ++served;
        }
        heavy_entry(sweep, sweep.heavy_id[h], h, served, p, a);
      }
    });
  }
};

std::tuple<Tensor, Tensor> alias_build_cpu(const Tensor& weights) {
  return build_alias_table<CpuBackend>(weights);
}

const float* prob_ptr(const Tensor& t, int64_t kind) {
  return kind == kAlias ? data<float>(t) : nullptr;
}
const int32_t* alias_ptr(const Tensor& t, int64_t kind) {
  return kind == kAlias ? data<int32_t>(t) : nullptr;
}

// Philox words for draws first..first+count-1, one array per word. Kept apart from the
// table lookups so that the compiler vectorises the rounds (AVX2 clone where available) and
// so that the lookups of a block are independent loads the core can overlap.
constexpr int kBlock = 128;
struct PhiloxBlock {
  uint32_t w[4][kBlock];
};

__attribute__((target_clones("avx512f", "avx2", "default"))) void philox_block(uint64_t key,
                                                                     uint32_t stream,
                                                                     uint64_t first, int count,
                                                                     PhiloxBlock& out) {
  for (int j = 0; j < count; ++j) {
    const Philox4 r = philox_at(key, stream, first + static_cast<uint64_t>(j));
    out.w[0][j] = r.x[0];
    out.w[1][j] = r.x[1];
    out.w[2][j] = r.x[2];
    out.w[3][j] = r.x[3];
  }
}

// Same values as draw_class() for draws first..first+count-1 (the tests hold the two equal).
void draw_block(int64_t kind, uint64_t key, uint64_t first, int count, const float* prob,
                const int32_t* alias, int64_t num_classes, TableStrides stride, int64_t* out) {
  // The vector code reads flat or interleaved tables, and takes V < 2^32 (alias tables always
  // are: their ids are int32); other strides and larger uniform ranges draw below.
  const bool together = kind == kAlias && interleaved(prob, alias, stride);
  const bool flat = kind == kAlias && stride.prob == 1 && stride.alias == 1;
  if ((together || flat || (kind == kUniform && num_classes < (int64_t{1} << 32))) &&
      alias_simd_supported()) {
    const int vec = count & ~7;
    if (together)
      philox_draws_avx512<kInterleaved>(key, kStreamSample, first, vec, prob, alias,
                                        num_classes, out);
    else if (flat)
      philox_draws_avx512<kTwoArrays>(key, kStreamSample, first, vec, prob, alias, num_classes,
                                      out);
    else
      philox_draws_avx512<kNoTable>(key, kStreamSample, first, vec, nullptr, nullptr,
                                    num_classes, out);
    for (int j = vec; j < count; ++j)
      out[j] = draw_class(kind, key, kStreamSample, first + j, prob, alias, num_classes, stride);
    return;
  }
  PhiloxBlock r;
  philox_block(key, kStreamSample, first, count, r);
  if (kind == kUniform) {
    for (int j = 0; j < count; ++j) out[j] = uniform_index(r.w[0][j], r.w[1][j], num_classes);
  } else if (kind == kLogUniform) {
    for (int j = 0; j < count; ++j)
      out[j] = log_uniform_draw(Philox4{{r.w[0][j], r.w[1][j], r.w[2][j], r.w[3][j]}}, num_classes);
  } else {
    // Both entries are read whatever the coin says, so the choice compiles to a select: as
    // `coin < prob ? bucket : alias[bucket]` it was a branch that mispredicted on a large
    // share of draws (17 against 10 ns a draw at V = 1e6, one core, a random table).
    for (int j = 0; j < count; ++j) {
      const int64_t bucket = uniform_index(r.w[0][j], r.w[1][j], num_classes);
      const double coin = uniform_double(r.w[2][j], r.w[3][j]);
      const double keep = static_cast<double>(prob[bucket * stride.prob]);
      const int64_t other = alias[bucket * stride.alias];
      out[j] = coin < keep ? bucket : other;
    }
  }
}

Tensor sample_cpu(const Tensor& prob, const Tensor& alias, const Tensor& seed,
                  int64_t num_classes, int64_t kind, std::vector<int64_t> size) {
  const TableStrides stride = check_sample_args(prob, alias, seed, num_classes, kind);
  Tensor out = empty(size, kLong, seed.device());
  const uint64_t key = static_cast<uint64_t>(*data<int64_t>(seed));
  const float* p = prob_ptr(prob, kind);
  const int32_t* a = alias_ptr(alias, kind);
  int64_t* o = data<int64_t>(out);
  const int64_t n = out.numel();
  advise_huge_pages(o, n * static_cast<int64_t>(sizeof(int64_t)));
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  torch::stable::parallel_for(0, blocks, kGrain / kBlock, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kBlock;
      const int count = static_cast<int>(std::min<int64_t>(kBlock, n - first));
      draw_block(kind, key, static_cast<uint64_t>(first), count, p, a, num_classes, stride,
                 o + first);
    }
  });
  return out;
}

// TensorFlow's unique sampling: draw until num_sampled distinct ids are seen, in order of
// first appearance; num_tries counts every draw taken. The caller guarantees that at least
// num_sampled classes have non-zero probability.
std::tuple<Tensor, Tensor> sample_unique_cpu(const Tensor& prob, const Tensor& alias,
                                             const Tensor& seed, int64_t num_classes,
                                             int64_t kind, int64_t num_sampled) {
  const TableStrides stride = check_sample_args(prob, alias, seed, num_classes, kind);
  check_num_sampled(num_sampled, num_classes);
  Tensor out = empty({num_sampled}, kLong, seed.device());
  const uint64_t key = static_cast<uint64_t>(*data<int64_t>(seed));
  const float* p = prob_ptr(prob, kind);
  const int32_t* a = alias_ptr(alias, kind);
  int64_t* o = data<int64_t>(out);
  std::vector<uint64_t> seen((num_classes + 63) / 64, 0);
  int64_t picked = 0;
  uint64_t tries = 0;
  while (picked < num_sampled) {
    check_unique_found(tries < kMaxUniqueTries, num_sampled);
    const int64_t c = draw_class(kind, key, kStreamUnique, tries++, p, a, num_classes, stride);
    uint64_t& word = seen[c >> 6];
    const uint64_t bit = uint64_t{1} << (c & 63);
    if (!(word & bit)) {
      word |= bit;
      o[picked++] = c;
    }
  }
  Tensor num_tries = empty({}, kLong, seed.device());
  *data<int64_t>(num_tries) = static_cast<int64_t>(tries);
  return {out, num_tries};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("alias_build", TORCH_BOX(&alias_build_cpu));
  m.impl("sample", TORCH_BOX(&sample_cpu));
  m.impl("sample_unique", TORCH_BOX(&sample_unique_cpu));
  m.impl("device_reads", TORCH_BOX(&device_reads));
}

}  // namespace fastsoftmax
