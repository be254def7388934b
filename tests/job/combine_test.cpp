// job/combine.h: test-time mirroring and ensembles as graphs. The combined graph's outputs
// against float64 references computed from each member run alone (its `full` and `scores` on the
// image and on its mirror, flipped back on the host, the score maps placed on the first member's
// grid by where their pixels lie on the image): labels equal wherever the reference's two
// best classes are more than 1e-5 apart in summed probability, `scores` (log of the mean
// probability) within 1e-5 relative error; random paper networks, batch 2, odd sizes. Then the
// mirrored labelling's symmetry (the labels of the mirror are the mirror of the labels, bit for
// bit), the file round trip, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <tuple>

#include "job/combine.h"
#include "core/error.h"
#include "engine/graph.h"
#include "core/parse_number.h"
#include "scenelab/scenelab.h"
#include "tests/reference.h"
#include "weights/default_model.h"
#include "weights/model_file.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

// Left-right mirror of every plane.
Tensor flipped(const Tensor& t) {
  Tensor o(t.shape());
  const int w = t.shape().w;
  for (size_t row = 0; row < t.numel() / size_t(w); ++row)
    for (int x = 0; x < w; ++x) o[row * w + size_t(x)] = t[row * w + size_t(w - 1 - x)];
  return o;
}

struct Run {
  std::map<std::string, Tensor> out;
  Geometry scores;  // where the node `scores` lies on the input
};

Run run_geo(const Model& m, const Tensor& x, const std::vector<std::string>& nodes) {
  CpuBackend cpu(2);
  Graph g(m);
  PlanIO io;
  io.keep = nodes;
  g.plan(x.shape().n, x.shape().h, x.shape().w, cpu, io);
  g.run(x.view());
  Run r;
  for (const auto& n : nodes) r.out[n] = g.fetch(n);
  if (m.graph.find("scores")) r.scores = g.geometry_of("scores");
  return r;
}

std::map<std::string, Tensor> run(const Model& m, const Tensor& x, const std::vector<std::string>& nodes) {
  return run_geo(m, x, nodes).out;
}

// Softmax over channels in float64 (tests/reference.h), added into `sum` (n x c x h x w).
void add_softmax(const Ref& s, std::vector<double>& sum) {
  const Ref p = ref_softmax(s);
  for (size_t i = 0; i < p.v.size(); ++i) sum[i] += p.v[i];
}

// A score map (geometry g) resampled bilinearly onto the grid `to` (h x w), where their pixels
// lie on the image, in float64.
Ref onto(const Ref& s, const Geometry& g, const Geometry& to, int h, int w) {
  std::vector<double> sy(static_cast<size_t>(h)), sx(static_cast<size_t>(w));
  for (int i = 0; i < h; ++i) sy[size_t(i)] = (to.offset_y + to.stride_y * i - g.offset_y) / g.stride_y;
  for (int j = 0; j < w; ++j) sx[size_t(j)] = (to.offset_x + to.stride_x * j - g.offset_x) / g.stride_x;
  return ref_resample(s, h, w, sy, sx, true);
}

// x resized by s as upsample(x) scale=s does (PyTorch's interpolate, align_corners=False), in
// float64, and where the resized image's pixels lie on x.
Tensor resized(const Tensor& x, double s, Geometry* where) {
  const int h = int(std::lround(x.shape().h * s)), w = int(std::lround(x.shape().w * s));
  const double ry = double(x.shape().h) / h, rx = double(x.shape().w) / w;
  std::vector<double> sy, sx;
  for (int i = 0; i < h; ++i) sy.push_back(std::max((i + 0.5) * ry - 0.5, 0.0));
  for (int j = 0; j < w; ++j) sx.push_back(std::max((j + 0.5) * rx - 0.5, 0.0));
  const Ref r = ref_resample(to_ref(x.view()), h, w, sy, sx, true);
  Tensor o(r.shape);
  for (size_t i = 0; i < r.v.size(); ++i) o[i] = float(r.v[i]);
  *where = Geometry{ry, rx, 0.5 * ry - 0.5, 0.5 * rx - 0.5};
  return o;
}

