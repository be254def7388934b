#include "engine/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "engine/error.h"

namespace scenelab {

std::vector<uint8_t> read_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw_error(path, ": cannot open file (", std::strerror(errno), ")");
  SL_REQUIRE(!S_ISDIR(st.st_mode), path, ": is a directory, not a file");
  SL_REQUIRE(uint64_t(st.st_size) <= max_bytes, path, ": file of ", uint64_t(st.st_size),
             " bytes is larger than the limit of ", max_bytes);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) throw_error(path, ": cannot open file (", std::strerror(errno), ")");
  std::vector<uint8_t> bytes(size_t(st.st_size));
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f.get());
  SL_REQUIRE(got == bytes.size() && !std::ferror(f.get()), path, ": read error");
  return bytes;
}

namespace {

bool write_all(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= size_t(n);
  }
  return true;
}

// Linux: the bytes into an unnamed file of the folder (O_TMPFILE), linked under `path` once
// whole: one directory entry made instead of a temporary name created and then renamed (on the
// GPU machine's disk 16 threads writing small PNGs spent most of their time on those two
// directory operations). False where this cannot apply (no O_TMPFILE on the file system, /proc
// not mounted, or `path` exists: replacing it takes the rename); errors other than those throw.
bool write_new_file_linked(const std::string& path, const void* data, size_t bytes) {
#if defined(__linux__) && defined(O_TMPFILE)
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  char proc[48];
  std::snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  const bool ok = write_all(fd, data, bytes);
  const int e = errno;
  if (!ok) {
    ::close(fd);
    throw_error(path, ": cannot write (", std::strerror(e), ")");
  }
  // fchmod: O_TMPFILE's mode is not filtered by the umask as open(O_CREAT)'s is
  const mode_t mask = ::umask(0);
  ::umask(mask);
  (void)::fchmod(fd, 0666 & ~mask);
  const bool linked = ::linkat(AT_FDCWD, proc, AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0;
  const int le = errno;
  const bool closed = ::close(fd) == 0;
  if (!linked) {
    if (le == EEXIST || le == ENOENT || le == EPERM || le == EXDEV || le == EOPNOTSUPP) return false;
    throw_error(path, ": cannot write (", std::strerror(le), ")");
  }
  SL_REQUIRE(closed, path, ": cannot write (", std::strerror(errno), ")");
  return true;
#else
  (void)path, (void)data, (void)bytes;
  return false;
#endif
}

}  // namespace

void write_file_atomic(const std::string& path, const void* data, size_t bytes) {
  if (write_new_file_linked(path, data, bytes)) return;
  static std::atomic<unsigned> counter{0};
  const std::string tmp = str_cat(path, ".tmp.", ::getpid(), ".", counter++);
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw_error(path, ": cannot write (", std::strerror(errno), ")");
  const bool ok = bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw_error(path, ": cannot write (", std::strerror(e), ")");
  }
}

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace scenelab
