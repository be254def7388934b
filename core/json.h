// JSON text for the reports the tools and the job write.
#pragma once
#include <cstdio>
#include <string>

namespace scenelab {

// A string as JSON string content (quotes, backslashes, control characters escaped).
inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o;
}

}  // namespace scenelab