// Geometry g (on an image) of an image that lies at `on` on another: where g lies on that one.
Geometry compose(const Geometry& on, const Geometry& g) {
  return Geometry{on.stride_y * g.stride_y, on.stride_x * g.stride_x, on.offset_y + on.stride_y * g.offset_y,
                  on.offset_x + on.stride_x * g.offset_x};
}

// The combination of `members` (mirrored or not, at `scales`) against the members run alone, in
// float64: each pass on the image resized by its scale (float64 resampling) and, mirrored, on that
// image's mirror. Each pass's `scores` (a mirrored pass's flipped back, its geometry mirrored about
// the image's middle; a scaled pass's placed where its pixels lie on the image) is resampled onto
// the first member's plain grid (at scale 1, else the first scale), to softmax, their mean's log
// for `scores`. For the labels, each pass's `full` (a scaled pass's scores resampled onto the
// image's pixels instead, the member's `full` being that on its own image) to softmax, summed.
// With `naive`, the mirrored score maps are instead flipped back in place, as if they lay where
// the plain ones do: returns that reference's relative error (for the test that the geometry
// matters).
double check_against_members(const std::vector<Model>& members, bool mirror, const Tensor& x,
                             const std::vector<double>& scales = {1.0}) {
  const Model combined = combine_models(members, mirror, scales);
  auto got = run(combined, x, {"full", "scores", "labels_full"});
  const Shape fs = got["full"].shape(), ss = got["scores"].shape();
  std::vector<double> pf(fs.numel()), ps(ss.numel()), naive(ss.numel());
  const int W = x.shape().w;
  // where x resized by s lies on x, and x so resized
  auto at_scale = [&](double s, Geometry* at) { return s == 1.0 ? x : resized(x, s, at); };
  Geometry first;  // the grid: the first member's plain pass at scale 1, else at the first scale
  {
    const double s = std::find(scales.begin(), scales.end(), 1.0) != scales.end() ? 1.0 : scales[0];
    Geometry at;
    const Tensor xs = at_scale(s, &at);
    first = compose(at, run_geo(members[0], xs, {"scores"}).scores);
  }
  for (size_t k = 0; k < members.size(); ++k)
    for (size_t j = 0; j < scales.size(); ++j) {
      Geometry at;
      const Tensor xs = at_scale(scales[j], &at);
      Run plain = run_geo(members[k], xs, {"full", "scores"});
      const Geometry pg = compose(at, plain.scores);
      add_softmax(scales[j] == 1.0 ? to_ref(plain.out["full"].view())
                                   : onto(to_ref(plain.out["scores"].view()), pg, Geometry{}, fs.h, fs.w),
                  pf);
      const Ref sp = onto(to_ref(plain.out["scores"].view()), pg, first, ss.h, ss.w);
      add_softmax(sp, ps);
      add_softmax(sp, naive);
      if (!mirror) continue;
      Run mir = run_geo(members[k], flipped(xs), {"full", "scores"});
      const Tensor back = flipped(mir.out["scores"]);
      Geometry g = compose(at, mir.scores);  // mirrored about the image's middle
      g.offset_x = (W - 1) - g.offset_x - g.stride_x * (back.shape().w - 1);
      add_softmax(scales[j] == 1.0 ? to_ref(flipped(mir.out["full"]).view())
                                   : onto(to_ref(back.view()), g, Geometry{}, fs.h, fs.w),
                  pf);
      add_softmax(onto(to_ref(back.view()), g, first, ss.h, ss.w), ps);
      if (back.shape() == ss) add_softmax(to_ref(back.view()), naive);
    }
  const double passes = double(members.size() * (mirror ? 2 : 1) * scales.size());
  Ref want(ss), want_naive(ss);
  for (size_t i = 0; i < ps.size(); ++i) {
    want.v[i] = std::log(ps[i] / passes);
    want_naive.v[i] = std::log(naive[i] / passes);
  }
  EXPECT_LT(rel_error(got["scores"].view(), want), 1e-5) << "scores";
  // labels: the argmax of the summed probabilities, where it is clear
  const size_t plane = fs.plane();
  size_t compared = 0, differ = 0;
  for (int n = 0; n < fs.n; ++n)
    for (size_t i = 0; i < plane; ++i) {
      int best = 0;
      double b1 = -1, b2 = -1;
      for (int c = 0; c < fs.c; ++c) {
        const double v = pf[(size_t(n) * fs.c + c) * plane + i];
        if (v > b1) b2 = b1, b1 = v, best = c;
        else if (v > b2) b2 = v;
      }
      if (b1 - b2 <= 1e-5) continue;
      ++compared;
      differ += int(got["labels_full"][size_t(n) * plane + i]) != best;
    }
  EXPECT_EQ(differ, 0u) << "of " << compared << " pixels";
  EXPECT_GT(compared, fs.numel() / size_t(fs.c) * 9 / 10) << "too few clear pixels: the check says little";
  return rel_error(got["scores"].view(), want_naive);
}

}  // namespace

