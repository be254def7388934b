#!/bin/sh
# Installs scenelab's build and test dependencies from Debian/Ubuntu packages (only the missing
# ones), and the Python module's build tools from PyPI, pinned, into .venv at the repository root
# (a virtual environment that also sees Debian's Python packages: numpy, torch, Dask, pytest;
# OpenCV is the oracle of the HOG tests and the source of weights/hog-people.h5; ONNX's protobuf
# classes read .onnx models, its node tests check them, python3-onnx writes test models).
# The CUDA toolkit is optional and not installed here: without it everything runs on the CPU.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
pkgs="build-essential cmake pkg-config libeigen3-dev libhdf5-dev libstb-dev libgtest-dev
      libjpeg-dev libpng-dev libdeflate-dev nlohmann-json3-dev libopenblas-openmp-dev libavformat-dev libavcodec-dev libswscale-dev
      unzip python3 python3-dev python3-venv python3-numpy python3-h5py python3-torch python3-pytest
      python3-distributed python3-opencv libonnx-dev libprotobuf-dev libonnx-testdata python3-onnx"
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing:$missing"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi
# The Python module's binding library (CMake finds it in .venv) and wheel builder.
venv="$root/.venv"
if ! "$venv/bin/python3" -c "import nanobind, scikit_build_core" >/dev/null 2>&1; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check nanobind==2.9.2 scikit-build-core==0.11.6
fi
# ONNX Runtime, the CPU peer of tools/peer_onnx.py and tools/peer_seg_nets.py (not needed to
# build or test). 1.21 or later: 1.20's graph optimiser fused a Pad into the AveragePool after it
# without counting the padding (onnxruntime PR #23190), which is how torch.onnx writes
# AvgPool2d(count_include_pad=True): DDRNet's and BiSeNet V2's scores were off by 1-7%.
ort_version=1.32.0
if ! "$venv/bin/python3" -c "import onnxruntime, sys; sys.exit(onnxruntime.__version__ != '$ort_version')" >/dev/null 2>&1; then
  "$venv/bin/pip" install -q --disable-pip-version-check onnxruntime==$ort_version ||
    echo "setup_debian: onnxruntime not installed (only tools/peer_onnx.py needs it)"
fi
