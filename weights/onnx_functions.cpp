// The ONNX importer's mapping of the model-local functions of the domain "scenelab"
// (tools/export_onnx.py writes them): the paper's preprocessing layers, which ONNX has no operator
// for, each a function whose body computes it from standard operators for other runtimes. The
// importer maps a call by name onto the engine's own layer (the body is not read), so the paper's
// networks exported to ONNX run as their HDF5 files do.
#include "weights/onnx_import.h"

#ifdef SCENELAB_WITH_ONNX
namespace scenelab::onnx_import {

void Importer::map_scenelab(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  bool defined = false;
  for (const auto& f : proto.functions()) defined = defined || (f.domain() == n.domain() && f.name() == op);
  if (!defined) unsupported(n, str_cat("no model-local function ", n.domain(), ".", op, " defines it"));
  if (op == "RgbToYuv") {
    known(n, {});
    add(n.output(0), "rgb_to_yuv", {data(n, 0)});
    return;
  }
  if (op == "ContrastNorm") {
    known(n, {"size", "eps", "sigma"});
    const int64_t size = attr_int(n, "size", 13);
    if (size < 1 || size > 63 || size % 2 == 0) unsupported(n, str_cat("size ", size, " (odd, 1 to 63)"));
    std::vector<std::pair<std::string, std::string>> a = {{"size", std::to_string(size)},
                                                          {"eps", num(attr_float(n, "eps", 1e-4f))}};
    if (attr(n, "sigma")) a.push_back({"sigma", num(attr_float(n, "sigma", 0.f))});
    add(n.output(0), "contrast_norm", {data(n, 0)}, a);
    return;
  }
  if (op == "Standardize") {
    known(n, {});
    const std::string x = data(n, 0);
    const Const& mean = need_const(n, 1, "mean");
    const Const& sd = need_const(n, 2, "std");
    const size_t c = size_t(channels_of(x));
    if (mean.is_int || sd.is_int || mean.f.size() != c || sd.f.size() != c || mean.dims.size() != 1 ||
        sd.dims.size() != 1)
      unsupported(n, str_cat("mean and std other than ", c, " floats (one a channel)"));
    const std::string name = add(n.output(0), "standardize", {x});
    g.nodes.back().attrs.set("params", name);
    add_param(name + "/mean", to_tensor(mean, path));
    add_param(name + "/std", to_tensor(sd, path));
    return;
  }
  unsupported(n, str_cat("function ", n.domain(), ".", op, " (RgbToYuv, ContrastNorm and Standardize are)"));
}

}  // namespace scenelab::onnx_import
#endif
