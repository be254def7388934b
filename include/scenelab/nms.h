// Non-maximum suppression on the CPU (public API: scenelab/nms.h): the reference rules every GPU
// variant is tested against.
// Stands alone (no engine dependency).
//
// Conventions (documented once, used everywhere):
// - Boxes are continuous coordinates (x1, y1) top-left, (x2, y2) bottom-right; area (x2-x1)(y2-y1).
//   Options::pixel_inclusive adds the papers' "+1" (integer pixel boxes: width x2-x1+1).
//   Inverted boxes (x2 < x1 or y2 < y1) have zero area. A zero-area box overlaps nothing (0/0 := 0),
//   so it never suppresses and is never suppressed.
// - Overlap criteria: IoU = |a n b| / |a u b|; OverCandidate = |a n b| / |a| where a is the box
//   being tested for suppression (Oro et al. 2016: A(di n dj) / A(di)).
// - A box is suppressed when its overlap with a higher-ranked box is > threshold (as
//   torchvision.ops.nms).
// - Rank: higher score first; equal scores rank the lower input index first (deterministic).
// - Scores: NaN detections are dropped (never kept, never suppress); +Inf ranks first, -Inf last.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

namespace scenelab::nms {

struct Box {
  float x1, y1, x2, y2;
};

struct Detection {
  Box box;
  float score;
  int cls = 0;
};

enum class Criterion { IoU, OverCandidate };

struct Options {
  float threshold = 0.5f;
  Criterion criterion = Criterion::IoU;
  bool pixel_inclusive = false;
  float score_threshold = -std::numeric_limits<float>::infinity();  // drop scores below
  int max_outputs = -1;                                             // keep at most (-1: all)
  bool per_class = false;  // only boxes of the same class suppress each other
};

float area(const Box& b, bool pixel_inclusive = false);
// Overlap of `candidate` with `other` by the criterion (the candidate is the one tested).
float overlap(const Box& candidate, const Box& other, Criterion c, bool pixel_inclusive = false);

// Input indices in rank order, after dropping NaN scores and scores below score_threshold.
std::vector<int> rank_order(const std::vector<Detection>& d, const Options& o);

// Exact greedy NMS: indices kept, in rank order.
std::vector<int> greedy_nms(const std::vector<Detection>& d, const Options& o);

// Exact greedy NMS for many boxes: the same indices as greedy_nms, with each box tested only
// against the kept boxes it can overlap (boxes binned on a grid of cells about the median box's
// size; a box spanning many cells, or with coordinates a grid cannot index, against every kept
// box). Its cost grows with the kept neighbours of a box, not with all the kept boxes: a million
// boxes in seconds where greedy_nms takes hours. greedy_nms_auto picks the plain loop below 2048
// boxes and this above.
std::vector<int> greedy_nms_sparse(const std::vector<Detection>& d, const Options& o);
std::vector<int> greedy_nms_auto(const std::vector<Detection>& d, const Options& o);

// Greedy NMS of each image of a batch, on the CPU: boxes [batch][n][4] (x1, y1, x2, y2), scores
// [batch][n], classes [batch][n] (nullptr: one class; they count with o.per_class), valid
// [batch] (nullptr: all n; else image b's first valid[b] boxes count). Per image, its kept
// indices (within the image) in rank order: what greedy_nms_auto gives for that image alone. The
// images run side by side on `threads` threads (0: all hardware threads). No cap on the boxes in
// or kept.
std::vector<std::vector<int>> batched_greedy_nms(const float* boxes, const float* scores, const int64_t* classes,
                                                 const int64_t* valid, int batch, int n, const Options& o,
                                                 int threads = 0);

// "Fast NMS" (the rule of Oro et al.'s map/reduce): a box dies if ANY higher-ranked box overlaps
// it beyond the threshold, even one that is itself suppressed. Keeps a subset of greedy's boxes.
std::vector<int> fast_nms(const std::vector<Detection>& d, const Options& o);

// Cluster-NMS (Zheng et al. 2020): the Fast-NMS step iterated, each time only through the boxes
// still kept, until stable; equals greedy NMS. `iterations` receives the count.
std::vector<int> cluster_nms(const std::vector<Detection>& d, const Options& o,
                             int* iterations = nullptr);

// The same rules on the GPU, on device memory (a CUDA tensor's data), all on one GPU: boxes
// n x 4 floats, scores n floats, classes n int64 (nullptr: one class; they count with
// o.per_class). The kept indices, in rank order, go into `keep` (n int64 slots in device
// memory). Greedy: the bitmask kernel up to 8,192 boxes, the sparse exact greedy above 30,000
// (memory linear in n: a million boxes fit), and between them the one faster for the set's
// density (a sample's share of boxes no better box overlaps: many kept, sparse); Oro: the map/reduce (equals fast_nms); Cluster:
// Cluster-NMS (equals greedy). Ordered after the work queued on `stream` (a cudaStream_t; null:
// the legacy default stream); returns the count, so it waits for the GPU. Throws where the
// library was built without CUDA, or for pointers not in GPU memory.
enum class Method { Greedy, Oro, Cluster };
int nms_on_device(const float* boxes, const float* scores, const int64_t* classes, int n, const Options& o,
                  Method method, int64_t* keep, void* stream = nullptr);

// Greedy NMS of each image of a batch on the GPU, in one call: boxes [batch][n][4], scores
// [batch][n], classes [batch][n] (nullptr: one class; they count with o.per_class, and must lie in
// [0, 2^31 / batch)) in device memory; valid [batch] in host memory (nullptr: all n; else image
// b's first valid[b] boxes count). One greedy NMS over the whole batch, each image (and class) a
// group no other suppresses: the dense or the sparse path as nms_on_device chooses them for the
// boxes of all the images. Image b's kept indices (within the image), in rank order, go into keep[b * n ...]
// (batch x n int64 slots in device memory), o.max_outputs the cap of each image; returns the
// count kept of each image (so it waits for the GPU). Per image, what nms_on_device gives for
// that image alone. No cap on the boxes in or kept.
std::vector<int> batched_nms_on_device(const float* boxes, const float* scores, const int64_t* classes,
                                       const int64_t* valid, int batch, int n, const Options& o, int64_t* keep,
                                       void* stream = nullptr);

// Soft-NMS (Bodla et al. 2017): instead of removing, decays overlapping scores: linear
// s *= (1 - overlap) when overlap > threshold; gaussian s *= exp(-overlap^2 / sigma). Returns the
// detections with decayed scores, in selection order, dropping those below score_threshold.
enum class SoftKind { Linear, Gaussian };
std::vector<Detection> soft_nms(const std::vector<Detection>& d, const Options& o, SoftKind kind,
                                float sigma = 0.5f);

// Grouping of sliding-window hits as OpenCV's HOGDescriptor::groupRectangles does (for comparison
// with OpenCV's detectMultiScale; boxes are integer rectangles): hits whose four edges all lie
// within eps * (mean of the smaller width and height) of each other's are joined, transitively;
// each group of more than `min_group` hits gives its mean rectangle (rounded to integers) and its
// best score; a group's box lying inside another larger group's box (with eps slack) is dropped.
// min_group <= 0 returns the input unchanged. Groups come in the order of their first hit.
std::vector<Detection> group_rectangles(const std::vector<Detection>& d, int min_group, float eps = 0.2f);

// 1-D segments (temporal windows, e.g. speech): greedy NMS with the 1-D IoU/criterion.
struct Segment {
  float t1, t2, score;
  int cls = 0;
};
std::vector<int> greedy_nms_1d(const std::vector<Segment>& s, const Options& o);

}  // namespace scenelab::nms
