#pragma once
// Safetensors files (Hugging Face's weight format), read and written here: an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes.
// The format is small enough that a library would add a dependency for forty lines; moetrain
// writes F32 and reads F32, BF16 and F16 (widened to float).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mt {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Tensors by name, written in name order. Throws UserError when the file cannot be written.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors);
// Every tensor of the file. Throws UserError naming the file and what is wrong.
std::map<std::string, Tensor> read_safetensors(const std::string& path);

}  // namespace mt
