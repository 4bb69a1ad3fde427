// What the fuzzers share: quiet loggers, a private scratch directory, files
// written from an input, and a reader of the input's leading integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace mcdma::fuzz {

// Registers the daemon's loggers ("daemon", "engine", "control", "peer")
// with no sink, so the fuzzers do not spend their time printing.
void QuietLogs();

// A directory only this process uses (mode 0700), made once; removed at exit.
const std::string& ScratchDir();

// Writes `data` to `path` (created or truncated, then chmod 0600).
bool WriteFile(const std::string& path, std::span<const uint8_t> data);

// Reads little-endian integers from the front of the input.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t left() const { return size_ - pos_; }
  uint8_t U8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() { return static_cast<uint16_t>(U8() | (U8() << 8)); }
  uint32_t U32() { return U16() | (static_cast<uint32_t>(U16()) << 16); }
  // Up to n bytes (fewer at the end of the input).
  std::span<const uint8_t> Take(size_t n) {
    n = n < left() ? n : left();
    std::span<const uint8_t> out(data_ + pos_, n);
    pos_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace mcdma::fuzz
