// parallel_for's teams (core/parallel.h): every index runs once, each on a thread index below the
// count asked for; a team's helpers serve many calls and other thread counts (new helpers join at
// the next call, not the one before); nested calls run on the calling thread; teams of several
// calling threads side by side; an exception on any thread stops the call and reaches the caller,
// and the team serves the next call; helpers asleep after a long pause wake for the next call; a
// forked child's calls run (its parent's helpers are not there).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "core/parallel.h"

using namespace scenelab;

namespace {

// Runs parallel_for(n, threads) and checks each index ran once on a thread index in range.
void check_once(int64_t n, int threads) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> bad_index{0};
  parallel_for(n, threads, [&](int64_t i) {
    hits[size_t(i)].fetch_add(1);
    const int t = parallel_thread_index();
    if (t < 0 || t >= std::max(1, threads)) bad_index.fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i << " of " << n;
  EXPECT_EQ(bad_index.load(), 0);
  EXPECT_EQ(parallel_thread_index(), 0);  // outside a call
}

}  // namespace

TEST(ParallelFor, EveryIndexOnceOnAThreadInRange) {
  for (int threads : {1, 2, 3, 8, 2, 5, 1, 4})
    for (int64_t n : {0, 1, 2, 7, 1000}) check_once(n, threads);
  for (int r = 0; r < 2000; ++r) check_once(3, 2);  // many small calls: the gap between layers
}

TEST(ParallelFor, UsesSeveralThreadsAndNestsSerially) {
  std::atomic<int> seen_mask{0}, nested_outside{0};
  parallel_for(64, 4, [&](int64_t) {
    seen_mask.fetch_or(1 << parallel_thread_index());
    const int outer = parallel_thread_index();
    parallel_for(4, 4, [&](int64_t) {
      if (parallel_thread_index() != outer) nested_outside.fetch_add(1);
    });
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  EXPECT_GT(__builtin_popcount(unsigned(seen_mask.load())), 1);  // 64 x 0.2 ms: helpers took some
  EXPECT_EQ(nested_outside.load(), 0);
}

TEST(ParallelFor, TeamsOfSeveralCallersSideBySide) {
  std::vector<std::thread> callers;
  std::atomic<int64_t> sum{0};
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 300; ++r) parallel_for(50, 2, [&](int64_t i) { sum.fetch_add(i); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(sum.load(), int64_t(3) * 300 * (49 * 50 / 2));
}

TEST(ParallelFor, AnExceptionReachesTheCallerAndTheTeamGoesOn) {
  for (int64_t thrower : {0, 37, 99}) {
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_for(100, 2,
                              [&](int64_t i) {
                                if (i == thrower) throw std::runtime_error("index " + std::to_string(i));
                                ran.fetch_add(1);
                                std::this_thread::sleep_for(std::chrono::microseconds(20));
                              }),
                 std::runtime_error);
    EXPECT_LT(ran.load(), 100);
    check_once(100, 2);
  }
}

TEST(ParallelFor, HelpersAsleepWakeForTheNextCall) {
  check_once(100, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past spinning and yielding: asleep
  const auto t0 = std::chrono::steady_clock::now();
  check_once(100, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST(ParallelFor, AForkedChildRunsItsCalls) {
  check_once(100, 2);  // the parent's team, with a helper
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: its calls must finish (exit 0), not wait for a helper it lacks
    std::atomic<int64_t> sum{0};
    for (int r = 0; r < 50; ++r) parallel_for(100, 2, [&](int64_t i) { sum.fetch_add(i); });
    _exit(sum.load() == 50 * 4950 ? 0 : 3);
  }
  int status = -1;
  for (int waited = 0; waited < 200 && waitpid(pid, &status, WNOHANG) == 0; ++waited)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the forked child's parallel_for did not finish in 10 s";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  check_once(100, 2);  // the parent's team goes on
}
