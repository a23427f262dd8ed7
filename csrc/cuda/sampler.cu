// CUDA implementations of the sampler ops. The arithmetic is shared with the CPU file
// (csrc/common), so a table built here is bit-identical to one built on the CPU and the same
// seed draws the same ids. Nothing here synchronises with the host except the weight check
// in alias_build. Unique sampling is in sample_unique.cu.
#include <vector>

#include "../common/philox.h"
#include "../common/sampler_host.h"
#include "cuda_utils.cuh"
#include "sampler_draws.cuh"

namespace fastsoftmax {
namespace {

using cuda::kThreads;

int64_t grid_for(int64_t n) { return cuda::blocks_for(n, kThreads); }

// ---- fixed-order scan (see alias_table.h) ---------------------------------------------------
// Thread k folds chunk k (kScanChunk doubles) left to right, exactly as the CPU does. A block
// of kScanThreads threads stages its chunks through shared memory kScanStep elements at a
// time, so global reads and writes are coalesced (a thread walking its own chunk in global
// memory would read 2 KiB apart from its neighbours).

constexpr int kScanThreads = 128;
constexpr int kScanStep = 32;

__global__ void __launch_bounds__(kScanThreads)
    scan_chunks_kernel(const double* x, double* prefix, int64_t n, const double* offsets,
                       double* totals, bool inclusive) {
  __shared__ double tile[kScanThreads][kScanStep + 1];  // +1: fewer bank conflicts
  const int64_t chunks = num_chunks(n);
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t first = blockIdx.x * static_cast<int64_t>(kScanThreads); first < chunks;
       first += static_cast<int64_t>(gridDim.x) * kScanThreads) {
    const int64_t k = first + t;
    double running = (offsets != nullptr && k < chunks) ? offsets[k] : 0.0;
    for (int step = 0; step < kScanChunk; step += kScanStep) {
      for (int r = t; r < kScanThreads * kScanStep; r += kScanThreads) {  // coalesced load
        const int64_t i = (first + r / kScanStep) * kScanChunk + step + r % kScanStep;
        tile[r / kScanStep][r % kScanStep] = i < n ? x[i] : 0.0;
      }
      __syncthreads();
      const int64_t base = k * kScanChunk + step;
      for (int e = 0; e < kScanStep && base + e < n && k < chunks; ++e) {
        const double next = running + tile[t][e];
        tile[t][e] = inclusive ? next : running;
        running = next;
      }
      __syncthreads();
      if (prefix != nullptr) {  // may be x: this tile of x has been read
        for (int r = t; r < kScanThreads * kScanStep; r += kScanThreads) {  // coalesced store
          const int64_t i = (first + r / kScanStep) * kScanChunk + step + r % kScanStep;
          if (i < n) prefix[i] = tile[r / kScanStep][r % kScanStep];
        }
      }
      __syncthreads();
    }
    if (totals != nullptr && k < chunks) totals[k] = running;
  }
}

__global__ void fold_small_kernel(const double* x, double* prefix, int64_t n, double* total,
                                  bool inclusive) {
  *total = fold_chunk(x, prefix, 0, n, 0.0, inclusive);
}

struct CudaBackend {
  static void scan(const double* x, double* prefix, int64_t n, double* total,
                   const Device& device, bool inclusive) {
    if (n <= kScanChunk) {
      FS_LAUNCH(fold_small_kernel, 1, 1, 0, x, prefix, n, total, inclusive);
      return;
    }
    const int64_t chunks = num_chunks(n);
    const Tensor totals = empty({chunks}, kDouble, device);
    const Tensor offsets = empty({chunks}, kDouble, device);
    const int64_t grid = cuda::blocks_for(chunks, kScanThreads);
    FS_LAUNCH(scan_chunks_kernel, grid, kScanThreads, 0, x, nullptr, n, nullptr,
              data<double>(totals), false);
    scan(data<double>(totals), data<double>(offsets), chunks, total, device, false);
    if (prefix) {
      FS_LAUNCH(scan_chunks_kernel, grid, kScanThreads, 0, x, prefix, n,
                data<double>(offsets), nullptr, inclusive);
    }
  }

  static Tensor fixed_scan(const Tensor& x, Tensor* prefix, bool inclusive) {
    Tensor total = empty({}, kDouble, x.device());
    scan(data<double>(x), prefix ? data<double>(*prefix) : nullptr, x.numel(),
         data<double>(total), x.device(), inclusive);
    return total;
  }

