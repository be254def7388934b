// The ONNX importer's arithmetic on shapes and constants, where no engine node is made:
// constant folding (the int64 and float32 computations torch.onnx writes between constants, such
// as F.pad's pads: ConstantOfShape, Concat, Reshape, Slice, Transpose, Cast...), the symbolic
// shapes of F.interpolate(size=y.shape[2:]) (Shape, Gather, Slice, Concat, Unsqueeze, Cast), and
// Pad, folded into the padding of the Conv or AveragePool that reads it.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "weights/onnx_import.h"

#ifdef SCENELAB_WITH_ONNX
namespace scenelab::onnx_import {
namespace {

constexpr size_t kMaxFolded = size_t(1) << 20;  // elements a folded constant may have

// The element count, saturated past kMaxFolded (dimensions from a file may multiply past 2^64).
size_t numel(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) return 0;
    if (size_t(d) > kMaxFolded || n * size_t(d) > kMaxFolded) return kMaxFolded + 1;
    n *= size_t(d);
  }
  return n;
}

std::vector<size_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<size_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * size_t(dims[k]);
  return s;
}

// c's elements at flat indices idx, as a constant of dims.
Const take(const Const& c, const std::vector<size_t>& idx, std::vector<int64_t> dims) {
  Const r;
  r.dims = std::move(dims);
  r.is_int = c.is_int;
  for (size_t k : idx) {
    if (c.is_int) r.i.push_back(c.i[k]);
    else r.f.push_back(c.f[k]);
  }
  return r;
}

// Output element -> input element for an output of `out` dims: in_index(multi-index).
template <class F>
std::vector<size_t> gather_indices(const std::vector<int64_t>& out, F in_index) {
  std::vector<size_t> idx(numel(out));
  std::vector<int64_t> m(out.size(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    idx[k] = in_index(m);
    for (size_t a = out.size(); a-- > 0;) {
      if (++m[a] < out[a]) break;
      m[a] = 0;
    }
  }
  return idx;
}

}  // namespace

std::vector<int64_t> Importer::const_ints(const onnx::NodeProto& n, int input, const char* what) const {
  const Const& c = need_const(n, input, what);
  if (!c.is_int) unsupported(n, str_cat(what, " that are not int64"));
  return c.i;
}

