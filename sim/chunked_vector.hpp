// A vector that grows by fixed chunks: elements never move, so growing never copies the whole
// array nor holds the old and the new array at once (a std::vector of a million tasks peaks at
// three times its size while it reallocates). Indexing is one extra indirection.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace exasim::detail {

template <class T, int kShift = 12>
class ChunkedVector {
 public:
  static constexpr size_t kChunk = size_t{1} << kShift;
  T& operator[](size_t i) { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  size_t size() const { return size_; }
  // Appends a value-initialised element; returns it.
  T& emplace_back() {
    if ((size_ & (kChunk - 1)) == 0) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }
  // Frees the last chunk and the elements in it (to release memory while reading from the end).
  void pop_back_chunk() {
    if (chunks_.empty()) return;
    chunks_.pop_back();
    size_ = chunks_.size() * kChunk;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace exasim::detail
