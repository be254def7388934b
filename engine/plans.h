// The one owner of a model's planned graphs on one backend: the backend (its own, or borrowed),
// the plans by input size, batch and PlanIO (the most recently used kept, up to a number), and
// what each plan's first run timed, restored from and stored in a PlanCache. The pipeline's
// workers, the Labeler, the public API and the pyramid detector all plan through it.
#pragma once
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/model.h"
#include "engine/plan_cache.h"

namespace scenelab {

// What an owner keeps beside a plan and drops with it (e.g. the pipeline's page-locked staging).
struct PlanExtras {
  virtual ~PlanExtras() = default;
};

class Plans {
 public:
  struct Plan {
    explicit Plan(const Model& m) : graph(m) {}
    Graph graph;
    int n = 0, h = 0, w = 0;
    PlanIO io;
    std::string key;  // its plan cache key; "" where nothing is timed or cached
    bool first_run = true;
    double plan_ms = 0;  // Graph::plan's time
    std::unique_ptr<PlanExtras> extras;
  };
  struct Options {
    // Where the first runs' timings are kept (shared by several owners on one model); none: each
    // plan times anew.
    PlanCache* cache = nullptr;
    std::string fingerprint;  // model_fingerprint(model), where the caller has it ("" : made here)
    int keep = 1;             // plans kept (least recently used dropped first); 0: no limit
  };

  // Keeps references to `model` (and a borrowed backend): they must outlive this.
  Plans(const Model& model, std::unique_ptr<Backend> backend, Options o);
  Plans(const Model& model, const Backend& borrowed, Options o);
  Plans(const Model& model, std::unique_ptr<Backend> backend) : Plans(model, std::move(backend), Options{}) {}
  Plans(const Model& model, const Backend& borrowed) : Plans(model, borrowed, Options{}) {}
  Plans(const Plans&) = delete;
  Plans& operator=(const Plans&) = delete;

  // The plan for n images of h x w read as `io` says, made the most recently used: a kept one
  // (with `larger_batch`, the smallest kept batch >= n of that size and io), else a new one
  // (the least recently used dropped first where `keep` are held). Throws as Graph::plan does;
  // nothing is kept then.
  Plan& get(int n, int h, int w, const PlanIO& io, bool larger_batch = false);
  bool made_last() const { return made_last_; }  // whether the last get() planned anew
  // The most recently used plan (get() was called).
  Plan& latest();
  const Plan& latest() const;
  // Drops the plans of this size and batch (after a failed run: planned anew next time).
  void drop(int n, int h, int w);
  void clear() { plans_.clear(); }
  size_t size() const { return plans_.size(); }

  // What a plan's first run did: its tuning restored from the cache (restore_ms), or the pass
  // timed the layers' choices (tuned: stored in the cache where there is one); pass_ms: the pass.
  struct FirstRun {
    bool restored = false, tuned = false;
    double restore_ms = 0, pass_ms = 0;
  };
  // Runs `pass` (which runs p.graph) once: on p's first run with the cached tuning restored
  // first, and what the pass timed stored after; later runs just run it.
  FirstRun run(Plan& p, const std::function<void()>& pass);

  const Backend& backend() const { return *backend_; }
  const Model& model() const { return model_; }

 private:
  Plans(const Model& model, std::unique_ptr<Backend> owned, const Backend* borrowed, Options o);
  const Model& model_;
  std::unique_ptr<Backend> owned_;
  const Backend* backend_;
  Options opt_;
  std::list<Plan> plans_;  // most recently used first
  bool made_last_ = false;
};

}  // namespace scenelab
