#include "engine/jpeg_gpu.h"

#include "engine/error.h"

#ifdef SCENELAB_WITH_NVJPEG
#include <dlfcn.h>
#include <nvjpeg.h>

#include <mutex>
#include <type_traits>

#include "engine/cuda_backend.h"
#endif

namespace scenelab {

namespace {

inline int be16(const uint8_t* p) { return (int(p[0]) << 8) | p[1]; }

}  // namespace

bool GpuJpegDecoder::decodable(const uint8_t* d, size_t n, int& width, int& height) {
  if (n < 4 || d[0] != 0xFF || d[1] != 0xD8) return false;
  // A stream that does not end with its EOI marker (cut short) is the CPU's: the hardware decoder
  // reads on through it without an error, leaving part of the image unwritten, where libjpeg-turbo
  // names the file.
  if (d[n - 2] != 0xFF || d[n - 1] != 0xD9) return false;
  size_t p = 2;
  bool adobe_rgb = false;
  while (p + 4 <= n) {
    if (d[p] != 0xFF) return false;  // markers only between segments, until the scan
    const uint8_t m = d[p + 1];
    if (m == 0xFF) {  // fill byte
      ++p;
      continue;
    }
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // no length
      p += 2;
      continue;
    }
    const size_t len = size_t(be16(d + p + 2));
    if (len < 2 || p + 2 + len > n) return false;
    const uint8_t* s = d + p + 4;  // the segment's body
    const size_t body = len - 2;
    if (m == 0xEE && body >= 12 && s[0] == 'A' && s[1] == 'd' && s[2] == 'o' && s[3] == 'b' && s[4] == 'e')
      adobe_rgb = s[11] == 0;  // transform 0: the components are RGB, not YCbCr
    if (m == 0xC0) {  // baseline
      if (body < 6 || s[0] != 8) return false;
      height = be16(s + 1);
      width = be16(s + 3);
      const int comps = s[5];
      if (width <= 0 || height <= 0 || comps != 3 || body < size_t(6 + 3 * comps) || adobe_rgb) return false;
      const int y = s[7];  // luma's sampling: H << 4 | V
      if (y != 0x11 && y != 0x21 && y != 0x12 && y != 0x22) return false;
      return s[10] == 0x11 && s[13] == 0x11;
    }
    if ((m >= 0xC1 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) || m == 0xDA || m == 0xD9)
      return false;  // another kind of frame, or a scan before any frame header
    p += 2 + len;
  }
  return false;
}

#ifdef SCENELAB_WITH_NVJPEG
namespace {

// libnvjpeg.so.13's entry points, opened once.
struct NvJpeg {
  decltype(&nvjpegCreateEx) create = nullptr;
  decltype(&nvjpegDestroy) destroy = nullptr;
  decltype(&nvjpegJpegStateCreate) state_create = nullptr;
  decltype(&nvjpegJpegStateDestroy) state_destroy = nullptr;
  decltype(&nvjpegDecodeBatchedInitialize) batch_init = nullptr;
  decltype(&nvjpegDecodeBatched) batch_decode = nullptr;
  bool ok = false;
};

const NvJpeg& nvjpeg() {
  static NvJpeg lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvjpeg.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    auto sym = [h](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
      return f != nullptr;
    };
    lib.ok = sym(lib.create, "nvjpegCreateEx") && sym(lib.destroy, "nvjpegDestroy") &&
             sym(lib.state_create, "nvjpegJpegStateCreate") && sym(lib.state_destroy, "nvjpegJpegStateDestroy") &&
             sym(lib.batch_init, "nvjpegDecodeBatchedInitialize") && sym(lib.batch_decode, "nvjpegDecodeBatched");
    // the handle stays open: the library is used until the process ends
  });
  return lib;
}

void check(nvjpegStatus_t s, const char* what) {
  SL_REQUIRE(s == NVJPEG_STATUS_SUCCESS, "nvJPEG ", what, " failed (status ", int(s), ")");
}

}  // namespace

struct GpuJpegDecoder::Impl {
  const NvJpeg& lib = nvjpeg();
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegState_t state = nullptr;
  cudaStream_t stream = nullptr;
  int batch = 0;  // the batch size the state was initialised for
  std::vector<const unsigned char*> data;
  std::vector<size_t> lengths;
  std::vector<nvjpegImage_t> out;
  ~Impl() {
    if (state) lib.state_destroy(state);
    if (handle) lib.destroy(handle);
  }
};

bool GpuJpegDecoder::available() {
  static const bool ok = [] {
    const NvJpeg& lib = nvjpeg();
    if (!lib.ok) return false;
    nvjpegHandle_t h = nullptr;
    if (lib.create(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &h) != NVJPEG_STATUS_SUCCESS)
      return false;
    lib.destroy(h);
    return true;
  }();
  return ok;
}

GpuJpegDecoder::GpuJpegDecoder(const Backend& backend) : impl_(std::make_unique<Impl>()) {
  const CudaContext* ctx = backend.cuda();
  SL_REQUIRE(ctx && available(), "GPU JPEG decoding: nvJPEG's hardware decoder is not available");
  impl_->stream = ctx->stream;
  check(impl_->lib.create(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &impl_->handle),
        "nvjpegCreateEx (hardware backend)");
  check(impl_->lib.state_create(impl_->handle, &impl_->state), "nvjpegJpegStateCreate");
}

GpuJpegDecoder::~GpuJpegDecoder() = default;

void GpuJpegDecoder::decode(const std::vector<const std::vector<uint8_t>*>& jpegs, int h, int w,
                            const std::vector<uint8_t*>& out) {
  Impl& m = *impl_;
  const int n = int(jpegs.size());
  SL_REQUIRE(n > 0 && h > 0 && w > 0 && out.size() == jpegs.size(), "GPU JPEG decoding: no frames");
  if (n != m.batch) {  // the state's buffers are sized for a batch
    check(m.lib.batch_init(m.handle, m.state, n, 1, NVJPEG_OUTPUT_RGBI), "nvjpegDecodeBatchedInitialize");
    m.batch = n;
  }
  m.data.resize(size_t(n));
  m.lengths.resize(size_t(n));
  m.out.assign(size_t(n), nvjpegImage_t{});
  for (int i = 0; i < n; ++i) {
    m.data[size_t(i)] = jpegs[size_t(i)]->data();
    m.lengths[size_t(i)] = jpegs[size_t(i)]->size();
    m.out[size_t(i)].channel[0] = out[size_t(i)];
    m.out[size_t(i)].pitch[0] = size_t(w) * 3;
  }
  const nvjpegStatus_t s = m.lib.batch_decode(m.handle, m.state, m.data.data(), m.lengths.data(), m.out.data(), m.stream);
  if (s != NVJPEG_STATUS_SUCCESS) m.batch = 0;  // initialise again before the next batch
  check(s, "nvjpegDecodeBatched");
}

#else

struct GpuJpegDecoder::Impl {};
bool GpuJpegDecoder::available() { return false; }
GpuJpegDecoder::GpuJpegDecoder(const Backend&) {
  throw_error("GPU JPEG decoding: this build has no nvJPEG (SCENELAB_ENABLE_NVJPEG, nvjpeg.h)");
}
GpuJpegDecoder::~GpuJpegDecoder() = default;
void GpuJpegDecoder::decode(const std::vector<const std::vector<uint8_t>*>&, int, int, const std::vector<uint8_t*>&) {
  throw_error("GPU JPEG decoding: this build has no nvJPEG");
}

#endif

}  // namespace scenelab
