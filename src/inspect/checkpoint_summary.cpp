#include "inspect/checkpoint_summary.hpp"

#include <algorithm>
#include <filesystem>

#include "io/checkpoint.hpp"
#include "io/h5util.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace mt {

namespace {

// Counts every dataset of a rank file under its top-level group ("params", "optim", "buffers").
herr_t count_dataset(hid_t root, const char* name, const H5L_info_t*, void* out) {
  auto& groups = *static_cast<std::map<std::string, ArrayCount>*>(out);
  h5::Handle d(H5Oopen(root, name, H5P_DEFAULT), H5Oclose);
  if (!d.valid() || H5Iget_type(d) != H5I_DATASET) return 0;
  h5::Handle space(H5Dget_space(d), H5Sclose);
  h5::Handle type(H5Dget_type(d), H5Tclose);
  const std::string path(name);
  ArrayCount& c = groups[path.substr(0, path.find('/'))];
  const long long n = H5Sget_simple_extent_npoints(space);
  c.arrays += 1;
  c.elements += n;
  c.bytes += n * (long long)H5Tget_size(type);
  return 0;
}

}  // namespace

CheckpointList list_checkpoints(const std::string& run_dir) {
  CheckpointList out;
  const fs::path dir = fs::path(run_dir) / "ckpt";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory()) continue;
    // Other names (step_backup/, a user's copy) are not checkpoints: neither listed nor counted.
    const bool tmp = name.size() > 4 && name.substr(name.size() - 4) == ".tmp";
    const auto step = checkpoint_name_step(tmp ? name.substr(0, name.size() - 4) : name);
    if (!step) continue;
    if (!tmp && fs::exists(e.path() / "manifest.toml")) out.complete.push_back(*step);
    else out.incomplete.push_back(name);
  }
  std::sort(out.complete.begin(), out.complete.end());
  std::sort(out.incomplete.begin(), out.incomplete.end());
  return out;
}

CheckpointSummary summarize_checkpoint(const std::string& dir) {
  h5::silence_errors();
  CheckpointSummary s;
  s.dir = dir;
  s.complete = fs::exists(fs::path(dir) / "manifest.toml");
  std::vector<fs::path> ranks;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank_", 0) == 0 && e.path().extension() == ".h5") ranks.push_back(e.path());
  }
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty())
    throw UserError(dir + ": no rank_*.h5 files (a checkpoint directory holds rank_00000.h5, one file per rank)");
  for (const fs::path& p : ranks) {
    const std::string path = p.string();
    h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!f.valid())
      throw UserError(path + ": not a readable HDF5 file (damaged, or a checkpoint still being written)");
    try {
      if (p == ranks.front()) {
        s.step = h5::read_int_attr(f, "step");
        s.samples_seen = h5::read_int_attr(f, "samples_seen");
        s.world_size = h5::read_int_attr(f, "world_size");
        s.seed = h5::read_int_attr(f, "rng_seed");
        s.format_version = h5::read_int_attr(f, "format_version");
        s.layout = h5::read_string_attr(f, "layout");
        s.config = flatten_config(h5::read_string_attr(f, "config_toml"), path + " (attribute config_toml)");
      }
    } catch (const UserError& e) {
      throw UserError(path + ": " + e.what() + " (not a moetrain checkpoint file?)");
    }
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, count_dataset, &s.groups);
    s.files.emplace_back(p.filename().string(), (long long)fs::file_size(p));
  }
  return s;
}

}  // namespace mt
