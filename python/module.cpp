// scenelab._scenelab: the Python module's native half, over the public C++ API
// (include/scenelab/scenelab.h). Arrays come in as nanobind ndarrays (numpy, or anything with
// DLPack or the buffer protocol) and are read where they lie; results are numpy arrays written
// in place by the engine. The GIL is released while the engine runs; one call at a time runs on
// a model (a mutex), so threads may share one. C++ errors become Python exceptions carrying the
// message (RuntimeError; ValueError for arguments this layer rejects).
// The Python half (python/scenelab/__init__.py) adds the friendly entry points.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenelab/nms.h"
#include "scenelab/scenelab.h"

namespace nb = nanobind;
using namespace nb::literals;
namespace api = scenelab::api;

namespace {

using Pixels = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;
template <typename T>
using Array = nb::ndarray<nb::numpy, T>;

// A numpy array of `count` elements, owned by Python, for the engine to write into.
template <typename T>
Array<T> new_array(std::initializer_list<size_t> shape) {
  size_t count = 1;
  for (size_t s : shape) count *= s;
  T* data = new T[count > 0 ? count : 1];
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return Array<T>(data, shape, owner);
}

std::string shape_text(const nb::ndarray<>& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// boxes (N, 4) and scores (N,) arrays from detections.
nb::tuple boxes_and_scores(const std::vector<scenelab::nms::Detection>& d) {
  Array<float> boxes = new_array<float>({d.size(), 4});
  Array<float> scores = new_array<float>({d.size()});
  for (size_t i = 0; i < d.size(); ++i) {
    const auto& b = d[i].box;
    float* row = boxes.data() + 4 * i;
    row[0] = b.x1, row[1] = b.y1, row[2] = b.x2, row[3] = b.y2;
    scores.data()[i] = d[i].score;
  }
  return nb::make_tuple(boxes, scores);
}

class PyModel {
 public:
  PyModel(const std::string& path, const std::string& device, const std::string& precision,
          int threads, bool mirror, const std::vector<std::string>& ensemble, const std::vector<double>& scales,
          const std::vector<double>& refine) {
    api::ModelOptions o;
    o.mirror = mirror;
    o.scales = scales;
    if (!refine.empty()) {  // sigma_s, sigma_r, iterations (checked by scenelab.Model)
      o.refine = true;
      o.refine_sigma_s = refine.at(0);
      o.refine_sigma_r = refine.at(1);
      o.refine_iterations = int(refine.at(2));
    }
    o.ensemble = ensemble;
    o.path = path;
    o.device = device;
    o.precision = precision;
    o.threads = threads;
    nb::gil_scoped_release release;
    labeler_ = std::make_unique<api::Labeler>(o);
  }

  // (H, W, 3) -> (H, W); (N, H, W, 3) -> (N, H, W).
  Array<uint8_t> label(const Pixels& rgb) {
    const bool batch = rgb.ndim() == 4;
    if ((rgb.ndim() != 3 && rgb.ndim() != 4) || rgb.shape(rgb.ndim() - 1) != 3)
      throw nb::value_error(("label: expected RGB pixels of shape (H, W, 3) or (N, H, W, 3), got " +
                             shape_text(nb::ndarray<>(rgb)))
                                .c_str());
    const size_t n = batch ? rgb.shape(0) : 1, h = rgb.shape(batch ? 1 : 0), w = rgb.shape(batch ? 2 : 1);
    if (n == 0 || h == 0 || w == 0)
      throw nb::value_error(("label: an empty image, shape " + shape_text(nb::ndarray<>(rgb))).c_str());
    Array<uint8_t> out = batch ? new_array<uint8_t>({n, h, w}) : new_array<uint8_t>({h, w});
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      labeler_->label(rgb.data(), int(n), int(h), int(w), out.data());
    }
    return out;
  }

  // The same on a CUDA device: `rgb` and `out` (its shape without the last axis) in the
  // labeller's GPU memory, the work ordered after `stream` and `stream` waiting for the labels.
  void label_cuda(const nb::ndarray<const uint8_t, nb::c_contig, nb::device::cuda>& rgb,
                  const nb::ndarray<uint8_t, nb::c_contig, nb::device::cuda>& out, uintptr_t stream) {
    const bool batch = rgb.ndim() == 4;
    if ((rgb.ndim() != 3 && rgb.ndim() != 4) || rgb.shape(rgb.ndim() - 1) != 3)
      throw nb::value_error(("label: expected RGB pixels of shape (H, W, 3) or (N, H, W, 3), got " +
                             shape_text(nb::ndarray<>(rgb)))
                                .c_str());
    bool same = out.ndim() == rgb.ndim() - 1 && out.device_id() == rgb.device_id();
    for (size_t i = 0; same && i < out.ndim(); ++i) same = out.shape(i) == rgb.shape(i);
    if (!same)
      throw nb::value_error(("label: the output " + shape_text(nb::ndarray<>(out)) + " on GPU " +
                             std::to_string(out.device_id()) + " does not match the pixels " +
                             shape_text(nb::ndarray<>(rgb)) + " on GPU " + std::to_string(rgb.device_id()))
                                .c_str());
    const size_t n = batch ? rgb.shape(0) : 1, h = rgb.shape(batch ? 1 : 0), w = rgb.shape(batch ? 2 : 1);
    if (n == 0 || h == 0 || w == 0)
      throw nb::value_error(("label: an empty image, shape " + shape_text(nb::ndarray<>(rgb))).c_str());
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    labeler_->label_device(rgb.data(), int(n), int(h), int(w), out.data(), reinterpret_cast<void*>(stream));
  }

  api::Image image_of(const Pixels& rgb, const char* what) {
    if (rgb.ndim() != 3 || rgb.shape(2) != 3)
      throw nb::value_error((std::string(what) + ": expected RGB pixels of shape (H, W, 3), got " +
                             shape_text(nb::ndarray<>(rgb)))
                                .c_str());
    api::Image img{int(rgb.shape(1)), int(rgb.shape(0)), 3, {}};
    img.pixels.assign(rgb.data(), rgb.data() + rgb.size());
    return img;
  }

  nb::tuple scores(const Pixels& rgb) {
    api::Image img = image_of(rgb, "scores");
    api::Scores s;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      s = labeler_->scores(img);
    }
    Array<float> out = new_array<float>({size_t(s.classes), size_t(s.height), size_t(s.width)});
    std::memcpy(out.data(), s.values.data(), s.values.size() * sizeof(float));
    nb::dict geometry;
    geometry["stride"] = nb::make_tuple(s.stride_y, s.stride_x);
    geometry["offset"] = nb::make_tuple(s.offset_y, s.offset_x);
    return nb::make_tuple(out, geometry);
  }

