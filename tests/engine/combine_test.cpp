// engine/combine.h: test-time mirroring and ensembles as graphs. The combined graph's outputs
// against float64 references computed from each member run alone (its `full` and `scores` on the
// image and on its mirror, flipped back on the host): labels equal wherever the reference's two
// best classes are more than 1e-5 apart in summed probability, `scores` (log of the mean
// probability) within 1e-5 relative error; random paper networks, batch 2, odd sizes. Then the
// mirrored labelling's symmetry (the labels of the mirror are the mirror of the labels, bit for
// bit), the file round trip, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/combine.h"
#include "engine/error.h"
#include "engine/graph.h"
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

std::map<std::string, Tensor> run(const Model& m, const Tensor& x, const std::vector<std::string>& nodes) {
  CpuBackend cpu(2);
  Graph g(m);
  PlanIO io;
  io.keep = nodes;
  g.plan(x.shape().n, x.shape().h, x.shape().w, cpu, io);
  g.run(x.view());
  std::map<std::string, Tensor> out;
  for (const auto& n : nodes) out[n] = g.fetch(n);
  return out;
}

// Softmax over channels in float64, added into `sum` (n x c x plane).
void add_softmax(const Tensor& s, std::vector<double>& sum) {
  const Shape& sh = s.shape();
  const size_t plane = sh.plane();
  for (int n = 0; n < sh.n; ++n)
    for (size_t i = 0; i < plane; ++i) {
      double m = -1e300, z = 0;
      for (int c = 0; c < sh.c; ++c) m = std::max(m, double(s[(size_t(n) * sh.c + c) * plane + i]));
      for (int c = 0; c < sh.c; ++c) z += std::exp(double(s[(size_t(n) * sh.c + c) * plane + i]) - m);
      for (int c = 0; c < sh.c; ++c)
        sum[(size_t(n) * sh.c + c) * plane + i] += std::exp(double(s[(size_t(n) * sh.c + c) * plane + i]) - m) / z;
    }
}

// The combination of `members` (mirrored or not) checked against the members run alone; `scores`
// where the members' score maps share a grid (one architecture), else only its shape.
void check_against_members(const std::vector<Model>& members, bool mirror, const Tensor& x, bool same_grid = true) {
  const Model combined = combine_models(members, mirror);
  auto got = run(combined, x, {"full", "scores", "labels_full"});
  const Shape fs = got["full"].shape(), ss = got["scores"].shape();
  std::vector<double> pf(fs.numel()), ps(ss.numel());
  for (const Model& m : members) {
    auto plain = run(m, x, {"full", "scores"});
    add_softmax(plain["full"], pf);
    if (same_grid) add_softmax(plain["scores"], ps);
    if (!mirror) continue;
    auto mir = run(m, flipped(x), {"full", "scores"});
    add_softmax(flipped(mir["full"]), pf);
    if (same_grid) add_softmax(flipped(mir["scores"]), ps);
  }
  const double passes = double(members.size() * (mirror ? 2 : 1));
  Ref want(ss);
  for (size_t i = 0; i < ps.size(); ++i) want.v[i] = std::log(ps[i] / passes);
  if (same_grid)
    EXPECT_LT(rel_error(got["scores"].view(), want), 1e-5) << "scores";
  else
    EXPECT_EQ(ss, run(members[0], x, {"scores"})["scores"].shape());
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
}

}  // namespace

TEST(Combine, MirroredNetworksMatchTheirPassesAveraged) {
  const Tensor x = random_tensor(Shape(2, 3, 67, 79), 3, 0.f, 1.f);
  for (const char* net : {"reference", "multiscale"}) {
    SCOPED_TRACE(net);
    check_against_members({make_random_model(net, 5, 11)}, true, x);
  }
}

TEST(Combine, EnsemblesPlainAndMirrored) {
  const Tensor x = random_tensor(Shape(2, 3, 65, 77), 4, 0.f, 1.f);
  const std::vector<Model> two = {make_random_model("multiscale", 5, 11), make_random_model("multiscale", 5, 12)};
  check_against_members(two, false, x);
  check_against_members(two, true, x);
  // Members of two architectures: the reference net's score map (valid convolutions) is smaller.
  const std::vector<Model> mixed = {two[0], make_random_model("reference", 5, 13)};
  check_against_members(mixed, true, x, false);
  // An ensemble changes the labels (else the checks above could pass with one member's).
  auto a = run(two[0], x, {"labels_full"}), e = run(combine_models(two, false), x, {"labels_full"});
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
  auto fails = [](const std::vector<Model>& ms, bool mirror, const std::string& want) {
    try {
      combine_models(ms, mirror);
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
  fails(std::vector<Model>(9, a), true, "9 models, mirrored, make 18 passes a frame; at most 16");
  fails({}, true, "no models");
}
