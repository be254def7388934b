#include "engine/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/error.h"

namespace scenelab {

std::string Shape::str() const { return str_cat(n, "x", c, "x", h, "x", w); }

void AlignedFree::operator()(float* p) const { std::free(p); }

std::unique_ptr<float[], AlignedFree> aligned_floats(size_t count) {
  if (count == 0) return std::unique_ptr<float[], AlignedFree>(nullptr);
  size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  return std::unique_ptr<float[], AlignedFree>(static_cast<float*>(p));
}

Tensor::Tensor(Shape s) : shape_(s) {
  SL_REQUIRE(s.n >= 0 && s.c >= 0 && s.h >= 0 && s.w >= 0, "negative tensor shape ", s.str());
  data_ = aligned_floats(s.numel());
}

Tensor::Tensor(Shape s, float v) : Tensor(s) { fill(v); }

Tensor::Tensor(const Tensor& o) : Tensor(o.shape_) {
  if (numel()) std::memcpy(data_.get(), o.data_.get(), numel() * sizeof(float));
}

Tensor& Tensor::operator=(const Tensor& o) {
  if (this != &o) *this = Tensor(o);
  return *this;
}

void Tensor::reshape(Shape s) {
  SL_REQUIRE(s.numel() == shape_.numel(), "cannot reshape ", shape_.str(), " to ", s.str());
  shape_ = s;
}

void Tensor::fill(float v) { std::fill(data_.get(), data_.get() + numel(), v); }

}  // namespace scenelab
