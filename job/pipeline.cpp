#include "job/pipeline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <list>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "core/error.h"
#include "job/labeler.h"
#include "job/overlay_rows.h"
#include "job/score_map_head.h"

namespace scenelab {

StageTimes& StageTimes::operator+=(const StageTimes& o) {
  decode_ms += o.decode_ms;
  upload_ms += o.upload_ms;
  forward_ms += o.forward_ms;
  download_ms += o.download_ms;
  finish_ms += o.finish_ms;
  detect_ms += o.detect_ms;
  return *this;
}

bool FileSource::next(Frame& f) {
  if (next_ >= files_.size()) return false;
  f.name = files_[next_++];
  return true;
}

void FileSource::decode(Frame& f) { f.image = load_image(f.name, 3, limits_); }

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Pixels a GPU batch aims at: enough work to fill the GPU at small sizes (480x360: 8 frames),
// one frame from 1920x1080 up. Measured in docs/BENCHMARKS.md at fb0dc9a.
constexpr double kBatchPixels = 1.5e6;
constexpr int kMaxAutoBatch = 16;

// State shared between threads: changed under its lock, then the waiting threads woken.
class Guarded {
 protected:
  template <typename F>
  void change(F&& f, bool all = true) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      f();
    }
    if (all)
      cv_.notify_all();
    else
      cv_.notify_one();
  }
  template <typename Ready>
  std::unique_lock<std::mutex> wait(Ready&& ready) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, ready);
    return lk;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// A FIFO between stages; pop() blocks while it is empty and open.
template <typename T>
class Channel : Guarded {
 public:
  void push(T v) {
    change([&] { q_.push_back(std::move(v)); }, /*all=*/false);
  }
  bool pop(T& v) {
    auto lk = wait([&] { return !q_.empty() || closed_; });
    if (q_.empty()) return false;
    v = std::move(q_.front());
    q_.pop_front();
    return true;
  }
  void close() {
    change([&] { closed_ = true; });
  }

 private:
  std::deque<T> q_;
  bool closed_ = false;
};

// Frames by input index, taken in index order; close(end) says no index >= end will come.
class Reorder : Guarded {
 public:
  void put(Frame f) {
    change([&] {
      const size_t i = f.index;
      frames_.emplace(i, std::move(f));
    });
  }
  // Waits for frame i; false when it will never come.
  bool take(size_t i, Frame& out) {
    auto lk = wait([&] { return frames_.count(i) || i >= end_; });
    auto it = frames_.find(i);
    if (it == frames_.end()) return false;
    out = std::move(it->second);
    frames_.erase(it);
    return true;
  }
  void close(size_t end) {
    change([&] { end_ = end; });
  }

 private:
  std::map<size_t, Frame> frames_;
  size_t end_ = SIZE_MAX;
};

}  // namespace

struct Pipeline::Worker {
  // Kept beside each plan: the host staging, page-locked on the GPU.
  struct Staging : PlanExtras {
    BackendMemory in, out;
    BackendMemory overlay;  // PipelineOptions::overlay's rows, where made
    std::map<std::string, BackendMemory> floats;
  };
  int id = 0;
  std::unique_ptr<Plans> plans;  // the worker's backend and its plans by size and batch (LRU)
  std::unique_ptr<Backend> own_backend;  // the backend, where there is no labelling model
  const Backend& backend() const { return plans ? plans->backend() : *own_backend; }
  std::unique_ptr<PyramidDetector> pyramid;  // PipelineOptions::pyramid, made at the first use
  std::unique_ptr<ScoreMapHead> head;  // PipelineOptions::detect, made at the first use
  std::unique_ptr<OverlayRows> overlay;  // PipelineOptions::overlay on a GPU, made at the first use
  BackendMemory marks[4];
};

