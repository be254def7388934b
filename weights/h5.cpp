#include "weights/h5.h"

#include <cstdio>

#include "engine/error.h"

namespace scenelab {

// The innermost message of the HDF5 error stack, for our error text.
static herr_t walk_cb(unsigned n, const H5E_error2_t* e, void* data) {
  if (n == 0 && e->desc) *static_cast<std::string*>(data) = e->desc;
  return 0;
}
std::string h5_reason() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? "HDF5 error" : s;
}

void silence_hdf5() {
  static bool done = [] {
    H5open();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// Checks an HDF5 call's result; the message names the file and what was being done.
hid_t h5_check(hid_t r, const std::string& file, const std::string& what) {
  if (r < 0) throw_error(file, ": ", what, " failed (", h5_reason(), ")");
  return r;
}

bool path_exists(hid_t file, const std::string& path) {
  // Checks every level, as H5Lexists requires the parents to exist.
  size_t pos = 0;
  while (true) {
    size_t slash = path.find('/', pos);
    std::string prefix = path.substr(0, slash);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    pos = slash + 1;
  }
}


H5Id open_h5_read(const std::string& path, const char* what) {
  silence_hdf5();
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    SL_REQUIRE(f, path, ": cannot open ", what);
    std::fclose(f);
  }
  htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw_error(path, ": not an HDF5 file (or truncated before its header)");
  }
  hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fid < 0) throw_error(path, ": corrupt or truncated HDF5 file (", h5_reason(), ")");
  return H5Id(fid, H5Fclose);
}

}  // namespace scenelab
