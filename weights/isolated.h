// Running a file reader in a child process first, so that a library bug a hostile or corrupt file
// triggers (HDF5 1.10's parser is not memory-safe on malformed files: docs/RELIABILITY.md) costs
// an error naming the file, not the process: the child's crash, hang or error becomes our Error.
#pragma once
#include <functional>
#include <string>

namespace scenelab {

// Runs `work` in a forked child with a time limit. Returns normally when it returned; throws
// Error with the child's own Error message when it threw one, or "<what>: <reason>" when it
// crashed (the signal), ran past timeout_s (it is killed), ran out of its memory or exited
// otherwise. memory_bytes > 0: the child may map at most that much more address space than the
// parent had (RLIMIT_AS), so a file that makes a library allocate and touch gigabytes fails at
// once instead (seen: a 13 KB corrupt model made HDF5 touch 16 GB). Where no child can be made
// (fork fails), `work` runs here instead.
void run_isolated(const std::function<void()>& work, double timeout_s, const std::string& what,
                  size_t memory_bytes = 0);
// False in builds whose sanitizers reserve huge address ranges (AddressSanitizer, ThreadSanitizer,
// MemorySanitizer): there run_isolated cannot cap the child's memory and does not.
bool isolation_caps_memory();

}  // namespace scenelab
