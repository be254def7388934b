// The public API (include/scenelab/scenelab.h) over the engine: a Labeler for single images, a
// graph planned at the batch size for batches of one size, the detection head.
#include "scenelab/scenelab.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/graph.h"
#include "engine/image_io.h"
#include "engine/labeler.h"
#include "nms/sliding_window.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

namespace scenelab::api {

struct Labeler::Impl {
  std::string path;
  Model model;
  std::unique_ptr<scenelab::Labeler> single;
  std::unique_ptr<Backend> batch_backend;
  std::unique_ptr<Graph> batch;
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
  impl_->model = read_model(impl_->path);
  CudaOptions co;
  co.precision = o.precision;
  impl_->single = std::make_unique<scenelab::Labeler>(impl_->model, make_backend(o.device, o.threads, co));
  impl_->batch_backend = make_backend(o.device, o.threads, co);
  impl_->batch = std::make_unique<Graph>(impl_->model);
}

Labeler::~Labeler() = default;
Labeler::Labeler(Labeler&&) noexcept = default;
Labeler& Labeler::operator=(Labeler&&) noexcept = default;

Labels Labeler::label(const Image& rgb) {
  const LabelMap m = impl_->single->label(to_internal(rgb, "Labeler::label"));
  return Labels{m.width, m.height, m.labels};
}

std::vector<Labels> Labeler::label(const std::vector<Image>& images) {
  std::vector<Labels> out(images.size());
  std::vector<bool> done(images.size(), false);
  for (size_t i = 0; i < images.size(); ++i) {
    if (done[i]) continue;
    // Every image of this one's size, run as one batch.
    std::vector<size_t> group;
    for (size_t j = i; j < images.size(); ++j)
      if (!done[j] && images[j].width == images[i].width && images[j].height == images[i].height)
        group.push_back(j);
    const int n = int(group.size()), h = images[i].height, w = images[i].width;
    if (n == 1) {
      out[i] = label(images[i]);
      done[i] = true;
      continue;
    }
    std::vector<uint8_t> pixels;
    pixels.reserve(size_t(n) * h * w * 3);
    for (size_t j : group) {
      const Image8 img = to_internal(images[j], "Labeler::label");
      pixels.insert(pixels.end(), img.pixels.begin(), img.pixels.end());
    }
    Graph& g = *impl_->batch;
    if (!g.planned() || g.input_shape() != Shape(n, 3, h, w)) {
      PlanIO io;
      io.u8_input = true;
      io.u8_outputs = {"labels_full"};
      g.plan(n, h, w, *impl_->batch_backend, io);
    }
    std::vector<uint8_t> labels(size_t(n) * h * w);
    g.run_u8(pixels.data());
    g.fetch_u8_async("labels_full", labels.data());
    g.synchronize();
    for (int k = 0; k < n; ++k) {
      const size_t j = group[size_t(k)];
      out[j] = Labels{w, h, std::vector<uint8_t>(labels.begin() + ptrdiff_t(size_t(k) * h * w),
                                                 labels.begin() + ptrdiff_t(size_t(k + 1) * h * w))};
      done[j] = true;
    }
  }
  return out;
}

Scores Labeler::scores(const Image& rgb) {
  label(rgb);
  Graph& g = impl_->single->graph();
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
  nms::WindowHeadOptions o;
  if (auto d = impl_->model.detect.find(name); d != impl_->model.detect.end()) nms::parse_window_spec(d->second, o);
  label(rgb);
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

}  // namespace scenelab::api
