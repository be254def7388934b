// onnx_conformance: ONNX's own node tests (onnx/backend/test/data/node: a one-node model.onnx
// and test_data_set_*/input_*.pb, output_*.pb) run through the importer (weights/onnx_model.h)
// and the engine, on the CPU and, with --gpu, on the GPU in fp32. Each test is passed (every
// output within the tolerance), failed (a wrong value, or an error where the importer took the
// node), or unsupported (the importer refused the node by name: OnnxUnsupported). A report, one
// line a test and the totals by operator; exit 1 if any failed.
//   onnx_conformance [--dir DIR] [--filter SUBSTRING] [--gpu] [--quiet]
// DIR defaults to Debian's libonnx-testdata (/usr/share/libonnx-testdata/data/node).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/graph.h"
#include "tools/cli.h"
#include "weights/onnx_model.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

constexpr double kRelTol = 1e-4, kAbsTol = 1e-5;  // |got - want| <= kAbsTol + kRelTol |want|

struct Result {
  std::string status, detail;
};

std::vector<fs::path> sorted(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> r;
  for (int k = 0;; ++k) {
    fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    r.push_back(p);
  }
  return r;
}

Result run_one(const fs::path& test, const std::string& device) {
  const fs::path set = test / "test_data_set_0";
  const auto inputs = sorted(set, "input_"), outputs = sorted(set, "output_");
  if (inputs.empty() || outputs.empty()) return {"unsupported", "no test data set"};
  std::vector<Tensor> given;
  Tensor image;
  try {
    image = read_onnx_tensor(inputs[0].string());  // rank < 4: leading 1s, as the importer
    for (size_t k = 1; k < inputs.size(); ++k) given.push_back(read_onnx_tensor(inputs[k].string()));
  } catch (const Error& e) {
    return {"unsupported", e.what()};
  }
  OnnxImport im;
  try {
    im = import_onnx((test / "model.onnx").string(), given);
  } catch (const OnnxUnsupported& e) {
    return {"unsupported", e.what()};
  } catch (const Error& e) {
    return {"failed", std::string("import: ") + e.what()};
  }
  try {
    CudaOptions co;
    co.precision = "fp32";
    auto backend = make_backend(device, 1, co);
    Graph g(im.model);
    PlanIO io;
    io.f32_outputs = im.outputs;
    const Shape s = image.shape();
    g.plan(s.n, s.h, s.w, *backend, io);
    g.run(image.view());
    for (size_t k = 0; k < outputs.size() && k < im.outputs.size(); ++k) {
      std::vector<int64_t> dims;
      const Tensor want = read_onnx_tensor(outputs[k].string(), &dims);
      const Tensor got = g.fetch(im.outputs[k]);
      if (got.shape() != want.shape())
        return {"failed", "output " + std::to_string(k) + " is " + got.shape().str() + ", expected " +
                              want.shape().str()};
      double worst = 0;
      for (size_t i = 0; i < want.shape().numel(); ++i) {
        const double w = want.data()[i], d = std::fabs(double(got.data()[i]) - w);
        const double excess = d - (kAbsTol + kRelTol * std::fabs(w));
        if (!(excess <= 0)) worst = std::max(worst, std::isnan(d) ? 1e30 : d);
      }
      if (worst > 0)
        return {"failed", "output " + std::to_string(k) + " differs by up to " + std::to_string(worst)};
    }
  } catch (const Error& e) {
    return {"failed", std::string("run: ") + e.what()};
  }
  return {"passed", ""};
}

std::string op_name(const std::string& test) {
  // test_conv_with_strides_padding -> conv (the first word); names of several words are kept
  // whole where ONNX's operator is such (batchnorm, globalaveragepool, ...): the report groups
  // by this name only.
  std::string s = test.rfind("test_", 0) == 0 ? test.substr(5) : test;
  const size_t u = s.find('_');
  return u == std::string::npos ? s : s.substr(0, u);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"dir", "filter"}, {"help", "gpu", "quiet"});
    if (cli.has("help")) {
      std::puts("usage: onnx_conformance [--dir DIR] [--filter SUBSTRING] [--gpu] [--quiet]");
      return 0;
    }
    const fs::path dir = cli.get("dir", "/usr/share/libonnx-testdata/data/node");
    if (!fs::is_directory(dir)) {
      std::fprintf(stderr, "onnx_conformance: no node tests at %s (Debian: libonnx-testdata)\n", dir.c_str());
      return 77;
    }
    if (!onnx_supported()) {
      std::fprintf(stderr, "onnx_conformance: built without ONNX support\n");
      return 77;
    }
    const std::string filter = cli.get("filter", "");
    std::vector<fs::path> tests;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) tests.push_back(e.path());
    std::sort(tests.begin(), tests.end());
    std::vector<std::string> devices = {"cpu"};
    if (cli.has("gpu")) devices.push_back("cuda");
    std::map<std::string, std::map<std::string, int>> by_op;  // op -> status -> count
    std::map<std::string, int> totals;
    for (const auto& device : devices)
      for (const auto& t : tests) {
        const std::string name = t.filename().string();
        const Result r = run_one(t, device);
        ++totals[r.status];
        ++by_op[op_name(name)][r.status];
        if (!cli.has("quiet") || r.status == "failed")
          std::printf("%-8s %-11s %s%s%s\n", device.c_str(), r.status.c_str(), name.c_str(),
                      r.detail.empty() ? "" : ": ", r.detail.c_str());
      }
    std::printf("\n| operator | passed | failed | unsupported |\n|---|---|---|---|\n");
    for (const auto& [op, c] : by_op)
      if (c.count("passed") || c.count("failed"))
        std::printf("| %s | %d | %d | %d |\n", op.c_str(), c.count("passed") ? c.at("passed") : 0,
                    c.count("failed") ? c.at("failed") : 0, c.count("unsupported") ? c.at("unsupported") : 0);
    std::printf("\nonnx_conformance: %zu node tests x %zu device(s): %d passed, %d failed, %d unsupported\n",
                tests.size(), devices.size(), totals["passed"], totals["failed"], totals["unsupported"]);
    return totals["failed"] ? 1 : 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "onnx_conformance: %s\n", e.what());
    return 2;
  }
}
