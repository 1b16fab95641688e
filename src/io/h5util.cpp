#include "io/h5util.hpp"

#include <algorithm>
#include <cstring>

#include "util/os_error.hpp"

namespace mt::h5 {

namespace {

// Why the last HDF5 call failed, from the innermost entry of its error stack: HDF5 words a
// failed system call as "..., errno = 28, error message = 'No space left on device', ...".
std::string failure_reason() {
  std::string innermost;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD,
           [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
             if (n == 0 && e->desc) *static_cast<std::string*>(out) = e->desc;
             return 0;
           },
           &innermost);
  H5Eclear2(H5E_DEFAULT);
  const std::string marker = "error message = '";
  if (const size_t at = innermost.find(marker); at != std::string::npos) {
    const size_t from = at + marker.size();
    const std::string os = innermost.substr(from, innermost.find('\'', from) - from);
    return os == std::strerror(ENOSPC) ? disk_full_text() : os;
  }
  return innermost.empty() ? "the file is damaged or not HDF5" : innermost;
}

}  // namespace

std::vector<hsize_t> extent(hid_t space, const std::string& what) {
  check(space, what);
  const int rank = H5Sget_simple_extent_ndims(space);
  check(rank, what);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), what);
  return dims;
}

static size_t elements(const std::vector<hsize_t>& dims) {
  size_t n = 1;
  for (hsize_t x : dims) n *= size_t(x);
  return n;
}

// Values of another kind are refused by name, never converted: a float where an integer belongs,
// or parameters stored at another precision (a 64-bit or 16-bit float, an integer).
static void require_integer(hid_t attr, const std::string& name) {
  Handle type(check(H5Aget_type(attr), "reading attribute " + name), H5Tclose);
  if (H5Tget_class(type) != H5T_INTEGER) throw UserError("HDF5: attribute " + name + " is not an integer");
}

static void require_float32(hid_t dataset, const std::string& path) {
  Handle type(check(H5Dget_type(dataset), "opening " + path), H5Tclose);
  const H5T_class_t kind = H5Tget_class(type);
  const size_t bits = H5Tget_size(type) * 8;
  if (kind == H5T_FLOAT && bits == 32) return;
  const std::string what = kind == H5T_FLOAT     ? std::to_string(bits) + "-bit floats"
                           : kind == H5T_INTEGER ? std::to_string(bits) + "-bit integers"
                                                 : "values that are not numbers";
  throw UserError("HDF5: dataset " + path + " holds " + what + "; moetrain stores and reads 32-bit floats");
}

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void no_cleanup_at_exit() { H5dont_atexit(); }

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw Failure("HDF5: " + what + " failed: " + failure_reason());
  return id;
}

Handle create_file(const std::string& path, bool latest_format) {
  Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose);
  if (latest_format) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  return Handle(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "creating " + path), H5Fclose);
}

// A SWMR reader rereads metadata whose checksum fails, as the writer may be midway through
// updating it. The pause between attempts doubles, so HDF5's default of 100 attempts waits for
// hours on a file that is simply damaged; 28 wait about 0.3 s in all (measured), far longer than
// the writer takes to update an entry.
constexpr unsigned kSwmrReadAttempts = 28;

Handle open_file(const std::string& path, bool swmr_read) {
  Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose);
  unsigned flags = H5F_ACC_RDONLY;
  if (swmr_read) {
    flags |= H5F_ACC_SWMR_READ;
    check(H5Pset_metadata_read_attempts(fapl, kSwmrReadAttempts), "H5Pset_metadata_read_attempts");
  }
  return Handle(check(H5Fopen(path.c_str(), flags, fapl), "opening " + path), H5Fclose);
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
  Handle a(check(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name),
           H5Aclose);
  check(H5Awrite(a, H5T_NATIVE_DOUBLE, &value), "writing attribute " + name);
}

void write_int_attr(hid_t obj, const std::string& name, long long value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(check(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name),
           H5Aclose);
  check(H5Awrite(a, H5T_NATIVE_LLONG, &value), "writing attribute " + name);
}

void write_ints_attr(hid_t obj, const std::string& name, const std::vector<long long>& values) {
  const hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a(check(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), "attribute " + name),
           H5Aclose);
  check(H5Awrite(a, H5T_NATIVE_LLONG, values.data()), "writing attribute " + name);
}

std::vector<long long> read_ints_attr(hid_t obj, const std::string& name) {
  Handle a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "reading attribute " + name), H5Aclose);
  require_integer(a, name);
  Handle space(H5Aget_space(a), H5Sclose);
  std::vector<long long> v(elements(extent(space, "reading attribute " + name)));
  check(H5Aread(a, H5T_NATIVE_LLONG, v.data()), "reading attribute " + name);
  return v;
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "reading attribute " + name), H5Aclose);
  Handle type(check(H5Aget_type(a), "reading attribute " + name), H5Tclose);
  if (H5Tget_class(type) != H5T_STRING) throw UserError("HDF5: attribute " + name + " is not a string");
  std::string out(H5Tget_size(type), '\0');
  check(H5Aread(a, type, out.data()), "reading attribute " + name);
  out.resize(out.find('\0') == std::string::npos ? out.size() : out.find('\0'));
  return out;
}