  nb::tuple detect(const Pixels& rgb, const std::string& cls) {
    api::Image img = image_of(rgb, "detect");
    std::vector<scenelab::nms::Detection> d;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      d = labeler_->detect(img, cls);
    }
    return boxes_and_scores(d);
  }

  nb::dict label_files(const std::vector<std::string>& inputs, const std::vector<std::string>& bases,
                       bool save_classes, bool save_labels, bool save_overlay, int batch, int io_threads,
                       const std::string& plan_cache) {
    if (inputs.size() != bases.size())
      throw nb::value_error(("label_files: " + std::to_string(inputs.size()) + " inputs but " +
                             std::to_string(bases.size()) + " output names")
                                .c_str());
    std::vector<api::FileJob> jobs(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) jobs[i] = {inputs[i], bases[i]};
    api::FileOptions fo;
    fo.save_classes = save_classes, fo.save_labels = save_labels, fo.save_overlay = save_overlay;
    fo.batch = batch, fo.io_threads = io_threads, fo.plan_cache = plan_cache;
    api::FileSummary s;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      s = labeler_->label_files(jobs, fo);
    }
    nb::dict out;
    out["images"] = s.images;
    nb::list failures;
    for (const auto& f : s.failures) failures.append(nb::make_tuple(f.input, f.error));
    out["failures"] = failures;
    out["histogram"] = s.histogram;
    out["seconds"] = s.seconds;
    out["device"] = s.device;
    return out;
  }

  std::vector<std::string> classes() const { return labeler_->classes(); }
  Array<uint8_t> palette() const {
    const auto& p = labeler_->palette();
    Array<uint8_t> out = new_array<uint8_t>({p.size(), 3});
    for (size_t i = 0; i < p.size(); ++i) std::memcpy(out.data() + 3 * i, p[i].data(), 3);
    return out;
  }
  std::string device() const { return labeler_->device(); }
  std::string path() const { return labeler_->model_path(); }

 private:
  std::unique_ptr<api::Labeler> labeler_;
  std::mutex mu_;
};


