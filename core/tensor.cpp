#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace scenelab {

std::string Shape::str() const { return str_cat(n, "x", c, "x", h, "x", w); }

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::U8: return 1;
  }
  return 4;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::U8: return "u8";
  }
  return "?";
}

std::string Format::str() const {
  return str_cat(dtype_name(dtype), layout == Layout::NCHW ? " NCHW" : " NHWC");
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const int exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF, u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (mant << 13);  // inf, NaN
  } else if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400));
      u = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3FF) << 13;
    }
  } else {
    u = sign | uint32_t(exp - 15 + 127) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return uint16_t(sign | 0x7C00 | (a > 0x7F800000u ? 0x200 : 0));
  if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    if (a < 0x33000000u) return sign;                     // below half the smallest subnormal
    const uint32_t mant = (a & 0x7FFFFF) | 0x800000;
    const int shift = 126 - int(a >> 23);  // 14..24
    const uint32_t v = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    return uint16_t(sign | (v + (rem > half || (rem == half && (v & 1)))));
  }
  const uint32_t v = ((a >> 13) - (112u << 10)), rem = a & 0x1FFF;
  return uint16_t(sign | (v + (rem > 0x1000 || (rem == 0x1000 && (v & 1)))));
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

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

float load_element(const TensorView& v, size_t i) {
  switch (v.format.dtype) {
    case DType::F32: return v.as<const float>()[i];
    case DType::F16: return half_to_float(v.as<const uint16_t>()[i]);
    case DType::BF16: return bf16_to_float(v.as<const uint16_t>()[i]);
    case DType::U8: return float(v.as<const uint8_t>()[i]);
  }
  return 0.f;
}

void store_element(const TensorView& v, size_t i, float x) {
  switch (v.format.dtype) {
    case DType::F32: v.as<float>()[i] = x; break;
    case DType::F16: v.as<uint16_t>()[i] = float_to_half(x); break;
    case DType::BF16: v.as<uint16_t>()[i] = float_to_bf16(x); break;
    case DType::U8: v.as<uint8_t>()[i] = x >= 0.f ? uint8_t(std::fmin(x + 0.5f, 255.f)) : uint8_t(0); break;
  }
}

void to_f32_nchw(const TensorView& src, float* dst) {
  const Shape& s = src.shape;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (size_t p = 0; p < s.plane(); ++p)
        dst[element_index(s, Layout::NCHW, n, c, p)] = load_element(src, element_index(s, src.format.layout, n, c, p));
}

}  // namespace scenelab
