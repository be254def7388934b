#ifdef SCENELAB_WITH_OPENBLAS
#include <cblas.h>
#endif
#include "engine/backend.h"


#include <Eigen/Core>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <new>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#ifdef __linux__
#include <sys/resource.h>
#include <unistd.h>
#endif

#include "core/error.h"
#include "core/parallel.h"
#include "core/parse_number.h"
#include "engine/resize_linear.h"
#include "core/tensor.h"

#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include "engine/cuda_backend.h"
#endif

namespace scenelab {

CpuConv cpu_conv_of(const std::string& conv) {
  if (conv == "gemm") return CpuConv::Gemm;
  if (conv == "winograd") return CpuConv::Winograd;
  SL_REQUIRE(conv == "auto" || conv == "direct" || conv == "gemm2s" || conv == "cudnn" || conv == "split",
             "--conv ", conv, ": expected auto, gemm or winograd on the CPU (direct, gemm2s, cudnn or split: the GPU's)");
  return CpuConv::Auto;
}

CpuBackend::CpuBackend(int threads, CpuConv conv) : conv_(conv) {
  if (threads <= 0) threads = int(std::thread::hardware_concurrency());
  threads_ = threads > 0 ? threads : 1;
}

std::string CpuBackend::describe() const {
  return str_cat("cpu (", threads_, threads_ == 1 ? " thread" : " threads", conv_ == CpuConv::Gemm ? ", conv gemm" : conv_ == CpuConv::Winograd ? ", conv winograd" : "", ")");
}

void CpuBackend::activate() const {
  // The layers split their GEMMs into bands of a size that does not depend on the thread count
  // and run them on our threads; Eigen's own threading would choose its blocking by the number of
  // threads, and the sums' order (the results' last bits) with it.
  Eigen::setNbThreads(1);
#ifdef SCENELAB_WITH_OPENBLAS
  openblas_set_num_threads(1);  // likewise OpenBLAS (the convolutions' GEMM where built with it)
#endif
}

BackendMemory CpuBackend::allocate(size_t bytes) const {
  float* p = nullptr;
  try {
    p = aligned_floats((bytes + sizeof(float) - 1) / sizeof(float)).release();
  } catch (const std::bad_alloc&) {
    throw_error("cannot allocate ", (bytes + (size_t(1) << 20) - 1) >> 20, " MiB of host memory");
  }
  return BackendMemory(p, [](void* q) { AlignedFree()(static_cast<float*>(q)); });
}

size_t CpuBackend::free_bytes() const { return host_memory_headroom(); }

namespace {

// The first whitespace-separated word of a /proc or /sys file as a count, or nullopt where the
// file is absent or the word is not one ("max": no limit).
std::optional<uint64_t> read_count(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word)) return std::nullopt;
  const auto v = parse_long(word, 0, std::numeric_limits<long>::max());
  if (!v) return std::nullopt;
  return uint64_t(*v);
}

// A "Key:   N kB" line of /proc/meminfo, in bytes (unit 1024), or a "key N" line of a cgroup's
// memory.stat (unit 1).
std::optional<uint64_t> keyed_count(const std::string& text, const std::string& key, uint64_t unit) {
  const size_t at = text.find("\n" + key);
  if (at == std::string::npos) return std::nullopt;
  std::istringstream line(text.substr(at + 1 + key.size()));
  uint64_t v = 0;
  if (!(line >> v)) return std::nullopt;
  return v * unit;
}

std::string whole_file(const std::string& path) {
  std::ifstream f(path);
  return "\n" + std::string(std::istreambuf_iterator<char>(f), {});
}

// What a cgroup's limit leaves: the limit less its use, where its use's inactive file cache
// (which the kernel reclaims before it fails an allocation) does not count.
std::optional<uint64_t> cgroup_room(std::optional<uint64_t> limit, std::optional<uint64_t> used,
                                    std::optional<uint64_t> inactive_file) {
  if (!limit) return std::nullopt;
  uint64_t u = used.value_or(0);
  u -= std::min(u, inactive_file.value_or(0));
  return *limit > u ? *limit - u : 0;
}

}  // namespace

