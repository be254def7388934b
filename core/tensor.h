// Tensors. Tensor owns 64-byte aligned host memory of float32 NCHW (RAII); TensorView is a
// non-owning window used by layers, so the graph can place many tensors in reused buffers. A view
// carries its format: element type (f32, f16, bf16, u8) and layout (NCHW, or NHWC: channels
// innermost); the shape is always given as n, c, h, w. The CPU path is f32 NCHW throughout; the
// GPU path runs f16/bf16 NHWC between the layers that take it (the planner places conversions,
// engine/graph.h).
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

enum class DType : uint8_t { F32, F16, BF16, U8 };
enum class Layout : uint8_t { NCHW, NHWC };
size_t dtype_bytes(DType t);
const char* dtype_name(DType t);

struct Format {
  DType dtype = DType::F32;
  Layout layout = Layout::NCHW;
  bool operator==(const Format& o) const { return dtype == o.dtype && layout == o.layout; }
  bool operator!=(const Format& o) const { return !(*this == o); }
  std::string str() const;  // "f16 NHWC"
};

struct TensorView {
  void* data = nullptr;
  Shape shape;
  Format format;
  // The float32 elements of an f32 view (the CPU path and f32 GPU tensors).
  float* f32() const { return static_cast<float*>(data); }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  size_t bytes() const { return shape.numel() * dtype_bytes(format.dtype); }
  // f32 NCHW only:
  float* channel(int n, int c) const { return f32() + (size_t(n) * shape.c + c) * shape.plane(); }
  float& at(int n, int c, int y, int x) const { return channel(n, c)[size_t(y) * shape.w + x]; }
};

// Host-side element conversions (IEEE binary16 with round-to-nearest-even; bfloat16 likewise).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_bf16(float f);
// Element i (in memory order) of a host view of any type, as float; and stored from a float
// (into u8: rounded to nearest, clamped to 0..255, NaN -> 0).
float load_element(const TensorView& v, size_t i);
void store_element(const TensorView& v, size_t i, float x);
// Memory index of element (n, c, pixel p) of a view with this shape and layout.
inline size_t element_index(const Shape& s, Layout l, int n, int c, size_t p) {
  return l == Layout::NCHW ? (size_t(n) * s.c + c) * s.plane() + p : (size_t(n) * s.plane() + p) * s.c + c;
}
// A view of any format into f32 NCHW host floats (`src` in host memory).
void to_f32_nchw(const TensorView& src, float* dst);

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
  TensorView view() const { return TensorView{data_.get(), shape_, Format{}}; }
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
