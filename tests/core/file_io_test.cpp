// Atomic whole-file writes (core/file_io.h): a new file, a file replaced, nothing else left in
// the folder, the umask applied, a missing folder a clear error naming the file.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/file_io.h"

using namespace scenelab;
namespace fs = std::filesystem;

TEST(FileIo, WriteNewReplaceAndNothingLeftBehind) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("scenelab_file_io_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "a.bin").string();
  const std::string first = "first contents", second = "second, longer contents";
  const mode_t old = ::umask(027);
  write_file_atomic(path, first.data(), first.size());
  const auto a = read_file(path);
  EXPECT_EQ(std::string(a.begin(), a.end()), first);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "the umask applies";
  write_file_atomic(path, second.data(), second.size());  // replaces
  const auto b = read_file(path);
  EXPECT_EQ(std::string(b.begin(), b.end()), second);
  write_file_atomic((dir / "empty.bin").string(), nullptr, 0);
  EXPECT_EQ(fs::file_size(dir / "empty.bin"), 0u);
  ::umask(old);
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 2u) << "no temporary files left";
  try {
    write_file_atomic((dir / "missing" / "c.bin").string(), first.data(), first.size());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.bin"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
