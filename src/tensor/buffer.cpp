#include "tensor/buffer.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace mt {

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  return 0;
}

Buffer::Buffer(const Backend& backend, DType dtype, size_t count) : Buffer(backend, dtype, count, Unfilled{}) {
  zero();
}

Buffer::Buffer(const Backend& backend, DType dtype, size_t count, Unfilled)
    : backend_(backend), dtype_(dtype), count_(count) {
  data_ = backend_.alloc(bytes());
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    backend_ = o.backend_;
    data_ = std::exchange(o.data_, nullptr);
    dtype_ = o.dtype_;
    count_ = std::exchange(o.count_, 0);
  }
  return *this;
}

void Buffer::reset() {
  if (data_) backend_.release(data_);
  data_ = nullptr;
  count_ = 0;
}

void* Buffer::checked(DType want) const {
  // A wrong element type is a programming error, never user input.
  if (want != dtype_ && data_) throw std::logic_error("Buffer: element type mismatch");
  return data_;
}

void Buffer::zero() const {
  if (data_) backend_.zero(data_, bytes());
}

void Buffer::upload(const void* host, size_t n, size_t offset) const {
  if (offset + n > count_) throw std::logic_error("Buffer::upload past the end");
  const size_t size = dtype_bytes(dtype_);
  if (n) backend_.upload(static_cast<std::byte*>(data_) + offset * size, host, n * size);
}

void Buffer::download(void* host, size_t n, size_t offset) const {
  if (offset + n > count_) throw std::logic_error("Buffer::download past the end");
  const size_t size = dtype_bytes(dtype_);
  if (n) backend_.download(host, static_cast<const std::byte*>(data_) + offset * size, n * size);
}

std::vector<float> Buffer::to_host_f32() const {
  std::vector<float> v(count_);
  download(v.data(), count_);
  return v;
}

std::vector<double> Buffer::to_host_f64() const {
  std::vector<double> v(count_);
  download(v.data(), count_);
  return v;
}

void Buffer::from_host(const std::vector<float>& v) const {
  if (dtype_ != DType::f32 || v.size() != count_) throw std::logic_error("Buffer::from_host: wrong type or size");
  upload(v.data(), v.size());
}

void Buffer::from_host(const std::vector<double>& v) const {
  if (dtype_ != DType::f64 || v.size() != count_) throw std::logic_error("Buffer::from_host: wrong type or size");
  upload(v.data(), v.size());
}

}  // namespace mt
