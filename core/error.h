// Errors carry what failed and on what input (file, dataset, layer, shape); tools print one line.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace scenelab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... R>
void append(std::ostringstream& os, const T& v, const R&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// Builds a message from any streamable pieces: throw_error("layer ", name, ": bad shape ", s).
template <typename... A>
[[noreturn]] void throw_error(const A&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  throw Error(os.str());
}

template <typename... A>
std::string str_cat(const A&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  return os.str();
}

}  // namespace scenelab

#define SL_REQUIRE(cond, ...)                                  \
  do {                                                         \
    if (!(cond)) ::scenelab::throw_error(__VA_ARGS__);         \
  } while (0)
