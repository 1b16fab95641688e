#include "io/safetensors.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/escape.hpp"
#include "io/json.hpp"
#include "ops/bf16.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

size_t elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

// IEEE half to float.
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, frac = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000 | (frac << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (frac << 13);
  } else if (frac == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    uint32_t f = frac;
    do {
      ++e;
      f <<= 1;
    } while (!(f & 0x400));
    bits = sign | uint32_t(112 - e) << 23 | ((f & 0x3FF) << 13);
  }
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// A tensor's shape: whole numbers >= 0 whose product fits in `bytes` (no element is under a byte).
std::vector<int64_t> shape_of(const Json& shape, uint64_t bytes, const std::string& where) {
  if (shape.kind != Json::Kind::array) throw UserError(where + ": shape must be a list of sizes");
  std::vector<int64_t> out;
  double count = 1;
  for (const Json& d : shape.array) {
    if (d.kind != Json::Kind::number || d.number < 0 || d.number != std::floor(d.number) || d.number > double(bytes))
      throw UserError(where + ": shape: each size must be a whole number from 0 to " + std::to_string(bytes));
    count *= d.number;
    out.push_back(int64_t(d.number));
  }
  if (count > double(bytes))
    throw UserError(where + ": shape: more values than the file's " + std::to_string(bytes) + " bytes of data");
  return out;
}

// A tensor's data_offsets [begin, end]: whole numbers, begin <= end <= `bytes` (the data's size).
std::pair<uint64_t, uint64_t> byte_range(const Json& range, uint64_t bytes, const std::string& where) {
  auto valid = [&](const Json& v) {
    return v.kind == Json::Kind::number && v.number >= 0 && v.number == std::floor(v.number) &&
           v.number <= double(bytes);
  };
  if (range.kind != Json::Kind::array || range.array.size() != 2 || !valid(range.array[0]) || !valid(range.array[1]) ||
      range.array[0].number > range.array[1].number)
    throw UserError(where + ": data_offsets must be [begin, end], whole numbers with 0 <= begin <= end <= " +
                    std::to_string(bytes) + " (the bytes after the header)");
  return {uint64_t(range.array[0].number), uint64_t(range.array[1].number)};
}

}  // namespace

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  std::ostringstream header;
  header << "{\"__metadata__\":{\"format\":\"pt\"}";
  size_t at = 0;
  for (const auto& [name, t] : tensors) {
    MT_CHECK(t.values.size() == elements(t.shape));
    header << "," << json_string(name) << ":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) header << (i ? "," : "") << t.shape[i];
    header << "],\"data_offsets\":[" << at << "," << at + 4 * t.values.size() << "]}";
    at += 4 * t.values.size();
  }
  header << "}";
  std::string h = header.str();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::ofstream f(path, std::ios::binary);
  const uint64_t length = h.size();
  f.write(reinterpret_cast<const char*>(&length), 8);
  f.write(h.data(), std::streamsize(h.size()));
  for (const auto& [name, t] : tensors)
    f.write(reinterpret_cast<const char*>(t.values.data()), std::streamsize(4 * t.values.size()));
  if (!f.flush()) throw UserError(path + ": cannot write (is the directory there, is the disk full?)");
}

std::map<std::string, Tensor> read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(path + ": cannot read");
  uint64_t length = 0;
  f.read(reinterpret_cast<char*>(&length), 8);
  f.seekg(0, std::ios::end);
  const uint64_t size = uint64_t(f.tellg());
  if (!f || length > size - 8)
    throw UserError(path + ": not a safetensors file (the header length is beyond the file)");
  std::string h(length, '\0');
  f.seekg(8);
  f.read(h.data(), std::streamsize(length));
  const Json header = parse_json(h, path + " (header)");
  const uint64_t data = 8 + length;
  std::map<std::string, Tensor> out;
  for (const auto& [name, entry] : header.object) {
    if (name == "__metadata__") continue;
    const std::string where = path + ": " + name;
    Tensor t;
    t.shape = shape_of(entry.at("shape", where), size - data, where);
    const std::string dtype = entry.at("dtype", where).string;
    const size_t n = elements(t.shape), width = dtype == "F32" ? 4 : (dtype == "BF16" || dtype == "F16") ? 2 : 0;
    if (width == 0) throw UserError(where + ": dtype " + dtype + "; moetrain reads F32, BF16 and F16");
    const auto [begin, end] = byte_range(entry.at("data_offsets", where), size - data, where);
    if (end - begin != n * width)
      throw UserError(where + ": its byte range does not hold " + std::to_string(n) + " " + dtype +
                      " values (data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]: " +
                      std::to_string(end - begin) + " bytes, not " + std::to_string(n * width) + ")");
    std::vector<char> bytes(n * width);
    f.seekg(std::streamoff(data + begin));
    f.read(bytes.data(), std::streamsize(bytes.size()));
    if (!f) throw UserError(where + ": cannot read its bytes");
    t.values.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (width == 4) {
        std::memcpy(&t.values[i], bytes.data() + 4 * i, 4);
      } else {
        uint16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2);
        t.values[i] = dtype == "BF16" ? bf16_bits_to_float(b) : half_to_float(b);
      }
      if (!std::isfinite(t.values[i]))
        throw UserError(where + ": value " + std::to_string(i) + " (of " + std::to_string(n) + ") is " +
                        (std::isnan(t.values[i]) ? "NaN" : "infinite") + "; a model to import needs finite weights");
    }
    out[name] = std::move(t);
  }
  return out;
}

}  // namespace mt
