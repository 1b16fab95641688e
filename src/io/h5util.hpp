#pragma once
// Small RAII and error helpers over the HDF5 C API.
#include <hdf5.h>

#include <string>
#include <vector>

#include "util/error.hpp"

namespace mt::h5 {

// Owns an hid_t and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept { reset(); id_ = o.id_; close_ = o.close_; o.id_ = -1; return *this; }
  ~Handle() { reset(); }
  void reset() { if (id_ >= 0 && close_) close_(id_); id_ = -1; }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// An HDF5 call that failed: the file is missing, unreadable, damaged (a checksum failed) or the
// disk is full. Other UserErrors from these helpers are files that read fine but hold something
// else than expected.
struct Failure : UserError {
  using UserError::UserError;
};

// Throws Failure("HDF5: <what> failed: <reason>") when id < 0 / status < 0, the reason taken
// from HDF5's error stack (which is silenced, not printed): for a failed system call the OS's
// words, "the disk is full" for ENOSPC.
hid_t check(hid_t id, const std::string& what);
void silence_errors();
// Call first, before any other HDF5 call: HDF5 then skips its clean-up at exit, which closes the
// files still open and crashes (HDF5 1.10) on one whose close failed on a full disk. moetrain
// closes every file itself, so nothing is left for that clean-up to do.
void no_cleanup_at_exit();
// The dimensions of a dataspace (`space` checked too: a damaged file can fail to give one).
std::vector<hsize_t> extent(hid_t space, const std::string& what);

// latest_format: HDF5's newest file format, which SWMR needs and which checksums the metadata.
Handle create_file(const std::string& path, bool latest_format);
Handle open_file(const std::string& path, bool swmr_read);

void write_string_attr(hid_t obj, const std::string& name, const std::string& value);
void write_double_attr(hid_t obj, const std::string& name, double value);
void write_int_attr(hid_t obj, const std::string& name, long long value);
void write_ints_attr(hid_t obj, const std::string& name, const std::vector<long long>& values);
std::string read_string_attr(hid_t obj, const std::string& name);
std::vector<long long> read_ints_attr(hid_t obj, const std::string& name);

long long read_int_attr(hid_t obj, const std::string& name);

// Fixed-size datasets (checkpoints, dump-step). Intermediate groups are created as needed. Each is
// stored in chunks with a Fletcher-32 checksum, so damaged data fails to read instead of loading.
void write_floats(hid_t file, const std::string& path, const float* data, const std::vector<hsize_t>& dims);
std::vector<float> read_floats(hid_t file, const std::string& path, size_t expected);
// Elements [begin, begin+count) along dimension `dim` of a dataset (all of every other
// dimension), in the dataset's order.
std::vector<float> read_floats_along(hid_t file, const std::string& path, int dim, hsize_t begin, hsize_t count);
void write_ints(hid_t file, const std::string& path, const int* data, const std::vector<hsize_t>& dims);
// Whether an absolute path names an object; throws Failure when the file cannot say.
bool exists(hid_t file, const std::string& path);

// Extendible datasets along dimension 0 (logs): create with row shape, append rows.
Handle create_series(hid_t file, const std::string& path, hid_t type, const std::vector<hsize_t>& row_shape);
void append_rows(hid_t dset, hid_t mem_type, const void* data, hsize_t rows);
template <class T>
std::vector<T> read_all(hid_t file, const std::string& path, hid_t mem_type);

}  // namespace mt::h5
