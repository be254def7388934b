#include "weights/model_file.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/error.h"
#include "nms/sliding_window.h"
#include "weights/isolated.h"
#include "weights/onnx_model.h"
#include "weights/h5.h"

namespace scenelab {
namespace {

std::string class_name_of(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return str_cat("int", 8 * H5Tget_size(type));
    case H5T_FLOAT: return str_cat("float", 8 * H5Tget_size(type));
    case H5T_STRING: return "string";
    default: return "non-numeric type";
  }
}

std::string read_string_attr(hid_t obj, const char* name, const std::string& file) {
  SL_REQUIRE(H5Aexists(obj, name) > 0, file, ": missing attribute '", name, "'");
  H5Id attr(h5_check(H5Aopen(obj, name, H5P_DEFAULT), file, str_cat("open attribute ", name)),
            H5Aclose);
  H5Id type(h5_check(H5Aget_type(attr.get()), file, "attribute type"), H5Tclose);
  SL_REQUIRE(H5Tget_class(type.get()) == H5T_STRING, file, ": attribute '", name,
             "' should be a string, found ", class_name_of(type.get()));
  H5Id space(h5_check(H5Aget_space(attr.get()), file, "attribute space"), H5Sclose);
  SL_REQUIRE(H5Sget_simple_extent_npoints(space.get()) == 1, file, ": attribute '", name,
             "' should be a single string");
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* s = nullptr;
    h5_check(H5Aread(attr.get(), mem.get(), &s), file, str_cat("read attribute ", name));
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  size_t n = H5Tget_size(type.get());
  std::vector<char> buf(n + 1, 0);
  h5_check(H5Aread(attr.get(), type.get(), buf.data()), file, str_cat("read attribute ", name));
  return std::string(buf.data(), strnlen(buf.data(), n));
}

long long read_int_attr(hid_t obj, const char* name, const std::string& file) {
  SL_REQUIRE(H5Aexists(obj, name) > 0, file, ": not a scenelab model (no attribute '", name,
             "')");
  H5Id attr(h5_check(H5Aopen(obj, name, H5P_DEFAULT), file, str_cat("open attribute ", name)),
            H5Aclose);
  H5Id type(h5_check(H5Aget_type(attr.get()), file, "attribute type"), H5Tclose);
  SL_REQUIRE(H5Tget_class(type.get()) == H5T_INTEGER, file, ": attribute '", name,
             "' should be an integer, found ", class_name_of(type.get()));
  H5Id space(h5_check(H5Aget_space(attr.get()), file, "attribute space"), H5Sclose);
  SL_REQUIRE(H5Sget_simple_extent_npoints(space.get()) == 1, file, ": attribute '", name,
             "' should be a scalar");
  long long v = 0;
  h5_check(H5Aread(attr.get(), H5T_NATIVE_LLONG, &v), file, str_cat("read attribute ", name));
  return v;
}

// Opens dataset `path`, checks its type class/size and rank/dims; returns the dims.
H5Id open_dataset(hid_t file, const std::string& path, const std::string& fname,
                  H5T_class_t cls, size_t size, const char* type_name,
                  std::vector<hsize_t>* dims_out) {
  SL_REQUIRE(path_exists(file, path), fname, ": missing dataset '", path, "'");
  H5Id ds(h5_check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), fname,
                   str_cat("open dataset '", path, "'")),
          H5Dclose);
  H5Id type(h5_check(H5Dget_type(ds.get()), fname, "dataset type"), H5Tclose);
  if (cls != H5T_NO_CLASS)
    SL_REQUIRE(H5Tget_class(type.get()) == cls && (size == 0 || H5Tget_size(type.get()) == size),
               fname, ": dataset '", path, "' has type ", class_name_of(type.get()),
               ", expected ", type_name);
  H5Id space(h5_check(H5Dget_space(ds.get()), fname, "dataset space"), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.get());
  SL_REQUIRE(rank >= 0 && rank <= 8, fname, ": dataset '", path, "' has an unreadable shape");
  dims_out->assign(size_t(rank), 0);
  H5Sget_simple_extent_dims(space.get(), dims_out->data(), nullptr);
  return ds;
}

