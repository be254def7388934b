// The test programs' main: GoogleTest's, and a temporary folder of the process's own when TMPDIR
// is not set. ctest gives every test TMPDIR=BUILD/tests/tmp (tests/CMakeLists.txt); a test program
// run by hand (CI's baseline-x86-64 run, a developer's --gtest_filter) would otherwise write the
// tests' fixed file names into /tmp, shared with every other run. That folder is removed when the
// program returns; a TMPDIR that was set is used as it is and left alone.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string own;
  if (!std::getenv("TMPDIR")) {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "scenelab-tests-XXXXXX").string();
    if (!::mkdtemp(pattern.data()) || ::setenv("TMPDIR", pattern.c_str(), 1) != 0) {
      std::fprintf(stderr, "%s: cannot make a temporary folder %s: %s\n", argv[0], pattern.c_str(),
                   std::strerror(errno));
      return 2;
    }
    own = pattern;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (!own.empty()) {
    std::error_code ec;
    fs::remove_all(own, ec);
  }
  return rc;
}
