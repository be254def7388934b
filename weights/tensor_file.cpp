#include "weights/tensor_file.h"

#include <vector>

#include "core/error.h"
#include "weights/h5.h"

namespace scenelab {

Tensor read_tensor_h5(const std::string& path, const std::string& name) {
  std::lock_guard<std::recursive_mutex> lock(h5_mutex());
  H5Id file = open_h5_read(path, "tensor file");
  SL_REQUIRE(path_exists(file.get(), name), path, ": missing dataset '", name, "'");
  H5Id ds(h5_check(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), path, "open " + name),
          H5Dclose);
  H5Id type(h5_check(H5Dget_type(ds.get()), path, "dataset type"), H5Tclose);
  SL_REQUIRE(H5Tget_class(type.get()) == H5T_FLOAT, path, ": dataset '", name,
             "' is not floating point");
  H5Id space(h5_check(H5Dget_space(ds.get()), path, "dataset space"), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.get());
  SL_REQUIRE(rank >= 1 && rank <= 4, path, ": dataset '", name, "' has rank ", rank,
             ", expected 1..4");
  hsize_t d[4] = {1, 1, 1, 1};
  H5Sget_simple_extent_dims(space.get(), d + (4 - rank), nullptr);
  Tensor t(Shape{static_cast<int>(d[0]), static_cast<int>(d[1]), static_cast<int>(d[2]), static_cast<int>(d[3])});
  h5_check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()), path,
           "read " + name);
  return t;
}

void write_tensors_h5(const std::string& path,
                      const std::vector<std::pair<std::string, TensorView>>& tensors) {
  std::lock_guard<std::recursive_mutex> lock(h5_mutex());
  silence_hdf5();
  hid_t fid = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (fid < 0) throw_error(path, ": cannot create file (", h5_reason(), ")");
  H5Id file(fid, H5Fclose);
  for (const auto& [name, v] : tensors) {
    hsize_t d[4] = {hsize_t(v.shape.n), hsize_t(v.shape.c), hsize_t(v.shape.h),
                    hsize_t(v.shape.w)};
    H5Id space(h5_check(H5Screate_simple(4, d, nullptr), path, "dataspace"), H5Sclose);
    H5Id ds(h5_check(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(),
                                H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     path, "create " + name),
            H5Dclose);
    h5_check(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data), path,
             "write " + name);
  }
}

}  // namespace scenelab