TEST(Combine, MirroredNetworksMatchTheirPassesAveraged) {
  // The multiscale net's score map (same-padded, stride 4) is symmetric about the image's middle
  // where the width is a multiple of 4 (80): the mirrored pass's map flipped back lies where the
  // plain pass's does and the resampling copies it. At 79 it lies aside, so placing it where the
  // plain one lies would be wrong. The reference net's (valid convolutions, floored pooling) lies
  // aside at both widths.
  for (int w : {79, 80}) {
    const Tensor x = random_tensor(Shape(2, 3, 67, w), 3, 0.f, 1.f);
    for (const char* net : {"reference", "multiscale"}) {
      SCOPED_TRACE(std::string(net) + " width " + std::to_string(w));
      const double naive = check_against_members({make_random_model(net, 5, 11)}, true, x);
      if (std::string(net) == "multiscale" && w % 4 == 0)
        EXPECT_LT(naive, 1e-5);
      else
        EXPECT_GT(naive, 1e-3) << "the mirrored score map lies aside: the naive reference should differ";
    }
  }
}

TEST(Combine, EnsemblesPlainAndMirrored) {
  const Tensor x = random_tensor(Shape(2, 3, 65, 77), 4, 0.f, 1.f);
  const std::vector<Model> two = {make_random_model("multiscale", 5, 11), make_random_model("multiscale", 5, 12)};
  check_against_members(two, false, x);
  check_against_members(two, true, x);
  // Members of two architectures: the reference net's score map (valid convolutions) has its own
  // grid, resampled onto the multiscale net's.
  const std::vector<Model> mixed = {two[0], make_random_model("reference", 5, 13)};
  check_against_members(mixed, true, x);
  // An ensemble changes the labels (else the checks above could pass with one member's).
  auto a = run(two[0], x, {"labels_full"}), e = run(combine_models(two, false), x, {"labels_full"});
  size_t changed = 0;
  for (size_t i = 0; i < a["labels_full"].numel(); ++i) changed += a["labels_full"][i] != e["labels_full"][i];
  EXPECT_GT(changed, 0u);
}

TEST(Combine, ScaledPassesMatchTheMembersOnResizedImages) {
  // Scales below and above 1, one that divides no size evenly (0.7 of 67 x 79), and scales
  // without 1 (the grid is then the first scale's); mirrored and not; the multiscale net and an
  // ensemble with the reference net (another grid at every scale).
  const Tensor x = random_tensor(Shape(2, 3, 67, 79), 7, 0.f, 1.f);
  const Model ms = make_random_model("multiscale", 5, 11), ref = make_random_model("reference", 5, 13);
  for (const auto& scales : std::vector<std::vector<double>>{{0.5, 1}, {0.7, 1, 1.25}, {0.75}, {1.3, 0.6}}) {
    std::string list;
    for (double s : scales) list += std::to_string(s) + " ";
    SCOPED_TRACE("scales " + list);
    check_against_members({ms}, false, x, scales);
    check_against_members({ms}, true, x, scales);
  }
  // (the reference net's valid convolutions need 0.8 of a larger image)
  check_against_members({ms, ref}, true, random_tensor(Shape(2, 3, 97, 103), 8, 0.f, 1.f), {0.8, 1});
  // Scaling changes the labels (else the checks above could pass with the plain pass's).
  auto a = run(ms, x, {"labels_full"}), e = run(combine_models({ms}, false, {0.5, 1}), x, {"labels_full"});
  size_t changed = 0;
  for (size_t i = 0; i < a["labels_full"].numel(); ++i) changed += a["labels_full"][i] != e["labels_full"][i];
  EXPECT_GT(changed, 0u);
}

