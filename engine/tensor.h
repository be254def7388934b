// NCHW float32 tensors. Tensor owns 64-byte aligned host memory (RAII); TensorView is a
// non-owning window used by layers, so the graph can place many tensors in reused buffers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace scenelab {

struct Shape {
  int n = 0, c = 0, h = 0, w = 0;
  Shape() = default;
  Shape(int n_, int c_, int h_, int w_) : n(n_), c(c_), h(h_), w(w_) {}
  size_t numel() const { return size_t(n) * size_t(c) * size_t(h) * size_t(w); }
  size_t plane() const { return size_t(h) * size_t(w); }
  bool empty() const { return numel() == 0; }
  bool operator==(const Shape& o) const { return n == o.n && c == o.c && h == o.h && w == o.w; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "1x3x240x320"
};

struct TensorView {
  float* data = nullptr;
  Shape shape;
  float* channel(int n, int c) const { return data + (size_t(n) * shape.c + c) * shape.plane(); }
  float& at(int n, int c, int y, int x) const { return channel(n, c)[size_t(y) * shape.w + x]; }
};

struct AlignedFree {
  void operator()(float* p) const;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape s);
  Tensor(Shape s, float fill);
  Tensor(const Tensor& o);
  Tensor& operator=(const Tensor& o);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  const Shape& shape() const { return shape_; }
  size_t numel() const { return shape_.numel(); }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }
  TensorView view() const { return TensorView{data_.get(), shape_}; }
  // Changes the shape in place; the element count must stay the same.
  void reshape(Shape s);
  void fill(float v);

 private:
  Shape shape_;
  std::unique_ptr<float[], AlignedFree> data_;
};

// Aligned raw float storage, used for planned buffers and workspaces.
std::unique_ptr<float[], AlignedFree> aligned_floats(size_t count);

}  // namespace scenelab