std::string dims_str(const std::vector<hsize_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}
std::string dims_str(const std::vector<int>& d) {
  return dims_str(std::vector<hsize_t>(d.begin(), d.end()));
}

Tensor read_param(hid_t file, const std::string& path, const std::vector<int>& want,
                  const std::string& fname) {
  std::vector<hsize_t> dims;
  H5Id ds = open_dataset(file, path, fname, H5T_FLOAT, 4, "float32", &dims);
  bool same = dims.size() == want.size();
  for (size_t i = 0; same && i < dims.size(); ++i) same = dims[i] == hsize_t(want[i]);
  SL_REQUIRE(same, fname, ": dataset '", path, "' has shape ", dims_str(dims), ", expected ",
             dims_str(want));
  Tensor t(param_shape(want));
  h5_check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()), fname,
           str_cat("read dataset '", path, "'"));
  for (size_t i = 0; i < t.numel(); ++i)
    SL_REQUIRE(std::isfinite(t[i]), fname, ": dataset '", path, "' holds a non-finite value (",
               t[i], ") at flat index ", i);
  return t;
}

// `count` strings (what the graph says there must be: checked before anything is allocated for
// them, as is each fixed-length string's size).
std::vector<std::string> read_string_list(hid_t file, const std::string& path,
                                          const std::string& fname, int count, const char* of) {
  std::vector<hsize_t> dims;
  H5Id ds = open_dataset(file, path, fname, H5T_STRING, 0, "string", &dims);
  SL_REQUIRE(dims.size() == 1, fname, ": dataset '", path, "' should be 1-D, found shape ",
             dims_str(dims));
  SL_REQUIRE(dims[0] == hsize_t(count), fname, ": dataset '", path, "' has ", dims[0],
             " names, but the graph outputs ", count, " ", of);
  H5Id type(h5_check(H5Dget_type(ds.get()), fname, "dataset type"), H5Tclose);
  constexpr size_t kMaxName = 4096;
  std::vector<std::string> out;
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    std::vector<char*> ptrs(dims[0], nullptr);
    h5_check(H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), fname,
             str_cat("read dataset '", path, "'"));
    for (char* p : ptrs) {
      out.push_back(p ? p : "");
      H5free_memory(p);
    }
  } else {
    size_t n = H5Tget_size(type.get());
    SL_REQUIRE(n >= 1 && n <= kMaxName, fname, ": dataset '", path, "' holds strings of ", n,
               " bytes, outside 1-", kMaxName);
    std::vector<char> buf(n * dims[0]);
    h5_check(H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), fname,
             str_cat("read dataset '", path, "'"));
    for (hsize_t i = 0; i < dims[0]; ++i)
      out.emplace_back(buf.data() + i * n, strnlen(buf.data() + i * n, n));
  }
  return out;
}

void write_string_attr(hid_t obj, const char* name, const std::string& value,
                       const std::string& fname) {
  H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(h5_check(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                     fname, str_cat("create attribute ", name)),
            H5Aclose);
  const char* p = value.c_str();
  h5_check(H5Awrite(attr.get(), type.get(), &p), fname, str_cat("write attribute ", name));
}

void write_int_attr(hid_t obj, const char* name, int value, const std::string& fname) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(h5_check(H5Acreate2(obj, name, H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                     fname, str_cat("create attribute ", name)),
            H5Aclose);
  h5_check(H5Awrite(attr.get(), H5T_NATIVE_INT, &value), fname, str_cat("write attribute ", name));
}

void write_dataset(hid_t file, const std::string& path, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* data, const std::string& fname) {
  H5Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  H5Id space(h5_check(H5Screate_simple(int(dims.size()), dims.data(), nullptr), fname,
                      "create dataspace"),
             H5Sclose);
  H5Id ds(h5_check(H5Dcreate2(file, path.c_str(), file_type, space.get(), lcpl.get(),
                              H5P_DEFAULT, H5P_DEFAULT),
                   fname, str_cat("create dataset '", path, "'")),
          H5Dclose);
  h5_check(H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), fname,
           str_cat("write dataset '", path, "'"));
}

}  // namespace