long long read_int_attr(hid_t obj, const std::string& name) {
  Handle a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "reading attribute " + name), H5Aclose);
  require_integer(a, name);
  Handle space(H5Aget_space(a), H5Sclose);
  if (const size_t n = elements(extent(space, "reading attribute " + name)); n != 1)
    throw UserError("HDF5: attribute " + name + " holds " + std::to_string(n) + " values, not one integer");
  long long v = 0;
  check(H5Aread(a, H5T_NATIVE_LLONG, &v), "reading attribute " + name);
  return v;
}

static Handle intermediate_groups_lcpl() {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  return lcpl;
}

// Chunks of whole rows (along dimension 0), about 4 MiB each, each with a Fletcher-32 checksum
// (the filter needs a chunked layout).
static Handle checksummed_dcpl(const std::vector<hsize_t>& dims, size_t element_bytes) {
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  if (dims.empty()) return dcpl;  // a scalar cannot be chunked
  std::vector<hsize_t> chunk(dims.size());
  size_t row_bytes = element_bytes;
  for (size_t k = 1; k < dims.size(); ++k) {
    chunk[k] = std::max<hsize_t>(dims[k], 1);
    row_bytes *= size_t(chunk[k]);
  }
  chunk[0] = std::clamp<hsize_t>((size_t(4) << 20) / row_bytes, 1, std::max<hsize_t>(dims[0], 1));
  check(H5Pset_chunk(dcpl, int(chunk.size()), chunk.data()), "chunking a dataset");
  check(H5Pset_fletcher32(dcpl), "adding a checksum");
  return dcpl;
}

static void write_dataset(hid_t file, const std::string& path, hid_t file_type, hid_t mem_type, size_t element_bytes,
                          const void* data, const std::vector<hsize_t>& dims) {
  Handle lcpl = intermediate_groups_lcpl();
  Handle dcpl = checksummed_dcpl(dims, element_bytes);
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle d(check(H5Dcreate2(file, path.c_str(), file_type, space, lcpl, dcpl, H5P_DEFAULT), "creating " + path),
           H5Dclose);
  check(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "writing " + path);
}

void write_floats(hid_t file, const std::string& path, const float* data, const std::vector<hsize_t>& dims) {
  write_dataset(file, path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, sizeof(float), data, dims);
}

void write_ints(hid_t file, const std::string& path, const int* data, const std::vector<hsize_t>& dims) {
  write_dataset(file, path, H5T_STD_I32LE, H5T_NATIVE_INT, sizeof(int), data, dims);
}

bool exists(hid_t file, const std::string& path) {
  // H5Lexists fails, rather than says no, when a group on the way is missing: ask group by group,
  // so that a failure means a damaged file.
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (check(H5Lexists(file, prefix.c_str(), H5P_DEFAULT), "looking up " + prefix) == 0) return false;
    if (slash == std::string::npos) return true;
  }
}

std::vector<float> read_floats(hid_t file, const std::string& path, size_t expected) {
  if (!exists(file, path)) throw UserError("HDF5: dataset " + path + " is missing");
  Handle d(check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  require_float32(d, path);
  Handle space(H5Dget_space(d), H5Sclose);
  const size_t n = elements(extent(space, "opening " + path));
  if (n != expected)
    throw UserError("HDF5: dataset " + path + " has " + std::to_string(n) + " values, expected " +
                    std::to_string(expected));
  std::vector<float> out(expected);
  check(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "reading " + path);
  return out;
}

std::vector<float> read_floats_along(hid_t file, const std::string& path, int dim, hsize_t begin, hsize_t count) {
  Handle d(check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  require_float32(d, path);
  Handle space(H5Dget_space(d), H5Sclose);
  std::vector<hsize_t> dims = extent(space, "opening " + path), start(dims.size(), 0);
  const int rank = int(dims.size());
  if (dim < 0 || dim >= rank || begin + count > dims[dim])
    throw UserError("HDF5: dataset " + path + " has no elements [" + std::to_string(begin) + ", " +
                    std::to_string(begin + count) + ") along dimension " + std::to_string(dim));
  start[dim] = begin;
  dims[dim] = count;
  check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, dims.data(), nullptr),
        "selecting in " + path);
  Handle memory(H5Screate_simple(rank, dims.data(), nullptr), H5Sclose);
  std::vector<float> out(elements(dims));
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
  return Handle(check(H5Dcreate2(file, path.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), "creating " + path),
                H5Dclose);
}

void append_rows(hid_t dset, hid_t mem_type, const void* data, hsize_t rows) {
  Handle space(H5Dget_space(dset), H5Sclose);
  std::vector<hsize_t> dims = extent(space, "extending a log dataset");
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  start[0] = dims[0];
  count[0] = rows;
  dims[0] += rows;
  check(H5Dset_extent(dset, dims.data()), "extending a log dataset");
  Handle fspace(check(H5Dget_space(dset), "extending a log dataset"), H5Sclose);
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  Handle mspace(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
  check(H5Dwrite(dset, mem_type, mspace, fspace, H5P_DEFAULT, data), "appending to a log dataset");
}

template <class T>
std::vector<T> read_all(hid_t file, const std::string& path, hid_t mem_type) {
  Handle d(check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  Handle space(H5Dget_space(d), H5Sclose);
  std::vector<T> out(elements(extent(space, "opening " + path)));
  if (!out.empty()) check(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "reading " + path);
  return out;
}
template std::vector<double> read_all<double>(hid_t, const std::string&, hid_t);
template std::vector<float> read_all<float>(hid_t, const std::string&, hid_t);
template std::vector<long long> read_all<long long>(hid_t, const std::string&, hid_t);

}  // namespace mt::h5