// The pyramid window detector (HOG pedestrians by default).
class PyWindowDetector {
 public:
  PyWindowDetector(const std::string& path, const std::string& device, int threads, const std::string& spec) {
    api::WindowDetectorOptions o;
    o.path = path, o.device = device, o.threads = threads, o.spec = spec;
    det_ = std::make_unique<api::WindowDetector>(o);
  }
  nb::tuple detect(const nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>& px) {
    const bool grey = px.ndim() == 2;
    if (!grey && !(px.ndim() == 3 && (px.shape(2) == 1 || px.shape(2) == 3 || px.shape(2) == 4)))
      throw nb::value_error(("detect: expected (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) uint8 pixels, got " +
                             shape_text(nb::ndarray<>(px)))
                                .c_str());
    const int h = int(px.shape(0)), w = int(px.shape(1)), c = grey ? 1 : int(px.shape(2));
    std::vector<scenelab::nms::Detection> d;
    {
      nb::gil_scoped_release release;
      d = det_->detect(px.data(), h, w, c);  // the detector serialises its own calls
    }
    return boxes_and_scores(d);
  }
  std::string class_name() const { return det_->class_name(); }
  std::string device() const { return det_->device(); }

 private:
  std::unique_ptr<api::WindowDetector> det_;
};

// The NMS options the Python arguments name (the criterion by its name).
scenelab::nms::Options rule_options(float threshold, const std::string& criterion, float score_threshold,
                                    int max_outputs, bool pixel_inclusive, bool per_class) {
  scenelab::nms::Options o;
  o.threshold = threshold;
  if (criterion == "iou") o.criterion = scenelab::nms::Criterion::IoU;
  else if (criterion == "over_candidate") o.criterion = scenelab::nms::Criterion::OverCandidate;
  else throw nb::value_error(("nms: criterion must be 'iou' or 'over_candidate', got '" + criterion + "'").c_str());
  o.score_threshold = score_threshold;
  o.max_outputs = max_outputs;
  o.pixel_inclusive = pixel_inclusive;
  o.per_class = per_class;
  return o;
}

// nms' arguments checked (boxes (N, 4), scores and classes (N,)) and its options; the method.
template <typename Boxes, typename Scores, typename Classes>
scenelab::nms::Options nms_options(const Boxes& boxes, const Scores& scores, const std::optional<Classes>& classes,
                                   float threshold, const std::string& method, const std::string& criterion,
                                   float score_threshold, int max_outputs, bool pixel_inclusive,
                                   scenelab::nms::Method* m) {
  if (boxes.ndim() != 2 || boxes.shape(1) != 4)
    throw nb::value_error(("nms: boxes must have shape (N, 4), got " + shape_text(nb::ndarray<>(boxes))).c_str());
  const size_t n = boxes.shape(0);
  if (scores.ndim() != 1 || scores.shape(0) != n)
    throw nb::value_error(("nms: scores must have shape (" + std::to_string(n) + ",), got " +
                           shape_text(nb::ndarray<>(scores)))
                              .c_str());
  if (classes && (classes->ndim() != 1 || classes->shape(0) != n))
    throw nb::value_error(("nms: classes must have shape (" + std::to_string(n) + ",), got " +
                           shape_text(nb::ndarray<>(*classes)))
                              .c_str());
  if (method == "greedy") *m = scenelab::nms::Method::Greedy;
  else if (method == "oro") *m = scenelab::nms::Method::Oro;
  else if (method == "cluster") *m = scenelab::nms::Method::Cluster;
  else throw nb::value_error(("nms: method must be 'greedy', 'oro' or 'cluster', got '" + method + "'").c_str());
  return rule_options(threshold, criterion, score_threshold, max_outputs, pixel_inclusive, classes.has_value());
}

