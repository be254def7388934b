// What layers timed at planning (Graph::tuning: convolution algorithms, cuDNN's picks), kept so
// that a size is timed once: in memory, shared by a pipeline's workers, and on disk, shared by
// later runs. A key names everything a timing depends on (Backend::identity(): GPU, driver,
// CUDA, cuBLAS and cuDNN versions; the model's content; precision and algorithm options; input
// size and batch); each key is one small text file, written atomically, checked by a checksum.
// A corrupt, truncated or foreign file is ignored with a warning and timed anew: never a crash,
// never a choice measured elsewhere.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/model.h"

namespace scenelab {

// A model's content (graph and parameters), as 16 hex digits.
std::string model_fingerprint(const Model& m);

class PlanCache {
 public:
  // dir: where entries live on disk; "" keeps them in memory only. `warn` receives one line per
  // ignored file (default: stderr).
  explicit PlanCache(std::string dir = {}, std::function<void(const std::string&)> warn = {});
  // $SCENELAB_PLAN_CACHE, else $XDG_CACHE_HOME/scenelab, else ~/.cache/scenelab ("" if none).
  static std::string default_dir();
  const std::string& dir() const { return dir_; }

  // key: one line naming everything the tuning depends on (see plan_key()).
  std::optional<Tuning> find(const std::string& key);
  void store(const std::string& key, const Tuning& t);
  // The file an entry lives in (for tests and messages).
  std::string path_of(const std::string& key) const;
  // Held while a plan is tuned, so two workers sharing a GPU neither time the same size twice
  // nor disturb each other's timings.
  std::mutex& tuning_mutex() { return tune_mu_; }

 private:
  std::optional<Tuning> read(const std::string& key);
  std::string dir_;
  std::function<void(const std::string&)> warn_;
  std::mutex mu_, tune_mu_;
  std::map<std::string, Tuning> memory_;
};

// The key of a plan: backend identity, model fingerprint, backend options, size and batch.
std::string plan_key(const std::string& backend_identity, const std::string& model_fingerprint,
                     const std::string& options, int n, int h, int w);

}  // namespace scenelab
