#include "job/combine.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parse_number.h"
#include "layers/softmax_mean.h"
#include "weights/model_file.h"

namespace scenelab {
namespace {

// Checks that `m` is a labelling model whose labels are the argmax of its `full` node.
void require_labelling(const Model& m, size_t index) {
  const std::string who = "model " + std::to_string(index + 1) + " ('" + m.name + "')";
  SL_REQUIRE(m.pyramid.empty(), who, " is a window detector (pyramid), not a labelling model");
  for (const char* node : {"scores", "full", "labels_full"})
    SL_REQUIRE(m.graph.find(node), who, " has no node '", node, "' (a labelling model has scores, full and labels_full)");
  const NodeDesc* lab = m.graph.find("labels_full");
  SL_REQUIRE(lab->type == "argmax" && lab->inputs.size() == 1 && lab->inputs[0] == "full", who,
             ": its labels_full is not argmax(full), so its labels cannot be averaged");
}

// A parameter group of `m` that `group` names (any dataset "group/...").
bool has_group(const Model& m, const std::string& group) {
  auto it = m.params.lower_bound(group + "/");
  return it != m.params.end() && it->first.compare(0, group.size() + 1, group + "/") == 0;
}

// What names a scale's nodes: nothing at 1, "x0p75" at 0.75 (a pass's prefix netK[m]TAG_ then
// cannot be the start of another's: netK_, netKm_, netKxS_, netKmxS_).
std::string scale_tag(double s) {
  if (s == 1.0) return "";
  std::string t = shortest_text(s);
  std::replace(t.begin(), t.end(), '.', 'p');
  return "x" + t;
}

}  // namespace

Model combine_models(const std::vector<Model>& members, bool mirror, const std::vector<double>& scales) {
  SL_REQUIRE(!members.empty(), "combine_models: no models");
  SL_REQUIRE(!scales.empty(), "combine_models: no scales");
  for (size_t j = 0; j < scales.size(); ++j) {
    SL_REQUIRE(std::isfinite(scales[j]) && scales[j] >= kMinPassScale && scales[j] <= kMaxPassScale,
               "combine_models: scale ", scales[j], " is not in [", kMinPassScale, ", ", kMaxPassScale, "]");
    for (size_t i = 0; i < j; ++i)
      SL_REQUIRE(scales[i] != scales[j], "combine_models: scale ", scales[j], " is given twice");
  }
  const bool scaled = !(scales.size() == 1 && scales[0] == 1.0);
  if (members.size() == 1 && !mirror && !scaled) return members[0];  // as it is: nothing to combine
  for (size_t k = 0; k < members.size(); ++k) require_labelling(members[k], k);
  const size_t passes = members.size() * (mirror ? 2 : 1) * scales.size();
  SL_REQUIRE(passes <= size_t(kSoftmaxMeanMaxInputs), "combine_models: ", members.size(), " models",
             mirror ? " mirrored" : "", scales.size() > 1 ? " at " + std::to_string(scales.size()) + " scales" : "",
             " make ", passes, " passes a frame; at most ", kSoftmaxMeanMaxInputs, " are averaged");
  const Model& first = members[0];
  for (size_t k = 1; k < members.size(); ++k) {
    const Model& m = members[k];
    SL_REQUIRE(m.class_names == first.class_names, "model ", k + 1, " ('", m.name, "') has other classes than model 1 ('",
               first.name, "'): an ensemble's members must label the same classes in the same order");
    SL_REQUIRE(m.graph.input_channels == first.graph.input_channels, "model ", k + 1, " ('", m.name, "') takes ",
               m.graph.input_channels, " input channels, model 1 ", first.graph.input_channels);
  }
  const bool several = members.size() > 1;
  const std::string input = first.graph.input_name;
  Model out;
  out.class_names = first.class_names;
  out.palette = first.palette;
  out.detect = first.detect;
  std::ostringstream name, text;
  text << "input " << input << " channels=" << first.graph.input_channels << "\n";
  // Each scale's image (the image itself at 1) and its mirror; the tag names a scale's nodes.
  std::vector<std::string> tags(scales.size()), images(scales.size());
  for (size_t j = 0; j < scales.size(); ++j) {
    tags[j] = scale_tag(scales[j]);
    images[j] = input + (tags[j].empty() ? "" : "_" + tags[j]);
    if (scales[j] != 1.0) text << images[j] << " = upsample(" << input << ") scale=" << shortest_text(scales[j]) << "\n";
    if (mirror) text << images[j] << "_mirror = flip(" << images[j] << ")\n";
  }
  std::vector<std::string> fulls, scores;  // each pass's, brought back onto the image
  for (size_t k = 0; k < members.size(); ++k) {
    const Model& m = members[k];
    name << (k ? ", " : "") << m.name;
    const std::string group_prefix = several ? "net" + std::to_string(k) + "_" : "";
    for (size_t j = 0; j < scales.size(); ++j)
      for (int view = 0; view < (mirror ? 2 : 1); ++view) {
        const std::string prefix = "net" + std::to_string(k) + (view ? "m" : "") + tags[j] + "_";
        const std::string image = images[j] + (view ? "_mirror" : "");
        auto rename = [&](const std::string& n) { return n == m.graph.input_name ? image : prefix + n; };
        // A scaled pass's full-resolution scores: where the member resamples its scores onto its
        // input by geometry (the networks' `full`), onto the image itself, in one resampling;
        // otherwise its `full`, resampled onto the image below.
        bool full_on_image = scales[j] == 1.0;
        for (const NodeDesc& n : m.graph.nodes) {
          if (n.name == "labels_full") continue;  // the combined argmax replaces each pass's
          const bool onto_image = !full_on_image && n.name == "full" && n.type == "upsample" &&
                                  n.inputs.size() == 2 && n.inputs[1] == m.graph.input_name &&
                                  n.attrs.get_str("align", "size") == "geometry";
          full_on_image = full_on_image || onto_image;
          text << rename(n.name) << " = " << n.type << "(";
          for (size_t i = 0; i < n.inputs.size(); ++i)
            text << (i ? ", " : "") << (onto_image && i == 1 ? input : rename(n.inputs[i]));
          text << ")";
          Attrs attrs = n.attrs;
          const std::string group = n.attrs.get_str("params", n.name);
          if (has_group(m, group)) attrs.set("params", group_prefix + group);  // all passes share it
          for (const auto& [key, value] : attrs.items()) text << " " << key << "=" << value;
          text << "\n";
        }
        // The mirrored pass's maps flipped back: its full-resolution scores onto its image pixel
        // for pixel; its score map with its geometry mirrored about the image's middle (flip's
        // reference; a scaled image has the same middle), to lie where its pixels are on the image.
        std::string full = prefix + "full", score = prefix + "scores";
        if (view) {
          text << full << "_back = flip(" << full << ")\n" << score << "_back = flip(" << score << ", " << input << ")\n";
          full += "_back";
          score += "_back";
        }
        // Otherwise its full resampled onto the image, where its pixels lie (its image's geometry:
        // align=size's sampling, undone).
        if (!full_on_image) {
          text << full << "_on_image = upsample(" << full << ", " << input << ") mode=bilinear align=geometry\n";
          full += "_on_image";
        }
        fulls.push_back(full);
        scores.push_back(score);
      }
    for (const auto& [key, tensor] : m.params) out.params[group_prefix + key] = tensor;
  }
  // Every score map but the grid's resampled onto that grid, where its pixels lie on the image: a
  // mirrored map lies a few pixels aside where the map is not symmetric about the image's middle,
  // another member's may have another grid (the reference net's valid convolutions), another
  // scale's has another stride; where the grids are the same this copies the values exactly. The
  // grid: the first member's plain pass at scale 1 (at the first scale where 1 is not among them).
  const size_t grid = size_t(std::find(scales.begin(), scales.end(), 1.0) - scales.begin()) % scales.size() *
                      (mirror ? 2 : 1);
  for (size_t p = 0; p < scores.size(); ++p)
    if (p != grid) {
      text << scores[p] << "_on0 = upsample(" << scores[p] << ", " << scores[grid] << ") mode=bilinear align=geometry\n";
      scores[p] += "_on0";
    }
  for (const auto& [node, maps] : {std::pair{"full", &fulls}, std::pair{"scores", &scores}}) {
    text << node << " = softmax_mean(";
    for (size_t i = 0; i < maps->size(); ++i) text << (i ? ", " : "") << (*maps)[i];
    text << ")\n";
  }
  text << "labels_full = argmax(full)\noutput scores labels_full\n";
  std::string kind = several ? "ensemble" : (mirror ? "mirrored" : "scaled");
  if (several && mirror) kind += " mirrored";
  if (scaled)  // "scaled 0.5,1(A)", "mirrored at scales 0.5,1(A)"
    kind += (kind == "scaled" ? " " : " at scales ") + scales_text(scales);
  out.name = kind + "(" + name.str() + ")";
  out.graph = GraphDesc::parse(text.str());
  return out;
}

std::string scales_text(const std::vector<double>& scales) {
  std::string t;
  for (double s : scales) t += (t.empty() ? "" : ",") + shortest_text(s);
  return t;
}

Model refine_model(const Model& m, const Refinement& r) {
  if (!r.on()) return m;
  require_labelling(m, 0);
  const NodeDesc* full = m.graph.find("full");
  SL_REQUIRE(full->type != "refine", "model '", m.name, "' is refined already (its full is a refine node)");
  const std::string unrefined = "full_unrefined";
  SL_REQUIRE(!m.graph.find(unrefined), "model '", m.name, "' has a node named ", unrefined);
  Model out = m;
  GraphDesc& g = out.graph;
  for (NodeDesc& n : g.nodes) {
    if (n.name == "full") n.name = unrefined;
    for (std::string& in : n.inputs)
      if (in == "full") in = unrefined;
  }
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(), [](const NodeDesc& n) { return n.name == "labels_full"; }),
                g.nodes.end());
  g.nodes.push_back({"full", "refine", {unrefined, g.input_name},
                     Attrs("full", {{"sigma_s", shortest_text(r.sigma_s)},
                                    {"sigma_r", shortest_text(r.sigma_r)},
                                    {"iterations", std::to_string(r.iterations)}})});
  g.nodes.push_back({"labels_full", "argmax", {"full"}, Attrs("labels_full", {})});
  out.graph = GraphDesc::parse(g.to_text());  // checked as a file's graph is, with line numbers
  create_layer(*out.graph.find("full"));  // the settings checked by the layer, naming them
  out.name = "refined " + refinement_text(r) + "(" + m.name + ")";
  return out;
}

std::string refinement_text(const Refinement& r) {
  return shortest_text(r.sigma_s) + "," + shortest_text(r.sigma_r) + (r.iterations == 3 ? "" : "," + std::to_string(r.iterations));
}

Model read_combined(const std::vector<std::string>& paths, bool mirror, const std::vector<double>& scales,
                    const Refinement& refine) {
  SL_REQUIRE(!paths.empty(), "no model files given");
  std::vector<Model> members;
  for (const auto& p : paths) {
    SL_REQUIRE(!p.empty(), "an empty model file name among ", paths.size(), " given");
    members.push_back(read_model(p));
  }
  return refine_model(combine_models(members, mirror, scales), refine);
}

}  // namespace scenelab
