// HDF5 helpers shared by the model and tensor files: RAII ids and checked calls whose errors
// name the file and what was being done. Never prints HDF5's own error stack.
#pragma once
#include <hdf5.h>

#include <mutex>
#include <string>

namespace scenelab {

class H5Id {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Id() = default;
  H5Id(hid_t id, Closer c) : id_(id), close_(c) {}
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// The innermost message of HDF5's error stack (and clears it).
std::string h5_reason();
// Turns off HDF5's automatic error printing, once per process.
void silence_hdf5();
// Returns r, or throws "<file>: <what> failed (<reason>)" when r < 0.
hid_t h5_check(hid_t r, const std::string& file, const std::string& what);
// True when every level of a/b/c exists.
bool path_exists(hid_t file, const std::string& path);
// HDF5 (Debian's build) is not thread-safe: every use of it holds this lock, which also keeps
// other threads out of the library while a reader forks (weights/isolated.h).
std::recursive_mutex& h5_mutex();
// Opens a file for reading with clear errors for missing, non-HDF5 and truncated files.
H5Id open_h5_read(const std::string& path, const char* what);

}  // namespace scenelab
