// The GPU board's energy counter through NVML, for benchmarks' GOp/s per watt and energy per
// frame (as the paper's Fig. 4 compares platforms by throughput per watt). NVML is the driver's
// libnvidia-ml.so.1, opened at run time: where it is absent (no driver, or a counter the board
// lacks) ok() is false, why() says so, and the benchmark prints no power figures. The few NVML
// entry points used are declared here from its public C interface (the toolkit here ships no
// nvml.h). The counter is the board's total energy (mJ since the driver loaded), updated by the
// driver every few tens of ms: measure over a second or more.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <string>

namespace scenelab::tools {

class EnergyMeter {
 public:
  explicit EnergyMeter(int cuda_device) {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      why_ = "libnvidia-ml.so.1 not found";
      return;
    }
    auto sym = [&](const char* name) { return dlsym(lib_, name); };
    init_ = reinterpret_cast<Init>(sym("nvmlInit_v2"));
    shutdown_ = reinterpret_cast<Init>(sym("nvmlShutdown"));
    by_pci_ = reinterpret_cast<ByPci>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    energy_ = reinterpret_cast<Energy>(sym("nvmlDeviceGetTotalEnergyConsumption"));
    if (!init_ || !shutdown_ || !by_pci_ || !energy_) {
      why_ = "libnvidia-ml.so.1 lacks an entry point used here";
      return;
    }
    if (init_() != 0) {
      why_ = "nvmlInit failed";
      return;
    }
    initialised_ = true;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
      (void)cudaGetLastError();
      why_ = "no PCI bus id for the CUDA device";
      return;
    }
    unsigned long long mj = 0;
    if (by_pci_(bus, &device_) != 0 || energy_(device_, &mj) != 0) {
      why_ = "the board's energy counter is not readable through NVML";
      return;
    }
    ok_ = true;
  }
  ~EnergyMeter() {
    if (initialised_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  EnergyMeter(const EnergyMeter&) = delete;
  EnergyMeter& operator=(const EnergyMeter&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  // The board's energy counter, mJ (0 when !ok()).
  double millijoules() const {
    unsigned long long mj = 0;
    return ok_ && energy_(device_, &mj) == 0 ? double(mj) : 0.0;
  }

 private:
  using Init = int (*)();
  using ByPci = int (*)(const char*, void**);
  using Energy = int (*)(void*, unsigned long long*);
  void* lib_ = nullptr;
  void* device_ = nullptr;
  Init init_ = nullptr, shutdown_ = nullptr;
  ByPci by_pci_ = nullptr;
  Energy energy_ = nullptr;
  bool initialised_ = false, ok_ = false;
  std::string why_;
};

}  // namespace scenelab::tools
#endif
