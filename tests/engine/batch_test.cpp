// Batch n = 2 and 3 through one plan equal n single runs on the CPU, bit for bit: every layer
// type in the registry and both whole networks.
#include <gtest/gtest.h>

#include "engine/backend.h"
#include "tests/engine/batch_check.h"

using namespace scenelab;
using namespace scenelab::test;

TEST(Batch, EveryLayerTypeHasABatchCase) {
  const auto covered = batch_case_types();
  for (const auto& t : layer_types()) EXPECT_TRUE(covered.count(t)) << "no batch test for layer type " << t;
}

TEST(Batch, TwoAndThreeEqualSingleRunsOnTheCpu) {
  CpuBackend cpu(2);
  for (const auto& c : batch_cases())
    for (int n : {2, 3}) EXPECT_EQ(batch_vs_single(c.model, cpu, n, c.h, c.w), 0.0) << c.what << " n=" << n;
}