bool Importer::fold_constant(const onnx::NodeProto& n) {
  static const std::set<std::string> ops = {"ConstantOfShape", "Concat", "Reshape", "Slice", "Transpose",
                                            "Cast", "Unsqueeze", "Squeeze", "Gather", "Flatten"};
  const std::string& op = n.op_type();
  if (!ops.count(op) || n.input_size() == 0 || n.input(0).empty()) return false;
  for (const auto& in : n.input())
    if (!in.empty() && !constant(in)) return false;
  const Const& x = *constant(n.input(0));
  for (const auto& in : n.input()) {  // every dimension within 2^20: no sum or product below overflows
    if (in.empty()) continue;
    for (int64_t d : constant(in)->dims)
      if (d > int64_t(kMaxFolded)) unsupported(n, "folding a constant with a dimension beyond 2^20");
  }
  if (numel(x.dims) > kMaxFolded) unsupported(n, "folding a constant of more than 2^20 elements");
  const int64_t rank_x = int64_t(x.dims.size());
  auto axis_of = [&](int64_t a, int64_t r) {
    if (a < -r || a >= r) unsupported(n, str_cat("axis ", a, " of rank ", r));
    return a < 0 ? a + r : a;
  };
  Const r;
  if (op == "ConstantOfShape") {
    known(n, {"value"});
    if (!x.is_int || x.dims.size() != 1) unsupported(n, "a shape that is not a 1-D int64 constant");
    r.dims = x.i;
    for (int64_t d : r.dims)
      if (d < 0) unsupported(n, "a negative dimension");
    const auto* v = attr(n, "value");
    const Const fill = v ? read_const(v->t(), where(n), 64) : Const{{1}, {0.f}, {}, false};
    if (fill.f.size() + fill.i.size() != 1) unsupported(n, "a value that is not one element");
    if (numel(r.dims) > kMaxFolded) unsupported(n, "a constant of more than 2^20 elements");
    r.is_int = fill.is_int;
    if (r.is_int) r.i.assign(numel(r.dims), fill.i[0]);
    else r.f.assign(numel(r.dims), fill.f[0]);
  } else if (op == "Concat") {
    const int64_t axis = axis_of(attr_int(n, "axis", 0), rank_x);
    r = x;
    r.i.clear(), r.f.clear();
    r.dims[size_t(axis)] = 0;
    size_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= size_t(x.dims[size_t(k)]);
    for (const auto& in : n.input()) {
      if (in.empty()) unsupported(n, "an empty input name");
      const Const& c = *constant(in);
      if (c.is_int != x.is_int || c.dims.size() != x.dims.size()) unsupported(n, "inputs of other types or ranks");
      for (size_t k = 0; k < c.dims.size(); ++k)
        if (int64_t(k) != axis && c.dims[k] != x.dims[k]) unsupported(n, "inputs whose other dimensions differ");
      r.dims[size_t(axis)] += c.dims[size_t(axis)];
    }
    if (numel(r.dims) > kMaxFolded) unsupported(n, "a constant of more than 2^20 elements");
    for (size_t o = 0; o < outer; ++o)
      for (const auto& in : n.input()) {
        const Const& c = *constant(in);
        const size_t block = numel(c.dims) / std::max<size_t>(outer, 1);
        for (size_t k = o * block; k < (o + 1) * block; ++k) {
          if (c.is_int) r.i.push_back(c.i[k]);
          else r.f.push_back(c.f[k]);
        }
      }
  } else if (op == "Reshape" || op == "Flatten") {
    std::vector<int64_t> shape;
    if (op == "Flatten") {
      const int64_t axis = axis_of(attr_int(n, "axis", 1), rank_x + 1);
      shape = {int64_t(numel(std::vector<int64_t>(x.dims.begin(), x.dims.begin() + axis))), -1};
    } else {
      known(n, {"allowzero"});
      shape = const_ints(n, 1, "shape");
      for (size_t k = 0; k < shape.size(); ++k)
        if (shape[k] == 0 && !attr_int(n, "allowzero", 0)) {
          if (k >= x.dims.size()) unsupported(n, "a 0 past the input's rank");
          shape[k] = x.dims[k];
        }
    }
    size_t known_part = 1;
    int free = -1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] == -1 && free < 0) free = int(k);
      else if (shape[k] < 0) unsupported(n, "a shape with a negative size");
      else known_part = numel({int64_t(known_part), shape[k]});
    }
    if (free >= 0 && known_part) shape[size_t(free)] = int64_t(numel(x.dims) / known_part);
    if (numel(shape) != numel(x.dims)) unsupported(n, "a shape of another element count");
    r = x;
    r.dims = shape;
  } else if (op == "Transpose") {
    std::vector<int64_t> perm = attr_ints(n, "perm");
    if (perm.empty())
      for (int64_t k = rank_x; k-- > 0;) perm.push_back(k);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 0; k < sorted.size(); ++k)
      if (sorted.size() != x.dims.size() || sorted[k] != int64_t(k)) unsupported(n, "perm that is not a permutation");
    std::vector<int64_t> out;
    for (int64_t p : perm) out.push_back(x.dims[size_t(p)]);
    const auto st = strides_of(x.dims);
    r = take(x, gather_indices(out, [&](const std::vector<int64_t>& m) {
               size_t i = 0;
               for (size_t a = 0; a < m.size(); ++a) i += size_t(m[a]) * st[size_t(perm[a])];
               return i;
             }), out);
  } else if (op == "Slice") {
    if (opset < 10) unsupported(n, "Slice before opset 10");
    const auto starts = const_ints(n, 1, "starts"), ends = const_ints(n, 2, "ends");
    std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
    std::iota(axes.begin(), axes.end(), 0);
    if (n.input_size() > 3 && !n.input(3).empty()) axes = const_ints(n, 3, "axes");
    if (n.input_size() > 4 && !n.input(4).empty()) steps = const_ints(n, 4, "steps");
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      unsupported(n, "starts, ends, axes and steps of different lengths");
    std::vector<int64_t> begin(x.dims.size(), 0), step(x.dims.size(), 1), out = x.dims;
    for (size_t k = 0; k < starts.size(); ++k) {
      const size_t a = size_t(axis_of(axes[k], rank_x));
      const int64_t d = x.dims[a], s = std::max<int64_t>(-d - 1, std::min<int64_t>(d + 1, steps[k]));
      if (s == 0) unsupported(n, "a step of 0");  // (a step past the axis's length takes one element, as that)
      auto clamp = [&](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v < 0 ? v + d : v, lo), hi); };
      const int64_t b = s > 0 ? clamp(starts[k], 0, d) : clamp(starts[k], 0, d - 1);
      const int64_t e = s > 0 ? clamp(ends[k], 0, d) : clamp(ends[k], -1, d - 1);
      begin[a] = b, step[a] = s;
      out[a] = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s) : std::max<int64_t>(0, (b - e - s - 1) / -s);
    }
    const auto st = strides_of(x.dims);
    r = take(x, gather_indices(out, [&](const std::vector<int64_t>& m) {
               size_t i = 0;
               for (size_t a = 0; a < m.size(); ++a) i += size_t(begin[a] + m[a] * step[a]) * st[a];
               return i;
             }), out);
  } else if (op == "Cast") {
    known(n, {"to", "saturate"});
    const int64_t to = attr_int(n, "to", 0);
    r = x;
    if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32) {
      if (!x.is_int) {
        r.i.clear();
        for (float v : x.f) {
          if (!(std::abs(v) < 9.2e18f)) unsupported(n, str_cat("casting ", v, " to an integer"));
          r.i.push_back(int64_t(v));
        }
        r.f.clear(), r.is_int = true;
      }
    } else if (to == onnx::TensorProto::FLOAT) {
      if (x.is_int) {
        r.f.clear();
        for (int64_t v : x.i) r.f.push_back(float(v));
        r.i.clear(), r.is_int = false;
      }
    } else {
      unsupported(n, "a cast of a constant to another type than int64, int32 or float");
    }
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    std::vector<int64_t> axes = opset >= 13 ? (n.input_size() > 1 && !n.input(1).empty() ? const_ints(n, 1, "axes")
                                                                                          : std::vector<int64_t>{})
                                            : attr_ints(n, "axes");
    r = x;
    if (op == "Unsqueeze") {
      const int64_t out_rank = rank_x + int64_t(axes.size());
      for (int64_t& a : axes) a = axis_of(a, out_rank);
      std::sort(axes.begin(), axes.end());
      for (int64_t a : axes) r.dims.insert(r.dims.begin() + std::min<int64_t>(a, int64_t(r.dims.size())), 1);
    } else {
      std::vector<int64_t> keep;
      for (int64_t k = 0; k < rank_x; ++k) {
        const bool listed = axes.empty() ? x.dims[size_t(k)] == 1
                                         : std::any_of(axes.begin(), axes.end(),
                                                       [&](int64_t a) { return axis_of(a, rank_x) == k; });
        if (listed && x.dims[size_t(k)] != 1) unsupported(n, "squeezing a dimension that is not 1");
        if (!listed) keep.push_back(x.dims[size_t(k)]);
      }
      r.dims = keep;
    }
  } else {  // Gather
    const int64_t axis = axis_of(attr_int(n, "axis", 0), rank_x);
    const Const& ind = need_const(n, 1, "indices");
    if (!ind.is_int) unsupported(n, "indices that are not int64");
    std::vector<int64_t> out(x.dims.begin(), x.dims.begin() + axis);
    out.insert(out.end(), ind.dims.begin(), ind.dims.end());
    out.insert(out.end(), x.dims.begin() + axis + 1, x.dims.end());
    const auto st = strides_of(x.dims);
    const size_t id_rank = ind.dims.size();
    const auto ist = strides_of(ind.dims);
    r = take(x, gather_indices(out, [&](const std::vector<int64_t>& m) {
               size_t i = 0, j = 0;
               for (size_t a = 0; a < size_t(axis); ++a) i += size_t(m[a]) * st[a];
               for (size_t a = 0; a < id_rank; ++a) j += size_t(m[size_t(axis) + a]) * ist[a];
               int64_t v = ind.i[j];
               const int64_t d = x.dims[size_t(axis)];
               if (v < -d || v >= d) unsupported(n, str_cat("index ", v, " of a dimension of ", d));
               i += size_t(v < 0 ? v + d : v) * st[size_t(axis)];
               for (size_t a = size_t(axis) + 1; a < x.dims.size(); ++a) i += size_t(m[a + id_rank - 1]) * st[a];
               return i;
             }), out);
  }
  for (int64_t d : r.dims)
    if (d < 0 || d > int64_t(kMaxFolded)) unsupported(n, str_cat("a folded constant with a dimension of ", d));
  consts[n.output(0)] = std::move(r);
  return true;
}

