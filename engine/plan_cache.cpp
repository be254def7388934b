#include "engine/plan_cache.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/file_io.h"

namespace scenelab {
namespace {

const char* kMagic = "scenelab plan cache 1";
constexpr uint64_t kMaxEntryBytes = 1 << 20;

bool one_line(const std::string& s) { return s.find_first_of("\n\r\t") == std::string::npos; }

}  // namespace

std::string model_fingerprint(const Model& m) {
  const std::string text = m.graph.to_text();
  uint64_t h = fnv1a64(text.data(), text.size());
  for (const auto& [name, t] : m.params) {
    h = fnv1a64(name.data(), name.size() + 1, h);
    const Shape s = t.shape();
    const int dims[4] = {s.n, s.c, s.h, s.w};
    h = fnv1a64(dims, sizeof dims, h);
    h = fnv1a64(t.data(), t.numel() * sizeof(float), h);
  }
  return hex64(h);
}

std::string plan_key(const std::string& identity, const std::string& model,
                     const std::string& options, int n, int h, int w) {
  return str_cat("device=", identity, " | model=", model, " | ", options, " | size=", w, "x", h,
                 " | batch=", n);
}

PlanCache::PlanCache(std::string dir, std::function<void(const std::string&)> warn)
    : dir_(std::move(dir)), warn_(std::move(warn)) {
  if (!warn_) warn_ = [](const std::string& m) { std::fprintf(stderr, "warning: %s\n", m.c_str()); };
}

std::string PlanCache::default_dir() {
  if (const char* d = std::getenv("SCENELAB_PLAN_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/scenelab";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/scenelab";
  return {};
}

std::string PlanCache::path_of(const std::string& key) const {
  return dir_ + "/plan-" + hex64(fnv1a64(key.data(), key.size())) + ".txt";
}

std::optional<Tuning> PlanCache::find(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(key);
    if (it != memory_.end()) return it->second;
  }
  if (dir_.empty()) return std::nullopt;
  std::optional<Tuning> t = read(key);
  if (t) {
    std::lock_guard<std::mutex> lock(mu_);
    memory_[key] = *t;
  }
  return t;
}

std::optional<Tuning> PlanCache::read(const std::string& key) {
  const std::string path = path_of(key);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::string text;
  try {
    const std::vector<uint8_t> bytes = read_file(path, kMaxEntryBytes);
    text.assign(bytes.begin(), bytes.end());
  } catch (const Error& e) {
    warn_(str_cat("plan cache: ", e.what(), "; ignored, timing anew"));
    return std::nullopt;
  }
  auto bad = [&](const std::string& why) -> std::optional<Tuning> {
    warn_(str_cat("plan cache ", path, ": ", why, "; ignored, timing anew"));
    return std::nullopt;
  };
  // The checksum line covers every byte before it.
  const size_t end = text.rfind("\nend ");
  if (end == std::string::npos) return bad("truncated (no end line)");
  const std::string body = text.substr(0, end + 1);
  const std::string sum = text.substr(end + 5);
  if (sum != hex64(fnv1a64(body.data(), body.size())) + "\n") return bad("checksum mismatch (corrupt)");
  std::istringstream in(body);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return bad("not a scenelab plan cache file of this version");
  if (!std::getline(in, line) || line != "key " + key)
    return bad("made for another device, model or size (foreign entry)");
  Tuning t;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (line.rfind("node ", 0) != 0 || tab == std::string::npos) return bad("malformed line");
    t[line.substr(5, tab - 5)] = line.substr(tab + 1);
  }
  return t;
}

void PlanCache::store(const std::string& key, const Tuning& t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    memory_[key] = t;
  }
  if (dir_.empty()) return;
  SL_REQUIRE(one_line(key), "plan cache: a key must be one line");
  std::string body = str_cat(kMagic, "\nkey ", key, "\n");
  for (const auto& [node, choice] : t) {
    if (!one_line(node) || !one_line(choice)) return;  // not representable: kept in memory only
    body += str_cat("node ", node, "\t", choice, "\n");
  }
  body += "end " + hex64(fnv1a64(body.data(), body.size())) + "\n";
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    write_file_atomic(path_of(key), body.data(), body.size());
  } catch (const Error& e) {
    warn_(str_cat("plan cache: ", e.what(), " (the plan is timed again next run)"));
  }
}

}  // namespace scenelab
