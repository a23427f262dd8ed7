// corpus_count: the vocabulary scan of word2vec's corpus_file path. A run of whole lines of a
// UTF-8 file -> its distinct words in first-seen order with their counts, and the run's
// sentences and raw words, read as LineSentence reads them (text_scan.h). Python merges the
// runs of a file in order, so first-seen order holds across runs (gensim's tie rule needs it).
// A host op, like corpus_encode: no CUDA kernel.
//
// Shapes: B text bytes, U distinct words.
#include <cstring>
#include <string_view>
#include <vector>

#include "../common/stable.h"
#include "text_scan.h"

namespace fastsoftmax {
namespace {

// Open addressing over words that point into the text (alive for the call), growing at load
// 1/2; entries keep first-seen order.
class WordCounts {
 public:
  struct Entry {
    std::string_view word;
    uint64_t hash;
    int64_t count;
  };

  WordCounts() : slots_(1 << 12, -1) {}

  void word(const uint8_t* begin, size_t length, uint64_t h) {
    std::string_view w(reinterpret_cast<const char*>(begin), length);
    size_t mask = slots_.size() - 1;
    for (size_t s = slot(h, mask);; s = (s + 1) & mask) {
      int64_t e = slots_[s];
      if (e < 0) {
        slots_[s] = static_cast<int64_t>(entries_.size());
        entries_.push_back(Entry{w, h, 1});
        if (2 * entries_.size() > slots_.size()) grow();
        break;
      }
      if (entries_[e].hash == h && entries_[e].word == w) {
        ++entries_[e].count;
        break;
      }
    }
    ++words_;
  }
  void piece(int64_t) { ++sentences_; }
  void line_end() {}
  void bad_line() {}  // the caller raises: the counts are not used

  const std::vector<Entry>& entries() const { return entries_; }
  int64_t sentences() const { return sentences_; }
  int64_t words() const { return words_; }

 private:
  static size_t slot(uint64_t h, size_t mask) {
    return static_cast<size_t>(h * 0x9E3779B97F4A7C15ull >> 20) & mask;
  }
  void grow() {
    std::vector<int64_t> bigger(2 * slots_.size(), -1);
    size_t mask = bigger.size() - 1;
    for (size_t e = 0; e < entries_.size(); ++e) {
      size_t s = slot(entries_[e].hash, mask);
      while (bigger[s] >= 0) s = (s + 1) & mask;
      bigger[s] = static_cast<int64_t>(e);
    }
    slots_.swap(bigger);
  }

  std::vector<int64_t> slots_;
  std::vector<Entry> entries_;
  int64_t sentences_ = 0, words_ = 0;
};

std::tuple<Tensor, Tensor, Tensor, int64_t, int64_t, int64_t> corpus_count_cpu(
    const Tensor& text, int64_t max_sentence_words) {
  FS_CHECK_TYPE(text.scalar_type() == ScalarType::Byte, "corpus_count: text must be uint8, got ",
                text.scalar_type());
  FS_CHECK_VALUE(text.dim() == 1 && text.is_contiguous(),
                 "corpus_count: text must be a contiguous 1-D tensor");
  FS_CHECK_VALUE(max_sentence_words > 0, "corpus_count: max_sentence_words must be positive, "
                 "got ", max_sentence_words);
  WordCounts counts;
  const int64_t bad = text_scan::scan_lines(data<uint8_t>(text), text.numel(),
                                            max_sentence_words, counts);
  const auto& entries = counts.entries();
  const int64_t U = static_cast<int64_t>(entries.size());
  const Device cpu(torch::headeronly::DeviceType::CPU);
  Tensor ends = empty({U}, kLong, cpu), count = empty({U}, kLong, cpu);
  int64_t total = 0;
  for (int64_t i = 0; i < U; ++i) {
    total += static_cast<int64_t>(entries[i].word.size());
    data<int64_t>(ends)[i] = total;
    data<int64_t>(count)[i] = entries[i].count;
  }
  Tensor bytes = empty({total}, ScalarType::Byte, cpu);
  char* out = static_cast<char*>(bytes.data_ptr());
  for (const auto& e : entries) {
    std::memcpy(out, e.word.data(), e.word.size());
    out += e.word.size();
  }
  return {bytes, ends, count, counts.sentences(), counts.words(), bad};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("corpus_count", TORCH_BOX(&corpus_count_cpu));
}

}  // namespace fastsoftmax
