#pragma once
// A typed buffer owned by a backend: dtype, element count, device memory. Host code never
// dereferences data(); it moves numbers with upload/download (data in; logs and checkpoints out).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/ops.hpp"

namespace mt {

enum class DType { f32, f64, i32, u8 };  // u8: raw bytes, such as FP8 codes
size_t dtype_bytes(DType t);

// Asks a Buffer for memory without the zero fill.
struct Unfilled {};

class Buffer {
 public:
  Buffer() = default;
  // `count` elements of `dtype`, zero-filled.
  Buffer(const Backend& backend, DType dtype, size_t count);
  // The same left as the backend hands it out, for a caller that writes every element before
  // any is read (and so touches the memory first where it chooses).
  Buffer(const Backend& backend, DType dtype, size_t count, Unfilled);
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  float* f32() const { return static_cast<float*>(checked(DType::f32)); }
  double* f64() const { return static_cast<double*>(checked(DType::f64)); }
  int* i32() const { return static_cast<int*>(checked(DType::i32)); }
  void* raw() const { return data_; }  // any dtype: for communication, which moves bytes
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * dtype_bytes(dtype_); }
  DType dtype() const { return dtype_; }
  const Backend& backend() const { return backend_; }

  void zero() const;
  // Elements [offset, offset + n) to or from host memory.
  void upload(const void* host, size_t n, size_t offset = 0) const;
  void download(void* host, size_t n, size_t offset = 0) const;
  std::vector<float> to_host_f32() const;
  std::vector<double> to_host_f64() const;
  void from_host(const std::vector<float>& v) const;
  void from_host(const std::vector<double>& v) const;

 private:
  void* checked(DType want) const;
  void reset();
  Backend backend_{};
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  size_t count_ = 0;
};

}  // namespace mt
