// Reading lines of UTF-8 text as Python's LineSentence does, for the corpus_file ops
// (corpus_encode.cpp, corpus_count.cpp): a line is the bytes up to '\n'; its words are the
// runs between the characters str.split() treats as whitespace; a line of more than
// max_words words is cut into pieces of that many, and an empty line is one empty piece.
// Bytes that are not UTF-8 (Python's strict decoder) stop the scan.
#pragma once

#include <cstdint>

namespace fastsoftmax {
namespace text_scan {

// FNV-1a over a word's bytes, one byte at a time so that the scan hashes a word as it reads it.
constexpr uint64_t kHashBasis = 1469598103934665603ull;
inline uint64_t hash_step(uint64_t h, uint8_t b) { return (h ^ b) * 1099511628211ull; }

// The non-ASCII character at p (before end): its length in bytes, 0 if p does not start a
// valid UTF-8 sequence (Python's strict decoder: no overlong forms, surrogates or code points
// past U+10FFFF), and whether str.split() would split on it.
struct Char {
  int length;
  bool space;
};

inline bool continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Called for lead bytes of 0x80 and up only: scan_lines classifies ASCII (ascii_space).
inline Char next_char(const uint8_t* p, const uint8_t* end) {
  const uint8_t b = p[0];
  int n;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return {0, false};
  }
  if (end - p < n || p[1] < lo || p[1] > hi) return {0, false};
  for (int i = 2; i < n; ++i)
    if (!continuation(p[i])) return {0, false};
  uint32_t cp;
  if (n == 2) {
    cp = ((b & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    return {2, cp == 0x85 || cp == 0xA0};
  }
  if (n == 3) {
    cp = ((b & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    bool space = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
                 cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
    return {3, space};
  }
  return {4, false};  // nothing past U+FFFF is whitespace
}

// The ASCII bytes str.split() splits on: \t \n \v \f \r, the separators 0x1C-0x1F, space.
constexpr bool ascii_space(uint8_t b) {
  return b == ' ' || (b >= 0x09 && b <= 0x0D) || (b >= 0x1C && b <= 0x1F);
}

// Scans `size` bytes of whole lines, calling on the visitor: word(begin, length, hash) for
// each word, piece(raw words) when a piece (sentence) closes, and bad_line() before stopping
// at a byte that is not UTF-8. Returns that byte's offset, or -1.
template <class Visitor>
int64_t scan_lines(const uint8_t* text, int64_t size, int64_t max_words, Visitor& visit) {
  const uint8_t* p = text;
  const uint8_t* end = text + size;
  int64_t piece_words = 0;
  while (p < end) {  // one line per pass
    int64_t line_words = 0;
    for (;;) {
      // Whitespace up to the next word or the line's end.
      while (p < end && *p != '\n') {
        if (*p < 0x80) {
          if (!ascii_space(*p)) break;
          ++p;
          continue;
        }
        Char c = next_char(p, end);
        if (c.length == 0) return visit.bad_line(), p - text;
        if (!c.space) break;
        p += c.length;
      }
      if (p == end || *p == '\n') break;
      // A word, hashed as it is read.
      const uint8_t* word = p;
      uint64_t h = kHashBasis;
      while (p < end) {
        if (*p < 0x80) {
          if (*p == '\n' || ascii_space(*p)) break;
          h = hash_step(h, *p++);
          continue;
        }
        Char c = next_char(p, end);
        if (c.length == 0) return visit.bad_line(), p - text;
        if (c.space) break;
        for (int i = 0; i < c.length; ++i) h = hash_step(h, *p++);
      }
      visit.word(word, static_cast<size_t>(p - word), h);
      ++line_words;
      if (++piece_words == max_words) {
        visit.piece(piece_words);
        piece_words = 0;
      }
    }
    if (piece_words > 0 || line_words == 0) {
      visit.piece(piece_words);
      piece_words = 0;
    }
    if (p < end) ++p;  // the '\n'
    visit.line_end();
  }
  return -1;
}

}  // namespace text_scan
}  // namespace fastsoftmax
