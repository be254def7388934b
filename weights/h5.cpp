#include "weights/h5.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"

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


namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

bool read_at(FILE* f, uint64_t pos, void* buf, size_t n) {
  return fseeko(f, static_cast<off_t>(pos), SEEK_SET) == 0 && std::fread(buf, 1, n, f) == n;
}

uint64_t decode_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// HDF5 1.10's reader of a global heap collection (where variable-length strings live) walks its
// objects by their sizes and never ends when one claims to need 0 bytes (found by fuzz_model:
// tests/fuzz/findings/model-hdf5-global-heap-hang.h5). Walks every collection of the file as that
// reader would and refuses the file before HDF5 reads it when a walk would stall, go backwards or
// leave the collection. A collection is the signature "GCOL", version 1, 3 reserved bytes and its
// size (the superblock's size of lengths), then objects: index (2 bytes), references (2), 4
// reserved, size (size of lengths), data padded to 8 bytes; index 0 is the free space, whose size
// counts its header. A "GCOL" whose size is not plausible (smaller than its header, past the end
// of the file) is left to HDF5, which refuses such a collection when it is used.
void check_global_heaps(FILE* f, const std::string& path) {
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size <= 0) return;
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // The superblock: at 0, 512, 1024, 2048, ...; its version says where the size of lengths is.
  static const unsigned char kSig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  int len_size = 0;
  for (uint64_t at = 0; at + 16 <= file_size && len_size == 0; at = at ? at * 2 : 512) {
    unsigned char sb[16];
    if (!read_at(f, at, sb, sizeof sb)) return;
    if (std::memcmp(sb, kSig, 8) != 0) continue;
    len_size = sb[8] <= 1 ? sb[14] : sb[10];
    if (len_size != 2 && len_size != 4 && len_size != 8) return;  // HDF5 refuses it itself
  }
  if (len_size == 0) return;
  const uint64_t head = 8 + static_cast<uint64_t>(len_size);      // GCOL, version, reserved, size
  const uint64_t obj_head = 8 + static_cast<uint64_t>(len_size);  // index, refs, reserved, size
  // Find every "GCOL" followed by version 1, reading the file in chunks that overlap by 4 bytes.
  if (fseeko(f, 0, SEEK_SET) != 0) return;
  std::vector<unsigned char> buf(1 << 20);
  std::vector<uint64_t> found;
  uint64_t base = 0;
  size_t keep = 0;
  while (true) {
    size_t got = std::fread(buf.data() + keep, 1, buf.size() - keep, f);
    size_t have = keep + got;
    for (size_t i = 0; i + 5 <= have; ++i)
      if (buf[i] == 'G' && buf[i + 1] == 'C' && buf[i + 2] == 'O' && buf[i + 3] == 'L' && buf[i + 4] == 1)
        found.push_back(base + i);
    if (got == 0) break;
    keep = std::min<size_t>(4, have);
    std::memmove(buf.data(), buf.data() + have - keep, keep);
    base += have - keep;
  }
  for (uint64_t at : found) {
    unsigned char h[16];
    if (!read_at(f, at, h, head)) continue;
    uint64_t size = decode_le(h + 8, len_size);
    if (size < head || size > file_size - at) continue;  // not plausible: HDF5's to refuse
    const uint64_t end = at + size;
    uint64_t p = at + head;
    while (p < end) {
      if (end - p < obj_head) break;  // a tail too small for an object: free space
      unsigned char o[16];
      if (!read_at(f, p, o, obj_head)) break;
      uint64_t index = decode_le(o, 2), osize = decode_le(o + 8, len_size);
      uint64_t need = index > 0 ? obj_head + ((osize + 7) & ~uint64_t{7}) : osize;
      const char* which = index > 0 ? "an object" : "its free space";
      if (osize > end - p || need > end - p)
        throw_error(path, ": corrupt HDF5 file (global heap collection at byte ", at, ": ", which,
                    " at byte ", p, " claims ", osize, " bytes, past the collection's end)");
      if (need == 0)
        throw_error(path, ": corrupt HDF5 file (global heap collection at byte ", at, ": ", which,
                    " at byte ", p, " claims 0 bytes; HDF5 would never finish reading it)");
      p += need;
    }
  }
}

}  // namespace

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex m;
  return m;
}

H5Id open_h5_read(const std::string& path, const char* what) {
  silence_hdf5();
  {
    File f(std::fopen(path.c_str(), "rb"));
    SL_REQUIRE(f, path, ": cannot open ", what);
    check_global_heaps(f.get(), path);
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
