// The tools' command-line numbers: an integer option past int's range and a size past 2^20 (or
// not a whole number) fail naming the option; std::atoi and a narrowing cast had read them with
// undefined or wrapped results ("--threads 4294967297" ran one thread).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/backend.h"
#include "tools/cli.h"

using namespace scenelab;

namespace {

Cli cli_of(std::vector<std::string> args) {
  static std::vector<std::string> keep;
  keep = std::move(args);
  keep.insert(keep.begin(), "tool");
  static std::vector<char*> argv;
  argv.clear();
  for (auto& a : keep) argv.push_back(a.data());
  return Cli(int(argv.size()), argv.data(), {"threads", "batch"}, {"help"});
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Cli, IntegersOutsideIntAreRefused) {
  EXPECT_EQ(cli_of({"--threads", "12"}).get_int("threads", 0), 12);
  EXPECT_EQ(cli_of({"--threads", "-3"}).get_int("threads", 0), -3);
  EXPECT_NE(error_of([] { cli_of({"--threads", "4294967297"}).get_int("threads", 0); })
                .find("option --threads 4294967297 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { cli_of({"--batch", "99999999999999999999999"}).get_int("batch", 0); })
                .find("is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { cli_of({"--batch", "8x"}).get_int("batch", 0); }).find("expects an integer, got '8x'"),
            std::string::npos);
}

TEST(Cli, SizesAreWholeNumbersInRange) {
  EXPECT_EQ(parse_size("640x480"), std::make_pair(640, 480));
  EXPECT_EQ(parse_size("1048576x1"), std::make_pair(1048576, 1));
  for (const char* bad : {"99999999999x5", "1048577x2", "0x5", "-4x5", "4.5x5", "5x", "x5", "640", "+5x5", " 5x5"})
    EXPECT_NE(error_of([&] { parse_size(bad); }).find("should look like 640x480"), std::string::npos) << bad;
}

TEST(Cli, DeviceIndexPastAnyMachineIsRefused) {
  for (const char* bad : {"cuda:4294967295", "cuda:99999999999999999999", "cuda:-1", "cuda:x"})
    EXPECT_NE(error_of([&] { make_backend(bad, 1); }).find("expected cuda:N"),
              std::string::npos)
        << bad;
}

// -h is --help (label_image had read it as a file name: "FAILED -h: cannot open file").
TEST(Cli, DashHIsHelp) {
  EXPECT_TRUE(cli_of({"-h"}).has("help"));
  EXPECT_TRUE(cli_of({"-h"}).positional().empty());
  EXPECT_FALSE(cli_of({"a.png"}).has("help"));
}