bool Importer::shape_of(const std::string& v, std::vector<SymDim>& out) const {
  auto it = shapes.find(v);
  if (it != shapes.end()) {
    out = it->second;
    return true;
  }
  const Const* c = constant(v);
  if (!c || !c->is_int || c->dims.size() > 1) return false;
  out.clear();
  for (int64_t x : c->i) out.push_back(SymDim{x, "", -1});
  return true;
}

bool Importer::map_shape_op(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  std::vector<SymDim> a;
  if (op == "Shape") {
    known(n, {"start", "end"});  // opset 15: the dimensions [start, end) alone
    const std::string x = data(n, 0);
    std::vector<SymDim> d;
    for (int k = 4 - rank; k < 4; ++k) d.push_back(SymDim{0, x, k});
    auto clamp = [&](int64_t v) { return std::min<int64_t>(std::max<int64_t>(v < 0 ? v + rank : v, 0), rank); };
    const int64_t b = clamp(attr_int(n, "start", 0)), e = clamp(attr_int(n, "end", rank));
    shapes[n.output(0)] = std::vector<SymDim>(d.begin() + b, d.begin() + std::max(b, e));
    return true;
  }
  if (op == "Concat") {
    std::vector<SymDim> all;
    for (int k = 0; k < n.input_size(); ++k) {
      std::vector<SymDim> part;
      if (!shape_of(n.input(k), part)) return false;  // data: the channel concat
      all.insert(all.end(), part.begin(), part.end());
    }
    if (attr_int(n, "axis", 0) != 0) unsupported(n, "a shape concatenated along axis 1");
    shapes[n.output(0)] = all;
    return true;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    if (n.input_size() != 2 || !(shapes.count(n.input(0)) || shapes.count(n.input(1)))) return false;  // data
    known(n, {});
    shapes[n.output(0)] = shape_arithmetic(n);
    return true;
  }
  if (n.input_size() == 0 || !shapes.count(n.input(0))) return false;  // the ops below on data: theirs
  a = shapes.at(n.input(0));
  if (op == "Reshape") {  // a size as a vector of one, or back (torch.export's sizes)
    known(n, {"allowzero"});
    const std::vector<int64_t> to = const_ints(n, 1, "shape");
    const bool same = to.empty() ? a.size() == 1 : to.size() == 1 && (to[0] == -1 || to[0] == int64_t(a.size()));
    if (!same) unsupported(n, "a shape value reshaped to other than one dimension");
    shapes[n.output(0)] = a;
    return true;
  }
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Cast" || op == "Identity") {
    if (op == "Cast" && attr_int(n, "to", onnx::TensorProto::INT64) != onnx::TensorProto::INT64)
      unsupported(n, "a shape cast to another type than int64");
    shapes[n.output(0)] = a;  // one element or a vector: the same values
    return true;
  }
  if (op == "Gather") {
    known(n, {"axis"});
    if (attr_int(n, "axis", 0) != 0) unsupported(n, "a shape gathered along axis 1");
    const Const& idx = need_const(n, 1, "indices");
    if (!idx.is_int || idx.dims.size() > 1) unsupported(n, "indices that are not int64 of rank 0 or 1");
    std::vector<SymDim> r;
    for (int64_t i : idx.i) {
      const int64_t k = i < 0 ? i + int64_t(a.size()) : i;
      if (k < 0 || k >= int64_t(a.size())) unsupported(n, str_cat("index ", i, " of a shape of ", a.size()));
      r.push_back(a[size_t(k)]);
    }
    shapes[n.output(0)] = r;
    return true;
  }
  if (op == "Slice") {
    if (opset < 10) unsupported(n, "Slice before opset 10");
    known(n, {});
    auto ints = [&](int input, int64_t def) {
      if (input >= n.input_size() || n.input(input).empty()) return std::vector<int64_t>{def};
      const Const& c = need_const(n, input, "slice bounds");
      if (!c.is_int || c.i.size() != 1) unsupported(n, "slice bounds that are not one int64");
      return c.i;
    };
    const int64_t size = int64_t(a.size()), step = ints(4, 1)[0];
    if (ints(3, 0)[0] != 0) unsupported(n, "a slice along axis 1");
    if (step != 1) unsupported(n, "a slice with a step");
    auto clamp = [&](int64_t v) { return std::min(std::max(v < 0 ? v + size : v, int64_t(0)), size); };
    const int64_t b = clamp(ints(1, 0)[0]), e = clamp(ints(2, size)[0]);
    shapes[n.output(0)] = std::vector<SymDim>(a.begin() + b, a.begin() + std::max(b, e));
    return true;
  }
  return false;
}

