// libFuzzer: the plan cache reader on arbitrary file contents: a Tuning or nothing, never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/plan_cache.h"
#include "scratch_path.h"

namespace {
const char* const kPrefix = "scenelab_fuzz_plans_";
std::string cache_dir() {
  static const std::string dir = scenelab::fuzz::scratch_path(kPrefix, ::getpid(), "");
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  scenelab::fuzz::remove_scratch_of_dead_processes(kPrefix, "");
  (void)cache_dir();  // its static made before the handler is registered outlives the handler
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(cache_dir(), ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string key = scenelab::plan_key("GPU; driver 1", "00ff", "fp16", 1, 64, 64);
  std::filesystem::create_directories(cache_dir());
  scenelab::PlanCache cache(cache_dir(), [](const std::string&) {});
  if (!scenelab::fuzz::write_input(cache.path_of(key), data, size)) return 0;
  (void)cache.find(key);
  return 0;
}