TEST(Combine, MirroredLabelsAreSymmetric) {
  // The mirrored labelling averages a pass on the image and one on its mirror; on the mirror it
  // takes the same two passes the other way round: its labels are the labels' mirror exactly.
  // The plain labels are not (so the check can fail), and mirroring changes some labels.
  const Model m = make_random_model("multiscale", 5, 11), mm = combine_models({m}, true);
  const Tensor x = random_tensor(Shape(2, 3, 41, 57), 5, 0.f, 1.f);
  auto l = run(mm, x, {"labels_full"})["labels_full"], lm = run(mm, flipped(x), {"labels_full"})["labels_full"];
  auto p = run(m, x, {"labels_full"})["labels_full"], pm = run(m, flipped(x), {"labels_full"})["labels_full"];
  const Tensor lmb = flipped(lm), pmb = flipped(pm);
  size_t asym = 0, asym_plain = 0, changed = 0;
  for (size_t i = 0; i < l.numel(); ++i) {
    asym += l[i] != lmb[i];
    asym_plain += p[i] != pmb[i];
    changed += l[i] != p[i];
  }
  EXPECT_EQ(asym, 0u);
  EXPECT_GT(asym_plain, 0u);
  EXPECT_GT(changed, 0u);
}

TEST(Combine, FileRoundTripAndSharedParameters) {
  const std::vector<Model> two = {make_random_model("reference", 5, 11), make_random_model("reference", 5, 12)};
  const Model mirrored = combine_models({two[0]}, true), ens = combine_models(two, true);
  // One member keeps its parameter groups: both passes read the same tensors.
  EXPECT_EQ(mirrored.params.size(), two[0].params.size());
  for (const auto& [key, t] : two[0].params) EXPECT_TRUE(mirrored.params.count(key)) << key;
  EXPECT_EQ(ens.params.size(), 2 * two[0].params.size());
  EXPECT_TRUE(ens.params.count("net1_" + two[1].params.begin()->first));
  const std::string path = ::testing::TempDir() + "/scenelab_combined.h5";
  write_model(path, ens);
  const Model back = read_model(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.graph.to_text(), ens.graph.to_text());
  const Tensor x = random_tensor(Shape(1, 3, 63, 75), 6, 0.f, 1.f);
  auto a = run(ens, x, {"scores", "labels_full"}), b = run(back, x, {"scores", "labels_full"});
  for (const char* node : {"scores", "labels_full"})
    for (size_t i = 0; i < a[node].numel(); ++i) ASSERT_EQ(a[node][i], b[node][i]) << node << " " << i;
  // Combining a member alone and unmirrored gives it back.
  EXPECT_EQ(combine_models({two[0]}, false).graph.to_text(), two[0].graph.to_text());
}

