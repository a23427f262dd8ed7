// The rows one CPU word2vec worker trains (csrc/cpu/word2vec.cpp): with several workers, each
// keeps private copies of the most used output rows and merges them into the shared tables
// now and then; with one worker it trains the shared rows directly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "../common/word2vec_host.h"
#include "vec.h"

namespace fastsoftmax {
namespace w2v {

// Private copies of the rows [first, first + count) of one [*, D] table, for one worker: the
// worker reads and writes them instead of the shared rows, and merge() adds what it changed
// to the shared rows (the caller holds the lock).
class PrivateRows {
 public:
  PrivateRows(float* table, int64_t first, int64_t count, int64_t D)
      : table_(table), first_(first), count_(count), D_(D),
        base_(table + first * D, table + (first + count) * D), local_(base_) {}
  // Row `id` of the table: the private copy when it has one.
  FS_ALWAYS_INLINE float* row(int64_t id) {
    if (count_ == 0) return table_ + id * D_;  // one worker: no private rows
    // A select, not a branch: whether a row is private is a coin flip per row asked for (the
    // 256 most frequent words take ~40% of the draws), and the branch mispredicted on it.
    // Two threads, WikiText-2's calls replayed: CBOW 148 -> 139-141 ns a kept word,
    // skip-gram 406-410 -> 390-392.
    const uint64_t k = static_cast<uint64_t>(id - first_);
    const uintptr_t mine = uintptr_t{0} - static_cast<uintptr_t>(k < static_cast<uint64_t>(count_));
    const uintptr_t local = reinterpret_cast<uintptr_t>(local_.data() + k * D_);
    const uintptr_t shared = reinterpret_cast<uintptr_t>(table_ + id * D_);
    return reinterpret_cast<float*>((local & mine) | (shared & ~mine));
  }
  // shared += local - base, then local = base = shared.
  void merge() {
    float* shared = table_ + first_ * D_;
    for (size_t k = 0; k < local_.size(); ++k) {
      const float merged = shared[k] + (local_[k] - base_[k]);
      shared[k] = merged;
      local_[k] = merged;
      base_[k] = merged;
    }
  }

 private:
  float* table_;
  int64_t first_, count_, D_;
  std::vector<float> base_, local_;
};

// The rows one worker trains. With several workers, the rows that nearly every step writes
// made the cores pass the same cache lines back and forth (true sharing): two threads trained
// skip-gram slower than one with the hierarchical softmax, whose paths all start at the root,
// and only 1.2x faster with negative sampling, whose targets and negatives are mostly the
// most frequent words. So each worker of a multi-worker run trains private copies of the
// kHotRows most used output rows (the last-created inner nodes of syn1, which carry the
// largest counts, and the syn1neg rows of the most frequent words, ids 0.. of a vocabulary
// sorted by count) and merges them into the shared tables under a lock, every
// kStaleSteps / workers logistic steps (at least kMinMergeSteps) and at its end: no update is
// lost, and the other workers' changes arrive some hundreds of centres late.
// Why the interval shrinks with the workers: a worker's private row moves toward its own
// optimum, and a merge adds every worker's move, so between two merges the rows see
// kStaleSteps steps of all workers at once. Held at 32768 (16384 for each of two workers, the
// setting measured best on WikiText-2 with 2 threads), CBOW and skip-gram train the same
// loss at 1 to 16 threads; merging every 16384 steps of each worker instead let 8 workers
// add 131072 steps' moves and drove the most frequent words' rows out of the logistic range
// (training loss 2.6-3.5 against 2.09-2.30, docs/word2vec.md). Private copies of the input
// rows (syn0) gained nothing.
constexpr int64_t kHotRows = 256;
constexpr int64_t kStaleSteps = 32768;
constexpr int64_t kMinMergeSteps = 1024;

class WorkerRows {
 public:
  // No private rows (count 0) unless a lock says there are several (`workers`).
  WorkerRows(const TrainParams& a, std::mutex* lock, int64_t workers)
      : lock_(lock), syn1neg_(a.syn1neg, 0, 0, a.D), syn1_(a.syn1, 0, 0, a.D),
        merge_steps_(std::max(kMinMergeSteps, kStaleSteps / std::max<int64_t>(workers, 1))) {
    if (lock_ == nullptr) return;
    std::lock_guard<std::mutex> hold(*lock_);
    if (a.negative > 0) syn1neg_ = PrivateRows(a.syn1neg, 0, std::min(kHotRows, a.V), a.D);
    if (a.hs) {
      const int64_t nodes = std::min(kHotRows, a.V - 1);
      syn1_ = PrivateRows(a.syn1, a.V - 1 - nodes, nodes, a.D);
    }
  }
  FS_ALWAYS_INLINE float* output(int64_t w) { return syn1neg_.row(w); }  // syn1neg
  FS_ALWAYS_INLINE float* node(int64_t n) { return syn1_.row(n); }        // syn1
  // Called after each center with the logistic steps it took.
  FS_ALWAYS_INLINE void advance(int64_t steps) {
    if (lock_ != nullptr && (steps_ += steps) >= merge_steps_) merge();
  }
  void merge() {
    if (lock_ == nullptr) return;
    steps_ = 0;
    std::lock_guard<std::mutex> hold(*lock_);
    syn1neg_.merge();
    syn1_.merge();
  }

 private:
  std::mutex* lock_;  // nullptr: one worker, no copies
  PrivateRows syn1neg_, syn1_;
  int64_t merge_steps_;
  int64_t steps_ = 0;
};

}  // namespace w2v
}  // namespace fastsoftmax
