// The streaming pipeline behind label_image, eval_labels and the library API. Frames come from a
// FrameSource and are decoded on a pool of threads; a batcher groups consecutive frames of one
// size (up to the batch size); workers run the batches, each worker a backend of its own (the
// CPU, or one stream on a GPU: several per GPU, so one batch's copies overlap another's compute,
// and one set per GPU with --device cuda:all), with the image uploaded as 8-bit pixels from
// page-locked memory and the labels fetched back as bytes; the pool then finishes each frame
// (encodes and writes its outputs, scores it) and the calling thread reports frames in input
// order. Stages are joined by bounded queues: at most queue_depth frames are between decoding
// and reporting, so memory is bounded by that depth, not by the number of inputs. Plans are kept
// per size and batch (an LRU per worker), and what planning timed is kept in a PlanCache.
// Results do not depend on the number of threads or workers; on the CPU, not on the batch either.
#pragma once
#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/image_io.h"
#include "job/labeler.h"
#include "job/pyramid_detector.h"
#include "engine/model.h"
#include "engine/plan_cache.h"
#include "engine/plans.h"
#include "nms/sliding_window.h"

namespace scenelab {

// Where a frame's time went, in ms. upload/forward/download are the frame's share of its batch's
// time on the backend (the batch's time over its frames), measured by timing marks (CUDA events).
struct StageTimes {
  double decode_ms = 0, upload_ms = 0, forward_ms = 0, download_ms = 0, finish_ms = 0;
  double detect_ms = 0;  // the detection head (PipelineOptions::detect), on the worker
  StageTimes& operator+=(const StageTimes& o);
};

struct Frame {
  size_t index = 0;       // position in the input order
  std::string name;       // file path, or a video's name and frame number
  Image8 image;           // RGB, as decoded
  LabelMap labels;        // the model's class index per input pixel
  std::map<std::string, Tensor> floats;       // PipelineOptions::float_outputs (batch of 1)
  std::map<std::string, Geometry> geometry;   // where those maps lie on the image
  std::vector<nms::Detection> detections;     // PipelineOptions::detect's boxes, class by class
  std::vector<nms::Detection> window_detections;  // PipelineOptions::pyramid's boxes
  PyramidTimes pyramid_times;                      // and where its time went
  // PipelineOptions::overlay on a GPU worker: the overlay's PNG-filtered rows, made there
  // (job/overlay_rows.h; encode_png_filtered writes the file). Empty on the CPU backend.
  std::vector<uint8_t> overlay_rows;
  std::string error;      // non-empty: this frame failed (decoding, planning, finishing)
  StageTimes times;
  int batch = 0;          // frames in the batch it ran in
  double ops = 0;         // its share of the pass, by the paper's metric (2 x conv MACs)
  int worker = -1;        // which worker ran it
  std::shared_ptr<void> user;  // the source's or the finisher's own data
};

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // The next frame in input order (its name, and for sequential sources such as a video its
  // image); false at the end. Called by one thread at a time, in order.
  virtual bool next(Frame& f) = 0;
  // The costly part left by next() (e.g. decoding the image file), run concurrently on the
  // pool. Throwing fails this frame alone.
  virtual void decode(Frame& /*f*/) {}
  // Number of frames, when known (0: unknown), for progress.
  virtual size_t size_hint() const { return 0; }
};

// Frames from image files (JPEG, PNG, BMP...), decoded on the pool.
class FileSource : public FrameSource {
 public:
  explicit FileSource(std::vector<std::string> files, ImageLimits limits = ImageLimits{})
      : files_(std::move(files)), limits_(limits) {}
  bool next(Frame& f) override;
  void decode(Frame& f) override;
  size_t size_hint() const override { return files_.size(); }

 private:
  std::vector<std::string> files_;
  ImageLimits limits_;
  size_t next_ = 0;
};