// Indices kept, in rank order (as torchvision.ops.nms).
Array<int64_t> nms(const nb::ndarray<const float, nb::c_contig, nb::device::cpu>& boxes,
                   const nb::ndarray<const float, nb::c_contig, nb::device::cpu>& scores,
                   float threshold, const std::string& method, const std::string& criterion,
                   const std::optional<nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>>& classes,
                   float score_threshold, int max_outputs, bool pixel_inclusive) {
  scenelab::nms::Method m;
  const scenelab::nms::Options o = nms_options(boxes, scores, classes, threshold, method, criterion,
                                               score_threshold, max_outputs, pixel_inclusive, &m);
  const size_t n = boxes.shape(0);
  std::vector<scenelab::nms::Detection> d(n);
  for (size_t i = 0; i < n; ++i) {
    const float* b = boxes.data() + 4 * i;
    d[i] = {{b[0], b[1], b[2], b[3]}, scores.data()[i], classes ? int(classes->data()[i]) : 0};
  }
  std::vector<int> keep;
  {
    nb::gil_scoped_release release;
    if (m == scenelab::nms::Method::Greedy) keep = scenelab::nms::greedy_nms_auto(d, o);
    else if (m == scenelab::nms::Method::Oro) keep = scenelab::nms::fast_nms(d, o);
    else keep = scenelab::nms::cluster_nms(d, o);
  }
  Array<int64_t> out = new_array<int64_t>({keep.size()});
  for (size_t i = 0; i < keep.size(); ++i) out.data()[i] = keep[i];
  return out;
}

// A batched call's shapes checked (boxes (B, N, 4), scores (B, N), classes (B, N), valid (B,)
// with values in 0..N) and its options.
template <typename Boxes, typename Scores, typename Classes>
scenelab::nms::Options batched_options(const Boxes& boxes, const Scores& scores, const std::optional<Classes>& classes,
                                       const std::optional<nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>>& valid,
                                       float threshold, const std::string& criterion, float score_threshold,
                                       int max_outputs, bool pixel_inclusive) {
  if (boxes.ndim() != 3 || boxes.shape(2) != 4)
    throw nb::value_error(("nms: batched boxes must have shape (B, N, 4), got " + shape_text(nb::ndarray<>(boxes))).c_str());
  const size_t b = boxes.shape(0), n = boxes.shape(1);
  const std::string bn = "(" + std::to_string(b) + ", " + std::to_string(n) + ")";
  if (scores.ndim() != 2 || scores.shape(0) != b || scores.shape(1) != n)
    throw nb::value_error(("nms: scores must have shape " + bn + ", got " + shape_text(nb::ndarray<>(scores))).c_str());
  if (classes && (classes->ndim() != 2 || classes->shape(0) != b || classes->shape(1) != n))
    throw nb::value_error(("nms: classes must have shape " + bn + ", got " + shape_text(nb::ndarray<>(*classes))).c_str());
  if (valid && (valid->ndim() != 1 || valid->shape(0) != b))
    throw nb::value_error(("nms: valid must have shape (" + std::to_string(b) + ",), got " +
                           shape_text(nb::ndarray<>(*valid))).c_str());
  if (b > size_t(INT32_MAX) || n > size_t(INT32_MAX)) throw nb::value_error("nms: more than 2^31 images or boxes an image");
  const scenelab::nms::Options o =
      rule_options(threshold, criterion, score_threshold, max_outputs, pixel_inclusive, classes.has_value());
  for (size_t i = 0; valid && i < b; ++i)
    if (valid->data()[i] < 0 || size_t(valid->data()[i]) > n)
      throw nb::value_error(("nms: valid[" + std::to_string(i) + "] is " + std::to_string(valid->data()[i]) +
                             ", expected 0.." + std::to_string(n)).c_str());
  return o;
}

// Greedy NMS of each image of a batch: boxes (B, N, 4), scores (B, N), classes (B, N) and valid
// (B,) optional; per image its kept indices, in rank order.
std::vector<Array<int64_t>> nms_batched(const nb::ndarray<const float, nb::c_contig, nb::device::cpu>& boxes,
                                        const nb::ndarray<const float, nb::c_contig, nb::device::cpu>& scores,
                                        float threshold, const std::string& criterion,
                                        const std::optional<nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>>& classes,
                                        const std::optional<nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>>& valid,
                                        float score_threshold, int max_outputs, bool pixel_inclusive) {
  const scenelab::nms::Options o = batched_options(boxes, scores, classes, valid, threshold, criterion, score_threshold,
                                                   max_outputs, pixel_inclusive);
  const size_t b = boxes.shape(0), n = boxes.shape(1);
  std::vector<std::vector<int>> keep;
  {
    nb::gil_scoped_release release;
    keep = scenelab::nms::batched_greedy_nms(boxes.data(), scores.data(), classes ? classes->data() : nullptr,
                                             valid ? valid->data() : nullptr, int(b), int(n), o);
  }
  std::vector<Array<int64_t>> out;
  out.reserve(b);
  for (const auto& k : keep) {
    Array<int64_t> a = new_array<int64_t>({k.size()});
    for (size_t i = 0; i < k.size(); ++i) a.data()[i] = k[i];
    out.push_back(std::move(a));
  }
  return out;
}

