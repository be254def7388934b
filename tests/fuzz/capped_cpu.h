// The fuzz harnesses' CPU backend: its headroom capped at 1 GiB, so that a plan past it fails by
// name (as past the host's own headroom), where a single larger allocation would trip libFuzzer's
// malloc limit (a model that is valid but huge, e.g. a convolution padded by 65536 pixels).
#pragma once
#include <algorithm>
#include <cstddef>

#include "engine/graph.h"

namespace scenelab::fuzz {

class CappedCpu : public CpuBackend {
 public:
  CappedCpu() : CpuBackend(1) {}
  size_t free_bytes() const override {
    const size_t host = CpuBackend::free_bytes(), cap = size_t(1) << 30;
    return host == 0 ? cap : std::min(host, cap);
  }
};

}  // namespace scenelab::fuzz
