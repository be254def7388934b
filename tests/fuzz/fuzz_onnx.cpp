// libFuzzer: the ONNX importer (weights/onnx_model.h: protobuf parsing, the limits, the mapping,
// the metadata) on arbitrary bytes written to an .onnx file, then, for a model that loads,
// planning it at a small size on the CPU. Every failure must be an Error naming the file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "engine/graph.h"
#include "capped_cpu.h"
#include "scratch_path.h"
#include "weights/onnx_model.h"

std::string input_path(long pid) { return scenelab::fuzz::scratch_path("scenelab_fuzz_onnx_", pid, ".onnx"); }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  scenelab::fuzz::remove_scratch_of_dead_processes("scenelab_fuzz_onnx_", ".onnx");
  std::atexit([] { ::unlink(input_path(::getpid()).c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = input_path(::getpid());
  if (!scenelab::fuzz::write_input(path, data, size)) return 0;
  scenelab::OnnxLimits lim;
  lim.max_param_bytes = 64 << 20;
  lim.max_nodes = 1000;
  try {
    const scenelab::Model m = scenelab::read_onnx_model(path, lim);
    scenelab::Graph g(m);
    const scenelab::fuzz::CappedCpu cpu;  // a valid but huge model fails by name, not by malloc
    g.plan(1, 32, 32, cpu);
  } catch (const scenelab::Error&) {
  }
  return 0;
}
