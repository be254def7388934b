// The plan owner: plans kept by size, batch and PlanIO with the least recently used dropped
// first; a short batch served by a kept larger one where asked; a failed plan leaves nothing;
// a plan's first run stores what it timed in the plan cache, and another owner sharing the
// cache restores it instead of timing.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/plans.h"
#include "tests/test_util.h"
#include "weights/default_model.h"

using namespace scenelab;

namespace {

// The CPU backend with an identity, so that its plans have plan cache keys.
class NamedCpu : public CpuBackend {
 public:
  NamedCpu() : CpuBackend(1) {}
  std::string identity() const override { return "test cpu"; }
};

PlanIO labels_io() {
  PlanIO io;
  io.u8_input = true;
  io.u8_outputs = {"labels_full"};
  return io;
}

}  // namespace

TEST(Plans, KeepsTheMostRecentlyUsedAndDropsTheLeast) {
  const Model m = make_random_model("reference", 5, 3);
  Plans plans(m, std::make_unique<CpuBackend>(1), Plans::Options{nullptr, "", 2});
  Graph* a = &plans.get(1, 90, 120, labels_io()).graph;
  EXPECT_TRUE(plans.made_last());
  EXPECT_TRUE(a->planned());
  Graph* b = &plans.get(1, 100, 130, labels_io()).graph;
  EXPECT_NE(a, b);
  EXPECT_EQ(&plans.get(1, 90, 120, labels_io()).graph, a);  // kept, now the most recent
  EXPECT_FALSE(plans.made_last());
  EXPECT_EQ(&plans.latest().graph, a);
  plans.get(1, 110, 140, labels_io());  // drops 44x60, the least recently used
  EXPECT_EQ(plans.size(), 2u);
  EXPECT_EQ(&plans.get(1, 90, 120, labels_io()).graph, a);
  EXPECT_FALSE(plans.made_last());
  plans.get(1, 100, 130, labels_io());
  EXPECT_TRUE(plans.made_last());
  // Another PlanIO at the same size is another plan.
  PlanIO floats;
  plans.get(1, 100, 130, floats);
  EXPECT_TRUE(plans.made_last());
}

TEST(Plans, LargerBatchServesAShortOneOnlyWhereAsked) {
  const Model m = make_random_model("reference", 5, 3);
  Plans plans(m, std::make_unique<CpuBackend>(1), Plans::Options{nullptr, "", 0});
  plans.get(4, 90, 120, labels_io());
  plans.get(2, 90, 120, labels_io());
  EXPECT_EQ(plans.get(3, 90, 120, labels_io(), /*larger_batch=*/true).n, 4);  // the smallest >= 3
  EXPECT_FALSE(plans.made_last());
  EXPECT_EQ(plans.get(2, 90, 120, labels_io(), true).n, 2);  // its own batch first
  EXPECT_EQ(plans.get(3, 90, 120, labels_io()).n, 3);        // not asked: planned anew
  EXPECT_TRUE(plans.made_last());
  EXPECT_EQ(plans.size(), 3u);
  plans.drop(3, 90, 120);
  EXPECT_EQ(plans.size(), 2u);
}

TEST(Plans, AFailedPlanLeavesNothing) {
  const Model m = make_random_model("reference", 5, 3);
  Plans plans(m, std::make_unique<CpuBackend>(1), Plans::Options{nullptr, "", 2});
  plans.get(1, 90, 120, labels_io());
  EXPECT_THROW(plans.get(1, 3, 3, labels_io()), Error);  // smaller than the network's field
  EXPECT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans.latest().h, 90);
}

TEST(Plans, FirstRunStoresTheTuningAndAnotherOwnerRestoresIt) {
  const Model m = make_random_model("reference", 5, 3);
  PlanCache cache;  // in memory
  const std::vector<uint8_t> pixels(size_t(90) * 120 * 3, 7);
  int passes = 0;
  Plans first(m, std::make_unique<NamedCpu>(), Plans::Options{&cache, "", 1});
  Plans::Plan& p = first.get(1, 90, 120, labels_io());
  ASSERT_FALSE(p.key.empty());
  auto pass = [&](Graph& g) {
    return [&] {
      g.run_u8(pixels.data());
      ++passes;
    };
  };
  const Plans::FirstRun r = first.run(p, pass(p.graph));
  EXPECT_TRUE(r.tuned);
  EXPECT_FALSE(r.restored);
  EXPECT_TRUE(cache.find(p.key));
  EXPECT_FALSE(p.first_run);
  const Plans::FirstRun again = first.run(p, pass(p.graph));  // a later run just runs
  EXPECT_FALSE(again.tuned || again.restored);
  EXPECT_EQ(passes, 2);

  Plans second(m, std::make_unique<NamedCpu>(), Plans::Options{&cache, "", 1});
  Plans::Plan& q = second.get(1, 90, 120, labels_io());
  EXPECT_EQ(q.key, p.key);
  const Plans::FirstRun restored = second.run(q, pass(q.graph));
  EXPECT_TRUE(restored.restored);
  EXPECT_FALSE(restored.tuned);
  // Without a cache nothing has a key and nothing is timed for keeping.
  Plans plain(m, std::make_unique<NamedCpu>());
  Plans::Plan& u = plain.get(1, 90, 120, labels_io());
  EXPECT_TRUE(u.key.empty());
  EXPECT_FALSE(plain.run(u, pass(u.graph)).tuned);
}
