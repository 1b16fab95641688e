// Writes moetrain's E4M3 and E5M2 codes of the float32 values in a file, for check_fp8.py to
// compare with PyTorch's conversions:  fp8_codes IN.f32 OUT_E4M3.u8 OUT_E5M2.u8
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ops/fp8/codes.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fp8_codes IN.f32 OUT_E4M3.u8 OUT_E5M2.u8\n");
    return 2;
  }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) {
    std::fprintf(stderr, "fp8_codes: cannot open %s\n", argv[1]);
    return 2;
  }
  std::vector<float> x;
  float v;
  while (std::fread(&v, sizeof v, 1, in) == 1) x.push_back(v);
  std::fclose(in);
  const std::pair<const char*, mt::Fp8Format> outputs[] = {{argv[2], mt::Fp8Format::e4m3}, {argv[3], mt::Fp8Format::e5m2}};
  for (const auto& [path, format] : outputs) {
    std::vector<uint8_t> codes(x.size());
    for (size_t i = 0; i < x.size(); ++i) codes[i] = mt::float_to_fp8(x[i], format);
    std::FILE* out = std::fopen(path, "wb");
    if (!out || std::fwrite(codes.data(), 1, codes.size(), out) != codes.size()) {
      std::fprintf(stderr, "fp8_codes: cannot write %s\n", path);
      return 2;
    }
    std::fclose(out);
  }
  return 0;
}
