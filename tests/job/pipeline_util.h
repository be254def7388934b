// What the pipeline's tests share: options for the CPU, and a run of files whose frames must all
// succeed.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "job/pipeline.h"

namespace scenelab::test {

// The CPU with these threads (0: all), pool threads and queue depth (0: automatic).
inline PipelineOptions cpu_pipeline(int threads, int pool_threads = 0, int queue_depth = 0) {
  PipelineOptions o;
  o.device = "cpu";
  o.threads = threads;
  o.pool_threads = pool_threads;
  o.queue_depth = queue_depth;
  return o;
}

// Runs the files through `p`; each frame, which must not have failed, goes to `check` in input
// order. Returns how many frames were reported.
inline size_t run_files(Pipeline& p, const std::vector<std::string>& files, const std::function<void(Frame&)>& check) {
  FileSource src(files);
  size_t seen = 0;
  p.run(src, nullptr, [&](Frame& f) {
    ++seen;
    ASSERT_TRUE(f.error.empty()) << f.error;
    check(f);
  });
  return seen;
}

}  // namespace scenelab::test
