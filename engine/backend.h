// Backends execute a planned graph. The CPU backend runs every layer's forward_cpu with OpenMP
// and Eigen threads; the CUDA backend (issue 3) plugs in behind the same interface.
#pragma once
#include <memory>
#include <string>

namespace scenelab {

enum class DeviceKind { CPU, CUDA };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu (2 threads)"
  virtual int threads() const { return 1; }
  // Makes this backend current for the calling thread (thread counts, device).
  virtual void activate() const = 0;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads = 0);  // 0: all hardware threads
  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string describe() const override;
  int threads() const override { return threads_; }
  void activate() const override;

 private:
  int threads_;
};

// "cpu", "cuda" or "auto" (cuda when built with it and a GPU is present, else cpu).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads);
bool cuda_device_available();

}  // namespace scenelab
