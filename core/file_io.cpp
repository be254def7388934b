#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"

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

std::atomic<unsigned> tmp_counter{0};
std::string temporary_name(const std::string& path) {
  return str_cat(path, ".tmp.", ::getpid(), ".", tmp_counter++);
}

#if defined(__linux__) && defined(O_TMPFILE)
// The process's umask now, from /proc/self/status (Linux 4.7+) without changing it: umask() is
// the only other way to read it, and it sets the mask for every thread while it does (files
// another thread creates meanwhile would get the wrong mode). -1 where it cannot be read (the
// unnamed-file path is then not used).
int process_umask() {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen("/proc/self/status", "re"), std::fclose);
  char line[256];
  while (f && std::fgets(line, sizeof line, f.get()))
    if (std::strncmp(line, "Umask:", 6) == 0) return int(std::strtol(line + 6, nullptr, 8));
  return -1;
}
#endif

// Linux: the bytes into an unnamed file of the folder (O_TMPFILE), linked under `path` once
// whole: one directory entry made instead of a temporary name created and then renamed (on the
// GPU machine's disk 16 threads writing small PNGs spent most of their time on those two
// directory operations). Where `path` exists the written file is linked under a temporary name
// and renamed over it (replacing stays atomic; nothing is written twice). False where this cannot
// apply (no O_TMPFILE on the file system, /proc not mounted, the umask unknown); other errors throw.
bool write_file_linked(const std::string& path, const void* data, size_t bytes) {
#if defined(__linux__) && defined(O_TMPFILE)
  const int mask = process_umask();
  if (mask < 0) return false;
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (!write_all(fd, data, bytes)) throw_error(path, ": cannot write (", std::strerror(errno), ")");
  // O_TMPFILE's mode is not filtered by the umask as open(O_CREAT)'s is
  if (::fchmod(fd, mode_t(0666 & ~mask)) != 0) throw_error(path, ": cannot write (", std::strerror(errno), ")");
  char proc[48];
  std::snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  if (::linkat(AT_FDCWD, proc, AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
  if (errno == ENOENT || errno == EPERM || errno == EXDEV || errno == EOPNOTSUPP) return false;
  if (errno != EEXIST) throw_error(path, ": cannot write (", std::strerror(errno), ")");
  const std::string tmp = temporary_name(path);
  if (::linkat(AT_FDCWD, proc, AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0 ||
      std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw_error(path, ": cannot write (", std::strerror(e), ")");
  }
  return true;
#else
  (void)path, (void)data, (void)bytes;
  return false;
#endif
}

}  // namespace

void write_file_atomic(const std::string& path, const void* data, size_t bytes) {
  if (write_file_linked(path, data, bytes)) return;
  const std::string tmp = temporary_name(path);
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
