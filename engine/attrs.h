// Hyper-parameters of one graph node (key=value pairs), with typed getters whose errors name
// the node and the key.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace scenelab {

// The largest kernel, stride, dilation or padding a windowed layer takes (conv, conv_transpose,
// pool): their sums and products stay far inside int.
constexpr int kMaxWindowAttr = 1 << 16;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::string owner, std::map<std::string, std::string> kv)
      : owner_(std::move(owner)), kv_(std::move(kv)) {}

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  std::string get_str(const std::string& key) const;
  std::string get_str(const std::string& key, const std::string& def) const;
  int get_int(const std::string& key) const;
  int get_int(const std::string& key, int def) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double def) const;
  std::vector<float> get_floats(const std::string& key) const;  // comma separated
  // Comma-separated integers, each within +-limit (a larger one is an error naming the attribute).
  std::vector<int> get_ints(const std::string& key, int limit = 1 << 30) const;
  // Throws if a key is present that is not in `known` (catches typos in model files).
  void check_known(const std::vector<std::string>& known) const;

  const std::map<std::string, std::string>& items() const { return kv_; }
  void set(const std::string& key, const std::string& value) { kv_[key] = value; }

 private:
  std::string owner_;
  std::map<std::string, std::string> kv_;
};

}  // namespace scenelab
