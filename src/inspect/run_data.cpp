#include "inspect/run_data.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <utility>

#include "io/h5util.hpp"
#include "io/run_log.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

// The file's attributes: numbers (run facts) and strings (config, device, layout).
struct Attributes {
  RunData& run;
  std::string error;  // why one could not be read: exceptions must not cross HDF5's C frames
};

herr_t collect_attribute(hid_t obj, const char* name, const H5A_info_t*, void* out) {
  auto& into = *static_cast<Attributes*>(out);
  try {
    h5::Handle a(h5::check(H5Aopen(obj, name, H5P_DEFAULT), std::string("opening attribute ") + name), H5Aclose);
    h5::Handle type(h5::check(H5Aget_type(a), std::string("reading attribute ") + name), H5Tclose);
    if (H5Tget_class(type) == H5T_STRING) {
      std::string value = h5::read_string_attr(obj, name);
      if (std::string(name) == "config_toml") into.run.config_toml = std::move(value);
      else into.run.texts[name] = std::move(value);
    } else if (H5Tget_class(type) == H5T_FLOAT || H5Tget_class(type) == H5T_INTEGER) {
      double v = 0;
      if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0) into.run.numbers[name] = v;
    }
  } catch (const std::exception& e) {
    into.error = e.what();
    return -1;
  }
  return 0;
}

// The [a, b] of a [step, a, b] series; a damaged or foreign file may hold another shape, and a
// zero would leave nothing per step to divide by.
std::pair<size_t, size_t> row_shape(hid_t file, const std::string& path) {
  h5::Handle d(h5::check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  h5::Handle space(H5Dget_space(d), H5Sclose);
  const std::vector<hsize_t> dims = h5::extent(space, "opening " + path);
  if (dims.size() != 3 || dims[1] == 0 || dims[2] == 0 || dims[1] > INT32_MAX || dims[2] > INT32_MAX) {
    std::string shape;
    for (hsize_t x : dims) shape += (shape.empty() ? "" : ", ") + std::to_string(x);
    throw UserError("dataset " + path + " has shape [" + shape + "], expected [steps, a, b] with a, b > 0");
  }
  return {size_t(dims[1]), size_t(dims[2])};
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) out.push_back(part);
  return out;
}

}  // namespace

const std::vector<double>& RunData::scalar(const std::string& name) const {
  auto it = scalars.find(name);
  if (it == scalars.end()) throw UserError(dir + "/log.h5: no series \"" + name + "\"");
  return it->second;
}

RunData load_run(const std::string& dir) {
  h5::silence_errors();
  const std::string path = dir + "/log.h5";
  if (!std::filesystem::exists(path))
    throw UserError(path + ": no such file (give a run directory, such as runs/tiny, which holds log.h5)");
  RunData run;
  run.dir = dir;
  h5::Handle f;
  try {
    try {
      f = h5::open_file(path, true);
    } catch (const h5::Failure&) {
      f = h5::open_file(path, false);  // a log written without SWMR
    }
  } catch (const h5::Failure& e) {
    throw UserError(path + ": not a readable HDF5 file: " + e.what() + "; " + damaged_log_advice(dir));
  }
  try {
    Attributes attributes{run, ""};
    if (H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_attribute, &attributes) < 0) {
      if (!attributes.error.empty()) throw h5::Failure(attributes.error);
      h5::check(-1, "listing the attributes");
    }
    run.steps = h5::read_all<long long>(f, "/step", H5T_NATIVE_LLONG);
    size_t rows = run.steps.size();
    for (const std::string& name : log_scalar_names()) {
      run.scalars[name] = h5::read_all<double>(f, "/" + name, H5T_NATIVE_DOUBLE);
      rows = std::min(rows, run.scalars[name].size());
    }
    if (h5::exists(f, "/moe/expert_load")) {
      const auto [layers, experts] = row_shape(f, "/moe/expert_load");
      run.moe_layers = int(layers);
      run.experts = int(experts);
      run.expert_load = h5::read_all<float>(f, "/moe/expert_load", H5T_NATIVE_FLOAT);
      run.expert_bias = h5::read_all<float>(f, "/moe/expert_bias", H5T_NATIVE_FLOAT);
      const size_t per_step = size_t(run.moe_layers) * run.experts;
      rows = std::min({rows, run.expert_load.size() / per_step, run.expert_bias.size() / per_step});
    }
    if (h5::exists(f, "/timing/rank_phases")) {
      const auto [ranks, phases] = row_shape(f, "/timing/rank_phases");
      run.ranks = int(ranks);
      h5::Handle d(h5::check(H5Dopen2(f, "/timing/rank_phases", H5P_DEFAULT), "opening /timing/rank_phases"), H5Dclose);
      run.phase_names = split_commas(h5::read_string_attr(d, "phases"));
      if (run.phase_names.size() != phases)
        throw UserError("attribute \"phases\" of /timing/rank_phases names " + std::to_string(run.phase_names.size()) +
                        " phases, but the dataset holds " + std::to_string(phases) + " per rank");
      run.rank_phases = h5::read_all<float>(f, "/timing/rank_phases", H5T_NATIVE_FLOAT);
      rows = std::min(rows, run.rank_phases.size() / (size_t(run.ranks) * run.phase_names.size()));
    }
    // A log being written may hold a row in one series and not yet in the next.
    run.steps.resize(rows);
    for (auto& [name, values] : run.scalars) values.resize(rows);
    run.expert_load.resize(rows * run.moe_layers * run.experts);
    run.expert_bias.resize(rows * run.moe_layers * run.experts);
    run.rank_phases.resize(rows * run.ranks * run.phase_names.size());
    run.eval_steps = h5::read_all<long long>(f, "/eval/step", H5T_NATIVE_LLONG);
    run.eval_loss = h5::read_all<double>(f, "/eval/loss", H5T_NATIVE_DOUBLE);
    const size_t evals = std::min(run.eval_steps.size(), run.eval_loss.size());
    run.eval_steps.resize(evals);
    run.eval_loss.resize(evals);
  } catch (const h5::Failure& e) {
    throw UserError(path + ": " + e.what() + "; " + damaged_log_advice(dir));
  } catch (const UserError& e) {
    throw UserError(path + ": " + e.what() + " (not a complete moetrain log?)");
  }
  return run;
}

std::vector<std::string> runs_in_folder(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_directory(ec) && std::filesystem::is_regular_file(e.path() / "log.h5", ec))
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mt
