// JSON for the reports the tools and the job write, through nlohmann/json (Debian's
// nlohmann-json3-dev). Objects keep their keys in the order they were set (ordered_json), as a
// report lists them; numbers are given as the reports state them, to 6 significant digits.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace scenelab {

using Json = nlohmann::ordered_json;

// A measured value as a report states it: 6 significant digits (a float's precision), a whole
// number below a million as an integer, NaN and infinities as null.
inline Json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  const double r = std::strtod(b, nullptr);
  if (r == std::floor(r) && std::fabs(r) < 1e6) return static_cast<long long>(r);
  return r;
}

// A value given exactly (a setting): whole numbers as integers.
inline Json json_exact(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == std::floor(v) && std::fabs(v) < 1e15) return static_cast<long long>(v);
  return v;
}

// One line of JSON text (for entries streamed one at a time); bad UTF-8 in names is replaced.
inline std::string json_text(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace scenelab