// The state of one run(): the window of frames in flight and the queues between the stages.
struct Pipeline::Run {
  FrameSource* source = nullptr;
  const std::function<void(Frame&)>* finish = nullptr;
  size_t depth = 1;
  std::mutex src_mu;
  std::condition_variable window_cv;
  size_t inflight = 0, taken = 0;
  bool source_done = false;
  Reorder decoded, finished;
  Channel<std::vector<Frame>> batches;
  Channel<Frame> finishing;
  std::atomic<int> workers_left{0}, finishers_left{0};
  // Exclusive while a plan's first run times algorithms, shared by every other run, so timings
  // are not disturbed by another worker's work on the same GPU.
  std::shared_mutex tuning;
  std::mutex stats_mu;
  size_t plans = 0, plans_from_cache = 0;
  double planning_ms = 0, first_pass_ms = 0;
};

Pipeline::Pipeline(const Model& model, const PipelineOptions& opt) : Pipeline(&model, opt) {}

Pipeline::Pipeline(const PipelineOptions& opt) : Pipeline(nullptr, opt) {}

Pipeline::Pipeline(const Model* model, const PipelineOptions& opt)
    : model_(model), opt_(opt), fingerprint_(model ? model_fingerprint(*model) : ""), cache_(opt.plan_cache) {
  SL_REQUIRE(model || opt.pyramid.model, "a pipeline needs a labelling model or a pyramid detector");
  if (model) {
    SL_REQUIRE(model->graph.find(opt.labels_node), "model '", model->name, "' has no node '", opt.labels_node,
               "' (class index per input pixel)");
    for (const auto& n : opt.float_outputs)
      SL_REQUIRE(model->graph.find(n), "model '", model->name, "' has no node '", n, "'");
    if (!opt.detect.empty())
      SL_REQUIRE(model->graph.find(opt.detect_node), "model '", model->name, "' has no node '", opt.detect_node,
                 "' (the class scores the detection head reads)");
  }
  SL_REQUIRE(opt.batch >= 0 && opt.batch <= 256, "--batch ", opt.batch, ": expected 1..256 (0: automatic)");
  SL_REQUIRE(opt.streams >= 1 && opt.streams <= 16, "--streams ", opt.streams, ": expected 1..16");
  SL_REQUIRE(opt.plans_per_worker >= 1, "plans per worker must be >= 1");
  plan_io_.u8_input = true;
  plan_io_.u8_outputs = {opt.labels_node};
  plan_io_.f32_outputs = opt.float_outputs;
  if (!opt.detect.empty()) plan_io_.keep.push_back(opt.detect_node);
  if (opt.pyramid.model) {  // its options checked now, not at the first frame
    PyramidOptions po;
    parse_pyramid_spec(opt.pyramid.overrides, po);
  }
  set_overlay(opt.overlay);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  pool_threads_ = opt.pool_threads > 0 ? opt.pool_threads : int(hw);
  std::vector<std::string> devices;
  if (opt.device == "cuda:all") {
    const int count = cuda_device_count();
    SL_REQUIRE(count > 0, "--device cuda:all: no CUDA device is available");
    for (int d = 0; d < count; ++d) devices.push_back(str_cat("cuda:", d));
  } else {
    devices.push_back(opt.device);
  }
  // Detection alone on the CPU: a worker a thread, a core each (images side by side).
  const int cpu_workers = model ? 1 : opt.threads > 0 ? opt.threads : int(hw);
  for (const auto& d : devices) {
    auto first = make_backend(d, model ? opt.threads : 1, opt.cuda);
    const bool gpu = first->kind() == DeviceKind::CUDA;
    gpu_ = gpu_ || gpu;
    const int per_device = gpu ? opt.streams : cpu_workers;
    for (int s = 0; s < per_device; ++s) {
      auto w = std::make_unique<Worker>();
      w->id = int(workers_.size());
      auto backend = s == 0 ? std::move(first) : make_backend(d, gpu || model ? opt.threads : 1, opt.cuda);
      if (model) {
        Plans::Options po;
        po.cache = &cache_;
        po.fingerprint = fingerprint_;
        po.keep = opt.plans_per_worker;
        w->plans = std::make_unique<Plans>(*model, std::move(backend), po);
      } else {
        w->own_backend = std::move(backend);
      }
      for (auto& m : w->marks) m = w->backend().make_mark();
      workers_.push_back(std::move(w));
    }
  }
}

