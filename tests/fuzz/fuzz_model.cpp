// libFuzzer: the HDF5 model loader (graph parser, validator, parameter reads) on arbitrary bytes
// written to a file, then, for a model that loads, planning it at a small size on the CPU.
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "engine/error.h"
#include "engine/graph.h"
#include "weights/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/scenelab_fuzz_model_" + std::to_string(::getpid()) + ".h5";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  scenelab::ModelLimits lim;
  lim.max_param_bytes = 64 << 20;
  lim.max_nodes = 1000;
  lim.isolate_timeout_s = 10;  // the reader's child, under libFuzzer's 20 s timeout
  try {
    const scenelab::Model m = scenelab::read_model(path, lim);
    scenelab::Graph g(m);
    scenelab::CpuBackend cpu(1);
    g.plan(1, 48, 48, cpu);
  } catch (const scenelab::Error&) {
  }
  // Whatever the file held, HDF5 must have no file of ours left open: one it could not close
  // would be found again, with its stale cache, by the next open of the same path.
  if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE) != 0) {
    std::fprintf(stderr, "fuzz_model: HDF5 still holds %zd open file(s) after read_model\n",
                 ssize_t(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE)));
    std::abort();
  }
  return 0;
}
