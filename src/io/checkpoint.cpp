#include "io/checkpoint.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <toml++/toml.h>

#include "comm/comm.hpp"
#include "io/h5util.hpp"
#include "io/param_h5.hpp"
#include "io/param_slices.hpp"
#include "util/os_error.hpp"

namespace fs = std::filesystem;

namespace mt {

namespace {
constexpr int kFormatVersion = 2;  // 2: slices by global name and range

std::string rank_file(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank_%05d.h5", rank);
  return buf;
}

// The manifest goes first, so a removal cut short leaves an incomplete directory, never a
// complete-looking one with files missing.
void remove_checkpoint(const fs::path& dir) {
  fs::remove(dir / "manifest.toml");
  fs::remove_all(dir);
}

// Directories of checkpoint writes that a killed run left unfinished.
void remove_unfinished(const fs::path& ckpt_dir) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool tmp = name.size() > 4 && name.substr(name.size() - 4) == ".tmp";
    if (tmp && checkpoint_name_step(name.substr(0, name.size() - 4)))
      fs::remove_all(e.path());
  }
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw UserError(path.string() + ": cannot create: " + os_error_text(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) ok = false, err = errno;
  if (!ok) throw UserError(path.string() + ": cannot write: " + os_error_text(err));
}

void write_rank_file(const fs::path& path, const ModelState& model, const TrainState& state,
                     const CheckpointFacts& facts, const ParallelGroups& groups) {
  const Comm& world = *groups.world;
  const ParamStore& params = model.params;
  h5::Handle f = h5::create_file(path.string(), true);
  h5::write_int_attr(f, "format_version", kFormatVersion);
  h5::write_int_attr(f, "step", state.step);
  h5::write_int_attr(f, "samples_seen", state.samples_seen);
  h5::write_int_attr(f, "rng_seed", state.seed);
  h5::write_ints_attr(f, "lr_cycle", {state.lr_start, state.lr_end});
  h5::write_int_attr(f, "world_size", world.size());
  h5::write_int_attr(f, "rank", world.rank());
  h5::write_string_attr(f, "layout", facts.layout);
  h5::write_string_attr(f, "config_toml", facts.config_toml);
  std::vector<int> mine;
  for (size_t i = 0; i < params.infos.size(); ++i)
    if (first_copy(params.infos[i], groups)) mine.push_back(int(i));
  write_param_slices(f, "/params", params, model.values, mine);
  write_param_slices(f, "/optim/exp_avg", params, model.exp_avg, mine);
  write_param_slices(f, "/optim/exp_avg_sq", params, model.exp_avg_sq, mine);
  if (first_replica(groups)) write_buffers(f, "/buffers", params);
  h5::check(H5Fflush(f, H5F_SCOPE_GLOBAL), "flushing");
}

void require_complete(const std::string& step_dir) {
  if (!fs::exists(fs::path(step_dir) / "manifest.toml"))
    throw UserError(step_dir + ": not a complete checkpoint (no manifest.toml; an interrupted write leaves "
                    "step_N.tmp/ behind, which is never resumed from)");
}

// What manifest.toml says: the rank files (each checked to exist) and the facts the rank files
// must repeat.
struct Manifest {
  std::vector<std::string> files;
  long long step = 0, samples_seen = 0, world_size = 0, format_version = 0;
};

Manifest read_manifest(const fs::path& dir) {
  const fs::path manifest = dir / "manifest.toml";
  toml::table t;
  try {
    t = toml::parse_file(manifest.string());
  } catch (const toml::parse_error& e) {
    throw CheckpointDamaged(manifest.string() + ": damaged (" + std::string(e.description()) + ")");
  }
  Manifest m;
  for (auto [key, out] : {std::pair{"step", &m.step}, {"samples_seen", &m.samples_seen}, {"world_size", &m.world_size},
                          {"format_version", &m.format_version}}) {
    const auto value = t[key].value_exact<int64_t>();
    if (!value || *value < 0)
      throw CheckpointDamaged(manifest.string() + ": damaged (" + key + " must be an integer >= 0)");
    *out = *value;
  }
  const toml::array* files = t["files"].as_array();
  if (!files || files->empty()) throw CheckpointDamaged(manifest.string() + ": damaged (no list of files)");
  for (const toml::node& n : *files) {
    const auto* name = n.as_string();
    if (!name || name->get().find('/') != std::string::npos)
      throw CheckpointDamaged(manifest.string() + ": damaged (files must be names of rank files)");
    m.files.push_back((dir / name->get()).string());
    if (!fs::exists(m.files.back())) throw CheckpointDamaged(m.files.back() + ": missing (manifest.toml lists it)");
  }
  return m;
}

// Damage unless `file`'s attribute `name` holds `want` (what `source` says).
void require_same(const std::string& file, const char* name, long long have, long long want,
                  const std::string& source) {
  if (have != want)
    throw CheckpointDamaged(file + ": attribute " + name + " = " + std::to_string(have) + ", but " + source + " says " +
                            std::to_string(want) + " (files of different checkpoints mixed?)");
}

}  // namespace

