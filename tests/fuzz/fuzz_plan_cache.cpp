// libFuzzer: the plan cache reader on arbitrary file contents: a Tuning or nothing, never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/plan_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = "/tmp/scenelab_fuzz_plans_" + std::to_string(::getpid());
  static const std::string key = scenelab::plan_key("GPU; driver 1", "00ff", "fp16", 1, 64, 64);
  std::filesystem::create_directories(dir);
  scenelab::PlanCache cache(dir, [](const std::string&) {});
  FILE* f = std::fopen(cache.path_of(key).c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  (void)cache.find(key);
  return 0;
}
