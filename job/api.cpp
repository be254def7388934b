// The public API (include/scenelab/scenelab.h) over the engine: the engine's Labeler (its plans
// by size and batch) for labels from and into the caller's memory, scores and the detection
// head, and the job (job/label_job.h) for files.
#include "scenelab/scenelab.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <tuple>

#include "job/combine.h"
#include "core/error.h"
#include "engine/graph.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "core/cuda_check.h"
#endif
#include "engine/image_io.h"
#include "core/file_io.h"
#include "job/label_job.h"
#include "job/labeler.h"
#include "job/pipeline.h"
#include "engine/plan_cache.h"
#include "job/pyramid_detector.h"
#include "job/score_map_head.h"
#include "nms/sliding_window.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

namespace scenelab::api {

struct Labeler::Impl {
  std::string path;
  ModelOptions options;
  Model model;
  // The engine's Labeler: its backend and plans serve label() (batches from the host),
  // label_device() (batches on the GPU), scores() and detect().
  std::unique_ptr<scenelab::Labeler> single;
#ifdef SCENELAB_WITH_CUDA
  std::unique_ptr<CudaEvent> caller_ready, labels_ready;  // label_device's ordering with the caller
#endif
  std::unique_ptr<LabelJob> job;  // label_files, made on first use
  // Its batch, io_threads and overlay (the GPU makes the overlay's rows only for a job that writes it).
  std::tuple<int, int, bool> job_key{-1, -1, false};
  std::string job_cache;
};

namespace {

Image8 to_internal(const Image& img, const char* what) {
  SL_REQUIRE(img.channels == 3, what, ": expected an RGB image (3 channels), got ", img.channels);
  SL_REQUIRE(img.width > 0 && img.height > 0 &&
                 img.pixels.size() == size_t(img.width) * img.height * 3,
             what, ": the pixels (", img.pixels.size(), " bytes) do not match ", img.width, "x",
             img.height, "x3");
  return Image8{img.width, img.height, 3, img.pixels};
}

}  // namespace

Labeler::Labeler(const ModelOptions& o) : impl_(std::make_unique<Impl>()) {
  impl_->path = o.path.empty() ? find_default_model() : o.path;
  impl_->options = o;
  std::vector<std::string> paths{impl_->path};
  paths.insert(paths.end(), o.ensemble.begin(), o.ensemble.end());
  impl_->model = read_combined(paths, o.mirror, o.scales,
                               o.refine ? Refinement{o.refine_sigma_s, o.refine_sigma_r, o.refine_iterations} : Refinement{});
  CudaOptions co;
  co.precision = o.precision;
  impl_->single = std::make_unique<scenelab::Labeler>(impl_->model, make_backend(o.device, o.threads, co), /*keep=*/2);
}

Labeler::~Labeler() = default;
Labeler::Labeler(Labeler&&) noexcept = default;
Labeler& Labeler::operator=(Labeler&&) noexcept = default;

Labels Labeler::label(const Image& rgb) {
  to_internal(rgb, "Labeler::label");
  Labels out{rgb.width, rgb.height, std::vector<uint8_t>(size_t(rgb.width) * rgb.height)};
  label(rgb.pixels.data(), 1, rgb.height, rgb.width, out.classes.data());
  return out;
}

void Labeler::label(const uint8_t* rgb, int n, int h, int w, uint8_t* labels) {
  SL_REQUIRE(n > 0 && h > 0 && w > 0, "Labeler::label: ", n, " images of ", w, "x", h,
             ": expected at least one image of at least 1x1");
  SL_REQUIRE(rgb != nullptr && labels != nullptr, "Labeler::label: null pixels or labels");
  Graph& g = impl_->single->plans().get(n, h, w, scenelab::Labeler::plan_io()).graph;
  g.run_u8(rgb);
  g.fetch_u8_async("labels_full", labels);
  g.synchronize();
}

void Labeler::label_device(const uint8_t* rgb, int n, int h, int w, uint8_t* labels, void* stream) {
  SL_REQUIRE(n > 0 && h > 0 && w > 0, "Labeler::label_device: ", n, " images of ", w, "x", h,
             ": expected at least one image of at least 1x1");
  SL_REQUIRE(rgb != nullptr && labels != nullptr, "Labeler::label_device: null pixels or labels");
#ifdef SCENELAB_WITH_CUDA
  Impl& m = *impl_;
  const auto* backend = dynamic_cast<const CudaBackend*>(&m.single->backend());
  SL_REQUIRE(backend, "Labeler::label_device: this labeller runs on ", device(),
             ", not a GPU (label() takes host memory)");
  backend->activate();
  for (const void* p : {static_cast<const void*>(rgb), static_cast<const void*>(labels)}) {
    cudaPointerAttributes a{};
    SL_CUDA_CHECK(cudaPointerGetAttributes(&a, p), "Labeler::label_device: where the memory is");
    SL_REQUIRE((a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) && a.device == backend->device(),
               "Labeler::label_device: ", p == rgb ? "the pixels" : "the labels", " are not in memory of GPU ",
               backend->device(), " (", a.type == cudaMemoryTypeDevice ? "memory of GPU " + std::to_string(a.device)
                                                                        : std::string("host memory"), ")");
  }
  Graph& g = m.single->plans().get(n, h, w, scenelab::Labeler::plan_io()).graph;
  if (!m.caller_ready) {
    m.caller_ready = std::make_unique<CudaEvent>(cudaEventDisableTiming);
    m.labels_ready = std::make_unique<CudaEvent>(cudaEventDisableTiming);
  }
  const cudaStream_t caller = static_cast<cudaStream_t>(stream), own = backend->cuda()->stream;
  SL_CUDA_CHECK(cudaEventRecord(m.caller_ready->get(), caller), "Labeler::label_device: the caller's stream");
  SL_CUDA_CHECK(cudaStreamWaitEvent(own, m.caller_ready->get(), 0), "Labeler::label_device: the caller's stream");
  g.feed_u8(rgb, Graph::Pixels::Backend);
  g.run();
  backend->copy(labels, g.u8_output_in_backend("labels_full"), size_t(n) * h * w);
  SL_CUDA_CHECK(cudaEventRecord(m.labels_ready->get(), own), "Labeler::label_device: the labels");
  SL_CUDA_CHECK(cudaStreamWaitEvent(caller, m.labels_ready->get(), 0), "Labeler::label_device: the labels");
#else
  (void)stream;
  throw_error("Labeler::label_device: this build has no CUDA (label() takes host memory)");
#endif
}

std::vector<Labels> Labeler::label(const std::vector<Image>& images) {
  std::vector<Labels> out(images.size());
  std::vector<bool> done(images.size(), false);
  std::vector<uint8_t> pixels, labels;
  for (size_t i = 0; i < images.size(); ++i) {
    if (done[i]) continue;
    // Every image of this one's size, run as one batch.
    std::vector<size_t> group;
    for (size_t j = i; j < images.size(); ++j)
      if (!done[j] && images[j].width == images[i].width && images[j].height == images[i].height)
        group.push_back(j);
    const int n = int(group.size()), h = images[i].height, w = images[i].width;
    const size_t frame = size_t(h) * w;
    pixels.clear();
    for (size_t j : group) {
      to_internal(images[j], "Labeler::label");
      pixels.insert(pixels.end(), images[j].pixels.begin(), images[j].pixels.end());
    }
    labels.resize(size_t(n) * frame);
    label(pixels.data(), n, h, w, labels.data());
    for (int k = 0; k < n; ++k) {
      const size_t j = group[size_t(k)];
      const auto first = labels.begin() + ptrdiff_t(size_t(k) * frame);
      out[j] = Labels{w, h, std::vector<uint8_t>(first, first + ptrdiff_t(frame))};
      done[j] = true;
    }
  }
  return out;
}

FileSummary Labeler::label_files(const std::vector<FileJob>& jobs, const FileOptions& fo) {
  Impl& m = *impl_;
  const std::string cache = fo.plan_cache == "default" ? PlanCache::default_dir() : fo.plan_cache;
  const OutputKinds save{fo.save_classes, fo.save_labels, fo.save_overlay};
  const std::tuple<int, int, bool> key{fo.batch, fo.io_threads, fo.save_overlay};
  if (!m.job || m.job_key != key || m.job_cache != cache) {
    JobOptions jo;
    jo.save = save;
    jo.pipeline.device = m.options.device;
    jo.pipeline.cuda.precision = m.options.precision;
    jo.pipeline.threads = m.options.threads;
    jo.pipeline.pool_threads = fo.io_threads;
    jo.pipeline.batch = fo.batch;
    jo.pipeline.plan_cache = cache;
    jo.model_path = m.path;
    m.job.reset();
    m.job = std::make_unique<LabelJob>(&m.model, jo);
    m.job_key = key;
    m.job_cache = cache;
  }
  // The job's report, summed: images written, failures by input, the classes' pixels.
  struct Sum : JobObserver {
    FileSummary s;
    void image(const ImageResult& r) override {
      if (!r.ok) {
        s.failures.push_back(FileFailure{r.file, r.error});
        return;
      }
      ++s.images;
      for (size_t c = 0; c < r.histogram.size(); ++c) s.histogram[c] += r.histogram[c];
    }
  } sum;
  std::vector<std::string> inputs, bases;
  inputs.reserve(jobs.size());
  bases.reserve(jobs.size());
  for (const auto& j : jobs) inputs.push_back(j.input), bases.push_back(j.output_base);
  m.job->set_outputs(save, bases);
  sum.s.device = m.job->describe();
  sum.s.histogram.assign(m.model.class_names.size(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  m.job->run(inputs, sum);
  sum.s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum.s;
}

Scores Labeler::scores(const Image& rgb) {
  impl_->single->label(to_internal(rgb, "Labeler::scores"));
  const Graph& g = impl_->single->graph();
  const Tensor s = g.fetch("scores");
  const Geometry geo = g.geometry_of("scores");
  Scores out;
  out.classes = s.shape().c;
  out.height = s.shape().h;
  out.width = s.shape().w;
  out.values.assign(s.data(), s.data() + s.numel());
  out.stride_y = geo.stride_y, out.stride_x = geo.stride_x;
  out.offset_y = geo.offset_y, out.offset_x = geo.offset_x;
  return out;
}

std::vector<nms::Detection> Labeler::detect(const Image& rgb, const std::string& name) {
  const auto& names = impl_->model.class_names;
  const auto it = std::find(names.begin(), names.end(), name);
  SL_REQUIRE(it != names.end(), "Labeler::detect: the model has no class '", name, "'");
  const int cls = int(it - names.begin());
  const nms::WindowHeadOptions o = head_settings(impl_->model, cls);
  impl_->single->label(to_internal(rgb, "Labeler::detect"));
  int h = 0, w = 0;
  Geometry g;
  const auto probs = impl_->single->class_probabilities({cls}, &h, &w, &g);
  return nms::detect_windows_cpu(probs[0].data(), h, w, cls, o,
                                 nms::MapGeometry{g.stride_y, g.stride_x, g.offset_y, g.offset_x},
                                 rgb.width, rgb.height);
}

const std::vector<std::string>& Labeler::classes() const { return impl_->model.class_names; }
const std::vector<std::array<uint8_t, 3>>& Labeler::palette() const { return impl_->model.palette; }

Image Labeler::colorize(const Labels& l) const {
  const Image8 c = scenelab::colorize(LabelMap{l.width, l.height, l.classes}, impl_->model.palette);
  return Image{c.width, c.height, 3, c.pixels};
}

std::string Labeler::device() const { return impl_->single->backend().describe(); }
std::string Labeler::model_path() const { return impl_->path; }

Image load_image(const std::string& path) {
  const Image8 i = scenelab::load_image(path, 3);
  return Image{i.width, i.height, i.channels, i.pixels};
}

void save_png(const std::string& path, const Image& img) {
  scenelab::save_png(path, Image8{img.width, img.height, img.channels, img.pixels});
}

struct WindowDetector::Impl {
  Model model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PyramidDetector> det;
  std::string cls;
  std::mutex mu;  // one image at a time through the planned levels
};

WindowDetector::WindowDetector(const WindowDetectorOptions& o) : impl_(std::make_unique<Impl>()) {
  impl_->model = read_model(o.path.empty() ? find_weights("hog-people.h5") : o.path);
  impl_->backend = make_backend(o.device, o.threads, CudaOptions{});
  impl_->det = std::make_unique<PyramidDetector>(impl_->model, *impl_->backend, o.spec);
  impl_->cls = impl_->model.class_names.empty() ? "object" : impl_->model.class_names[0];
}

WindowDetector::~WindowDetector() = default;
WindowDetector::WindowDetector(WindowDetector&&) noexcept = default;
WindowDetector& WindowDetector::operator=(WindowDetector&&) noexcept = default;

std::vector<nms::Detection> WindowDetector::detect(const uint8_t* pixels, int height, int width, int channels) {
  SL_REQUIRE(pixels != nullptr || size_t(height) * width == 0, "WindowDetector::detect: no pixels");
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (height < 1 || width < 1) return {};
  return impl_->det->detect(pixels, height, width, channels);
}

std::vector<nms::Detection> WindowDetector::detect(const Image& image) {
  SL_REQUIRE(image.pixels.size() == size_t(image.width) * image.height * size_t(image.channels),
             "WindowDetector::detect: the pixels (", image.pixels.size(), " bytes) do not match ", image.width,
             "x", image.height, "x", image.channels);
  return detect(image.pixels.data(), image.height, image.width, image.channels);
}

const std::string& WindowDetector::class_name() const { return impl_->cls; }
std::string WindowDetector::device() const { return impl_->backend->describe(); }

}  // namespace scenelab::api
