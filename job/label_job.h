// One job: a list of inputs (image files, folders, globs, videos) labelled end to end. The job
// decodes, plans and runs the labelling model on the streaming pipeline (job/pipeline.h), runs
// the detectors (the convnet head and a pyramid detector such as fastHOG, on the pipeline's
// workers: the job's device and precision), draws the overlay and the boxes, writes the
// outputs, and tells an observer about each input in input order: the structured report
// (job/report.h writes it as JSON and as console lines). label_image, api::label_files, Python's
// label_files and the Dask workers are its callers.
//
// Outputs of an image NAME.ext in out_dir: NAME_classes.png (class index per pixel),
// NAME_labels.png (the class colours, an indexed-colour PNG), NAME_overlay.png (the labels over
// the photo, with the detections' boxes); NAME_2... for repeated names. A video NAME.mp4 gives
// NAME_overlay.mp4 and/or NAME_labels.mp4. With detect_only: NAME_detections.png (boxes on the
// photo), the pyramid detector alone.
#pragma once
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/image_io.h"
#include "engine/model.h"
#include "job/pipeline.h"
#include "nms/nms.h"

namespace scenelab {

struct OutputKinds {
  bool classes = true, labels = true, overlay = true;
};
// "classes,labels,overlay" (any of them, at least one).
OutputKinds parse_output_kinds(const std::string& list);

// A sliding-window detector over an image pyramid (job/pyramid_detector.h): its model (with a
// `pyramid` attribute), option overrides in the attribute's syntax, the class it finds.
struct PyramidDetectorOptions {
  const Model* model = nullptr;  // none: no pyramid detector
  std::string overrides;
  std::string class_name;
};

struct JobOptions {
  std::string out_dir = "labels";
  // Per input, where its outputs go (BASE_classes.png...); empty: out_dir/NAME as above.
  std::vector<std::string> output_bases;
  OutputKinds save;
  PngOptions png;
  ImageLimits limits;
  bool skip_existing = false;  // images whose outputs all exist are left out
  // Device, precision, threads, batching, plan cache; pipeline.detect: the convnet head's classes.
  PipelineOptions pipeline;
  PyramidDetectorOptions pyramid;
  bool detect_only = false;  // the pyramid detector alone (no labelling model)
  std::string model_path;    // what the report names as the model
};

// A detection as reported: the labelling model's class (cls >= 0) or the pyramid detector's (-1).
struct Found {
  int cls = -1;
  std::string name;
  nms::Box box;
  float score = 0;
};

struct JobStart {
  bool detect_only = false;
  std::string model_path, model_name, device;
  std::vector<std::string> classes;
  std::string detector_name, detector_class;  // the pyramid detector's, where there is one
  size_t images = 0, videos = 0, skipped = 0;
  bool detections = false;  // a detector runs
};

struct ImageResult {
  std::string file;
  bool ok = false;
  std::string error;  // why it failed
  int width = 0, height = 0, batch = 0;
  StageTimes times;
  double ops = 0;  // the paper's metric, this image's share
  double encode_ms = 0, write_ms = 0;
  std::vector<size_t> histogram;  // pixels per class
  std::vector<Found> detections;
  std::vector<std::string> outputs;
  int levels = 0;         // detect_only: the pyramid's levels
  double detect_ms = 0;   // detect_only: the detector's time
};

struct VideoFrameResult {
  size_t frame = 0;
  StageTimes times;
  std::vector<size_t> histogram;
  std::vector<Found> detections;
};

struct VideoResult {
  std::string file, error, stopped;  // stopped: why decoding ended early, if it did
  bool opened = false;               // the video was opened (frames were reported)
  size_t frames = 0, frames_failed = 0;
  double frames_per_s = 0;
  std::vector<std::string> outputs;
};

struct JobSummary {
  std::string out_dir;
  size_t images = 0, ok = 0, failed = 0, skipped = 0;
  size_t videos = 0, videos_ok = 0, videos_failed = 0, video_frames = 0;
  bool interrupted = false;
  double wall_s = 0;
  StageTimes total;  // summed over frames
  double encode_ms = 0, write_ms = 0, planning_ms = 0, first_pass_ms = 0;
  size_t plans = 0, plans_from_cache = 0;
  // The exit status label_image gives it: 0, 1 (some input failed) or 130 (interrupted).
  int exit_code() const { return interrupted ? 130 : failed || videos_failed ? 1 : 0; }
};

// What a job tells as it goes, on the thread that called run(), inputs in input order.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void started(const JobStart&) {}
  virtual void image(const ImageResult&) {}
  virtual void video_started(const std::string& /*file*/, size_t /*frames_hint*/) {}
  virtual void video_frame(const VideoFrameResult&) {}
  virtual void video_frame_failed(const std::string& /*error*/) {}
  virtual void video(const VideoResult&) {}
  virtual void finished(const JobSummary&) {}
};

class LabelJob {
 public:
  // model: the labelling model (kept by reference; null with detect_only). Throws on options it
  // cannot run with (a device that is not there, an unusable detector), before any input.
  LabelJob(const Model* model, JobOptions opt);
  ~LabelJob();
  LabelJob(const LabelJob&) = delete;
  LabelJob& operator=(const LabelJob&) = delete;

  // Labels `inputs` (files, already expanded: job/inputs.h), told to each observer in turn. A
  // failing input fails alone.
  JobSummary run(const std::vector<std::string>& inputs, const std::vector<JobObserver*>& observers);
  JobSummary run(const std::vector<std::string>& inputs, JobObserver& observer) { return run(inputs, {&observer}); }
  // Stops taking inputs: those in flight finish and are reported. Safe in a signal handler.
  void cancel();
  bool cancelled() const { return cancelled_.load(); }
  std::string describe() const;  // the device, as the report names it
  // What the next runs write, and where (JobOptions::save, output_bases): the options that may
  // change between runs of one job (the device, the pipeline and the detectors may not).
  void set_outputs(const OutputKinds& save, std::vector<std::string> output_bases);

 private:
  void run_images(const std::vector<std::string>& files, const std::vector<std::string>& bases,
                  JobObserver& obs, JobSummary& sum);
  void run_video(const std::string& file, const std::string& base, JobObserver& obs, JobSummary& sum);
  void run_detect_only(const std::vector<std::string>& files, const std::vector<std::string>& bases,
                       JobObserver& obs, JobSummary& sum);
  void add(const PipelineStats& st, JobSummary& sum) const;
  std::vector<Found> found(const Frame& f) const;
  void draw_boxes(Image8& img, const std::vector<Found>& dets) const;

  const Model* model_;
  JobOptions opt_;
  std::unique_ptr<Pipeline> pipeline_;
  std::atomic<bool> cancelled_{false};
};

// --runtime-fusion auto: compiled fused kernels pay for their compilation (about a second a
// large shape, once a machine; 0.25 s of first pass from the driver's cache after) over long
// runs only: videos, or 10000 images and more (H100: 1010 images of 480x360 took 0.25 s more
// with it, for no measurable gain; it saves 0.2-0.3 ms a 1920x1080 frame).
bool runtime_fusion_pays(const std::vector<std::string>& inputs);

// Boxes drawn on an image: 2 px in the colour inside a 1 px black outline.
void draw_box(Image8& img, const nms::Box& b, const std::array<uint8_t, 3>& color);

}  // namespace scenelab