TEST(Combine, ErrorsNameTheModelAndWhatIsWrong) {
  auto fails = [](const std::vector<Model>& ms, bool mirror, const std::string& want,
                  const std::vector<double>& scales = {1.0}) {
    try {
      combine_models(ms, mirror, scales);
      ADD_FAILURE() << "no error; expected one containing '" << want << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  Model a = make_random_model("reference", 5, 1), b = make_random_model("reference", 6, 2);
  a.name = "alpha";
  b.name = "beta";
  fails({a, b}, false, "model 2 ('beta') has other classes than model 1 ('alpha')");
  Model no_labels = random_model_from_text(
      "input image channels=3\nscores = conv2d(image) out=3 k=1\nfull = upsample(scores, image)\noutput scores\n", 3);
  no_labels.name = "bare";
  fails({no_labels}, true, "model 1 ('bare') has no node 'labels_full'");
  Model other = random_model_from_text(
      "input image channels=3\nscores = conv2d(image) out=3 k=1\nfull = upsample(scores, image)\n"
      "labels_full = argmax(scores)\noutput labels_full\n", 3);
  other.name = "odd";
  fails({other}, true, "its labels_full is not argmax(full)");
  // alone and not mirrored, any model comes back as it is (label_image's own checks apply)
  EXPECT_EQ(combine_models({other}, false).graph.to_text(), other.graph.to_text());
  fails(std::vector<Model>(17, a), true, "17 models mirrored make 34 passes a frame; at most 32");
  fails(std::vector<Model>(3, a), true, "3 models mirrored at 6 scales make 36 passes a frame; at most 32",
        {0.5, 0.75, 1, 1.25, 1.5, 2});
  fails({}, true, "no models");
  // the files' reader: no list, or an empty name in it
  for (const auto& [paths, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "no model files given"}, {{""}, "an empty model file name among 1 given"}}) {
    try {
      read_combined(paths, false);
      ADD_FAILURE() << "no error; expected '" << want << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

// The shipped accurate files are what make_model --combine --mirror --scales ... --refine[=S,R] makes of
// the shipped models today (weights/MODELS.md at fb0dc9a, "Test-time scaling", "Edge-aware refinement", "The
// recipe and copy-paste as one accurate mode", "The accurate file's refinement, chosen again": the
// multiscale file at 40,0.1, the reference file at --refine's default): the same graph, parameters
// bit for bit, classes, palette and detection settings; so they cannot go stale when a model is
// retrained.
TEST(Combine, ShippedAccurateFilesAreTheShippedModelsCombined) {
  struct Shipped {
    std::vector<const char*> bases;
    const char* accurate;
    std::vector<double> scales;
    Refinement refine;
  };
  const std::string dir = SCENELAB_SOURCE_DIR "/weights/";
  for (const Shipped& s : {Shipped{{"camvid-multiscale.h5", "camvid-multiscale-paste.h5"}, "camvid-multiscale-accurate.h5",
                                   {0.5, 0.75, 1, 1.25}, Refinement{40, 0.1, 3}},
                           Shipped{{"camvid-reference.h5"}, "camvid-reference-accurate.h5", {0.5, 1},
                                   kDefaultRefinement}}) {
    std::vector<Model> bases;
    for (const char* b : s.bases) {
      if (!std::filesystem::exists(dir + b)) GTEST_SKIP() << "shipped model absent: " << b;
      bases.push_back(read_model(dir + b));
    }
    if (!std::filesystem::exists(dir + s.accurate)) GTEST_SKIP() << "shipped model absent: " << s.accurate;
    SCOPED_TRACE(s.accurate);
    const Model want = refine_model(combine_models(bases, true, s.scales), s.refine),
                got = read_model(dir + s.accurate);
    EXPECT_EQ(got.graph.to_text(), want.graph.to_text());
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.class_names, want.class_names);
    EXPECT_EQ(got.palette, want.palette);
    EXPECT_EQ(got.detect, want.detect);
    ASSERT_EQ(got.params.size(), want.params.size());
    for (const auto& [key, t] : want.params) {
      ASSERT_TRUE(got.params.count(key)) << key;
      const Tensor& g = got.params.at(key);
      ASSERT_EQ(g.shape(), t.shape()) << key;
      for (size_t i = 0; i < t.numel(); ++i) ASSERT_EQ(g[i], t[i]) << key << " " << i;
    }
  }
}

// refine_model: the refined graph's `full` is the refine layer's float64 definition applied to the
// unrefined model's own `full` (fetched from the same graph, node full_unrefined) and the image,
// within 2e-5; its labels that argmax where the two best classes are 1e-4 apart; `scores` (what the
// detection head reads) as the unrefined model's, bit for bit. A plain network and a mirrored one at
// two scales, batch 2, odd sizes; refinement changes labels; off gives the model back; errors.
TEST(Combine, RefinedModelsMatchTheLayerOnTheirFullScores) {
  const Tensor x = random_tensor(Shape(2, 3, 61, 75), 9, 0.f, 1.f);
  const Model ms = make_random_model("multiscale", 5, 11);
  const Refinement r{12, 0.3, 2};
  for (const Model& base : {ms, combine_models({ms}, true, {0.5, 1})}) {
    SCOPED_TRACE(base.name);
    const Model refined = refine_model(base, r);
    EXPECT_EQ(refined.name, "refined 12,0.3,2(" + base.name + ")");
    EXPECT_EQ(refined.graph.find("full")->type, "refine");
    auto got = run(refined, x, {"full", "full_unrefined", "labels_full", "scores"});
    auto plain = run(base, x, {"scores", "labels_full"});
    const Ref want = ref_refine(to_ref(got["full_unrefined"].view()), to_ref(x.view()), r.sigma_s, r.sigma_r, r.iterations);
    double err = 0;
    for (size_t i = 0; i < want.v.size(); ++i) err = std::max(err, std::abs(double(got["full"][i]) - want.v[i]));
    EXPECT_LT(err, 2e-5);
    const Shape s = got["full"].shape();
    size_t clear = 0, changed = 0;
    for (int n = 0; n < s.n; ++n)
      for (size_t i = 0; i < s.plane(); ++i) {
        int best = 0;
        double top = -1e300, second = -1e300;
        for (int c = 0; c < s.c; ++c) {
          const double v = std::exp(want.at(n, c, int(i / s.w), int(i % s.w)));
          if (v > top) second = top, top = v, best = c;
          else if (v > second) second = v;
        }
        const size_t at = size_t(n) * s.plane() + i;
        changed += got["labels_full"][at] != plain["labels_full"][at];
        if (top - second < 1e-4) continue;
        ++clear;
        ASSERT_EQ(int(got["labels_full"][at]), best) << "frame " << n << " pixel " << i;
      }
    EXPECT_GT(clear, size_t(s.n) * s.plane() * 9 / 10);
    EXPECT_GT(changed, 0u) << "refinement changed no label";
    ASSERT_EQ(got["scores"].numel(), plain["scores"].numel());
    for (size_t i = 0; i < plain["scores"].numel(); ++i) ASSERT_EQ(got["scores"][i], plain["scores"][i]) << i;
  }
  // The library's defaults (include/scenelab/scenelab.h, which cannot name the engine's) are these.
  const api::ModelOptions defaults;
  EXPECT_EQ(defaults.refine_sigma_s, kDefaultRefinement.sigma_s);
  EXPECT_EQ(defaults.refine_sigma_r, kDefaultRefinement.sigma_r);
  EXPECT_EQ(defaults.refine_iterations, kDefaultRefinement.iterations);
  EXPECT_FALSE(defaults.refine);
  // Off: the model as it is. Twice, or settings out of the layer's ranges: errors naming them.
  EXPECT_EQ(refine_model(ms, Refinement{}).graph.to_text(), ms.graph.to_text());
  const Model once = refine_model(ms, kDefaultRefinement);
  EXPECT_EQ(once.graph.find("full")->attrs.get_str("sigma_s"), "40");
  for (const auto& [model, settings, want] :
       {std::tuple{once, kDefaultRefinement, std::string("refined already")},
        std::tuple{ms, Refinement{10, -1, 3}, std::string("sigma_r must be in")},
        std::tuple{ms, Refinement{10, 0.2, 9}, std::string("iterations must be 1-8")}}) {
    try {
      refine_model(model, settings);
      ADD_FAILURE() << "no error; expected '" << want << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  // Through a file and read_combined, the same graph.
  const std::string path = ::testing::TempDir() + "/scenelab_refined.h5";
  write_model(path, ms);
  EXPECT_EQ(read_combined({path}, true, {1}, r).graph.to_text(),
            refine_model(combine_models({ms}, true), r).graph.to_text());
  std::filesystem::remove(path);
}

// Numbers as the graph text and the tools write them: the shortest that reads back, no exponent
// where a plain number is as short.
TEST(Combine, ShortestText) {
  EXPECT_EQ(shortest_text(40), "40");
  EXPECT_EQ(shortest_text(0.75), "0.75");
  EXPECT_EQ(shortest_text(0.1), "0.1");
  EXPECT_EQ(shortest_text(1200), "1200");
  EXPECT_EQ(shortest_text(1e-5), "1e-05");
  EXPECT_EQ(shortest_text(0), "0");
  EXPECT_EQ(std::strtod(shortest_text(1.0 / 3).c_str(), nullptr), 1.0 / 3);
}
