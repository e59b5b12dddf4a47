// A vector that keeps up to N elements inline. Shapes and dimension lists are small and
// built on every eager op, so avoiding a heap allocation for them matters for dispatch.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

namespace kiln {

// Only trivially copyable element types: the inline buffer is copied as raw values.
template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  explicit SmallVector(std::span<const T> values) { assign(values.begin(), values.end()); }
  SmallVector(size_t count, T value) { resize(count, value); }
  template <typename It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }

  template <typename It>
  void assign(It first, It last) {
    size_ = 0;
    heap_.clear();
    for (; first != last; ++first) push_back(*first);
  }

  void push_back(T value) {
    if (size_ < N) {
      inline_[size_] = value;
    } else {
      if (size_ == N) heap_.assign(inline_, inline_ + N);
      heap_.push_back(value);
    }
    ++size_;
  }
  void pop_back() {
    --size_;
    if (size_ > N) {
      heap_.pop_back();
    } else if (size_ == N) {
      // Back to inline storage: the heap holds the current values (the inline copy is
      // from before the spill, and elements may have changed since).
      std::copy(heap_.begin(), heap_.begin() + N, inline_);
      heap_.clear();
    }
  }
  void resize(size_t count, T value = T{}) {
    while (size_ > count) pop_back();
    while (size_ < count) push_back(value);
  }
  void insert_at(size_t index, T value) {
    push_back(value);
    T* d = data();
    std::rotate(d + index, d + size_ - 1, d + size_);
  }
  void erase_at(size_t index) {
    T* d = data();
    std::rotate(d + index, d + index + 1, d + size_);
    pop_back();
  }

  T* data() { return size_ <= N ? inline_ : heap_.data(); }
  const T* data() const { return size_ <= N ? inline_ : heap_.data(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  operator std::span<const T>() const { return {data(), size_}; }
  std::span<const T> span() const { return {data(), size_}; }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T inline_[N] = {};
  size_t size_ = 0;
  std::vector<T> heap_;
};

}  // namespace kiln