Pipeline::~Pipeline() = default;

void Pipeline::set_overlay(const PipelineOptions::Overlay& o) {
  SL_REQUIRE(!o.on || !o.palette.empty(), "overlay: empty palette");
  if (o.on) overlay_weight(o.alpha);  // throws for an alpha outside 0..1
  opt_.overlay = o;
}

int Pipeline::workers() const { return int(workers_.size()); }
const Backend& Pipeline::backend(int worker) const { return workers_.at(size_t(worker))->backend(); }

std::string Pipeline::describe() const {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  for (const auto& w : workers_) {
    const std::string d = w->backend().describe();
    if (!count[d]++) order.push_back(d);
  }
  std::string s;
  for (const auto& d : order)
    s += str_cat(s.empty() ? "" : ", ", d,
                 count[d] > 1 ? str_cat(" x", count[d], d.rfind("cpu", 0) == 0 ? " workers" : " streams") : "");
  return s;
}

int Pipeline::batch_for(int h, int w) const {
  if (opt_.batch > 0) return opt_.batch;
  if (!gpu_ || !model_) return 1;  // the CPU gains nothing from batches and keeps memory low
  const int n = int(kBatchPixels / std::max(1.0, double(h) * w));
  return std::clamp(n, 1, kMaxAutoBatch);
}

void Pipeline::work(Worker& wk, Run& r) {
  wk.backend().activate();
  std::vector<Frame> batch;
  while (r.batches.pop(batch)) {
    if (model_) label_batch(wk, r, batch);
    if (opt_.pyramid.model) detect_windows(wk, r, batch);
    for (auto& f : batch) r.finishing.push(std::move(f));
    batch.clear();
  }
  if (--r.workers_left == 0) r.finishing.close();
}

// The pyramid detector on each frame of the batch that has not failed, on the worker's backend;
// shared with other workers' passes, not with a first run's timings.
void Pipeline::detect_windows(Worker& wk, Run& r, std::vector<Frame>& batch) {
  std::shared_lock<std::shared_mutex> lock(r.tuning);
  for (auto& f : batch) {
    if (!f.error.empty()) continue;
    try {
      if (!wk.pyramid) wk.pyramid = std::make_unique<PyramidDetector>(*opt_.pyramid.model, wk.backend(), opt_.pyramid.overrides);
      f.window_detections = wk.pyramid->detect(f.image.pixels.data(), f.image.height, f.image.width,
                                               f.image.channels, &f.pyramid_times);
      f.worker = wk.id;
    } catch (const std::exception& e) {
      f.error = str_cat(f.name, ": ", e.what());
    }
  }
}