// Elementwise on two shape values, one of them constants (or one element, broadcast): Add, Sub,
// Mul, Div on int64, kept in SymDim's form ((D + add) / div) * mul + value.
std::vector<SymDim> Importer::shape_arithmetic(const onnx::NodeProto& n) const {
  const std::string& op = n.op_type();
  std::vector<SymDim> a, b;
  if (!shape_of(n.input(0), a) || !shape_of(n.input(1), b))
    unsupported(n, "shape arithmetic with a value that is neither a shape nor an int64 constant");
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1)
    unsupported(n, str_cat("shape arithmetic on ", a.size(), " and ", b.size(), " values"));
  if (a.empty() || b.empty()) return {};  // an empty shape, or one value broadcast over none
  constexpr int64_t kBig = int64_t(1) << 31;  // every term within this: no product below overflows
  auto small = [&](int64_t v) {
    if (v <= -kBig || v >= kBig) unsupported(n, str_cat("shape arithmetic reaching ", v));
    return v;
  };
  std::vector<SymDim> r;
  for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
    const SymDim &p = a[a.size() == 1 ? 0 : k], &q = b[b.size() == 1 ? 0 : k];
    if (p.axis >= 0 && q.axis >= 0) unsupported(n, "arithmetic between two sizes");
    if (p.axis < 0 && q.axis < 0) {  // two constants: ONNX's int64 arithmetic (Div truncates)
      if (op == "Div" && q.value == 0) unsupported(n, "a division by zero");
      SymDim v;
      v.value = small(op == "Add" ? p.value + q.value : op == "Sub" ? p.value - q.value
                    : op == "Mul" ? p.value * q.value : p.value / q.value);
      r.push_back(v);
      continue;
    }
    if (p.axis < 0 && (op == "Sub" || op == "Div"))  // c + D and c * D alone, the constant first
      unsupported(n, str_cat("a constant ", op == "Sub" ? "minus" : "divided by", " a size"));
    SymDim x = p.axis >= 0 ? p : q;
    const int64_t c = small(p.axis >= 0 ? q.value : p.value);
    if (op == "Add") x.value = small(x.value + c);
    else if (op == "Sub") x.value = small(x.value - c);
    else if (c <= 0) unsupported(n, str_cat("a size ", op == "Mul" ? "times " : "divided by ", c));
    else if (op == "Mul") x.mul = small(x.mul * c), x.value = small(x.value * c);
    else if (x.mul % c == 0 && x.value % c == 0) x.mul /= c, x.value /= c;  // exact
    else if (x.mul == 1) x.add = small(x.add + x.value * x.div), x.div = small(x.div * c), x.value = 0;
    else unsupported(n, str_cat("a size ((D + ", x.add, ") / ", x.div, ") * ", x.mul, " divided by ", c));
    r.push_back(x);
  }
  return r;
}