// The batched greedy on CUDA memory in one call (batched_nms_on_device): image b's kept indices
// into keep[b] ((B, N) int64 on the boxes' GPU), the counts returned; ordered after `stream`.
std::vector<int> nms_cuda_batched(const nb::ndarray<const float, nb::c_contig, nb::device::cuda>& boxes,
                                  const nb::ndarray<const float, nb::c_contig, nb::device::cuda>& scores,
                                  float threshold, const std::string& criterion,
                                  const std::optional<nb::ndarray<const int64_t, nb::c_contig, nb::device::cuda>>& classes,
                                  const std::optional<nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>>& valid,
                                  float score_threshold, int max_outputs, bool pixel_inclusive,
                                  const nb::ndarray<int64_t, nb::c_contig, nb::device::cuda>& keep, uintptr_t stream) {
  const scenelab::nms::Options o = batched_options(boxes, scores, classes, valid, threshold, criterion, score_threshold,
                                                   max_outputs, pixel_inclusive);
  const size_t b = boxes.shape(0), n = boxes.shape(1);
  if (keep.ndim() != 2 || keep.shape(0) != b || keep.shape(1) != n)
    throw nb::value_error(("nms: keep must have shape (" + std::to_string(b) + ", " + std::to_string(n) + "), got " +
                           shape_text(nb::ndarray<>(keep))).c_str());
  nb::gil_scoped_release release;
  return scenelab::nms::batched_nms_on_device(boxes.data(), scores.data(), classes ? classes->data() : nullptr,
                                              valid ? valid->data() : nullptr, int(b), int(n), o, keep.data(),
                                              reinterpret_cast<void*>(stream));
}

// The same on CUDA memory: the kept indices into `keep` (N int64 slots on the boxes' GPU), their
// count returned; ordered after `stream`.
int64_t nms_cuda(const nb::ndarray<const float, nb::c_contig, nb::device::cuda>& boxes,
                 const nb::ndarray<const float, nb::c_contig, nb::device::cuda>& scores, float threshold,
                 const std::string& method, const std::string& criterion,
                 const std::optional<nb::ndarray<const int64_t, nb::c_contig, nb::device::cuda>>& classes,
                 float score_threshold, int max_outputs, bool pixel_inclusive,
                 const nb::ndarray<int64_t, nb::c_contig, nb::device::cuda>& keep, uintptr_t stream) {
  scenelab::nms::Method m;
  const scenelab::nms::Options o = nms_options(boxes, scores, classes, threshold, method, criterion,
                                               score_threshold, max_outputs, pixel_inclusive, &m);
  const size_t n = boxes.shape(0);
  if (keep.ndim() != 1 || keep.shape(0) != n)
    throw nb::value_error(("nms: keep must have shape (" + std::to_string(n) + ",), got " +
                           shape_text(nb::ndarray<>(keep)))
                              .c_str());
  nb::gil_scoped_release release;
  return scenelab::nms::nms_on_device(boxes.data(), scores.data(), classes ? classes->data() : nullptr, int(n), o,
                                      m, keep.data(), reinterpret_cast<void*>(stream));
}

Array<uint8_t> load_image(const std::string& path) {
  api::Image img;
  {
    nb::gil_scoped_release release;
    img = api::load_image(path);
  }
  Array<uint8_t> out = new_array<uint8_t>({size_t(img.height), size_t(img.width), 3});
  std::memcpy(out.data(), img.pixels.data(), img.pixels.size());
  return out;
}

void save_png(const std::string& path, const Pixels& pixels) {
  const bool grey = pixels.ndim() == 2;
  if (!grey && !(pixels.ndim() == 3 && (pixels.shape(2) == 3 || pixels.shape(2) == 1)))
    throw nb::value_error(("save_png: expected (H, W), (H, W, 1) or (H, W, 3) uint8 pixels, got " +
                           shape_text(nb::ndarray<>(pixels)))
                              .c_str());
  api::Image img{int(pixels.shape(1)), int(pixels.shape(0)), grey ? 1 : int(pixels.shape(2)), {}};
  img.pixels.assign(pixels.data(), pixels.data() + pixels.size());
  nb::gil_scoped_release release;
  api::save_png(path, img);
}

}  // namespace