size_t host_memory_headroom() {
  uint64_t room = UINT64_MAX;
  auto at_most = [&room](std::optional<uint64_t> v) {
    if (v) room = std::min(room, *v);
  };
  {
    const std::string text = whole_file("/proc/meminfo");
    const auto avail = keyed_count(text, "MemAvailable:", 1024), swap = keyed_count(text, "SwapFree:", 1024);
    if (avail) at_most(*avail + swap.value_or(0));
  }
  // cgroup v2: this process's group and each above it may set memory.max.
  {
    std::ifstream f("/proc/self/cgroup");
    std::string line, group;
    while (std::getline(f, line))
      if (line.rfind("0::", 0) == 0) group = line.substr(3);
    for (std::string g = group; !group.empty();) {
      const std::string dir = "/sys/fs/cgroup" + (g == "/" ? std::string() : g);
      at_most(cgroup_room(read_count(dir + "/memory.max"), read_count(dir + "/memory.current"),
                          keyed_count(whole_file(dir + "/memory.stat"), "inactive_file ", 1)));
      if (g == "/" || g.empty()) break;
      g = g.substr(0, std::max<size_t>(g.rfind('/'), 1));
    }
  }
  // cgroup v1's memory controller (a limit of about 2^63 means none).
  {
    const std::string dir = "/sys/fs/cgroup/memory";
    const auto limit = read_count(dir + "/memory.limit_in_bytes");
    if (limit && *limit < (uint64_t(1) << 62))
      at_most(cgroup_room(limit, read_count(dir + "/memory.usage_in_bytes"),
                          keyed_count(whole_file(dir + "/memory.stat"), "total_inactive_file ", 1)));
  }
  // The process's own limits: RLIMIT_AS against its mappings, RLIMIT_DATA against its data and
  // stack (/proc/self/statm's first and sixth fields, in pages).
#ifdef __linux__
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  std::ifstream statm("/proc/self/statm");
  uint64_t pages[6] = {};
  if (statm >> pages[0] >> pages[1] >> pages[2] >> pages[3] >> pages[4] >> pages[5]) {
    const std::pair<decltype(RLIMIT_AS), uint64_t> limits[] = {{RLIMIT_AS, pages[0] * page},
                                                               {RLIMIT_DATA, pages[5] * page}};
    for (const auto& [resource, used] : limits) {
      struct rlimit lim {};
      if (::getrlimit(resource, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
        at_most(uint64_t(lim.rlim_cur) > used ? uint64_t(lim.rlim_cur) - used : 0);
    }
  }
#endif
  if (room == UINT64_MAX) return 0;  // nothing known
  return size_t(std::max<uint64_t>(room, 1));  // known, and none left: still not "unknown"
}

void CpuBackend::upload(void* dst, const void* src, size_t bytes) const {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::download(void* dst, const void* src, size_t bytes) const {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::u8_to_float(const uint8_t* src, float* dst, int n, int c, int h, int w,
                             float divisor) const {
  const size_t plane = size_t(h) * w;
  parallel_for(int64_t(n) * h, threads_, [&](int64_t row) {
    const size_t b = size_t(row) / size_t(h), y = size_t(row) % size_t(h);
    const uint8_t* px = src + (b * plane + y * size_t(w)) * size_t(c);
    float* out = dst + b * size_t(c) * plane + y * size_t(w);
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch) out[size_t(ch) * plane + size_t(x)] = px[size_t(x) * c + ch] / divisor;
  });
}

void CpuBackend::resize_u8_to_float(const uint8_t* src, int sh, int sw, float* dst, int n, int c, int h,
                                    int w, float divisor) const {
  // linear_sample's sum of four weighted bytes in integers, taken vertically first: a whole source
  // row pair blended at once (vectorises), then the horizontal taps from that row. Integer sums
  // do not depend on their order: the same bytes as linear_sample. Buffers per thread, kept.
  const size_t plane = size_t(h) * w, rowlen = size_t(sw) * c;
  thread_local std::vector<LinearTap> tx;
  tx.resize(size_t(w));
  for (int x = 0; x < w; ++x) tx[size_t(x)] = linear_tap(x, sw, w);
  const LinearTap* taps = tx.data();
  float value[256];  // byte / divisor, the same division, once per byte value
  for (int i = 0; i < 256; ++i) value[i] = float(i) / divisor;
  parallel_for(int64_t(n) * h, threads_, [&](int64_t row) {
    thread_local std::vector<uint16_t> vert;
    if (vert.size() < rowlen) vert.resize(rowlen);
    uint16_t* v = vert.data();
    const size_t b = size_t(row) / size_t(h);
    const int y = int(size_t(row) % size_t(h));
    const LinearTap ty = linear_tap(y, sh, h);
    const uint8_t* top = src + b * size_t(sh) * rowlen + size_t(ty.i0) * rowlen;
    if (ty.w1) {
      const uint8_t* bottom = top + rowlen;
      const uint16_t wt = uint16_t(256 - ty.w1), wb = uint16_t(ty.w1);
      for (size_t i = 0; i < rowlen; ++i) v[i] = uint16_t(wt * top[i] + wb * bottom[i]);
    } else {
      for (size_t i = 0; i < rowlen; ++i) v[i] = uint16_t(top[i] << 8);
    }
    auto sample = [&](const uint16_t* p, LinearTap t) {
      const uint32_t s = t.w1 ? uint32_t(256 - t.w1) * p[0] + uint32_t(t.w1) * p[c] : uint32_t(p[0]) << 8;
      const uint32_t r = (s + (1u << 15)) >> 16;
      return value[r > 255u ? 255u : r];
    };
    float* out = dst + b * size_t(c) * plane + size_t(y) * w;
    if (c == 3) {  // RGB: each tap read once for the three channels
      for (int x = 0; x < w; ++x) {
        const LinearTap t = taps[x];
        const uint16_t* p = v + size_t(t.i0) * 3;
        out[x] = sample(p, t);
        out[plane + size_t(x)] = sample(p + 1, t);
        out[2 * plane + size_t(x)] = sample(p + 2, t);
      }
    } else {
      for (int ch = 0; ch < c; ++ch)
        for (int x = 0; x < w; ++x)
          out[size_t(ch) * plane + size_t(x)] = sample(v + size_t(taps[x].i0) * c + ch, taps[x]);
    }
  });
}

void CpuBackend::convert(const TensorView& src, const TensorView& dst) const {
  SL_REQUIRE(src.shape == dst.shape, "convert: shapes ", src.shape.str(), " and ", dst.shape.str());
  const Shape& s = src.shape;
  parallel_for(int64_t(s.n) * s.c, threads_, [&](int64_t nc) {
    const int n = int(nc / s.c), c = int(nc % s.c);
    for (size_t p = 0; p < s.plane(); ++p)
      store_element(dst, element_index(s, dst.format.layout, n, c, p),
                    load_element(src, element_index(s, src.format.layout, n, c, p)));
  });
}

BackendMemory Backend::allocate_host(size_t bytes) const {
  float* p = aligned_floats((bytes + sizeof(float) - 1) / sizeof(float)).release();
  return BackendMemory(p, [](void* q) { AlignedFree()(static_cast<float*>(q)); });
}

namespace {
using Clock = std::chrono::steady_clock;
}

void Backend::copy(void* dst, const void* src, size_t bytes) const {
  if (bytes) std::memcpy(dst, src, bytes);
}

BackendMemory Backend::make_mark() const { return std::make_shared<Clock::time_point>(); }
void Backend::record_mark(const BackendMemory& m) const {
  *static_cast<Clock::time_point*>(m.get()) = Clock::now();
}
double Backend::mark_ms(const BackendMemory& a, const BackendMemory& b) const {
  return std::chrono::duration<double, std::milli>(*static_cast<Clock::time_point*>(b.get()) -
                                                   *static_cast<Clock::time_point*>(a.get()))
      .count();
}

int cuda_device_count() {
#ifdef SCENELAB_WITH_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
#else
  return 0;
#endif
}

bool cuda_device_available() { return cuda_device_count() > 0; }

std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const CudaOptions& cuda) {
  if (device == "cpu") return std::make_unique<CpuBackend>(threads, cpu_conv_of(cuda.conv));
  const bool indexed = device.rfind("cuda:", 0) == 0;
  if (device == "cuda" || device == "auto" || indexed) {
    CudaOptions co = cuda;
    if (indexed) {
      const std::string idx = device.substr(5);
      const auto k = parse_long(idx, 0, 4096);
      SL_REQUIRE(k, "--device ", device, ": expected cuda:N with a device index N >= 0 (or cuda:all where supported)");
      co.device = int(*k);
    }
#ifdef SCENELAB_WITH_CUDA
    const int count = cuda_device_count();
    if (count > 0) {
      SL_REQUIRE(co.device < count, "--device ", device, ": this machine has ", count,
                 " CUDA device(s), 0..", count - 1);
      return std::make_unique<CudaBackend>(co);
    }
    if (device == "auto") return std::make_unique<CpuBackend>(threads, cpu_conv_of(cuda.conv));
    throw_error("--device ", device, ": no CUDA device is available");
#else
    if (device == "auto") return std::make_unique<CpuBackend>(threads, cpu_conv_of(cuda.conv));
    throw_error("--device ", device, ": this build has no CUDA support (built without a CUDA toolkit)");
#endif
  }
  throw_error("unknown device '", device, "' (expected cpu, cuda, cuda:N or auto)");
}

}  // namespace scenelab