int model_num_classes(const GraphDesc& g) {
  SL_REQUIRE(g.find("scores"), "graph has no node named 'scores' (the class scores)");
  return node_channels(g, "scores");
}

namespace {
Model read_model_here(const std::string& path, const ModelLimits& limits);
}  // namespace

Model read_model(const std::string& path, const ModelLimits& limits) {
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) {
    OnnxLimits ol;
    ol.max_param_bytes = limits.max_param_bytes;
    ol.max_nodes = limits.max_nodes;
    return read_onnx_model(path, ol);
  }
  std::lock_guard<std::recursive_mutex> lock(h5_mutex());
  silence_hdf5();
  // The child must not take the lock: after fork it is held by a thread the child does not have.
  // Its memory: the parameters the limits allow, and 1 GiB for the library and the graph.
  if (limits.isolate_timeout_s > 0)
    run_isolated([&] { (void)read_model_here(path, limits); }, limits.isolate_timeout_s, path,
                 size_t(limits.max_param_bytes) + (size_t(1) << 30));
  return read_model_here(path, limits);
}

namespace {
Model read_model_here(const std::string& path, const ModelLimits& limits) {
  H5Id file = open_h5_read(path, "model file");
  Model m;
  long long version = read_int_attr(file.get(), "format_version", path);
  SL_REQUIRE(version >= 1, path, ": invalid format_version ", version);
  SL_REQUIRE(version <= kModelFormatVersion, path, ": model format version ", version,
             " is newer than this build supports (", kModelFormatVersion,
             "); upgrade scenelab");
  m.name = H5Aexists(file.get(), "name") > 0 ? read_string_attr(file.get(), "name", path) : path;
  if (H5Aexists(file.get(), "graph") > 0) {
    H5Id attr(h5_check(H5Aopen(file.get(), "graph", H5P_DEFAULT), path, "open attribute graph"), H5Aclose);
    const hsize_t stored = H5Aget_storage_size(attr.get());
    SL_REQUIRE(stored <= limits.max_graph_bytes, path, ": attribute 'graph' of ", stored,
               " bytes is larger than the limit of ", limits.max_graph_bytes, " bytes");
  }
  std::string text = read_string_attr(file.get(), "graph", path);
  SL_REQUIRE(text.size() <= limits.max_graph_bytes, path, ": attribute 'graph' of ", text.size(),
             " bytes is larger than the limit of ", limits.max_graph_bytes, " bytes");
  try {
    m.graph = GraphDesc::parse(text);
  } catch (const Error& e) {
    throw_error(path, ": attribute 'graph': ", e.what());
  }
  SL_REQUIRE(m.graph.nodes.size() <= limits.max_nodes, path, ": the graph has ", m.graph.nodes.size(),
             " nodes, more than the limit of ", limits.max_nodes);
  std::vector<ParamRequirement> reqs;
  try {
    reqs = required_params(m.graph);
  } catch (const Error& e) {
    throw_error(path, ": attribute 'graph': ", e.what());
  }
  // The parameters' total size from the graph's shapes, before any is read.
  long double param_bytes = 0;
  for (const auto& r : reqs) {
    long double n = 4;
    for (int d : r.dims) n *= (long double)(d);
    param_bytes += n;
  }
  SL_REQUIRE(param_bytes <= (long double)(limits.max_param_bytes), path, ": the graph asks for ",
             double(param_bytes), " bytes of parameters, more than the limit of ", limits.max_param_bytes);
  for (const auto& r : reqs)
    m.params.emplace(r.dataset, read_param(file.get(), "params/" + r.dataset, r.dims, path));
  int classes = 0;
  try {
    classes = model_num_classes(m.graph);
  } catch (const Error& e) {
    throw_error(path, ": attribute 'graph': ", e.what());
  }
  m.class_names = read_string_list(file.get(), "meta/class_names", path, classes, "classes");
  std::vector<hsize_t> dims;
  H5Id pal = open_dataset(file.get(), "meta/palette", path, H5T_INTEGER, 1, "uint8", &dims);
  SL_REQUIRE(dims.size() == 2 && dims[0] == hsize_t(classes) && dims[1] == 3, path,
             ": dataset 'meta/palette' has shape ", dims_str(dims), ", expected [", classes,
             ", 3]");
  std::vector<uint8_t> buf(size_t(classes) * 3);
  h5_check(H5Dread(pal.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), path,
           "read dataset 'meta/palette'");
  for (int c = 0; c < classes; ++c)
    m.palette.push_back({buf[size_t(c) * 3], buf[size_t(c) * 3 + 1], buf[size_t(c) * 3 + 2]});
  // Optional detection settings, one "CLASS: key=value ..." a line.
  if (H5Aexists(file.get(), "detect") > 0) {
    std::istringstream lines(read_string_attr(file.get(), "detect", path));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      const size_t colon = line.find(':');
      SL_REQUIRE(colon != std::string::npos, path, ": attribute 'detect': line '", line,
                 "' is not 'CLASS: key=value ...'");
      const std::string name = line.substr(0, colon);
      SL_REQUIRE(std::find(m.class_names.begin(), m.class_names.end(), name) != m.class_names.end(),
                 path, ": attribute 'detect' names class '", name, "', which the model has not");
      const size_t a = line.find_first_not_of(' ', colon + 1);
      const std::string spec = a == std::string::npos ? "" : line.substr(a);
      try {  // checked here, so that a bad value names the file (not at the first detection)
        nms::WindowHeadOptions o;
        nms::parse_window_spec(spec, o);
      } catch (const std::invalid_argument& e) {
        throw_error(path, ": attribute 'detect', class '", name, "': ", e.what());
      }
      m.detect[name] = spec;
    }
  }
  if (H5Aexists(file.get(), "pyramid") > 0) m.pyramid = read_string_attr(file.get(), "pyramid", path);
  return m;
}

}  // namespace

