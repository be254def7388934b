// The plan cache: a stored tuning comes back from disk in a new process's cache (a new
// instance); a corrupt, truncated, foreign or unreadable entry is ignored with a warning.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/file_io.h"
#include "engine/plan_cache.h"
#include "weights/default_model.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {
std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
}  // namespace

TEST(PlanCache, RoundTripAndBadEntriesAreIgnoredWithAWarning) {
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_plan_cache";
  fs::remove_all(dir);
  const std::string key = plan_key("GPU X; driver 1", "00ff", "fp16", 8, 360, 480);
  const std::string other = plan_key("GPU X; driver 1", "00ff", "fp16", 4, 360, 480);
  const Tuning t{{"s1c1", "direct"}, {"s1c2", "cudnn 1 1"}, {"s1c3", "gemm2s"}};
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& w) { warnings.push_back(w); };
  {
    PlanCache c(dir.string(), warn);
    EXPECT_FALSE(c.find(key));
    c.store(key, t);
    EXPECT_EQ(*c.find(key), t);
  }
  PlanCache fresh(dir.string(), warn);
  ASSERT_TRUE(fresh.find(key));
  EXPECT_EQ(*fresh.find(key), t);
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(fresh.find(other));  // another batch: not there
  EXPECT_TRUE(warnings.empty());

  const std::string path = fresh.path_of(key), good = slurp(path);
  auto expect_ignored = [&](const std::string& content, const std::string& why) {
    SCOPED_TRACE(why);
    spit(path, content);
    warnings.clear();
    PlanCache c(dir.string(), warn);
    EXPECT_FALSE(c.find(key));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(why), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(path), std::string::npos) << warnings[0];
  };
  std::string flipped = good;
  flipped[flipped.find("gemm2s")] = 'G';
  expect_ignored(flipped, "checksum");
  expect_ignored(good.substr(0, good.size() / 2), "truncated");
  expect_ignored("", "truncated");
  // An entry made for another size, under this key's file name (a copied cache): foreign.
  PlanCache other_cache((dir / "other").string(), warn);
  other_cache.store(other, t);
  expect_ignored(slurp(other_cache.path_of(other)), "foreign");
  // Garbage with a valid checksum is still not a cache file.
  const std::string body = "hello\n";
  expect_ignored(body + "end " + hex64(fnv1a64(body.data(), body.size())) + "\n", "not a scenelab plan cache");
  // After all that, storing again repairs it.
  PlanCache c(dir.string(), warn);
  c.store(key, t);
  PlanCache again(dir.string(), warn);
  EXPECT_EQ(*again.find(key), t);
}

TEST(PlanCache, ModelFingerprintFollowsTheWeights) {
  Model a = make_random_model("reference", 5, 1), b = make_random_model("reference", 5, 1);
  EXPECT_EQ(model_fingerprint(a), model_fingerprint(b));
  b.params.begin()->second[0] += 1e-3f;
  EXPECT_NE(model_fingerprint(a), model_fingerprint(b));
}
