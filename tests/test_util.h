// Small helpers shared by the tests: a file's text, a shell command's exit status, the message of
// an Error a call throws, an image of random pixels.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>

#include "core/error.h"
#include "engine/image_io.h"

namespace scenelab::test {

#ifdef SCENELAB_SOURCE_DIR
// CamVid (tools/get_camvid.sh lays it out): $SCENELAB_CAMVID, else ../shared/data/camvid beside
// the source tree. Tests that need it skip, naming both, where it is not there.
inline std::string camvid_dir() {
  if (const char* e = std::getenv("SCENELAB_CAMVID")) return e;
  return std::string(SCENELAB_SOURCE_DIR) + "/../shared/data/camvid";
}
#endif

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline int run_command(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline Image8 noise_image(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  Image8 img{w, h, 3, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (auto& p : img.pixels) p = uint8_t(rng() & 255);
  return img;
}

}  // namespace scenelab::test
