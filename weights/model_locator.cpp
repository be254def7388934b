#include "weights/model_locator.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace scenelab {

std::vector<std::string> default_model_names() {
  return {"camvid-multiscale.h5", "default-multiscale.h5"};
}

static std::string exe_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, size_t(n));
  return p.substr(0, p.rfind('/'));
}

// The folder of the file this code was linked into: libscenelab.so where a program uses the
// installed library (wherever `cmake --install --prefix` put it, moved or not), else the program.
static std::string library_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&library_dir), &info) || !info.dli_fname) return exe_dir();
  char buf[PATH_MAX];
  const std::string p = realpath(info.dli_fname, buf) ? std::string(buf) : std::string(info.dli_fname);
  return p.substr(0, p.rfind('/'));
}

std::vector<std::string> weights_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("SCENELAB_WEIGHTS_DIR")) dirs.push_back(env);
  // an installed library's share/
  dirs.push_back((std::filesystem::path(library_dir()) / SCENELAB_LIB_TO_WEIGHTS).lexically_normal().string());
  dirs.push_back(exe_dir() + "/../share/scenelab/weights");
  dirs.push_back(SCENELAB_INSTALL_WEIGHTS_DIR);
  dirs.push_back(SCENELAB_BUILD_WEIGHTS_DIR);
  dirs.push_back(SCENELAB_SOURCE_WEIGHTS_DIR);
  // Each folder once (in a program linked with the static engine the library's folder is the
  // program's, and both name the same share/ folder).
  std::vector<std::string> unique;
  for (auto& d : dirs) {
    const std::string n = std::filesystem::path(d).lexically_normal().string();
    if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(n);
  }
  return unique;
}

std::string find_default_model() {
  std::string looked;
  for (const auto& name : default_model_names())
    for (const auto& dir : weights_search_dirs()) {
      std::string p = dir + "/" + name;
      if (std::ifstream(p).good()) return p;
      looked += "\n  " + p;
    }
  throw_error("no default model found; looked for:", looked,
              "\n(build the project, or pass --model FILE)");
}

std::string find_weights(const std::string& name) {
  std::string looked;
  for (const auto& dir : weights_search_dirs()) {
    std::string p = dir + "/" + name;
    if (std::ifstream(p).good()) return p;
    looked += "\n  " + p;
  }
  throw_error("no ", name, " found; looked in:", looked);
}

}  // namespace scenelab
