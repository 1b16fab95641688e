#include "comm/gather_text.hpp"

#include <algorithm>

namespace mt {

// Bytes travel as floats, one each: every value 0..255 (and every length up to 2^24) is exact in a
// float, and all_gather of floats is what every Comm has.
std::vector<std::string> all_gather_text(Comm& comm, const std::string& mine) {
  const int n = comm.size();
  std::vector<float> lengths(n);
  const float my_length = float(mine.size());
  comm.all_gather({&my_length, 1}, lengths);
  const size_t width = size_t(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<float> padded(width, 0.0f), all(width * n);
  for (size_t i = 0; i < mine.size(); ++i) padded[i] = float(static_cast<unsigned char>(mine[i]));
  comm.all_gather(padded, all);
  std::vector<std::string> texts(n);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < size_t(lengths[r]); ++i) texts[r] += char(static_cast<unsigned char>(all[r * width + i]));
  return texts;
}

}  // namespace mt
