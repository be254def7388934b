// scenelab's public C++ API: a scene-labelling model on the CPU or a GPU, its class scores and
// label maps, the detection head, a HOG pedestrian detector, and non-maximum suppression
// (scenelab/nms.h). Installed with
// `cmake --install`; a consumer writes `find_package(scenelab)` and links `scenelab::scenelab`
// (examples/consumer). Errors are std::runtime_error whose message names the file or the input
// and what is wrong. The engine's own headers are not part of the API.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scenelab/nms.h"

#define SCENELAB_VERSION_MAJOR 0
#define SCENELAB_VERSION_MINOR 4
#define SCENELAB_VERSION_PATCH 0

namespace scenelab::api {

// Interleaved 8-bit pixels, row-major: channels 3 (RGB) or 1.
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// A class index per pixel, row-major.
struct Labels {
  int width = 0, height = 0;
  std::vector<uint8_t> classes;
};

// Class scores at the network's feature resolution (classes x height x width, planar), and where
// map pixel (y, x) lies on the input image: (offset_y + stride_y * y, offset_x + stride_x * x).
struct Scores {
  int classes = 0, height = 0, width = 0;
  std::vector<float> values;
  double stride_y = 1, stride_x = 1, offset_y = 0, offset_x = 0;
};

// label_files: one input image and where its outputs go: output_base + "_classes.png" (the class
// index per pixel, 8-bit grey) and output_base + "_labels.png" (the classes in their colours, an
// indexed-colour PNG), as label_image writes them. Files are written whole or not at all.
struct FileJob {
  std::string input, output_base;
};

struct FileOptions {
  bool save_classes = true, save_labels = true;
  bool save_overlay = false;  // output_base + "_overlay.png": the labels over the photo
  int batch = 0;         // images of one size per pass (0: chosen for the device and size)
  int io_threads = 0;    // decoding and encoding threads (0: all)
  std::string plan_cache = "default";  // folder of timed planning choices; "default": the user's
                                       // cache folder; "": memory only
};

struct FileFailure {
  std::string input, error;
};

struct FileSummary {
  size_t images = 0;                  // labelled and written
  std::vector<FileFailure> failures;  // in input order; the other files are not affected
  std::vector<uint64_t> histogram;    // pixels of each class over the labelled images
  double seconds = 0;                 // wall time of the run
  std::string device;
};

struct ModelOptions {
  std::string path;              // model file; empty: the shipped model
  std::string device = "auto";   // cpu | cuda | cuda:N | auto
  std::string precision = "fp32";  // fp32 | tf32 | fp16 | bf16 (GPU)
  int threads = 0;               // CPU threads (0: all)
  // Label with the mean class probabilities of the image and its left-right mirror (twice the
  // work; scores() and detect() read the mean too).
  bool mirror = false;
  // Label with the mean class probabilities of the image resized by each of these factors (each
  // in [0.125, 4], none twice; with `mirror`, both passes at each): e.g. {0.5, 0.75, 1, 1.25}
  // (3.4 times the work). {1}: the image alone.
  std::vector<double> scales{1.0};
  // Refine the class probabilities along the image's edges (the domain transform's recursive
  // filter guided by the image, after the passes are averaged): refine_sigma_s pixels of spread
  // where the image is flat, a step of refine_sigma_r in the RGB values (0-1, summed over the
  // channels) stops it. The defaults are the settings chosen on CamVid's held-out sequences
  // (weights/MODELS.md at fb0dc9a, "Edge-aware refinement"). Its cost at 480x360: about 0.2 ms on an H200,
  // about 8 ms on two CPU cores.
  bool refine = false;
  double refine_sigma_s = 40, refine_sigma_r = 0.2;
  int refine_iterations = 3;
  // More model files averaged with `path`'s (an ensemble: each one's pass, their class
  // probabilities' mean; the work of all of them). Same classes; `path`'s palette and settings.
  // At most 32 passes in all (models x 2 if mirrored x scales).
  std::vector<std::string> ensemble;
};

class Labeler {
 public:
  explicit Labeler(const ModelOptions& options = ModelOptions{});
  ~Labeler();
  Labeler(Labeler&&) noexcept;
  Labeler& operator=(Labeler&&) noexcept;
  Labeler(const Labeler&) = delete;
  Labeler& operator=(const Labeler&) = delete;

  // Labels at the image's resolution. Images of one size in a batch run through one plan at
  // once; the results equal labelling them one by one.
  Labels label(const Image& rgb);
  std::vector<Labels> label(const std::vector<Image>& rgb);
  // The same without copies: n images of height x width, interleaved RGB bytes one after the
  // other (n x height x width x 3), labelled into `labels` (n x height x width bytes).
  void label(const uint8_t* rgb, int n, int height, int width, uint8_t* labels);
  // The same in GPU memory, for a labeller on a CUDA device: `rgb` and `labels` are device
  // pointers on the labeller's GPU (a CUDA tensor's data), nothing goes through the host. The
  // work is ordered after what `stream` (a cudaStream_t; null: the legacy default stream) has
  // queued, and `stream` waits for the labels: the call returns without waiting for the GPU.
  // Throws on a CPU labeller, or for pointers not in memory of the labeller's GPU.
  void label_device(const uint8_t* rgb, int n, int height, int width, uint8_t* labels, void* stream = nullptr);
  // The streaming pipeline over image files (decoding, batching, labelling and writing overlap);
  // a file that fails is listed and the others go on.
  FileSummary label_files(const std::vector<FileJob>& jobs, const FileOptions& options = FileOptions{});
  Scores scores(const Image& rgb);
  // The sliding-window detection head on one class's probabilities (the model's settings for the
  // class where its file has them); boxes in input pixels, fused by NMS.
  std::vector<nms::Detection> detect(const Image& rgb, const std::string& class_name);

  const std::vector<std::string>& classes() const;
  const std::vector<std::array<uint8_t, 3>>& palette() const;
  Image colorize(const Labels& labels) const;
  std::string device() const;  // e.g. "cuda (NVIDIA H100 80GB HBM3, fp16)"
  std::string model_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A sliding-window detector over an image pyramid: HOG + linear SVM pedestrians by default
// (the shipped weights/hog-people.h5, OpenCV's people detector: the same boxes as OpenCV 4.6's
// HOGDescriptor.detectMultiScale with fusion "group"). Options as in the model file's pyramid
// spec, e.g. "threshold=0.5 fusion=greedy overlap=0.3" (fusion: greedy, oro, group, none).
struct WindowDetectorOptions {
  std::string path;             // model file; empty: hog-people.h5
  std::string device = "auto";  // cpu | cuda | cuda:N | auto
  int threads = 0;              // CPU threads (0: all)
  std::string spec;             // overrides of the model's pyramid settings
};

class WindowDetector {
 public:
  explicit WindowDetector(const WindowDetectorOptions& options = WindowDetectorOptions{});
  ~WindowDetector();
  WindowDetector(WindowDetector&&) noexcept;
  WindowDetector& operator=(WindowDetector&&) noexcept;
  WindowDetector(const WindowDetector&) = delete;
  WindowDetector& operator=(const WindowDetector&) = delete;

  // Boxes in image pixels (1, 3 or 4 channels; an image smaller than the window: none).
  std::vector<nms::Detection> detect(const Image& image);
  std::vector<nms::Detection> detect(const uint8_t* pixels, int height, int width, int channels);
  const std::string& class_name() const;  // e.g. "person"
  std::string device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

Image load_image(const std::string& path);
void save_png(const std::string& path, const Image& image);

}  // namespace scenelab::api
