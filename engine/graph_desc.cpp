#include "engine/graph_desc.h"

#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"

namespace scenelab {
namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

bool valid_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.')) return false;
  return true;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> out;
  std::string tok;
  while (is >> tok) out.push_back(tok);
  return out;
}

std::map<std::string, std::string> parse_kv(const std::vector<std::string>& toks, size_t from,
                                            int line) {
  std::map<std::string, std::string> kv;
  for (size_t i = from; i < toks.size(); ++i) {
    size_t eq = toks[i].find('=');
    SL_REQUIRE(eq != std::string::npos && eq > 0 && eq + 1 < toks[i].size(), "graph line ", line,
               ": expected key=value, found '", toks[i], "'");
    std::string key = toks[i].substr(0, eq);
    SL_REQUIRE(!kv.count(key), "graph line ", line, ": attribute '", key, "' given twice");
    kv[key] = toks[i].substr(eq + 1);
  }
  return kv;
}

}  // namespace

GraphDesc GraphDesc::parse(const std::string& text) {
  GraphDesc g;
  std::set<std::string> defined;
  bool have_input = false;
  std::istringstream is(text);
  std::string raw;
  int line = 0;
  while (std::getline(is, raw)) {
    ++line;
    std::string s = trim(raw.substr(0, raw.find('#')));
    if (s.empty()) continue;
    auto toks = split_ws(s);
    if (toks[0] == "input") {
      SL_REQUIRE(!have_input, "graph line ", line, ": a second 'input' statement");
      SL_REQUIRE(toks.size() >= 2 && valid_name(toks[1]), "graph line ", line,
                 ": expected 'input NAME channels=C'");
      auto kv = parse_kv(toks, 2, line);
      Attrs a(toks[1], kv);
      a.check_known({"channels"});
      g.input_name = toks[1];
      g.input_channels = a.get_int("channels", 3);
      SL_REQUIRE(g.input_channels > 0, "graph line ", line, ": input channels must be positive");
      defined.insert(g.input_name);
      have_input = true;
      continue;
    }
    if (toks[0] == "output") {
      SL_REQUIRE(toks.size() >= 2, "graph line ", line, ": 'output' names no node");
      for (size_t i = 1; i < toks.size(); ++i) {
        SL_REQUIRE(defined.count(toks[i]), "graph line ", line, ": output '", toks[i],
                   "' is not a node defined above");
        g.outputs.push_back(toks[i]);
      }
      continue;
    }
    // NAME = TYPE(IN, IN) key=value ...
    size_t eq = s.find('=');
    size_t lp = s.find('(');
    size_t rp = s.find(')');
    SL_REQUIRE(eq != std::string::npos && lp != std::string::npos && rp != std::string::npos &&
                   eq < lp && lp < rp,
               "graph line ", line, ": expected 'NAME = TYPE(INPUTS) key=value ...', found '", s,
               "'");
    NodeDesc n;
    n.line = line;
    n.name = trim(s.substr(0, eq));
    n.type = trim(s.substr(eq + 1, lp - eq - 1));
    SL_REQUIRE(valid_name(n.name), "graph line ", line, ": bad node name '", n.name, "'");
    SL_REQUIRE(valid_name(n.type), "graph line ", line, ": bad layer type '", n.type, "'");
    SL_REQUIRE(!defined.count(n.name), "graph line ", line, ": node '", n.name,
               "' defined twice");
    std::string ins = s.substr(lp + 1, rp - lp - 1);
    size_t pos = 0;
    while (pos < ins.size()) {
      size_t comma = ins.find(',', pos);
      if (comma == std::string::npos) comma = ins.size();
      std::string in = trim(ins.substr(pos, comma - pos));
      SL_REQUIRE(defined.count(in), "graph line ", line, ": node '", n.name, "' reads '", in,
                 "', which is not defined above");
      n.inputs.push_back(in);
      pos = comma + 1;
    }
    SL_REQUIRE(!n.inputs.empty(), "graph line ", line, ": node '", n.name, "' has no input");
    n.attrs = Attrs(n.name, parse_kv(split_ws(s.substr(rp + 1)), 0, line));
    defined.insert(n.name);
    g.nodes.push_back(std::move(n));
  }
  SL_REQUIRE(have_input, "graph has no 'input' statement");
  SL_REQUIRE(!g.nodes.empty(), "graph has no nodes");
  if (g.outputs.empty()) g.outputs.push_back(g.nodes.back().name);
  return g;
}

std::string GraphDesc::to_text() const {
  std::ostringstream os;
  os << "input " << input_name << " channels=" << input_channels << "\n";
  for (const auto& n : nodes) {
    os << n.name << " = " << n.type << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << n.inputs[i];
    os << ")";
    for (const auto& kv : n.attrs.items()) os << " " << kv.first << "=" << kv.second;
    os << "\n";
  }
  os << "output";
  for (const auto& o : outputs) os << " " << o;
  os << "\n";
  return os.str();
}

const NodeDesc* GraphDesc::find(const std::string& name) const {
  for (const auto& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

}  // namespace scenelab
