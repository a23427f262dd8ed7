// Pieces of the parallel Walker/Vose alias-table construction shared by CPU and CUDA.
//
// The sequential "sweep" (Vose 1991; Huebschle-Schneider & Sanders 2019) hands each light
// bucket (scaled weight s < 1) to the current heavy item, and when a heavy item falls below
// 1 it becomes a bucket of its own aliased to the next heavy item. Written with prefix sums
// the sweep has a closed form, which is what makes it parallel:
//   L_i  = sum of deficits (1 - s) of the lights before light i         (exclusive)
//   H_j  = sum of surpluses (s - 1) of heavies 0..j                      (inclusive)
//   light i   -> alias = first heavy j with H_j >= L_i,  prob = s_i
//   heavy j   -> alias = heavy j + 1, prob = 1 + H_j - (deficits of all lights with L <= H_j)
//   last heavy-> prob = 1
// Every prefix sum is computed in one fixed order (chunks of kScanChunk folded left to
// right, chunk totals scanned the same way, recursively), so the CPU and CUDA builds do
// the same float64 operations and produce bit-identical tables.
#pragma once

#include "philox.h"  // FS_HOST_DEVICE

namespace fastsoftmax {

constexpr int64_t kScanChunk = 256;

FS_HOST_DEVICE int64_t num_chunks(int64_t n) { return (n + kScanChunk - 1) / kScanChunk; }

// Left fold of x[begin, end) starting from `start`; writes the exclusive (or, with
// `inclusive`, the inclusive) prefixes to out when given. out may be x: each term is read
// before its prefix is written. Returns the fold's final value.
FS_HOST_DEVICE double fold_chunk(const double* x, double* out, int64_t begin, int64_t end,
                                 double start, bool inclusive = false) {
  double running = start;
  for (int64_t i = begin; i < end; ++i) {
    const double next = running + x[i];
    if (out) out[i] = inclusive ? next : running;
    running = next;
  }
  return running;
}

// First index in a[0, n) with a[idx] >= v (n when none).
FS_HOST_DEVICE int64_t lower_bound(const double* a, int64_t n, double v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// First index in a[0, n) with a[idx] > v (n when none).
FS_HOST_DEVICE int64_t upper_bound(const double* a, int64_t n, double v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] <= v) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// The lights and the heavies, each in class order, packed into one array of V values (the
// lights' exclusive deficit prefixes, then the heavies' inclusive surplus prefixes) and one
// of V class ids, so the build needs no separate compacted arrays.
struct AliasSweep {
  const double* light_start;  // [num_light] exclusive deficit prefix of each light
  const double* heavy_end;    // [num_heavy] inclusive surplus prefix of each heavy
  const int32_t* light_id;    // [num_light] class of each light
  const int32_t* heavy_id;    // [num_heavy] class of each heavy
  const double* scaled;       // [V] scaled weight of each class
  int64_t num_light;
  int64_t num_heavy;

  // Inclusive deficit prefix of light l: its exclusive prefix plus its own deficit, the very
  // addition the fold performed.
  FS_HOST_DEVICE double light_end(int64_t l) const {
    return light_start[l] + (1.0 - scaled[light_id[l]]);
  }
};

FS_HOST_DEVICE AliasSweep alias_sweep(const double* packed_values, const int32_t* packed_ids,
                                      const double* scaled, int64_t n, int64_t num_light) {
  return AliasSweep{packed_values,        packed_values + num_light, packed_ids,
                    packed_ids + num_light, scaled,                  num_light,
                    n - num_light};
}

// Where class i goes in the packed arrays: lights first, then heavies, each in class order.
// lights_through = number of lights among classes 0..i.
FS_HOST_DEVICE int64_t packed_position(bool light, int64_t i, int64_t lights_through,
                                       int64_t num_light) {
  return light ? lights_through - 1 : num_light + (i - lights_through);
}

// The heavy that donates to a light whose exclusive deficit prefix is `start`: the first
// heavy j with H_j >= start. Light starts grow with the class id, so callers that walk the
// lights in order may instead advance a cursor; both give this value.
FS_HOST_DEVICE int64_t light_donor(const AliasSweep& sw, double start) {
  const int64_t donor = lower_bound(sw.heavy_end, sw.num_heavy, start);
  return donor < sw.num_heavy ? donor : sw.num_heavy - 1;  // rounding past the last heavy
}

// Number of lights served by heavies 0..p: those with start <= H_p (monotone in p too).
FS_HOST_DEVICE int64_t lights_served(const AliasSweep& sw, int64_t p) {
  return upper_bound(sw.light_start, sw.num_light, sw.heavy_end[p]);
}

// Table entry of class i, a light with scaled weight `scaled`.
FS_HOST_DEVICE void light_entry(const AliasSweep& sw, int64_t i, double scaled, int64_t donor,
                                float* prob, int32_t* alias) {
  if (sw.num_heavy == 0) {  // all weights equal up to rounding
    prob[i] = 1.0f;
    alias[i] = static_cast<int32_t>(i);
    return;
  }
  prob[i] = static_cast<float>(scaled);
  alias[i] = sw.heavy_id[donor];
}

// Table entry of class i, the heavy at compacted position p, which with the heavies before
// it serves the first `served` lights.
FS_HOST_DEVICE void heavy_entry(const AliasSweep& sw, int64_t i, int64_t p, int64_t served,
                                float* prob, int32_t* alias) {
  if (p == sw.num_heavy - 1) {
    prob[i] = 1.0f;
    alias[i] = static_cast<int32_t>(i);
    return;
  }
  const double consumed = served > 0 ? sw.light_end(served - 1) : 0.0;
  double keep = 1.0 + sw.heavy_end[p] - consumed;
  keep = keep < 0.0 ? 0.0 : (keep > 1.0 ? 1.0 : keep);
  prob[i] = static_cast<float>(keep);
  alias[i] = sw.heavy_id[p + 1];
}

}  // namespace fastsoftmax