void Importer::map_pad(const onnx::NodeProto& n) {
  known(n, {"mode", "pads", "value"});
  if (attr_str(n, "mode", "constant") != "constant") unsupported(n, "mode " + attr_str(n, "mode", "constant"));
  std::vector<int64_t> p;
  float value = attr_float(n, "value", 0.f);
  if (opset < 11) {
    p = attr_ints(n, "pads");
  } else {
    const Const& c = need_const(n, 1, "pads");
    if (!c.is_int) unsupported(n, "pads that are not int64");
    p = c.i;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const Const& v = need_const(n, 2, "constant_value");
      if (v.is_int || v.f.size() != 1) unsupported(n, "a constant_value that is not one float");
      value = v.f[0];
    }
    if (n.input_size() > 3 && !n.input(3).empty()) unsupported(n, "axes");
  }
  if (rank != 4 || p.size() != 8) unsupported(n, str_cat(p.size(), " pads for rank ", rank));
  if (p[0] || p[1] || p[4] || p[5]) unsupported(n, "padding the batch or the channels");
  for (int64_t v : p) {
    if (v < 0) unsupported(n, "negative pads (cropping)");
    if (v > (1 << 16)) unsupported(n, str_cat("pads of ", v, " (at most 65536)"));
  }
  if (value != 0.f) unsupported(n, "a value other than 0");
  // Zeros around the map are what the one reader's own padding adds: a Conv's, or an
  // AveragePool's counted in the mean (how torch.onnx writes AvgPool2d(count_include_pad=True)).
  const onnx::NodeProto* reader = nullptr;
  if (uses[n.output(0)] == 1)
    for (const auto& m : proto.graph().node())
      if (m.input_size() > 0 && m.input(0) == n.output(0) && (m.op_type() == "Conv" || m.op_type() == "AveragePool"))
        reader = &m;
  if (!reader) unsupported(n, "a Pad whose one reader is not a Conv or AveragePool (it is folded into their pads)");
  folded_pads[n.output(0)] = {p[2], p[3], p[6], p[7]};
  node_of[n.output(0)] = data(n, 0);
}

void Importer::add_folded_pads(const onnx::NodeProto& n, std::vector<int64_t>& pads) const {
  if (n.input_size() == 0) return;
  auto it = folded_pads.find(n.input(0));
  if (it == folded_pads.end()) return;
  for (size_t k = 0; k < 4; ++k) {
    if (pads[k] > (1 << 16)) unsupported(n, str_cat("pads of ", pads[k], " after a Pad (at most 65536)"));
    pads[k] += it->second[k];
  }
}

}  // namespace scenelab::onnx_import
#endif
