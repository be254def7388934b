#include "engine/networks.h"

#include "core/error.h"

namespace scenelab {
namespace {

const char* kPreprocess =
    "input image channels=3\n"
    "yuv = rgb_to_yuv(image)\n"
    "lcn = contrast_norm(yuv) size=13\n"
    "pre = standardize(lcn)\n";

// One feature-extraction stack; `p` prefixes node names, weights are the shared groups conv1..3.
std::string extractor(const std::string& p, const std::string& in, const std::string& pad) {
  return str_cat(p, "c1 = conv2d(", in, ") out=16 k=7 pad=", pad, " params=conv1\n",  //
                 p, "r1 = relu(", p, "c1)\n",                                          //
                 p, "p1 = maxpool2d(", p, "r1) k=2\n",                                 //
                 p, "c2 = conv2d(", p, "p1) out=64 k=7 pad=", pad, " params=conv2\n",  //
                 p, "r2 = relu(", p, "c2)\n",                                          //
                 p, "p2 = maxpool2d(", p, "r2) k=2\n",                                 //
                 p, "c3 = conv2d(", p, "p2) out=256 k=7 pad=", pad, " params=conv3\n",  //
                 p, "r3 = relu(", p, "c3)\n");
}

std::string classifier(const std::string& in, int classes) {
  return str_cat("fc1 = conv2d(", in, ") out=64 k=1\n",                     //
                 "fc1r = relu(fc1)\n",                                     //
                 "scores = conv2d(fc1r) out=", classes, " k=1\n",          //
                 "full = upsample(scores, image) mode=bilinear align=geometry\n",
                 "labels_full = argmax(full)\n",                           //
                 "output scores labels_full\n");
}

}  // namespace

std::vector<std::string> network_names() { return {"reference", "multiscale"}; }

std::string network_text(const std::string& name, int classes) {
  SL_REQUIRE(classes >= 1 && classes <= 255, "number of classes must be 1..255, got ", classes);
  if (name == "reference")
    return str_cat(kPreprocess, extractor("s1", "pre", "valid"), classifier("s1r3", classes));
  if (name == "multiscale")
    return str_cat(kPreprocess,                                 //
                   "half = downscale(pre) factor=2\n",          //
                   "quarter = downscale(pre) factor=4\n",       //
                   extractor("s1", "pre", "same"),              //
                   extractor("s2", "half", "same"),             //
                   extractor("s4", "quarter", "same"),          //
                   "s2up = upsample(s2r3, s1r3) mode=bilinear\n",
                   "s4up = upsample(s4r3, s1r3) mode=bilinear\n",
                   "features = concat(s1r3, s2up, s4up)\n",     //
                   classifier("features", classes));
  throw_error("unknown network '", name, "' (known: reference, multiscale)");
}

}  // namespace scenelab
