// A small command-line parser shared by the tools: --key value, --flag, positional arguments.
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "job/combine.h"
#include "core/json.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "job/pipeline.h"

namespace scenelab {

class Cli {
 public:
  // `with_value`: options that take a value; `flags`: options that do not.
  Cli(int argc, char** argv, const std::set<std::string>& with_value,
      const std::set<std::string>& flags) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) == 0 && a.size() > 2) {
        std::string key = a.substr(2), value;
        size_t eq = key.find('=');
        bool inline_value = eq != std::string::npos;
        if (inline_value) {
          value = key.substr(eq + 1);
          key = key.substr(0, eq);
        }
        if (flags.count(key) && !inline_value) {
          opts_[key] = "1";
        } else if (with_value.count(key)) {
          if (!inline_value) {
            SL_REQUIRE(i + 1 < argc, "option --", key, " needs a value");
            value = argv[++i];
          }
          opts_[key] = value;
        } else {
          throw_error("unknown option --", key, " (see --help)");
        }
      } else if (a == "-h" && flags.count("help")) {  // the short form every tool's user tries first
        opts_["help"] = "1";
      } else {
        positional_.push_back(a);
      }
    }
  }
  bool has(const std::string& k) const { return opts_.count(k) != 0; }
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = opts_.find(k);
    return it == opts_.end() ? def : it->second;
  }
  int get_int(const std::string& k, int def) const {
    if (!has(k)) return def;
    std::string v = get(k);
    bool integer = false;
    const auto x = parse_long(v, INT_MIN, INT_MAX, &integer);
    SL_REQUIRE(integer, "option --", k, " expects an integer, got '", v, "'");
    SL_REQUIRE(x, "option --", k, " ", v, " is out of range");
    return int(*x);
  }
  double get_double(const std::string& k, double def) const {
    if (!has(k)) return def;
    const auto x = finite_number(get(k));
    SL_REQUIRE(x, "option --", k, " expects a number, got '", get(k), "'");
    return *x;
  }
  // A comma-separated list of numbers (`def` where the option is absent).
  std::vector<double> get_doubles(const std::string& k, const std::vector<double>& def) const {
    if (!has(k)) return def;
    const std::string v = get(k);
    std::vector<double> out;
    size_t from = 0;
    for (;;) {
      const size_t comma = std::min(v.find(',', from), v.size());
      const auto x = finite_number(v.substr(from, comma - from));
      SL_REQUIRE(x, "option --", k, " expects numbers separated by commas, got '", v, "'");
      out.push_back(*x);
      if (comma == v.size()) return out;
      from = comma + 1;
    }
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  // The finite number a whole text spells, else nullopt.
  static std::optional<double> finite_number(const std::string& t) {
    char* end = nullptr;
    const double x = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0' || !std::isfinite(x)) return std::nullopt;
    return x;
  }
  std::map<std::string, std::string> opts_;
  std::vector<std::string> positional_;
};

// --conv, --precision, --conv-workspace (MiB) and --runtime-fusion on|off|auto (auto: on here;
// label_image decides by the length of its run), for tools that make a backend.
inline CudaOptions cuda_options(const Cli& cli) {
  CudaOptions co;
  co.conv = cli.get("conv", "auto");
  co.precision = cli.get("precision", "fp32");
  const std::string rf = cli.get("runtime-fusion", "auto");
  SL_REQUIRE(rf == "on" || rf == "off" || rf == "auto", "option --runtime-fusion expects on, off or auto, got '",
             rf, "'");
  co.runtime_fusion = rf != "off";
  if (cli.has("conv-workspace")) {
    const int mb = cli.get_int("conv-workspace", 0);
    SL_REQUIRE(mb >= 1, "option --conv-workspace expects a size in MiB >= 1, got ", mb);
    co.conv_workspace_bytes = size_t(mb) << 20;
  }
  return co;
}

// The pipeline options every labelling tool takes: --device, --conv, --precision,
// --conv-workspace, --threads, --io-threads, --batch, --streams, --queue-depth, --plan-cache.
inline PipelineOptions pipeline_options(const Cli& cli) {
  PipelineOptions po;
  po.device = cli.get("device", "auto");
  po.cuda = cuda_options(cli);
  po.threads = cli.get_int("threads", 0);
  po.pool_threads = cli.get_int("io-threads", 0);
  po.batch = cli.get_int("batch", 0);
  po.streams = cli.get_int("streams", 2);
  po.queue_depth = cli.get_int("queue-depth", 0);
  const std::string pc = cli.get("plan-cache", PlanCache::default_dir());
  po.plan_cache = pc == "off" ? "" : pc;
  return po;
}

