// test_main.cpp's folder, seen from inside a test: tests/own_tmp.cmake runs this test with TMPDIR
// unset and TMP=BASE (std::filesystem::temp_directory_path's next choice) and
// SCENELAB_EXPECT_TMP_UNDER=BASE, then checks that BASE is empty again afterwards.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

TEST(TestMain, OwnTemporaryFolderWhenTmpdirIsUnset) {
  const char* base = std::getenv("SCENELAB_EXPECT_TMP_UNDER");
  if (!base) GTEST_SKIP() << "run by tests/own_tmp.cmake (ctest test test_main_own_tmp)";
  const char* tmp = std::getenv("TMPDIR");
  ASSERT_NE(tmp, nullptr) << "the test main did not set TMPDIR";
  const std::string dir = tmp, prefix = std::string(base) + "/scenelab-tests-";
  EXPECT_EQ(dir.compare(0, prefix.size(), prefix), 0) << dir << " is not under " << prefix;
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
  // GoogleTest's TempDir() follows it: a test's fixed file name lands in the folder
  const std::string file = ::testing::TempDir() + "/scenelab_test_main_probe";
  std::ofstream(file) << "x";
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / "scenelab_test_main_probe")) << file;
}
