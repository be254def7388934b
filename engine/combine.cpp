#include "engine/combine.h"

#include <sstream>

#include "engine/error.h"
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

}  // namespace

Model combine_models(const std::vector<Model>& members, bool mirror) {
  SL_REQUIRE(!members.empty(), "combine_models: no models");
  if (members.size() == 1 && !mirror) return members[0];  // as it is: nothing to combine
  for (size_t k = 0; k < members.size(); ++k) require_labelling(members[k], k);
  const size_t passes = members.size() * (mirror ? 2 : 1);
  SL_REQUIRE(passes <= size_t(kSoftmaxMeanMaxInputs), "combine_models: ", members.size(), " models",
             mirror ? ", mirrored," : "", " make ", passes, " passes a frame; at most ", kSoftmaxMeanMaxInputs,
             " are averaged");
  const Model& first = members[0];
  for (size_t k = 1; k < members.size(); ++k) {
    const Model& m = members[k];
    SL_REQUIRE(m.class_names == first.class_names, "model ", k + 1, " ('", m.name, "') has other classes than model 1 ('",
               first.name, "'): an ensemble's members must label the same classes in the same order");
    SL_REQUIRE(m.graph.input_channels == first.graph.input_channels, "model ", k + 1, " ('", m.name, "') takes ",
               m.graph.input_channels, " input channels, model 1 ", first.graph.input_channels);
  }
  const bool several = members.size() > 1;
  const std::string input = first.graph.input_name, mirrored_input = input + "_mirror";
  Model out;
  out.class_names = first.class_names;
  out.palette = first.palette;
  out.detect = first.detect;
  std::ostringstream name, text;
  text << "input " << input << " channels=" << first.graph.input_channels << "\n";
  if (mirror) text << mirrored_input << " = flip(" << input << ")\n";
  std::vector<std::string> fulls, scores;  // each pass's, brought back onto the image
  for (size_t k = 0; k < members.size(); ++k) {
    const Model& m = members[k];
    name << (k ? ", " : "") << m.name;
    const std::string group_prefix = several ? "net" + std::to_string(k) + "_" : "";
    for (int view = 0; view < (mirror ? 2 : 1); ++view) {
      const std::string prefix = "net" + std::to_string(k) + (view ? "m_" : "_");
      auto rename = [&](const std::string& n) {
        return n == m.graph.input_name ? (view ? mirrored_input : input) : prefix + n;
      };
      for (const NodeDesc& n : m.graph.nodes) {
        if (n.name == "labels_full") continue;  // the combined argmax replaces each pass's
        text << rename(n.name) << " = " << n.type << "(";
        for (size_t i = 0; i < n.inputs.size(); ++i) text << (i ? ", " : "") << rename(n.inputs[i]);
        text << ")";
        Attrs attrs = n.attrs;
        const std::string group = n.attrs.get_str("params", n.name);
        if (has_group(m, group)) attrs.set("params", group_prefix + group);  // both views share it
        for (const auto& [key, value] : attrs.items()) text << " " << key << "=" << value;
        text << "\n";
      }
      // The mirrored pass's maps flipped back: its full-resolution scores onto the image pixel
      // for pixel; its score map with its geometry mirrored about the image's middle (flip's
      // reference), to lie where its pixels are on the image.
      std::string full = prefix + "full", score = prefix + "scores";
      if (view) {
        text << full << "_back = flip(" << full << ")\n" << score << "_back = flip(" << score << ", " << input << ")\n";
        full += "_back";
        score += "_back";
      }
      // Every score map but the first resampled onto the first's grid, where its pixels lie on
      // the image: a mirrored map lies a few pixels aside where the map is not symmetric about
      // the image's middle, another member's may have another grid (the reference net's valid
      // convolutions); where the grids are the same this copies the values exactly.
      if (k || view) {
        text << score << "_on0 = upsample(" << score << ", net0_scores) mode=bilinear align=geometry\n";
        score += "_on0";
      }
      fulls.push_back(full);
      scores.push_back(score);
    }
    for (const auto& [key, tensor] : m.params) out.params[group_prefix + key] = tensor;
  }
  for (const auto& [node, maps] : {std::pair{"full", &fulls}, std::pair{"scores", &scores}}) {
    text << node << " = softmax_mean(";
    for (size_t i = 0; i < maps->size(); ++i) text << (i ? ", " : "") << (*maps)[i];
    text << ")\n";
  }
  text << "labels_full = argmax(full)\noutput scores labels_full\n";
  out.name = std::string(several ? "ensemble" : "mirrored") + (several && mirror ? " mirrored" : "") + "(" +
             name.str() + ")";
  out.graph = GraphDesc::parse(text.str());
  return out;
}

Model read_combined(const std::vector<std::string>& paths, bool mirror) {
  SL_REQUIRE(!paths.empty(), "no model files given");
  std::vector<Model> members;
  for (const auto& p : paths) {
    SL_REQUIRE(!p.empty(), "an empty model file name among ", paths.size(), " given");
    members.push_back(read_model(p));
  }
  return combine_models(members, mirror);
}

}  // namespace scenelab