// The labelling model of --model, --mirror, --scales and --refine: one file, or several separated by commas
// (an ensemble: their class probabilities averaged), mirrored or not, at the image's size or at
// several (job/combine.h). A path that exists as it is is one file, commas and all.
inline Model labelling_model(const std::string& spec, bool mirror, const std::vector<double>& scales,
                             const Refinement& refine = {}, const char* option = "--model") {
  std::vector<std::string> paths;
  if (std::filesystem::exists(spec)) {
    paths.push_back(spec);
  } else {
    size_t from = 0;
    for (size_t comma; (comma = spec.find(',', from)) != std::string::npos; from = comma + 1)
      paths.push_back(spec.substr(from, comma - from));
    paths.push_back(spec.substr(from));
  }
  if (paths.size() == 1 && !spec.empty()) return read_combined(paths, mirror, scales, refine);  // its errors name the file
  try {
    return read_combined(paths, mirror, scales, refine);
  } catch (const Error& e) {  // which list
    throw_error(option, " ", spec, ": ", e.what());
  }
}

// --scales LIST: the sizes the labelling model runs at, as factors of the image's (default 1).
inline std::vector<double> scales_option(const Cli& cli) { return cli.get_doubles("scales", {1.0}); }

// --refine (a flag: the chosen settings, kDefaultRefinement) or --refine=SIGMA_S,SIGMA_R[,ITERATIONS]:
// edge-aware refinement of the class probabilities (job/combine.h); none without it. "refine"
// must be among the Cli's flags and its options with a value. The settings' ranges are the refine
// layer's, checked when the model is made.
inline Refinement refine_option(const Cli& cli) {
  if (!cli.has("refine")) return {};
  if (cli.get("refine") == "1") return kDefaultRefinement;
  const std::vector<double> v = cli.get_doubles("refine", {});
  SL_REQUIRE(v.size() == 2 || v.size() == 3, "option --refine takes SIGMA_S,SIGMA_R[,ITERATIONS], got '",
             cli.get("refine"), "'");
  SL_REQUIRE(v.size() == 2 || (v[2] == std::floor(v[2]) && std::fabs(v[2]) < 1e6),
             "option --refine: iterations must be a whole number, got ", v[2]);
  return {v[0], v[1], v.size() == 3 ? int(v[2]) : 3};
}

// "640x480" -> {w, h}
// (each side a whole number from 1 to 2^20; atoi had read "99999999999" with undefined behaviour)
inline std::pair<int, int> parse_size(const std::string& s) {
  const size_t x = s.find('x');
  auto side = [&](const std::string& v) {
    const auto n = v.find_first_not_of("0123456789") == std::string::npos ? parse_long(v, 1, 1L << 20) : std::nullopt;
    SL_REQUIRE(n, "size '", s, "' should look like 640x480 (whole numbers from 1 to 1048576)");
    return int(*n);
  };
  SL_REQUIRE(x != std::string::npos, "size '", s, "' should look like 640x480");
  return {side(s.substr(0, x)), side(s.substr(x + 1))};
}

// --max-pixels N|WxH: the largest image accepted.
inline uint64_t parse_max_pixels(const std::string& v) {
  if (v.find('x') != std::string::npos) {
    auto [w, h] = parse_size(v);
    return uint64_t(w) * uint64_t(h);
  }
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  SL_REQUIRE(!v.empty() && *end == '\0' && n > 0, "--max-pixels: expected N or WxH, got '", v, "'");
  return n;
}

// --detect CLASS[,CLASS...]: class names (any case) or indices of `names`.
inline std::vector<int> parse_classes(const std::string& list, const std::vector<std::string>& names) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int found = -1;
    for (size_t c = 0; c < names.size(); ++c) {
      std::string a = names[c], b = item;
      std::transform(a.begin(), a.end(), a.begin(), ::tolower);
      std::transform(b.begin(), b.end(), b.begin(), ::tolower);
      if (a == b || std::to_string(c) == item) found = int(c);
    }
    if (found < 0) {
      std::string all;
      for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
      throw_error("--detect: unknown class '", item, "' (classes: ", all, ")");
    }
    out.push_back(found);
  }
  return out;
}

}  // namespace scenelab
