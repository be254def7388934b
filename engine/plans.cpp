#include "engine/plans.h"

#include <chrono>

#include "core/error.h"

namespace scenelab {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

Plans::Plans(const Model& model, std::unique_ptr<Backend> backend, Options o)
    : Plans(model, std::move(backend), nullptr, std::move(o)) {}

Plans::Plans(const Model& model, const Backend& borrowed, Options o) : Plans(model, nullptr, &borrowed, std::move(o)) {}

Plans::Plans(const Model& model, std::unique_ptr<Backend> owned, const Backend* borrowed, Options o)
    : model_(model), owned_(std::move(owned)), backend_(owned_ ? owned_.get() : borrowed), opt_(std::move(o)) {
  SL_REQUIRE(backend_ != nullptr, "Plans: no backend");
  SL_REQUIRE(opt_.keep >= 0, "Plans: keep ", opt_.keep, " must be >= 0");
  if (opt_.cache && opt_.fingerprint.empty()) opt_.fingerprint = model_fingerprint(model);
}

Plans::Plan& Plans::get(int n, int h, int w, const PlanIO& io, bool larger_batch) {
  auto it = plans_.end();
  for (auto q = plans_.begin(); q != plans_.end(); ++q) {
    if (q->h != h || q->w != w || !(q->io == io)) continue;
    if (q->n == n || (larger_batch && q->n > n && (it == plans_.end() || q->n < it->n))) it = q;
    if (q->n == n) break;
  }
  made_last_ = it == plans_.end();
  if (!made_last_) {
    plans_.splice(plans_.begin(), plans_, it);
    return plans_.front();
  }
  if (opt_.keep > 0 && int(plans_.size()) >= opt_.keep) plans_.pop_back();  // frees it first
  const auto t0 = Clock::now();
  plans_.emplace_front(model_);  // a Graph stays where it is made
  Plan& p = plans_.front();
  p.n = n, p.h = h, p.w = w, p.io = io;
  try {
    p.graph.plan(n, h, w, *backend_, io);
  } catch (...) {
    plans_.pop_front();
    throw;
  }
  if (opt_.cache && !backend_->identity().empty())
    p.key = plan_key(backend_->identity(), opt_.fingerprint, "", n, h, w);
  p.plan_ms = ms_since(t0);
  return p;
}

Plans::Plan& Plans::latest() {
  SL_REQUIRE(!plans_.empty(), "Plans::latest: nothing planned yet");
  return plans_.front();
}

const Plans::Plan& Plans::latest() const {
  SL_REQUIRE(!plans_.empty(), "Plans::latest: nothing planned yet");
  return plans_.front();
}

void Plans::drop(int n, int h, int w) {
  plans_.remove_if([&](const Plan& p) { return p.n == n && p.h == h && p.w == w; });
}

Plans::FirstRun Plans::run(Plan& p, const std::function<void()>& pass) {
  FirstRun r;
  if (!p.first_run) {
    pass();
    return r;
  }
  const auto t0 = Clock::now();
  if (!p.key.empty()) {
    if (auto saved = opt_.cache->find(p.key)) r.restored = p.graph.restore_tuning(*saved).empty();
  }
  r.restore_ms = ms_since(t0);
  const auto t1 = Clock::now();
  pass();
  r.pass_ms = ms_since(t1);
  r.tuned = !p.key.empty() && !r.restored;
  if (r.tuned) opt_.cache->store(p.key, p.graph.tuning());
  p.first_run = false;
  return r;
}

}  // namespace scenelab
