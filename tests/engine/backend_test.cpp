// The CPU backend's memory: what the host has left for a plan (host_memory_headroom), a plan that
// cannot fit failing by name before it allocates, and an allocation that fails as an Error.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "engine/backend.h"
#include "core/error.h"
#include "engine/graph.h"
#include "tests/test_util.h"

using namespace scenelab;
using test::error_of;

namespace {

// A /proc/meminfo field in bytes (0 where absent).
uint64_t meminfo(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  std::string k;
  uint64_t kib = 0;
  std::string unit;
  while (f >> k >> kib) {
    std::getline(f, unit);
    if (k == key + ":") return kib * 1024;
  }
  return 0;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// A CPU backend that reports a fixed headroom (as a small machine or a tight cgroup would).
class SmallCpu : public CpuBackend {
 public:
  explicit SmallCpu(size_t bytes) : CpuBackend(1), bytes_(bytes) {}
  size_t free_bytes() const override { return bytes_; }

 private:
  size_t bytes_;
};

// Lowers the process's RLIMIT_DATA for its lifetime, then restores it.
class DataLimit {
 public:
  explicit DataLimit(rlim_t soft) {
    EXPECT_EQ(::getrlimit(RLIMIT_DATA, &saved_), 0);
    rlimit lim = saved_;
    lim.rlim_cur = soft;
    ok_ = ::setrlimit(RLIMIT_DATA, &lim) == 0;
  }
  ~DataLimit() { ::setrlimit(RLIMIT_DATA, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

const char* kSmallGraph =
    "input x channels=3\n"
    "c = conv2d(x) out=8 k=3 pad=same\n"
    "r = relu(c)\n"
    "output r\n";

Model small_model() {
  Model m;
  m.graph = GraphDesc::parse(kSmallGraph);
  for (const auto& r : required_params(m.graph))
    m.params.emplace(r.dataset, Tensor(param_shape(r.dims), 0.25f));
  return m;
}

}  // namespace

TEST(CpuBackend, HostMemoryHeadroomIsKnownAndWithinTheMachine) {
  const uint64_t total = meminfo("MemTotal") + meminfo("SwapTotal");
  if (total == 0) GTEST_SKIP() << "no /proc/meminfo here: the headroom is unknown (0) by design";
  const size_t room = host_memory_headroom();
  EXPECT_GT(room, 0u);
  EXPECT_LE(room, total);
  EXPECT_GT(CpuBackend(1).free_bytes(), 0u);
}

TEST(CpuBackend, HeadroomFollowsTheProcessDataLimit) {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages[6] = {};
  if (!(statm >> pages[0] >> pages[1] >> pages[2] >> pages[3] >> pages[4] >> pages[5]))
    GTEST_SKIP() << "no /proc/self/statm here";
  const uint64_t data = pages[5] * uint64_t(::sysconf(_SC_PAGESIZE)), margin = uint64_t(256) << 20;
  const size_t before = host_memory_headroom();
  size_t limited = 0;
  std::string err;
  {
    DataLimit lim(rlim_t(data + margin));
    if (!lim.ok()) GTEST_SKIP() << "cannot lower RLIMIT_DATA here";
    limited = host_memory_headroom();
    // 8 x 4096 x 4096 floats of output: 512 MiB, past the 256 MiB the limit leaves.
    Model m = small_model();
    Graph g(m);
    err = error_of([&] { g.plan(1, 4096, 4096, CpuBackend(1)); });
  }
  EXPECT_LE(limited, margin);
  EXPECT_GT(limited, margin / 2);  // the process's data did not grow by half the margin meanwhile
  EXPECT_GE(host_memory_headroom(), std::min<size_t>(before, size_t(margin)));  // restored
  EXPECT_NE(err.find("input 4096x4096 (batch 1) needs"), std::string::npos) << err;
  EXPECT_NE(err.find("MiB of host memory"), std::string::npos) << err;
  EXPECT_NE(err.find("MiB are free on cpu (1 thread)"), std::string::npos) << err;
}

TEST(CpuBackend, PlanPastTheHeadroomFailsByNameAndTheGraphPlansAgain) {
  Model m = small_model();
  Graph g(m);
  // 8 x 300 x 400 floats of output alone: 3.7 MiB.
  const std::string err = error_of([&] { g.plan(1, 300, 400, SmallCpu(size_t(1) << 20)); });
  EXPECT_NE(err.find("input 400x300 (batch 1) needs "), std::string::npos) << err;
  EXPECT_NE(err.find(" MiB of host memory (activations, workspace) but 1 MiB are free"), std::string::npos)
      << err;
  EXPECT_FALSE(g.planned());
  // Nothing else is lost: the same graph plans and runs at a size that fits.
  CpuBackend cpu(1);
  g.plan(1, 5, 7, cpu);
  Tensor in(Shape(1, 3, 5, 7), 1.f);
  g.run(in.view());
  const Tensor out = g.fetch("r");
  ASSERT_EQ(out.numel(), size_t(8 * 5 * 7));
  // An inner pixel: 27 taps of 1 x 0.25, and the bias, 0.25.
  EXPECT_FLOAT_EQ(out[size_t(2 * 7 + 3)], 0.25f * 27 + 0.25f);
}

TEST(CpuBackend, GraphWhosePlanCannotFitIsRefusedBeforeAllocating) {
  // fuzz_graph's finding (tests/fuzz/corpus/graph/huge-input-channels.txt): 444 million input
  // channels at 24x20 (794 GiB of output) escaped planning as std::bad_alloc.
  Model m;
  m.graph = GraphDesc::parse("input x channels=444444474\ns = softmax(x)\noutput s\n");
  Graph g(m);
  const std::string err = error_of([&] { g.plan(1, 20, 24, CpuBackend(1)); });
  EXPECT_NE(err.find("MiB of host memory"), std::string::npos) << err;
}

TEST(CpuBackend, AllocationFailureIsAnErrorNamingTheSize) {
  if (kAddressSanitizer)
    GTEST_SKIP() << "AddressSanitizer reports a failed huge allocation itself (allocator_may_return_null=0)";
  const std::string err = error_of([] { CpuBackend(1).allocate(size_t(1) << 62); });
  EXPECT_EQ(err, "cannot allocate 4398046511104 MiB of host memory");
}
