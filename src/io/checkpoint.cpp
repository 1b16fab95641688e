#include "io/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "comm/comm.hpp"
#include "io/h5util.hpp"
#include "io/param_h5.hpp"
#include "io/param_slices.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace mt {

namespace {
constexpr int kFormatVersion = 2;  // 2: slices by global name and range

std::string step_name(long long step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", step);
  return buf;
}

// Complete checkpoints of a run, oldest first.
std::vector<fs::path> complete_checkpoints(const std::string& run_dir) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(run_dir) / "ckpt";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0 && name.find('.') == std::string::npos && fs::exists(e.path() / "manifest.toml"))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string rank_file(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank_%05d.h5", rank);
  return buf;
}

}  // namespace

void save_checkpoint(const std::string& run_dir, const ModelState& model, const TrainState& state,
                     const CheckpointFacts& facts, const ParallelGroups& groups) {
  h5::silence_errors();
  Comm& world = *groups.world;
  const fs::path final_dir = fs::path(run_dir) / "ckpt" / step_name(state.step);
  const fs::path tmp_dir = final_dir.string() + ".tmp";
  if (world.rank() == 0) {
    fs::remove_all(tmp_dir);
    fs::create_directories(tmp_dir);
  }
  world.barrier();
  {
    const ParamStore& params = model.params;
    h5::Handle f = h5::create_file((tmp_dir / rank_file(world.rank())).string(), false);
    h5::write_int_attr(f, "format_version", kFormatVersion);
    h5::write_int_attr(f, "step", state.step);
    h5::write_int_attr(f, "samples_seen", state.samples_seen);
    h5::write_int_attr(f, "rng_seed", state.seed);
    h5::write_int_attr(f, "world_size", world.size());
    h5::write_int_attr(f, "rank", world.rank());
    h5::write_string_attr(f, "layout", facts.layout);
    h5::write_string_attr(f, "config_toml", facts.config_toml);
    std::vector<int> mine;
    for (size_t i = 0; i < params.infos.size(); ++i)
      if (first_copy(params.infos[i], groups)) mine.push_back(int(i));
    write_param_slices(f, "/params", params, params.host_values(), mine);
    write_param_slices(f, "/optim/exp_avg", params, model.exp_avg, mine);
    write_param_slices(f, "/optim/exp_avg_sq", params, model.exp_avg_sq, mine);
    if (first_replica(groups)) write_buffers(f, "/buffers", params);
    h5::check(H5Fflush(f, H5F_SCOPE_GLOBAL), "flushing checkpoint");
  }
  world.barrier();
  if (world.rank() == 0) {
    {
      std::ofstream m(tmp_dir / "manifest.toml");
      m << "step = " << state.step << "\nsamples_seen = " << state.samples_seen << "\nworld_size = " << world.size()
        << "\nformat_version = " << kFormatVersion << "\nfiles = [";
      for (int r = 0; r < world.size(); ++r) m << (r ? ", " : "") << '"' << rank_file(r) << '"';
      m << "]\n";
      if (!m) throw UserError((tmp_dir / "manifest.toml").string() + ": cannot write (disk full?)");
    }
    fs::remove_all(final_dir);
    fs::rename(tmp_dir, final_dir);
    auto all = complete_checkpoints(run_dir);
    for (size_t i = 0; i + facts.keep < all.size(); ++i) fs::remove_all(all[i]);
  }
  world.barrier();
}

TrainState load_checkpoint(const std::string& step_dir, const ModelState& model) {
  h5::silence_errors();
  const fs::path dir(step_dir);
  if (!fs::exists(dir / "manifest.toml"))
    throw UserError(step_dir + ": not a complete checkpoint (no manifest.toml; an interrupted write leaves "
                    "step_N.tmp/ behind, which is never resumed from)");
  h5::Handle f = h5::open_file((dir / rank_file(0)).string(), false);
  if (h5::read_int_attr(f, "format_version") != kFormatVersion)
    throw UserError(step_dir + ": checkpoint format " + std::to_string(h5::read_int_attr(f, "format_version")) +
                    ", this moetrain reads format " + std::to_string(kFormatVersion));
  TrainState s;
  s.step = h5::read_int_attr(f, "step");
  s.samples_seen = h5::read_int_attr(f, "samples_seen");
  s.seed = h5::read_int_attr(f, "rng_seed");
  std::vector<std::string> files;
  for (long long r = 0; r < h5::read_int_attr(f, "world_size"); ++r) files.push_back((dir / rank_file(int(r))).string());
  try {
    const ParamSlices slices(files);
    model.exp_avg.assign(model.params.total(), 0.0f);
    model.exp_avg_sq.assign(model.params.total(), 0.0f);
    std::vector<float> values(model.params.total(), 0.0f);
    slices.read("/params", model.params, values);
    model.params.set_values(values);
    slices.read("/optim/exp_avg", model.params, model.exp_avg);
    slices.read("/optim/exp_avg_sq", model.params, model.exp_avg_sq);
    slices.read_buffers("/buffers", model.params);
  } catch (const UserError& e) {
    throw UserError(step_dir + ": does not fit this model (" + e.what() +
                    "); resume with the config the checkpoint was made with, or set checkpoint.resume = \"never\"");
  }
  return s;
}

std::optional<std::string> newest_checkpoint(const std::string& run_dir) {
  auto all = complete_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back().string();
}

long long checkpoint_step(const std::string& step_dir) {
  return std::stoll(fs::path(step_dir).filename().string().substr(std::string("step_").size()));
}

}  // namespace mt
