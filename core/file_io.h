// Whole-file reads and atomic writes (on Linux an unnamed file of the folder linked under its
// name once whole, else a temporary name in the same folder renamed into place: an interrupted
// program never leaves a half-written file under the real name), and the hash the caches key
// files by. Errors name the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace scenelab {

// The whole file; errors say whether it is missing, a directory or unreadable. Files larger
// than max_bytes are refused before reading.
std::vector<uint8_t> read_file(const std::string& path, uint64_t max_bytes = UINT64_MAX);
void write_file_atomic(const std::string& path, const void* data, size_t bytes);
inline void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

// 64-bit FNV-1a, continuing from `h` (a content hash for cache keys, not for security).
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull);
std::string hex64(uint64_t v);

}  // namespace scenelab
