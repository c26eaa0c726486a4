// DeviceArray<T>: a grows-only array in GPU memory (the device twin of Tensor's storage rule):
// reserve() allocates only when asked for more than it holds, so once the largest batch has been
// seen, nothing in the training loop calls cudaMalloc. Every allocation is counted, which is how
// tests and the trainer prove the loop allocation-free.
//
//   ds2::DeviceArray<float> buf;
//   buf.reserve(n);                       // cudaMalloc once
//   kernel<<<g, b, 0, stream>>>(buf.data(), n);
//   int64_t before = ds2::device_allocations();  ... ; EXPECT_EQ(device_allocations(), before);
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace ds2 {

// Number of device allocations made through DeviceArray since the process started.
int64_t device_allocations();
// Bytes currently held by DeviceArrays, and the most ever held at once.
int64_t device_bytes_in_use();
int64_t device_bytes_peak();

namespace detail {
void* device_alloc(size_t bytes);  // throws ds2::Error naming the size and the free memory
void device_free(void* ptr, size_t bytes) noexcept;
}  // namespace detail

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(int64_t n) { reserve(n); }
  ~DeviceArray() { release(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }

  // Ensures room for `n` elements; contents are not preserved when it grows.
  void reserve(int64_t n) {
    if (n <= capacity_) return;
    release();
    ptr_ = static_cast<T*>(detail::device_alloc(static_cast<size_t>(n) * sizeof(T)));
    capacity_ = n;
  }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  int64_t capacity() const { return capacity_; }

 private:
  void release() noexcept {
    if (ptr_) detail::device_free(ptr_, static_cast<size_t>(capacity_) * sizeof(T));
    ptr_ = nullptr;
    capacity_ = 0;
  }
  void swap(DeviceArray& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(capacity_, o.capacity_);
  }
  T* ptr_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace ds2
