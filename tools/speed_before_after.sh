#!/bin/bash
# A change's speed against the tree before it, on one GPU machine in one call: both trees built
# (Release), then the runs alternating (after, before, after, before), fp16:
#   peer_pipeline.py --skip-peer at 480x360 (--save classes), at 1920x1080 (all outputs), with the
#   HOG detector; bench_gops on the multiscale net at 1920x1080.
#   tools/speed_before_after.sh BEFORE_SRC [VAL_IMAGES]
# BEFORE_SRC: the earlier tree (e.g. `git archive REV | tar -x -C .base`, carried beside .gpu);
# VAL_IMAGES: CamVid's val images (default .gpu/camvid/val/images). Run from the project root after
# `source .gpu/env.sh` (../shared/gpu/README.md); builds into build-gpu and build-base.
set -euo pipefail
before=$1
val=${2:-.gpu/camvid/val/images}
args=${CMAKE_ARGS:-}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release $args >/dev/null
cmake -S "$before" -B build-base -DCMAKE_BUILD_TYPE=Release $args >/dev/null
cmake --build build-gpu -j"$(nproc)" --target label_image bench_gops >/dev/null &
cmake --build build-base -j"$(nproc)" --target label_image bench_gops >/dev/null &
wait
for round in 1 2; do
  for tree in build-gpu build-base; do
    echo "== round $round: $tree"
    python3 tools/peer_pipeline.py --build $tree --images "$val" --repeat 10 --precision fp16 --save classes --skip-peer | tail -1
    python3 tools/peer_pipeline.py --build $tree --images "$val" --repeat 3 --size 1920x1080 --precision fp16 --skip-peer | tail -1
    python3 tools/peer_pipeline.py --build $tree --images "$val" --repeat 3 --precision fp16 --save classes --skip-peer \
      -- --detect person --detector hog | tail -1
    $tree/tools/bench_gops --device cuda --precision fp16 --nets multiscale --sizes 1920x1080 --runs 50 | tail -1
  done
done
