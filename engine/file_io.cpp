#include "engine/file_io.h"

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

void write_file_atomic(const std::string& path, const void* data, size_t bytes) {
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
