// A sliding-window detector over an image pyramid (fastHOG; Dalal and Triggs): a model whose graph
// scores every window position of its input (e.g. hog_gradient -> hog_blocks -> linear_window,
// weights/hog-people.h5) run at every level of a pyramid of the image (each level 1/scale of the
// one before, as many as hold a window, like OpenCV's detectMultiScale), windows scoring at least
// the threshold kept as boxes in image pixels, then fused.
//
// Each level is a Graph planned once per image size, reading the image's 8-bit pixels and
// resizing them on the backend (bilinear, OpenCV's fixed point: engine/resize_linear.h); on a GPU
// the image goes up once and every level reads it there. The engine names no layer here: the
// window and its stride come from the model (the `pyramid` attribute and the score node's
// geometry).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/model.h"
#include "engine/plans.h"
#include "nms/nms.h"

namespace scenelab {
namespace nms {
class GpuWindowCandidates;
}

enum class Fusion {
  None,     // every hit
  Greedy,   // exact greedy NMS by IoU
  Oro,      // Oro et al.'s map/reduce rule (Fast NMS) with the over-candidate criterion
  Group,    // OpenCV's groupRectangles (min_group neighbours, eps 0.2), then clipped to the image
};

struct PyramidOptions {
  int window_w = 64, window_h = 128;  // the window the model scores, pixels
  double scale = 1.05;                // between levels
  int levels = 64;                    // at most
  float threshold = 0.f;              // a window is a hit at score >= threshold
  Fusion fusion = Fusion::Greedy;
  float overlap = 0.3f;  // Greedy / Oro: suppress beyond this overlap
  int min_group = 2;     // Group: groups of more than this many hits
  float group_eps = 0.2f;
  // GPU: hits kept on the device for fusion there; an image with more is fused on the host.
  int candidates = 4096;
};

// "window=64x128 scale=1.05 levels=64 threshold=0 fusion=greedy overlap=0.3 group=2 eps=0.2
// candidates=4096" (any subset, any order) into `o`; unknown keys and bad values throw naming them
// and leave `o` as it was. Ranges (model files are untrusted; each level is a planned graph):
// window sides [1, kMaxPyramidWindow], scale (1, 16], levels [1, kMaxPyramidLevels], threshold
// [-1e30, 1e30], overlap [0, 1], group [0, 2^20], eps (0, 16], candidates [1, kMaxPyramidCandidates].
constexpr int kMaxPyramidWindow = 16384;
constexpr int kMaxPyramidLevels = 256;
constexpr int kMaxPyramidCandidates = 1 << 24;
void parse_pyramid_spec(const std::string& spec, PyramidOptions& o);
Fusion parse_fusion(const std::string& name);  // none | greedy | oro | group
const char* fusion_name(Fusion f);

struct PyramidHit {
  nms::Detection det;  // box in image pixels (integer rectangles, as OpenCV reports them)
  int level;           // 0 = the image itself
};

struct PyramidTimes {
  double run_ms = 0;   // resizing, the graph at every level and, on the GPU, the hits' fusion there
  double fuse_ms = 0;  // what the host did after (hit collection and fusion, or clipping)
  int levels = 0;
  // From the image uploaded to the fused boxes in host memory (on the GPU, by its clock; with
  // more hits than the device keeps, to the scores computed); on the CPU, from the image to the
  // scores.
  double device_ms = 0;
  int hits = 0;            // windows scoring at least the threshold, every level
  bool on_device = false;  // the hits compacted (and fused, but for group) on the GPU
};

class PyramidDetector {
 public:
  // Options: the model's `pyramid` attribute (it must have one), then `overrides` (same syntax).
  PyramidDetector(const Model& model, const Backend& backend, const std::string& overrides = "");
  ~PyramidDetector();
  PyramidDetector(const PyramidDetector&) = delete;
  PyramidDetector& operator=(const PyramidDetector&) = delete;

  const PyramidOptions& options() const { return opt_; }
  // Scales of the levels for an image of this size (first 1; empty never: an image smaller than
  // the window has the one level, with no window in it).
  std::vector<double> level_scales(int h, int w) const;

  // Detections in one image of interleaved 8-bit pixels (h x w x channels; 1: grey, 3: RGB,
  // 4: RGBA, alpha ignored), fused by the options' rule, best first for greedy/oro.
  std::vector<nms::Detection> detect(const uint8_t* pixels, int h, int w, int channels,
                                     PyramidTimes* times = nullptr);
  // Every hit of every level before fusion (level order, then row-major).
  std::vector<PyramidHit> hits(const uint8_t* pixels, int h, int w, int channels,
                               PyramidTimes* times = nullptr);
  // Per-layer timing (Graph::set_profiling) at every level; stage_ms(): the last run's
  // milliseconds per layer type summed over the levels.
  void set_profiling(bool on);
  std::vector<std::pair<std::string, double>> stage_ms() const;
  // Fusion of hits by the options' rule, boxes clipped to a w x h image.
  std::vector<nms::Detection> fuse(const std::vector<PyramidHit>& hits, int h, int w) const;

 private:
  struct Level;
  void plan_for(int h, int w);
  // Every level's scores; on the GPU also the hits' compaction and fusion by `rule` (None: every
  // hit), all enqueued.
  void run_levels(const uint8_t* pixels, int h, int w, int channels, Fusion rule);
  nms::Options nms_options() const;
  // Waits for the GPU's compaction and fusion; false where there is none (the CPU) or it kept
  // too few (more hits than its capacity).
  bool fuse_on_device(std::vector<PyramidHit>& out);
  std::vector<PyramidHit> hits_on_host();  // every level's scores fetched, hits collected
  PyramidTimes times_of(double run_ms, double fuse_ms, bool on_device) const;  // of the last run
  static std::vector<nms::Detection> clip(const std::vector<nms::Detection>& d, int h, int w);
  std::unique_ptr<nms::GpuWindowCandidates> gpu_;
  int last_hits_ = 0;
  BackendMemory mark_uploaded_, mark_done_;  // Backend marks around the device's part
  BackendMemory replays_[3];                 // the recorded pyramid, per device fusion rule
  bool warm_ = false;                        // it ran once since planned
  bool capture_failed_ = false;              // could not be recorded: runs as it comes
  double device_ms_ = 0;
  const Model& model_;
  const Backend& backend_;
  Plans plans_;  // the levels' graphs at the planned image size
  PyramidOptions opt_;
  std::string score_node_;
  int planned_h_ = 0, planned_w_ = 0;
  bool profiling_ = false;
  std::vector<std::unique_ptr<Level>> levels_;
  std::vector<uint8_t> rgb_;  // the image as 3 channels when it comes with 1 or 4
};

}  // namespace scenelab
