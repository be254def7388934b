// libFuzzer: video demuxing and decoding through VideoReader (FFmpeg's libavformat/libavcodec,
// our conversion to RGB) from arbitrary bytes, under a pixel limit. The input is handed over as
// an in-memory file (memfd). Any input must give frames of the announced size, stop with a
// reason, or throw an Error; at most 32 frames are read per input.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "job/video.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("fuzz_video", 0);
  if (fd < 0) std::abort();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != ssize_t(size)) std::abort();
  scenelab::ImageLimits lim;
  lim.max_pixels = 1 << 20;
  try {
    scenelab::VideoReader r(path, lim);
    scenelab::Image8 f;
    for (int n = 0; n < 32 && r.read(f); ++n)
      if (f.channels != 3 || f.width <= 0 || f.height <= 0 ||
          f.pixels.size() != size_t(f.width) * f.height * 3 ||
          uint64_t(f.width) * uint64_t(f.height) > lim.max_pixels)
        __builtin_trap();
  } catch (const scenelab::Error&) {
  }
  return 0;
}