  static void pack(const Tensor& values, const Tensor& scaled,
                   const Tensor& lights_through, bool lights, Tensor& packed_values,
                   Tensor& packed_ids);
  static void finalize(const Tensor& scaled, const Tensor& packed_values,
                       const Tensor& packed_ids, const Tensor& lights_through,
                       Tensor& prob, Tensor& alias);
};

// ---- alias-table build ---------------------------------------------------------------------
// The light count num_light = lights_through[n - 1] is read on the device: the split between
// lights and heavies never goes through the host.

__global__ void pack_kernel(const double* values, const double* scaled,
                            const int32_t* lights_through, int64_t n, bool lights,
                            double* packed_values, int32_t* packed_ids) {
  const int64_t num_light = lights_through[n - 1];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const bool light = scaled[i] < 1.0;
    if (light != lights) continue;
    const int64_t pos = packed_position(light, i, lights_through[i], num_light);
    packed_values[pos] = values[i];
    packed_ids[pos] = static_cast<int32_t>(i);
  }
}

__global__ void finalize_kernel(const double* scaled, const double* packed_values,
                                const int32_t* packed_ids, const int32_t* lights_through,
                                int64_t n, float* prob, int32_t* alias) {
  const AliasSweep sweep =
      alias_sweep(packed_values, packed_ids, scaled, n, lights_through[n - 1]);
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (j < sweep.num_light) {
      const int64_t donor = sweep.num_heavy ? light_donor(sweep, sweep.light_start[j]) : 0;
      const int32_t i = sweep.light_id[j];
      light_entry(sweep, i, scaled[i], donor, prob, alias);
    } else {
      const int64_t h = j - sweep.num_light;
      heavy_entry(sweep, sweep.heavy_id[h], h, lights_served(sweep, h), prob, alias);
    }
  }
}

void CudaBackend::pack(const Tensor& values, const Tensor& scaled,
                       const Tensor& lights_through, bool lights, Tensor& packed_values,
                       Tensor& packed_ids) {
  const int64_t n = scaled.numel();
  FS_LAUNCH(pack_kernel, grid_for(n), kThreads, 0, data<double>(values),
            data<double>(scaled), data<int32_t>(lights_through), n, lights,
            data<double>(packed_values), data<int32_t>(packed_ids));
}

void CudaBackend::finalize(const Tensor& scaled, const Tensor& packed_values,
                           const Tensor& packed_ids, const Tensor& lights_through,
                           Tensor& prob, Tensor& alias) {
  const int64_t n = scaled.numel();
  FS_LAUNCH(finalize_kernel, grid_for(n), kThreads, 0, data<double>(scaled),
            data<double>(packed_values), data<int32_t>(packed_ids),
            data<int32_t>(lights_through), n, data<float>(prob),
            data<int32_t>(alias));
}

std::tuple<Tensor, Tensor> alias_build_cuda(const Tensor& weights) {
  const cuda::DeviceGuard guard(weights.device());
  return build_alias_table<CudaBackend>(weights);
}

// ---- draws ---------------------------------------------------------------------------------

template <int64_t Kind>
__global__ void sample_kernel(const float* prob, const int32_t* alias, TableStrides stride,
                              const int64_t* seed, int64_t num_classes, int64_t n, int64_t* out) {
  const uint64_t key = static_cast<uint64_t>(seed[0]);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = draw_class(Kind, key, kStreamSample, static_cast<uint64_t>(i), prob, alias,
                        num_classes, stride);
}

Tensor sample_cuda(const Tensor& prob, const Tensor& alias, const Tensor& seed,
                   int64_t num_classes, int64_t kind, std::vector<int64_t> size) {
  const TableStrides stride = check_sample_args(prob, alias, seed, num_classes, kind);
  const cuda::DeviceGuard guard(seed.device());
  Tensor out = empty(size, kLong, seed.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  const float* p = prob_ptr(prob, kind);
  const int32_t* a = alias_ptr(alias, kind);
  const int64_t* s = data<int64_t>(seed);
  int64_t* o = data<int64_t>(out);
  with_kind(kind, [&](auto k) {
    FS_LAUNCH(sample_kernel<decltype(k)::value>, grid_for(n), kThreads, 0, p, a, stride, s,
              num_classes, n, o);
  });
  return out;
}

}  // namespace

FS_CUDA_IMPL(m) {
  m.impl("alias_build", TORCH_BOX(&alias_build_cuda));
  m.impl("sample", TORCH_BOX(&sample_cuda));
#ifdef FASTSOFTMAX_EMULATE_CUDA  // the emulated ops take CPU tensors; the product's is in cpu/
  m.impl("device_reads", TORCH_BOX(&device_reads));
#endif
}

}  // namespace fastsoftmax
