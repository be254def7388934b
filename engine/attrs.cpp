#include "engine/attrs.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/parse_number.h"

namespace scenelab {

std::string Attrs::get_str(const std::string& key) const {
  auto it = kv_.find(key);
  SL_REQUIRE(it != kv_.end(), "node '", owner_, "': missing attribute '", key, "'");
  return it->second;
}

std::string Attrs::get_str(const std::string& key, const std::string& def) const {
  return has(key) ? get_str(key) : def;
}

int Attrs::get_int(const std::string& key) const {
  std::string s = get_str(key);
  const auto v = parse_long(s, -(1L << 30), 1L << 30);
  SL_REQUIRE(v, "node '", owner_, "': attribute ", key, "='", s, "' is not an integer");
  return int(*v);
}

int Attrs::get_int(const std::string& key, int def) const { return has(key) ? get_int(key) : def; }

static double parse_double(const std::string& owner, const std::string& key, const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  SL_REQUIRE(!s.empty() && *end == '\0' && std::isfinite(v), "node '", owner, "': attribute ", key,
             "='", s, "' is not a finite number");
  return v;
}

double Attrs::get_float(const std::string& key) const {
  return parse_double(owner_, key, get_str(key));
}

double Attrs::get_float(const std::string& key, double def) const {
  return has(key) ? get_float(key) : def;
}

std::vector<float> Attrs::get_floats(const std::string& key) const {
  std::string s = get_str(key);
  std::vector<float> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(float(parse_double(owner_, key, s.substr(pos, comma - pos))));
    pos = comma + 1;
  }
  return out;
}

std::vector<int> Attrs::get_ints(const std::string& key, int limit) const {
  const std::string s = get_str(key);
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(pos, comma - pos);
    const auto v = parse_long(item, -long(limit), long(limit));
    SL_REQUIRE(v, "node '", owner_, "': attribute ", key, "='", s, "': '", item, "' is not an integer within +-",
               limit);
    out.push_back(int(*v));
    pos = comma + 1;
  }
  return out;
}

void Attrs::check_known(const std::vector<std::string>& known) const {
  for (const auto& kv : kv_) {
    bool ok = false;
    for (const auto& k : known) ok = ok || k == kv.first;
    if (!ok) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw_error("node '", owner_, "': unknown attribute '", kv.first, "' (known: ", list, ")");
    }
  }
}

}  // namespace scenelab