NB_MODULE(_scenelab, m) {
  m.doc() = "scenelab's native module (use the scenelab package)";
  {  // what refine=True applies: ModelOptions' defaults, the settings chosen for --refine
    const api::ModelOptions o;
    m.attr("default_refinement") = nb::make_tuple(o.refine_sigma_s, o.refine_sigma_r, o.refine_iterations);
  }
  m.attr("version") = std::to_string(SCENELAB_VERSION_MAJOR) + "." + std::to_string(SCENELAB_VERSION_MINOR) +
                      "." + std::to_string(SCENELAB_VERSION_PATCH);
  nb::class_<PyModel>(m, "NativeModel")
      .def(nb::init<const std::string&, const std::string&, const std::string&, int, bool,
                    const std::vector<std::string>&, const std::vector<double>&, const std::vector<double>&>(),
           "path"_a, "device"_a, "precision"_a, "threads"_a, "mirror"_a, "ensemble"_a, "scales"_a, "refine"_a)
      .def("label", &PyModel::label, "rgb"_a, "Labels of (H, W, 3) or (N, H, W, 3) C-contiguous uint8 pixels.")
      .def("label_cuda", &PyModel::label_cuda, "rgb"_a, "out"_a, "stream"_a,
           "Labels of CUDA pixels into CUDA memory, ordered after the stream (a cudaStream_t).")
      .def("scores", &PyModel::scores, "rgb"_a, "Class scores (C, h, w) and their geometry on the image.")
      .def("detect", &PyModel::detect, "rgb"_a, "cls"_a, "Boxes (N, 4) x1 y1 x2 y2 and scores (N,).")
      .def("label_files", &PyModel::label_files, "inputs"_a, "output_bases"_a, "save_classes"_a,
           "save_labels"_a, "save_overlay"_a, "batch"_a, "io_threads"_a, "plan_cache"_a)
      .def_prop_ro("classes", &PyModel::classes)
      .def_prop_ro("palette", &PyModel::palette, nb::rv_policy::automatic)
      .def_prop_ro("device", &PyModel::device)
      .def_prop_ro("path", &PyModel::path);
  nb::class_<PyWindowDetector>(m, "NativeWindowDetector")
      .def(nb::init<const std::string&, const std::string&, int, const std::string&>(), "path"_a, "device"_a,
           "threads"_a, "spec"_a)
      .def("detect", &PyWindowDetector::detect, "pixels"_a, "Boxes (N, 4) x1 y1 x2 y2 and scores (N,).")
      .def_prop_ro("class_name", &PyWindowDetector::class_name)
      .def_prop_ro("device", &PyWindowDetector::device);
  m.def("nms", &nms, "boxes"_a, "scores"_a, "threshold"_a, "method"_a, "criterion"_a,
        "classes"_a.none(), "score_threshold"_a, "max_outputs"_a, "pixel_inclusive"_a,
        "Indices kept, in rank order.");
  m.def("nms_batched", &nms_batched, "boxes"_a, "scores"_a, "threshold"_a, "criterion"_a, "classes"_a.none(),
        "valid"_a.none(), "score_threshold"_a, "max_outputs"_a, "pixel_inclusive"_a,
        "Greedy NMS of each image of a batch: per image the indices kept, in rank order.");
  m.def("nms_cuda", &nms_cuda, "boxes"_a, "scores"_a, "threshold"_a, "method"_a, "criterion"_a,
        "classes"_a.none(), "score_threshold"_a, "max_outputs"_a, "pixel_inclusive"_a, "keep"_a, "stream"_a,
        "Indices kept, in rank order, into keep (CUDA memory); returns their count.");
  m.def("nms_cuda_batched", &nms_cuda_batched, "boxes"_a, "scores"_a, "threshold"_a, "criterion"_a,
        "classes"_a.none(), "valid"_a.none(), "score_threshold"_a, "max_outputs"_a, "pixel_inclusive"_a, "keep"_a,
        "stream"_a, "Greedy NMS of each image of a batch in one call; image b's kept indices into keep[b], the counts returned.");
  m.def("load_image", &load_image, "path"_a, "An image file as (H, W, 3) uint8 RGB.");
  m.def("save_png", &save_png, "path"_a, "pixels"_a, "Writes (H, W) or (H, W, 3) uint8 pixels as a PNG.");
}