// The labelling model on one batch of frames of one size: its plan, the pass, the labels (and
// floats, overlay rows, the detection head's boxes) into the frames; a failure fails the batch's
// frames by name.
void Pipeline::label_batch(Worker& wk, Run& r, std::vector<Frame>& batch) {
  const Backend& b = wk.backend();
  const bool overlay_on = opt_.overlay.on && OverlayRows::available(b);
  const int n = int(batch.size()), h = batch[0].image.height, w = batch[0].image.width;
  int planned_n = n;  // the batch of the plan that runs these n frames
  try {
    // The plan for this size and batch, or a kept plan of this size for a larger batch (the
    // short last batch of a run or of a size: its spare slots run whatever they held, which
    // costs one batch's time where a new plan costs its planning and first pass, 0.1-0.3 s on
    // a GPU).
    Plans::Plan& p = wk.plans->get(n, h, w, plan_io_, /*larger_batch=*/true);
    if (wk.plans->made_last()) {
      auto st = std::make_unique<Worker::Staging>();
      st->in = b.allocate_host(size_t(n) * h * w * 3);
      std::memset(st->in.get(), 0, size_t(n) * h * w * 3);  // a short batch's spare slots run it
      st->out = b.allocate_host(p.graph.shape_of(opt_.labels_node).numel());
      for (const auto& node : opt_.float_outputs)
        st->floats[node] = b.allocate_host(p.graph.shape_of(node).numel() * sizeof(float));
      p.extras = std::move(st);
    }
    auto& st = static_cast<Worker::Staging&>(*p.extras);
    planned_n = p.n;
    // A plan made while the overlay was off (an earlier run) has no buffer for it.
    if (overlay_on && !st.overlay) st.overlay = b.allocate_host(size_t(p.n) * OverlayRows::frame_bytes(h, w));
    if (overlay_on && !wk.overlay) wk.overlay = std::make_unique<OverlayRows>(b, opt_.overlay.palette, opt_.overlay.alpha);
    const size_t image_bytes = size_t(h) * w * 3;
    auto* in = static_cast<uint8_t*>(st.in.get());
    for (int i = 0; i < n; ++i) {
      SL_REQUIRE(batch[size_t(i)].image.channels == 3, batch[size_t(i)].name, ": not RGB");
      std::memcpy(in + size_t(i) * image_bytes, batch[size_t(i)].image.pixels.data(), image_bytes);
    }
    auto pass = [&] {
      b.record_mark(wk.marks[0]);
      p.graph.feed_u8(in, Graph::Pixels::Host);
      b.record_mark(wk.marks[1]);
      p.graph.run();
      b.record_mark(wk.marks[2]);
      p.graph.fetch_u8_async(opt_.labels_node, static_cast<uint8_t*>(st.out.get()));
      for (auto& [node, mem] : st.floats) p.graph.fetch_async(node, static_cast<float*>(mem.get()));
      if (overlay_on)
        wk.overlay->enqueue(p.graph.u8_input_in_backend(), p.graph.u8_output_in_backend(opt_.labels_node),
                            n, h, w, static_cast<uint8_t*>(st.overlay.get()));
      b.record_mark(wk.marks[3]);
      b.synchronize();
    };
    if (p.first_run) {
      // The first run at a plan times what the plan cache did not have; alone on the GPU.
      std::unique_lock<std::shared_mutex> lock(r.tuning);
      // SCENELAB_TRACE_FIRST_PASS=1: where a plan's first pass spends its time (each layer
      // waited for: kernel modules and libraries load at their first use), on stderr.
      static const bool trace = std::getenv("SCENELAB_TRACE_FIRST_PASS") != nullptr;
      if (trace) p.graph.set_profiling(true);
      const Plans::FirstRun first = wk.plans->run(p, pass);
      if (trace) {
        p.graph.set_profiling(false);
        std::string line = str_cat("first pass ", n, "x", w, "x", h, " worker ", wk.id, ": ",
                                   int(first.pass_ms + 0.5), " ms (restored ", first.restored, ");");
        for (const auto& s : p.graph.stats())
          if (s.time_ms >= 1) line += str_cat(" ", s.name, " ", int(s.time_ms + 0.5));
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      std::lock_guard<std::mutex> sl(r.stats_mu);
      r.plans++;
      r.plans_from_cache += first.restored ? 1 : 0;
      // A restored (or untuned: the CPU) plan's first pass only runs (and loads kernel
      // modules); otherwise it also times the algorithms, which is planning.
      r.planning_ms += p.plan_ms + first.restore_ms + (first.tuned ? first.pass_ms : 0);
      r.first_pass_ms += first.tuned ? 0 : first.pass_ms;
    } else {
      std::shared_lock<std::shared_mutex> lock(r.tuning);
      pass();
    }
    // The detection head where the scores are (after the pass: the scores are kept); shared
    // with other workers' passes, not with a first run's timings.
    double detect_ms = 0;
    if (!opt_.detect.empty()) {
      std::shared_lock<std::shared_mutex> lock(r.tuning);
      const auto t0 = Clock::now();
      if (!wk.head) wk.head = std::make_unique<ScoreMapHead>(b);
      const TensorView scores = p.graph.output(opt_.detect_node);
      const Geometry g = p.graph.geometry_of(opt_.detect_node);
      for (int i = 0; i < n; ++i)
        for (const auto& d : opt_.detect) {
          auto boxes = wk.head->detect(scores, i, d.cls, d.head, g, w, h);
          auto& out = batch[size_t(i)].detections;
          out.insert(out.end(), boxes.begin(), boxes.end());
        }
      detect_ms = ms_since(t0) / n;
    }
    const double up = b.mark_ms(wk.marks[0], wk.marks[1]) / n;
    const double fw = b.mark_ms(wk.marks[1], wk.marks[2]) / n;
    const double down = b.mark_ms(wk.marks[2], wk.marks[3]) / n;
    const auto* labels = static_cast<const uint8_t*>(st.out.get());
    const size_t plane = size_t(h) * w;
    for (int i = 0; i < n; ++i) {
      Frame& f = batch[size_t(i)];
      f.labels.width = w;
      f.labels.height = h;
      f.labels.labels.assign(labels + size_t(i) * plane, labels + size_t(i + 1) * plane);
      if (overlay_on) {
        const size_t fb = OverlayRows::frame_bytes(h, w);
        const auto* rows = static_cast<const uint8_t*>(st.overlay.get()) + size_t(i) * fb;
        f.overlay_rows.assign(rows, rows + fb);
      }
      for (const auto& [node, mem] : st.floats) {
        Shape s = p.graph.shape_of(node);
        const size_t per = s.numel() / size_t(p.n);
        s.n = 1;
        Tensor t(s);
        std::memcpy(t.data(), static_cast<const float*>(mem.get()) + size_t(i) * per,
                    per * sizeof(float));
        f.floats[node] = std::move(t);
        f.geometry[node] = p.graph.geometry_of(node);
      }
      f.times.upload_ms = up;
      f.times.forward_ms = fw;
      f.times.download_ms = down;
      f.times.detect_ms = detect_ms;
      f.batch = n;
      f.ops = p.graph.total_ops() / p.n;
      f.worker = wk.id;
    }
  } catch (const std::exception& e) {
    // This batch's size failed (too small for the network, too large for memory): its frames
    // fail by name, the plan is dropped, the others go on.
    wk.plans->drop(planned_n, h, w);
    for (auto& f : batch) f.error = str_cat(f.name, ": ", e.what());
  }
}

PipelineStats Pipeline::run(FrameSource& source, const std::function<void(Frame&)>& finish,
                            const std::function<void(Frame&)>& report) {
  Run r;
  r.source = &source;
  r.finish = &finish;
  const int max_batch = opt_.batch > 0 ? opt_.batch : gpu_ && model_ ? kMaxAutoBatch : 1;
  r.depth = opt_.queue_depth > 0
                ? size_t(opt_.queue_depth)
                : size_t(std::max({4 * pool_threads_, 2 * max_batch * workers() + pool_threads_, 8}));
  SL_REQUIRE(r.depth >= size_t(max_batch), "--queue-depth ", r.depth,
             " must be at least the batch size ", max_batch);
  cancelled_.store(false);
  const auto t_start = Clock::now();

  auto decoder = [&] {
    for (;;) {
      Frame f;
      bool more = true;
      {
        std::unique_lock<std::mutex> lk(r.src_mu);
        r.window_cv.wait(lk, [&] { return r.inflight < r.depth || r.source_done; });
        if (r.source_done) return;
        const auto t0 = Clock::now();
        try {
          more = !cancelled_.load() && r.source->next(f);
        } catch (const std::exception& e) {
          // A sequential source (a video) that cannot go on: its last frame says why.
          f.error = e.what();
          r.source_done = true;
        }
        if (!more) {
          r.source_done = true;
          r.decoded.close(r.taken);
          r.window_cv.notify_all();
          return;
        }
        f.index = r.taken++;
        r.inflight++;
        f.times.decode_ms = ms_since(t0);
        if (r.source_done) {
          r.decoded.close(r.taken);
          r.window_cv.notify_all();
        }
      }
      if (f.error.empty()) {
        const auto t0 = Clock::now();
        try {
          r.source->decode(f);
        } catch (const std::exception& e) {
          f.error = e.what();
        }
        f.times.decode_ms += ms_since(t0);
      }
      r.decoded.put(std::move(f));
    }
  };

  auto batcher = [&] {
    size_t i = 0;
    Frame pending;
    bool have = false;
    for (;;) {
      if (!have) {
        if (!r.decoded.take(i, pending)) break;
        ++i;
      }
      have = false;
      if (!pending.error.empty()) {
        r.finishing.push(std::move(pending));
        continue;
      }
      const int n = std::min(batch_for(pending.image.height, pending.image.width), int(r.depth));
      std::vector<Frame> batch;
      batch.push_back(std::move(pending));
      while (int(batch.size()) < n) {
        Frame g;
        if (!r.decoded.take(i, g)) break;
        ++i;
        if (!g.error.empty()) {
          r.finishing.push(std::move(g));
        } else if (g.image.width != batch[0].image.width || g.image.height != batch[0].image.height) {
          pending = std::move(g);
          have = true;
          break;
        } else {
          batch.push_back(std::move(g));
        }
      }
      r.batches.push(std::move(batch));
    }
    r.batches.close();
  };

  auto finisher = [&] {
    Frame f;
    while (r.finishing.pop(f)) {
      const auto t0 = Clock::now();
      if (*r.finish) {
        try {
          (*r.finish)(f);
        } catch (const std::exception& e) {
          if (f.error.empty()) f.error = e.what();
        }
      }
      f.times.finish_ms = ms_since(t0);
      r.finished.put(std::move(f));
    }
    if (--r.finishers_left == 0) {
      std::lock_guard<std::mutex> lk(r.src_mu);
      r.finished.close(r.taken);
    }
  };

  std::vector<std::thread> threads;
  r.workers_left = workers();
  r.finishers_left = pool_threads_;
  for (int i = 0; i < pool_threads_; ++i) threads.emplace_back(decoder);
  threads.emplace_back(batcher);
  for (auto& w : workers_) threads.emplace_back([this, &w, &r] { work(*w, r); });
  for (int i = 0; i < pool_threads_; ++i) threads.emplace_back(finisher);

  PipelineStats st;
  std::exception_ptr report_error;
  Frame f;
  for (size_t i = 0; r.finished.take(i, f); ++i) {
    if (!report_error) {
      st.frames++;
      st.failed += f.error.empty() ? 0 : 1;
      st.total += f.times;
      try {
        if (report) report(f);
      } catch (...) {
        report_error = std::current_exception();
        cancel();
      }
    }
    f = Frame();
    {
      std::lock_guard<std::mutex> lk(r.src_mu);
      r.inflight--;
    }
    r.window_cv.notify_one();
  }
  for (auto& t : threads) t.join();
  if (report_error) std::rethrow_exception(report_error);
  st.wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  st.plans = r.plans;
  st.plans_from_cache = r.plans_from_cache;
  st.planning_ms = r.planning_ms;
  st.first_pass_ms = r.first_pass_ms;
  for (const auto& w : workers_) st.workers.push_back(w->backend().describe());
  return st;
}

}  // namespace scenelab
