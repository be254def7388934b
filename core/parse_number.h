// A whole text as an integer in a range, for the parsers of untrusted text (graph attributes,
// settings in model files, command lines): strtol's overflow and trailing characters checked in
// one place. Each caller says what was wrong in its own words.
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>

namespace scenelab {

// The integer `s` spells (strtol's syntax: leading spaces and a sign allowed), or nullopt when it
// is empty, has anything after the number, or lies outside [lo, hi] (out of long's range too).
// is_integer (optional): whether the text spells an integer at all, in range or not, so that a
// caller can tell "not a number" from "too large".
inline std::optional<long> parse_long(const std::string& s, long lo, long hi, bool* is_integer = nullptr) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  const bool integer = !s.empty() && end != s.c_str() && *end == '\0';
  if (is_integer) *is_integer = integer;
  if (!integer || errno != 0 || v < lo || v > hi) return std::nullopt;
  return v;
}

// The shortest text (of %g's kind) that reads back as exactly `v`: 0.75, not 0.750000; 40, not
// 4e+01 (an exponent only where %g would write one at full precision).
inline std::string shortest_text(double v) {
  const bool exponent = v != 0 && (std::fabs(v) >= 1e17 || std::fabs(v) < 1e-4);
  std::string t;
  for (int digits = 1; digits <= 17; ++digits) {
    std::ostringstream o;
    o << std::setprecision(digits) << v;
    t = o.str();
    if (std::strtod(t.c_str(), nullptr) == v && (exponent || t.find('e') == std::string::npos)) break;
  }
  return t;
}

}  // namespace scenelab
