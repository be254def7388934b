#!/bin/bash
# Run here, from the project root, before a GPU run: ../shared/gpu/stage.sh's packages, and what
# this project adds to them in .gpu/ (git-ignored): libdeflate (the PNG writer) as Debian
# packages, unpacked there by .gpu/env.sh, and a copy of the CamVid val images for benchmarks.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
../shared/gpu/stage.sh >/dev/null
(cd .gpu/debs && for p in libdeflate0 libdeflate-dev; do
   ls ${p}_*.deb >/dev/null 2>&1 || apt-get download -q "$p" >/dev/null; done)
if [ -d ../shared/data/camvid/val ] && [ ! -d .gpu/camvid/val ]; then
  mkdir -p .gpu/camvid && cp -r ../shared/data/camvid/val .gpu/camvid/
fi
du -sh .gpu
