#include "io/h5util.hpp"

#include "util/error.hpp"

namespace mt::h5 {

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw UserError("HDF5: " + what + " failed (is the disk full or the file damaged?)");
  return id;
}

Handle create_file(const std::string& path, bool swmr_format) {
  Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose);
  // SWMR needs the latest file format; it also lets h5py read the log while training runs.
  if (swmr_format) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  return Handle(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "creating " + path), H5Fclose);
}

Handle open_file(const std::string& path, bool swmr_read) {
  unsigned flags = H5F_ACC_RDONLY | (swmr_read ? H5F_ACC_SWMR_READ : 0u);
  return Handle(check(H5Fopen(path.c_str(), flags, H5P_DEFAULT), "opening " + path), H5Fclose);
}

void write_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, value.size() + 1);
  H5Tset_strpad(type, H5T_STR_NULLTERM);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(check(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name), H5Aclose);
  check(H5Awrite(a, type, value.c_str()), "writing attribute " + name);
}

void write_double_attr(hid_t obj, const std::string& name, double value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(check(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name), H5Aclose);
  check(H5Awrite(a, H5T_NATIVE_DOUBLE, &value), "writing attribute " + name);
}

void write_int_attr(hid_t obj, const std::string& name, long long value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(check(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name), H5Aclose);
  check(H5Awrite(a, H5T_NATIVE_LLONG, &value), "writing attribute " + name);
}

void write_ints_attr(hid_t obj, const std::string& name, const std::vector<long long>& values) {
  const hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a(check(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name), H5Aclose);
  check(H5Awrite(a, H5T_NATIVE_LLONG, values.data()), "writing attribute " + name);
}

std::vector<long long> read_ints_attr(hid_t obj, const std::string& name) {
  Handle a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "reading attribute " + name), H5Aclose);
  Handle space(H5Aget_space(a), H5Sclose);
  std::vector<long long> v(size_t(H5Sget_simple_extent_npoints(space)));
  check(H5Aread(a, H5T_NATIVE_LLONG, v.data()), "reading attribute " + name);
  return v;
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "reading attribute " + name), H5Aclose);
  Handle type(H5Aget_type(a), H5Tclose);
  std::string out(H5Tget_size(type), '\0');
  check(H5Aread(a, type, out.data()), "reading attribute " + name);
  out.resize(out.find('\0') == std::string::npos ? out.size() : out.find('\0'));
  return out;
}

long long read_int_attr(hid_t obj, const std::string& name) {
  Handle a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "reading attribute " + name), H5Aclose);
  long long v = 0;
  check(H5Aread(a, H5T_NATIVE_LLONG, &v), "reading attribute " + name);
  return v;
}

static Handle intermediate_groups_lcpl() {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  return lcpl;
}

void write_floats(hid_t file, const std::string& path, const float* data, const std::vector<hsize_t>& dims) {
  Handle lcpl = intermediate_groups_lcpl();
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle d(check(H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, space, lcpl, H5P_DEFAULT, H5P_DEFAULT), "creating " + path), H5Dclose);
  check(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "writing " + path);
}

void write_ints(hid_t file, const std::string& path, const int* data, const std::vector<hsize_t>& dims) {
  Handle lcpl = intermediate_groups_lcpl();
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle d(check(H5Dcreate2(file, path.c_str(), H5T_STD_I32LE, space, lcpl, H5P_DEFAULT, H5P_DEFAULT), "creating " + path), H5Dclose);
  check(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "writing " + path);
}

bool exists(hid_t file, const std::string& path) {
  return H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0;
}

std::vector<float> read_floats(hid_t file, const std::string& path, size_t expected) {
  if (!exists(file, path)) throw UserError("HDF5: dataset " + path + " is missing");
  Handle d(check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  Handle space(H5Dget_space(d), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n != hssize_t(expected))
    throw UserError("HDF5: dataset " + path + " has " + std::to_string(n) + " values, expected " + std::to_string(expected));
  std::vector<float> out(expected);
  check(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "reading " + path);
  return out;
}

std::vector<float> read_floats_along(hid_t file, const std::string& path, int dim, hsize_t begin, hsize_t count) {
  Handle d(check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  Handle space(H5Dget_space(d), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(rank), start(rank, 0);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  if (dim < 0 || dim >= rank || begin + count > dims[dim])
    throw UserError("HDF5: dataset " + path + " has no elements [" + std::to_string(begin) + ", " +
                    std::to_string(begin + count) + ") along dimension " + std::to_string(dim));
  start[dim] = begin;
  dims[dim] = count;
  check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, dims.data(), nullptr), "selecting in " + path);
  Handle memory(H5Screate_simple(rank, dims.data(), nullptr), H5Sclose);
  size_t n = 1;
  for (hsize_t x : dims) n *= size_t(x);
  std::vector<float> out(n);
  check(H5Dread(d, H5T_NATIVE_FLOAT, memory, space, H5P_DEFAULT, out.data()), "reading " + path);
  return out;
}

Handle create_series(hid_t file, const std::string& path, hid_t type, const std::vector<hsize_t>& row_shape) {
  std::vector<hsize_t> dims{0}, maxd{H5S_UNLIMITED}, chunk{64};
  for (hsize_t r : row_shape) { dims.push_back(r); maxd.push_back(r); chunk.push_back(r); }
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), maxd.data()), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
  Handle lcpl = intermediate_groups_lcpl();
  return Handle(check(H5Dcreate2(file, path.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), "creating " + path), H5Dclose);
}

hsize_t series_length(hid_t dset) {
  Handle space(H5Dget_space(dset), H5Sclose);
  std::vector<hsize_t> dims(H5Sget_simple_extent_ndims(space));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return dims[0];
}

void append_rows(hid_t dset, hid_t mem_type, const void* data, hsize_t rows) {
  Handle space(H5Dget_space(dset), H5Sclose);
  std::vector<hsize_t> dims(H5Sget_simple_extent_ndims(space));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  start[0] = dims[0];
  count[0] = rows;
  dims[0] += rows;
  check(H5Dset_extent(dset, dims.data()), "extending a log dataset");
  Handle fspace(H5Dget_space(dset), H5Sclose);
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  Handle mspace(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
  check(H5Dwrite(dset, mem_type, mspace, fspace, H5P_DEFAULT, data), "appending to a log dataset");
}

template <class T>
std::vector<T> read_all(hid_t file, const std::string& path, hid_t mem_type) {
  Handle d(check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  Handle space(H5Dget_space(d), H5Sclose);
  std::vector<T> out(H5Sget_simple_extent_npoints(space));
  if (!out.empty()) check(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "reading " + path);
  return out;
}
template std::vector<double> read_all<double>(hid_t, const std::string&, hid_t);
template std::vector<float> read_all<float>(hid_t, const std::string&, hid_t);
template std::vector<long long> read_all<long long>(hid_t, const std::string&, hid_t);

}  // namespace mt::h5
