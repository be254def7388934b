// Detection ground truth and scores on hand-made data: connected components (8-connected, minimum
// area), AP by hand (a perfect detector, a wrong one, one half right, duplicates), and the model
// file's per-class detection settings round trip.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/detection_eval.h"
#include "core/error.h"
#include "job/score_map_head.h"
#include "weights/default_model.h"
#include "weights/model_file.h"

using namespace scenelab;

TEST(DetectionEval, ComponentsAreEightConnectedWithAMinimumArea) {
  // 0: background; 1: an L of 5 px and a diagonal neighbour (one component of 6), a far 2x2 (4 px).
  const int w = 8, h = 5;
  std::vector<uint8_t> l = {1, 0, 0, 0, 0, 0, 0, 0,  //
                            1, 0, 0, 0, 0, 0, 1, 1,  //
                            1, 1, 1, 0, 0, 0, 1, 1,  //
                            0, 0, 0, 1, 0, 0, 0, 0,  //
                            0, 0, 0, 0, 0, 0, 0, 2};
  auto c = label_components(l.data(), w, h, 1, 1);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].area, 6);
  EXPECT_FLOAT_EQ(c[0].box.x1, 0);
  EXPECT_FLOAT_EQ(c[0].box.y1, 0);
  EXPECT_FLOAT_EQ(c[0].box.x2, 4);
  EXPECT_FLOAT_EQ(c[0].box.y2, 4);
  EXPECT_EQ(c[1].area, 4);
  EXPECT_EQ(label_components(l.data(), w, h, 1, 5).size(), 1u);
  EXPECT_EQ(label_components(l.data(), w, h, 2, 1).size(), 1u);
  EXPECT_TRUE(label_components(l.data(), w, h, 3, 1).empty());
}

TEST(DetectionEval, AveragePrecisionByHand) {
  const std::vector<nms::Box> truth = {{0, 0, 10, 10}, {20, 20, 30, 30}};
  {  // perfect: AP 1 at every threshold
    DetectionEvaluator e;
    e.add(truth, {{{0, 0, 10, 10}, 0.9f}, {{20, 20, 30, 30}, 0.8f}});
    const auto r = e.result();
    EXPECT_DOUBLE_EQ(r.ap50, 1.0);
    EXPECT_DOUBLE_EQ(r.ap, 1.0);
    EXPECT_DOUBLE_EQ(r.recall50, 1.0);
  }
  {  // a miss ranked first, then one hit: precision 1/2 up to recall 1/2
    DetectionEvaluator e;
    e.add(truth, {{{50, 50, 60, 60}, 0.9f}, {{0, 0, 10, 10}, 0.8f}});
    const auto r = e.result();
    EXPECT_NEAR(r.ap50, 51.0 * 0.5 / 101.0, 1e-12);  // recall points 0..0.5 at precision 1/2
    EXPECT_NEAR(r.ap50_11pt, 6.0 * 0.5 / 11.0, 1e-12);
    EXPECT_DOUBLE_EQ(r.recall50, 0.5);
  }
  {  // a duplicate of a found object is a false positive; IoU 0.6 counts at 0.5 but not at 0.75
    DetectionEvaluator e;
    e.add(truth, {{{0, 0, 10, 10}, 0.9f}, {{0, 0, 10, 10}, 0.8f}, {{20, 20, 30, 36.67f}, 0.7f}});
    const auto r = e.result();
    EXPECT_DOUBLE_EQ(r.recall50, 1.0);
    EXPECT_LT(r.ap50, 1.0);
    EXPECT_LT(r.ap75, r.ap50);
    EXPECT_EQ(r.detections, 3u);
    EXPECT_EQ(r.truth, 2u);
  }
  {  // nothing to find and nothing found: AP 0, no crash
    DetectionEvaluator e;
    e.add({}, {});
    EXPECT_DOUBLE_EQ(e.result().ap50, 0.0);
  }
}

TEST(DetectionEval, ModelFileCarriesPerClassSettings) {
  const auto path = (std::filesystem::path(::testing::TempDir()) / "scenelab_detect_attr.h5").string();
  Model m = make_random_model("reference", 3, 1);
  m.detect[m.class_names[1]] = "threshold=0.45 aspects=0.4,0.7";
  write_model(path, m);
  const Model back = read_model(path);
  ASSERT_EQ(back.detect.size(), 1u);
  EXPECT_EQ(back.detect.at(m.class_names[1]), "threshold=0.45 aspects=0.4,0.7");
  // What label_image, the library and eval_detections slide: the defaults, then the file's.
  const nms::WindowHeadOptions set = head_settings(back, 1), plain = head_settings(back, 0);
  EXPECT_FLOAT_EQ(set.threshold, 0.45f);
  EXPECT_EQ(set.sizes, nms::WindowHeadOptions::sizes_from(nms::WindowHeadOptions::default_heights(), {0.4f, 0.7f}));
  EXPECT_FLOAT_EQ(plain.threshold, nms::WindowHeadOptions{}.threshold);
  EXPECT_EQ(plain.sizes, nms::WindowHeadOptions::default_sizes());
  m.detect.clear();
  m.detect["NoSuchClass"] = "threshold=0.5";
  write_model(path, m);
  EXPECT_THROW(read_model(path), Error);
  // A bad value or key is refused when the file loads, naming the file and the class.
  for (const char* bad : {"threshold=abc", "aspects=0.3,,1", "treshold=0.3"}) {
    m.detect.clear();
    m.detect[m.class_names[2]] = bad;
    write_model(path, m);
    try {
      read_model(path);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(path), std::string::npos) << w;
      EXPECT_NE(w.find("class '" + m.class_names[2] + "'"), std::string::npos) << w;
    }
  }
}
