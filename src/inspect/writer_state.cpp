#include "inspect/writer_state.hpp"

#include <cstring>
#include <fstream>

#include "io/run_lock.hpp"

namespace mt {

namespace {

// HDF5 keeps "file consistency flags" in superblocks of version 2 and later (byte 11): bit 0 is
// set while a writer has the file open, bit 2 while it writes in SWMR mode; closing clears them.
// The superblock sits at byte 0, or at 512, 1024, ... after a user block.
bool hdf5_open_for_writing(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  static const char signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  for (std::streamoff at = 0; in; at = at ? 2 * at : 512) {
    char head[12] = {};
    in.seekg(at);
    if (!in.read(head, sizeof head)) return false;
    if (std::memcmp(head, signature, sizeof signature) == 0) return head[8] >= 2 && (head[11] & 0x05) != 0;
  }
  return false;
}

}  // namespace

std::string run_writer(const std::string& run_dir) {
  const std::string holder = run_lock_holder(run_dir);
  return holder.empty() ? "" : holder + " holds " + run_dir + "/lock";
}

bool log_left_open(const std::string& run_dir) { return hdf5_open_for_writing(run_dir + "/log.h5"); }

}  // namespace mt
