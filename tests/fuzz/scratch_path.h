// A harness's scratch file or folder: in the temporary folder ($TMPDIR, else /tmp), named by the
// process id, removed when the process exits normally; what processes that died left (a crash,
// libFuzzer's timeout) is removed by the next one to start, so that campaigns and the replay
// tests do not pile them up (hundreds were found in /tmp).
#pragma once
#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace scenelab::fuzz {

// TMPDIR/PREFIX<pid>SUFFIX.
inline std::string scratch_path(const std::string& prefix, long pid, const std::string& suffix) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  return (dir / (prefix + std::to_string(pid) + suffix)).string();
}

// Removes the PREFIX<pid>SUFFIX entries of processes that no longer exist.
inline void remove_scratch_of_dead_processes(const std::string& prefix, const std::string& suffix) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(scratch_path(prefix, 0, suffix)).parent_path();
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + suffix.size() + 1) continue;
    const long pid = std::atol(name.c_str() + prefix.size());
    if (pid > 0 && e.path().string() == scratch_path(prefix, pid, suffix) && ::kill(pid_t(pid), 0) != 0 &&
        errno == ESRCH)
      std::filesystem::remove_all(e.path(), ec);
  }
}

// Writes a fuzz input to `path` (whole, replacing it); false where the file cannot be made.
inline bool write_input(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

}  // namespace scenelab::fuzz
