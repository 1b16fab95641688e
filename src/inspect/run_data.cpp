#include "inspect/run_data.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "io/h5util.hpp"
#include "io/run_log.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

// The file's attributes: numbers (run facts) and strings (config, device, layout).
herr_t collect_attribute(hid_t obj, const char* name, const H5A_info_t*, void* out) {
  auto& run = *static_cast<RunData*>(out);
  h5::Handle a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  h5::Handle type(H5Aget_type(a), H5Tclose);
  if (H5Tget_class(type) == H5T_STRING) {
    std::string value = h5::read_string_attr(obj, name);
    if (std::string(name) == "config_toml") run.config_toml = std::move(value);
    else run.texts[name] = std::move(value);
  } else if (H5Tget_class(type) == H5T_FLOAT || H5Tget_class(type) == H5T_INTEGER) {
    double v = 0;
    if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0) run.numbers[name] = v;
  }
  return 0;
}

// Second dimension of a [step, a, b] series (0 when absent).
std::vector<hsize_t> row_shape(hid_t file, const std::string& path) {
  h5::Handle d(h5::check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  h5::Handle space(H5Dget_space(d), H5Sclose);
  std::vector<hsize_t> dims(H5Sget_simple_extent_ndims(space));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return {dims.begin() + 1, dims.end()};
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
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT), H5Fclose);
  if (!f.valid()) f = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.valid()) throw UserError(path + ": not a readable HDF5 file (damaged, or not a moetrain log)");
  try {
    H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_attribute, &run);
    run.steps = h5::read_all<long long>(f, "/step", H5T_NATIVE_LLONG);
    size_t rows = run.steps.size();
    for (const std::string& name : log_scalar_names()) {
      run.scalars[name] = h5::read_all<double>(f, "/" + name, H5T_NATIVE_DOUBLE);
      rows = std::min(rows, run.scalars[name].size());
    }
    if (h5::exists(f, "/moe/expert_load")) {
      const auto shape = row_shape(f, "/moe/expert_load");
      run.moe_layers = int(shape.at(0));
      run.experts = int(shape.at(1));
      run.expert_load = h5::read_all<float>(f, "/moe/expert_load", H5T_NATIVE_FLOAT);
      run.expert_bias = h5::read_all<float>(f, "/moe/expert_bias", H5T_NATIVE_FLOAT);
      const size_t per_step = size_t(run.moe_layers) * run.experts;
      rows = std::min({rows, run.expert_load.size() / per_step, run.expert_bias.size() / per_step});
    }
    if (h5::exists(f, "/timing/rank_phases")) {
      run.ranks = int(row_shape(f, "/timing/rank_phases").at(0));
      h5::Handle d(h5::check(H5Dopen2(f, "/timing/rank_phases", H5P_DEFAULT), "opening /timing/rank_phases"), H5Dclose);
      run.phase_names = split_commas(h5::read_string_attr(d, "phases"));
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
  } catch (const UserError& e) {
    throw UserError(path + ": " + e.what() + " (not a complete moetrain log?)");
  }
  return run;
}

}  // namespace mt
