#!/bin/bash
# Run here, from the project root, before a GPU run: ../shared/gpu/stage.sh's packages, and what
# this project adds to them in .gpu/ (git-ignored): libdeflate (the PNG writer), nlohmann-json,
# and ONNX's protobuf classes, protobuf and ONNX's node tests (the ONNX import) as Debian
# packages, unpacked there by .gpu/env.sh, Dask as wheels (installed by tools/gpu_check.sh when
# its cluster benchmark runs) and a copy of the CamVid images (val for benchmarks, train for training there).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
../shared/gpu/stage.sh >/dev/null
(cd .gpu/debs && for p in libdeflate0 libdeflate-dev nlohmann-json3-dev libonnx1 libonnx-dev libonnxifi libprotobuf32 \
                           libprotobuf-dev libonnx-testdata; do
   ls ${p}_*.deb >/dev/null 2>&1 || apt-get download -q "$p" >/dev/null; done)
# Dask for gpu_check.sh's cluster benchmark (the GPU machine's Python 3.12 lacks it): wheels of
# the versions pinned here and their dependencies.
if ! ls .gpu/whl/distributed-2024.12.1-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --disable-pip-version-check dask==2024.12.1 distributed==2024.12.1 \
    --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .gpu/whl
fi
for split in val train; do  # train: for tools/train.py and tools/crossval.py there
  if [ -d ../shared/data/camvid/$split ] && [ ! -d .gpu/camvid/$split ]; then
    mkdir -p .gpu/camvid && cp -r ../shared/data/camvid/$split .gpu/camvid/
  fi
done
du -sh .gpu