std::string checkpoint_dir(const std::string& run_dir, long long step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", step);
  return (fs::path(run_dir) / "ckpt" / name).string();
}

void save_checkpoint(const std::string& run_dir, const ModelState& model, const TrainState& state,
                     const CheckpointFacts& facts, const ParallelGroups& groups) {
  h5::silence_errors();
  Comm& world = *groups.world;
  const fs::path final_dir = checkpoint_dir(run_dir, state.step);
  const fs::path tmp_dir = final_dir.string() + ".tmp";
  if (world.rank() == 0) {
    remove_unfinished(final_dir.parent_path());
    fs::create_directories(tmp_dir);
  }
  world.barrier();
  const fs::path mine = tmp_dir / rank_file(world.rank());
  try {
    write_rank_file(mine, model, state, facts, groups);
  } catch (const UserError& e) {
    // Give the space back; step_N.tmp/ itself is never resumed from and goes with the next save.
    std::error_code ignored;
    fs::remove(mine, ignored);
    throw UserError(mine.string() + ": cannot write the checkpoint: " + e.what() +
                    "; older checkpoints are intact, and a run started again resumes from the newest of them");
  }
  world.barrier();
  if (world.rank() == 0) {
    std::string manifest = "step = " + std::to_string(state.step) +
                           "\nsamples_seen = " + std::to_string(state.samples_seen) +
                           "\nworld_size = " + std::to_string(world.size()) +
                           "\nformat_version = " + std::to_string(kFormatVersion) + "\nfiles = [";
    for (int r = 0; r < world.size(); ++r) manifest += (r ? ", \"" : "\"") + rank_file(r) + "\"";
    write_text_file(tmp_dir / "manifest.toml", manifest + "]\n");
    if (fs::exists(final_dir)) remove_checkpoint(final_dir);
    fs::rename(tmp_dir, final_dir);
    const std::vector<std::string> all = complete_checkpoints(run_dir);
    for (size_t i = facts.keep; i < all.size(); ++i) remove_checkpoint(all[i]);
  }
  world.barrier();
}

CheckpointRecord read_checkpoint_record(const std::string& step_dir) {
  h5::silence_errors();
  require_complete(step_dir);
  const Manifest manifest = read_manifest(step_dir);
  const std::string& first = manifest.files[0];
  try {
    const h5::Handle f = h5::open_file(first, false);
    return {h5::read_string_attr(f, "config_toml"), h5::read_string_attr(f, "layout"), manifest.step};
  } catch (const UserError& e) {
    throw CheckpointDamaged(first + ": cannot be read: " + e.what());
  }
}

namespace {

// [start, end] of the learning-rate cycle, absent from checkpoints of older moetrains.
void read_lr_cycle(hid_t f, const std::string& file, TrainState& s) {
  if (H5Aexists(f, "lr_cycle") <= 0) return;
  const std::vector<long long> cycle = h5::read_ints_attr(f, "lr_cycle");
  if (cycle.size() != 2 || cycle[0] < 0 || cycle[1] < cycle[0])
    throw CheckpointDamaged(file + ": damaged attribute lr_cycle (expected [start step, end step])");
  s.lr_start = cycle[0];
  s.lr_end = cycle[1];
}

}  // namespace

