// libFuzzer: the HDF5 model loader (graph parser, validator, parameter reads) on arbitrary bytes
// written to a file, then, for a model that loads, planning it at a small size on the CPU.
#include <hdf5.h>
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "engine/graph.h"
#include "scratch_path.h"
#include "weights/model_file.h"

// read_model reads each file first in a forked child (weights/isolated.h). That child must not
// report as libFuzzer: its crash is the reader's error, which the parent turns into an Error, and
// libFuzzer's death callback and signal handlers would write the input as a crash of the parent.
#if defined(__SANITIZE_ADDRESS__)
#define SL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SL_ASAN 1
#endif
#endif
static void plain_child() {
#ifdef SL_ASAN
  __sanitizer_set_death_callback(nullptr);
#endif
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::signal(sig, SIG_DFL);
}

// Each input is written to a file of this process (HDF5 opens files by path, and not a memfd's:
// "can't retrieve real path"): tests/fuzz/scratch_path.h.
std::string input_path(long pid) { return scenelab::fuzz::scratch_path("scenelab_fuzz_model_", pid, ".h5"); }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::pthread_atfork(nullptr, nullptr, plain_child);
  scenelab::fuzz::remove_scratch_of_dead_processes("scenelab_fuzz_model_", ".h5");
  std::atexit([] { ::unlink(input_path(::getpid()).c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = input_path(::getpid());
  if (!scenelab::fuzz::write_input(path, data, size)) return 0;
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
