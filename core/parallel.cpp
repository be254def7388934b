// parallel_for's teams (core/parallel.h). One team per calling thread, its helpers kept between
// calls. A call publishes its work in one atomic word (generation and the number of helpers that
// take part: a helper never reads another call's fields), the helpers and the caller take indices
// from a shared counter, and the caller waits until every helper taking part has finished.
// Waiting is in three steps: spinning (a few tens of microseconds: the gap between two layers),
// then yielding the core (another process or our other thread may need it), then sleeping on a
// condition variable, woken by the call or the last helper.
#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <omp.h>
#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace scenelab::detail {
namespace {

thread_local bool t_in_team = false;
thread_local int t_index = 0;

constexpr int kMaxThreads = 1024;  // a team's threads, the caller included
constexpr auto kSpin = std::chrono::microseconds(50);   // then yield
constexpr auto kYield = std::chrono::microseconds(2000);  // then sleep

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Waits until done() holds: spins, yields, then sleeps on cv (under m, counting itself in
// `sleepers` so that the one who makes done() true knows to notify).
template <class Done>
void wait_until(Done done, std::mutex& m, std::condition_variable& cv, std::atomic<int>& sleepers) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0;; ++k) {
    if (done()) return;
    if ((k & 63) != 63) {
      cpu_relax();
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - t0;
    if (waited < kSpin) continue;
    if (waited < kYield) {
      std::this_thread::yield();
      continue;
    }
    std::unique_lock<std::mutex> lock(m);
    sleepers.fetch_add(1);
    cv.wait(lock, done);
    sleepers.fetch_sub(1);
    return;
  }
}

// Wakes the sleepers of cv after the state they wait for changed (seq_cst: a waiter either sees
// the change before sleeping or is counted in `sleepers` here).
void wake(std::mutex& m, std::condition_variable& cv, std::atomic<int>& sleepers) {
  if (sleepers.load() == 0) return;
  std::lock_guard<std::mutex> lock(m);
  cv.notify_all();
}

class Team {
 public:
  Team() = default;
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  ~Team() {
    word_.store((word_.load() + kGeneration) | kStop);
    {
      std::lock_guard<std::mutex> lock(m_);
      start_cv_.notify_all();
    }
    for (auto& t : helpers_) t.join();
  }

  void run(int64_t n, int threads, void (*call)(void*, int64_t), void* ctx) {
    const int want = threads - 1;
    while (int(helpers_.size()) < want) {  // a new helper waits for the generation after this one
      const int id = int(helpers_.size()) + 1;
      const uint64_t seen = word_.load() & ~kHelpersMask;
      helpers_.emplace_back([this, id, seen] { serve(id, seen); });
    }
    call_ = call, ctx_ = ctx, n_ = n;
    next_.store(0);
    pending_.store(want);
    word_.store((word_.load() & ~kHelpersMask) + kGeneration + uint64_t(want));
    wake(m_, start_cv_, start_sleepers_);
    t_in_team = true, t_index = 0;
    work();
    t_in_team = false;
    wait_until([this] { return pending_.load() == 0; }, m_, done_cv_, done_sleepers_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  static constexpr uint64_t kHelpersMask = 0xffff, kStop = uint64_t(1) << 63, kGeneration = uint64_t(1) << 16;

  // The indices left, one at a time; an exception stops the call (the indices not begun are
  // skipped) and the caller rethrows the first.
  void work() {
    try {
      for (int64_t i; (i = next_.fetch_add(1)) < n_;) call_(ctx_, i);
    } catch (...) {
      next_.store(n_);
      std::lock_guard<std::mutex> lock(m_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void serve(int id, uint64_t seen) {
    t_in_team = true, t_index = id;
    // A library that threads with OpenMP (Debian's OpenBLAS, openmp flavour: the convolutions'
    // GEMM on builds without AVX-512) runs on this thread alone, as it did inside OpenMP's teams;
    // with this thread's default it split each band's product over every core, and its sums
    // changed with the thread count.
    omp_set_num_threads(1);
    while (true) {
      uint64_t w = 0;
      wait_until(
          [&] {
            w = word_.load();
            return (w & ~kHelpersMask) != seen;
          },
          m_, start_cv_, start_sleepers_);
      if (w & kStop) return;
      seen = w & ~kHelpersMask;
      if (id > int(w & kHelpersMask)) continue;  // not taking part in this call
      work();
      if (pending_.fetch_sub(1) == 1) wake(m_, done_cv_, done_sleepers_);
    }
  }

  std::vector<std::thread> helpers_;
  std::atomic<uint64_t> word_{0};  // generation (bits 16..62), stop (63), helpers taking part (0..15)
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};
  void (*call_)(void*, int64_t) = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  std::exception_ptr error_;  // under m_
  std::mutex m_;
  std::condition_variable start_cv_, done_cv_;
  std::atomic<int> start_sleepers_{0}, done_sleepers_{0};
};

}  // namespace

// A forked child has only the thread that forked: its team's helpers are gone (joining them
// would never return). The child's first call leaves that team behind, unjoined, and makes a new
// one. (OpenMP's teams hang there.)
std::atomic<unsigned> g_forks{0};

void run_team(int64_t n, int threads, void (*call)(void*, int64_t), void* ctx) {
  static const int registered = pthread_atfork(nullptr, nullptr, [] { g_forks.fetch_add(1); });
  (void)registered;
  thread_local std::unique_ptr<Team> team;
  thread_local unsigned forks = 0;
  if (team && forks != g_forks.load()) (void)team.release();  // left behind in the child
  if (!team) team = std::make_unique<Team>(), forks = g_forks.load();
  team->run(n, std::min(threads, kMaxThreads), call, ctx);
}

bool in_team() { return t_in_team; }
int team_index() { return t_index; }

}  // namespace scenelab::detail