struct PipelineOptions {
  std::string device = "auto";  // cpu | cuda | cuda:N | cuda:all | auto
  CudaOptions cuda;
  int threads = 0;         // CPU backend threads (0: all hardware threads)
  int pool_threads = 0;    // decoding and finishing threads (0: all hardware threads)
  int batch = 0;           // frames of one size per run (0: chosen per size for the device)
  int streams = 2;         // workers per GPU
  int queue_depth = 0;     // frames between decoding and reporting (0: automatic)
  int plans_per_worker = 3;  // planned sizes and batches kept by each worker (LRU)
  std::string plan_cache;  // folder of the plan cache on disk; "" keeps it in memory only
  std::string labels_node = "labels_full";
  std::vector<std::string> float_outputs;  // nodes also fetched as floats for each frame
  // The sliding-window head on these classes, run by the worker where the scores are (on a GPU:
  // there, only the boxes fetched; job/score_map_head.h): Frame::detections.
  struct Detect {
    int cls = 0;
    nms::WindowHeadOptions head;
  };
  std::vector<Detect> detect;
  std::string detect_node = "scores";  // the class scores the head reads
  // The labels' colours over the image, blended and PNG-filtered by GPU workers where the
  // pixels and labels are (Frame::overlay_rows): the host only codes them. CPU workers leave it
  // to the caller (overlay_labels), whose pool does it beside the other frames.
  struct Overlay {
    bool on = false;
    std::vector<std::array<uint8_t, 3>> palette;  // colours by class
    float alpha = 0.5f;                           // as overlay_labels'
  };
  Overlay overlay;
  // A sliding-window detector over an image pyramid (job/pyramid_detector.h: fastHOG), run by
  // the worker on its backend (device, precision) after the labels: Frame::window_detections.
  // Without a labelling model (Pipeline(options)) it runs alone; on the CPU then a worker a
  // thread, one core each.
  struct Pyramid {
    const Model* model = nullptr;  // none: no pyramid detector
    std::string overrides;         // options in the model's `pyramid` attribute's syntax
  };
  Pyramid pyramid;
};

struct PipelineStats {
  size_t frames = 0, failed = 0;
  double wall_s = 0;
  StageTimes total;  // summed over frames
  size_t plans = 0, plans_from_cache = 0;
  // Planning: shapes, memory, the plan cache's restore, and where nothing was restored the first
  // pass, which times the algorithms. A restored plan's first pass (which loads the kernel
  // modules) is first_pass_ms.
  double planning_ms = 0, first_pass_ms = 0;
  std::vector<std::string> workers;
};

class Pipeline {
 public:
  Pipeline(const Model& model, const PipelineOptions& opt);
  // Detection alone: no labelling model, PipelineOptions::pyramid on every frame.
  explicit Pipeline(const PipelineOptions& opt);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Runs every frame of `source`. `finish` runs on the pool as each frame's labels arrive (also
  // for failed frames: check error); what it throws fails that frame. `report` runs on the
  // calling thread in input order. Either may be empty.
  PipelineStats run(FrameSource& source, const std::function<void(Frame&)>& finish,
                    const std::function<void(Frame&)>& report);
  // Stops taking frames from the source; frames already taken finish and are reported. Safe to
  // call from a signal handler.
  void cancel() { cancelled_.store(true); }
  // PipelineOptions::overlay for the next runs (between runs: e.g. on for images whose overlay is
  // a PNG, off for a video's frames).
  void set_overlay(const PipelineOptions::Overlay& o);
  bool cancelled() const { return cancelled_.load(); }

  std::string describe() const;      // e.g. "cuda (NVIDIA H100 ..., fp16) x2 streams"
  int batch_for(int h, int w) const;  // the batch size used for frames of this size
  const Backend& backend(int worker = 0) const;
  int workers() const;
  PlanCache& plan_cache() { return cache_; }

 private:
  struct Worker;
  struct Run;
  Pipeline(const Model* model, const PipelineOptions& opt);
  void work(Worker& w, Run& r);
  void label_batch(Worker& w, Run& r, std::vector<Frame>& batch);
  void detect_windows(Worker& w, Run& r, std::vector<Frame>& batch);
  const Model* model_;  // the labelling model; null: detection alone
  PlanIO plan_io_;      // how the workers' plans meet the host (made once, from the options)
  PipelineOptions opt_;
  std::string fingerprint_;
  PlanCache cache_;
  std::vector<std::unique_ptr<Worker>> workers_;
  int pool_threads_ = 1;
  bool gpu_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace scenelab