TrainState load_checkpoint(const std::string& step_dir, const ModelState& model) {
  h5::silence_errors();
  const fs::path dir(step_dir);
  require_complete(step_dir);
  const Manifest manifest = read_manifest(dir);
  const std::vector<std::string>& files = manifest.files;
  const std::string listed = (dir / "manifest.toml").string();
  if (manifest.world_size != (long long)files.size())
    throw CheckpointDamaged(listed + ": damaged (world_size = " + std::to_string(manifest.world_size) + ", but " +
                            std::to_string(files.size()) + " files listed)");
  TrainState s;
  // Every attribute is read from every rank file and must agree with the manifest: a file of
  // another checkpoint copied in is damage, not a resume from a mixture.
  for (size_t r = 0; r < files.size(); ++r) {
    h5::Handle f;
    long long format = 0;
    try {
      f = h5::open_file(files[r], false);
      format = h5::read_int_attr(f, "format_version");
    } catch (const UserError& e) {
      throw CheckpointDamaged(files[r] + ": cannot be read: " + e.what());
    }
    if (format != kFormatVersion)
      throw UserError(files[r] + ": checkpoint format " + std::to_string(format) + ", this moetrain reads format " +
                      std::to_string(kFormatVersion));
    try {
      require_same(files[r], "format_version", format, manifest.format_version, listed);
      require_same(files[r], "step", h5::read_int_attr(f, "step"), manifest.step, listed);
      require_same(files[r], "samples_seen", h5::read_int_attr(f, "samples_seen"), manifest.samples_seen, listed);
      require_same(files[r], "world_size", h5::read_int_attr(f, "world_size"), (long long)files.size(),
                   listed + " (its list of " + std::to_string(files.size()) + " files)");
      require_same(files[r], "rank", h5::read_int_attr(f, "rank"), (long long)r, listed + " (its place in files)");
      const long long seed = h5::read_int_attr(f, "rng_seed");
      if (r == 0) {
        s = {manifest.step, manifest.samples_seen, seed};
        read_lr_cycle(f, files[r], s);
      }
      require_same(files[r], "rng_seed", seed, s.seed, files[0]);
      h5::read_string_attr(f, "layout");
      h5::read_string_attr(f, "config_toml");
    } catch (const CheckpointDamaged&) {
      throw;
    } catch (const UserError& e) {  // an attribute missing, unreadable or of another type
      throw CheckpointDamaged(files[r] + ": cannot be read: " + e.what());
    }
  }
  if (const auto named = checkpoint_name_step(dir.filename().string()); named && *named != s.step)
    throw CheckpointDamaged(step_dir + ": holds step " + std::to_string(s.step) + " (manifest.toml and rank files), "
                            "not the step its name says; rename it step_" + std::to_string(s.step) +
                            " in eight digits, or move it out of ckpt/");
  try {
    const ParamSlices slices(files);
    model.exp_avg.assign(model.params.total(), 0.0f);
    model.exp_avg_sq.assign(model.params.total(), 0.0f);
    model.values.assign(model.params.total(), 0.0f);
    slices.read("/params", model.params, model.values);
    slices.read("/optim/exp_avg", model.params, model.exp_avg);
    slices.read("/optim/exp_avg_sq", model.params, model.exp_avg_sq);
    slices.read_buffers("/buffers", model.params);
  } catch (const h5::Failure& e) {
    throw CheckpointDamaged(step_dir + ": cannot be read: " + e.what());
  } catch (const UserError& e) {
    throw UserError(step_dir + ": does not fit this model (" + e.what() +
                    "); resume with the config the checkpoint was made with, or set checkpoint.resume = \"never\"");
  }
  return s;
}

std::optional<long long> checkpoint_name_step(const std::string& name) {
  const std::string digits = name.rfind("step_", 0) == 0 ? name.substr(5) : "";
  if (digits.size() < 8 || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return std::nullopt;
  const long long step = std::stoll(digits);
  // step_000000001 (nine digits) is not what checkpoint_dir writes for step 1.
  if (fs::path(checkpoint_dir("", step)).filename().string() != name) return std::nullopt;
  return step;
}

std::vector<std::string> complete_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<long long, std::string>> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(fs::path(run_dir) / "ckpt", ec))
    if (const auto step = checkpoint_name_step(e.path().filename().string()))
      if (e.is_directory(ec) && fs::exists(e.path() / "manifest.toml")) found.push_back({*step, e.path().string()});
  // By number: step_100000000 is newer than step_99999999.
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

long long checkpoint_step(const std::string& step_dir) {
  const std::string name = fs::path(step_dir).filename().string();
  const auto step = checkpoint_name_step(name);
  if (!step)
    throw UserError(step_dir + ": not a checkpoint directory (moetrain names them step_<N>, N in eight digits)");
  return *step;
}

}  // namespace mt