void write_model(const std::string& path, const Model& m) {
  std::lock_guard<std::recursive_mutex> lock(h5_mutex());
  silence_hdf5();
  const int classes = model_num_classes(m.graph);
  SL_REQUIRE(int(m.class_names.size()) == classes && int(m.palette.size()) == classes,
             "write_model ", path, ": need ", classes, " class names and palette entries, have ",
             m.class_names.size(), " and ", m.palette.size());
  hid_t fid = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (fid < 0) throw_error(path, ": cannot create file (", h5_reason(), ")");
  H5Id file(fid, H5Fclose);
  write_int_attr(file.get(), "format_version", kModelFormatVersion, path);
  write_string_attr(file.get(), "name", m.name, path);
  write_string_attr(file.get(), "graph", m.graph.to_text(), path);
  for (const auto& r : required_params(m.graph)) {
    auto it = m.params.find(r.dataset);
    SL_REQUIRE(it != m.params.end(), "write_model ", path, ": missing parameter '", r.dataset,
               "'");
    SL_REQUIRE(it->second.shape() == param_shape(r.dims), "write_model ", path, ": parameter '",
               r.dataset, "' has shape ", it->second.shape().str(), ", expected ",
               dims_str(r.dims));
    std::vector<hsize_t> dims(r.dims.begin(), r.dims.end());
    write_dataset(file.get(), "params/" + r.dataset, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims,
                  it->second.data(), path);
  }
  H5Id stype(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(stype.get(), H5T_VARIABLE);
  H5Tset_cset(stype.get(), H5T_CSET_UTF8);
  std::vector<const char*> names;
  for (const auto& n : m.class_names) names.push_back(n.c_str());
  write_dataset(file.get(), "meta/class_names", stype.get(), stype.get(),
                {hsize_t(names.size())}, names.data(), path);
  std::vector<uint8_t> pal;
  for (const auto& p : m.palette) pal.insert(pal.end(), p.begin(), p.end());
  write_dataset(file.get(), "meta/palette", H5T_STD_U8LE, H5T_NATIVE_UINT8,
                {hsize_t(m.palette.size()), 3}, pal.data(), path);
  if (!m.detect.empty()) {
    std::string text;
    for (const auto& [name, spec] : m.detect) text += name + ": " + spec + "\n";
    write_string_attr(file.get(), "detect", text, path);
  }
  if (!m.pyramid.empty()) write_string_attr(file.get(), "pyramid", m.pyramid, path);
  h5_check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), path, "flush");
}

}  // namespace scenelab
