// corpus_encode: a run of whole lines of a UTF-8 text file -> word2vec's token buffer. The
// native half of `corpus_file=` (fastsoftmax/models/word2vec/corpus_file.py): the file is
// read once, in chunks cut at line ends, and every epoch replays the int32 buffer.
//
// The result is exactly what the Python path gives (LineSentence, then data.encode): a line
// is the bytes up to '\n'; its words are the runs between the characters Python's
// str.split() treats as whitespace (ASCII and Unicode); a line of more than
// max_sentence_words words is cut into pieces of that many, and an empty line is one empty
// sentence. Out-of-vocabulary words count in the sentence's raw words and are dropped from
// the tokens. Bytes that are not UTF-8 stop the scan; their offset comes back so that Python
// can name the file, line and byte as LineSentence does. A host op: the text is in host
// memory and the result feeds the trainer on any device, so it has no CUDA kernel. On a bad
// byte the result holds the sentences of the lines before the bad byte's line.
//
// Shapes: B text bytes, V vocabulary words, N in-vocabulary tokens, S sentences.
#include <cstring>
#include <string_view>
#include <vector>

#include "../common/stable.h"
#include "text_scan.h"

namespace fastsoftmax {
namespace {

using text_scan::hash_step;
using text_scan::kHashBasis;

// Open addressing over the vocabulary's UTF-8 bytes: word -> id, linear probing, load <= 1/2.
// A slot keeps the high half of its word's hash, so that a probe compares bytes only on a
// likely match.
class VocabTable {
 public:
  VocabTable(const uint8_t* bytes, const int64_t* ends, int64_t V) : bytes_(bytes), ends_(ends) {
    size_t capacity = 16;
    while (capacity < static_cast<size_t>(2 * V)) capacity <<= 1;
    mask_ = capacity - 1;
    slots_.assign(capacity, Slot{0, -1});
    for (int64_t id = 0; id < V; ++id) {
      std::string_view w = word(id);
      uint64_t h = kHashBasis;
      for (unsigned char c : w) h = hash_step(h, c);
      if (find(w, h) >= 0) continue;  // a repeated word keeps its first id
      size_t s = slot(h);
      while (slots_[s].id >= 0) s = (s + 1) & mask_;
      slots_[s] = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(id)};
    }
  }

  // The id of `w` (whose hash_step hash is h), or -1.
  int32_t find(std::string_view w, uint64_t h) const {
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t s = slot(h);; s = (s + 1) & mask_) {
      const Slot& e = slots_[s];
      if (e.id < 0 || (e.tag == tag && word(e.id) == w)) return e.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag;
    int32_t id;
  };
  size_t slot(uint64_t h) const { return static_cast<size_t>(h * 0x9E3779B97F4A7C15ull >> 20) & mask_; }
  std::string_view word(int64_t id) const {
    int64_t begin = id ? ends_[id - 1] : 0;
    return {reinterpret_cast<const char*>(bytes_ + begin), static_cast<size_t>(ends_[id] - begin)};
  }

  const uint8_t* bytes_;
  const int64_t* ends_;
  size_t mask_ = 0;
  std::vector<Slot> slots_;
};

struct Encoded {
  std::vector<int32_t> tokens;
  std::vector<int64_t> sentence_ends;   // exclusive, in tokens
  std::vector<int64_t> sentence_words;  // raw words, out-of-vocabulary ones included
  int64_t bad_offset = -1;              // first byte that is not UTF-8, or -1
};

// Appends each in-vocabulary word's id; a piece records its end and raw words. A bad line's
// words and pieces are taken back, so that the result holds the lines before it.
struct Encoder {
  const VocabTable& vocab;
  Encoded& out;
  size_t line_tokens = 0, line_sentences = 0;  // the sizes at the current line's start

  void word(const uint8_t* begin, size_t length, uint64_t h) {
    int32_t id = vocab.find({reinterpret_cast<const char*>(begin), length}, h);
    if (id >= 0) out.tokens.push_back(id);
  }
  void piece(int64_t raw_words) {
    out.sentence_ends.push_back(static_cast<int64_t>(out.tokens.size()));
    out.sentence_words.push_back(raw_words);
  }
  void line_end() {
    line_tokens = out.tokens.size();
    line_sentences = out.sentence_ends.size();
  }
  void bad_line() {
    out.tokens.resize(line_tokens);
    out.sentence_ends.resize(line_sentences);
    out.sentence_words.resize(line_sentences);
  }
};

Tensor from_vector(const void* src, int64_t n, ScalarType dtype, size_t item) {
  Tensor t = empty({n}, dtype, Device(torch::headeronly::DeviceType::CPU));
  if (n) std::memcpy(t.data_ptr(), src, n * item);
  return t;
}

std::tuple<Tensor, Tensor, Tensor, int64_t> corpus_encode_cpu(const Tensor& text,
                                                              const Tensor& vocab_bytes,
                                                              const Tensor& vocab_ends,
                                                              int64_t max_sentence_words) {
  FS_CHECK_TYPE(text.scalar_type() == ScalarType::Byte &&
                    vocab_bytes.scalar_type() == ScalarType::Byte,
                "corpus_encode: text and vocab_bytes must be uint8, got ", text.scalar_type(),
                " and ", vocab_bytes.scalar_type());
  FS_CHECK_TYPE(vocab_ends.scalar_type() == kLong, "corpus_encode: vocab_ends must be int64, got ",
                vocab_ends.scalar_type());
  FS_CHECK_VALUE(text.dim() == 1 && vocab_bytes.dim() == 1 && vocab_ends.dim() == 1,
                 "corpus_encode: text, vocab_bytes and vocab_ends must be 1-D");
  FS_CHECK_VALUE(text.is_contiguous() && vocab_bytes.is_contiguous() &&
                     vocab_ends.is_contiguous(),
                 "corpus_encode: text, vocab_bytes and vocab_ends must be contiguous");
  FS_CHECK_VALUE(max_sentence_words > 0, "corpus_encode: max_sentence_words must be positive, "
                 "got ", max_sentence_words);
  const int64_t V = vocab_ends.numel();
  FS_CHECK_VALUE(V < (int64_t{1} << 31), "corpus_encode: a vocabulary of ", V,
                 " words does not fit int32 ids");
  const int64_t* ends = data<int64_t>(vocab_ends);
  for (int64_t i = 0; i < V; ++i)
    FS_CHECK_VALUE(ends[i] >= (i ? ends[i - 1] : 0) && ends[i] <= vocab_bytes.numel(),
                   "corpus_encode: vocab_ends must be non-decreasing ends within vocab_bytes");
  VocabTable vocab(data<uint8_t>(vocab_bytes), ends, V);
  Encoded out;
  out.tokens.reserve(text.numel() / 6);
  Encoder encoder{vocab, out};
  out.bad_offset = text_scan::scan_lines(data<uint8_t>(text), text.numel(), max_sentence_words,
                                         encoder);
  const int64_t S = static_cast<int64_t>(out.sentence_ends.size());
  return {from_vector(out.tokens.data(), out.tokens.size(), kInt, sizeof(int32_t)),
          from_vector(out.sentence_ends.data(), S, kLong, sizeof(int64_t)),
          from_vector(out.sentence_words.data(), S, kLong, sizeof(int64_t)), out.bad_offset};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("corpus_encode", TORCH_BOX(&corpus_encode_cpu));
}

}  // namespace fastsoftmax
