#!/bin/bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang, AddressSanitizer and UBSan, and runs
# each for SECONDS (default 60) on a copy of its seed corpus (tests/fuzz/corpus/NAME, plus a small
# model file made here), in parallel up to the cores. Findings (crash-*, leak-*, timeout-*) are
# left in build-fuzz/findings/NAME; execution counts are printed.
#   tools/fuzz.sh [SECONDS] [HARNESS...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
harnesses=${*:-"fuzz_image fuzz_model fuzz_graph fuzz_nms fuzz_plan_cache fuzz_png_write fuzz_specs fuzz_video fuzz_onnx"}
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang (apt-get install clang libomp-dev)"; exit 2; }
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCENELAB_ENABLE_CUDA=OFF \
  -DSCENELAB_SANITIZE=ON -DSCENELAB_FUZZ=ON -DSCENELAB_BUILD_TESTS=OFF -DSCENELAB_NATIVE=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target $harnesses make_model >/dev/null
work=build-fuzz/work
mkdir -p "$work" build-fuzz/findings
for h in $harnesses; do
  name=${h#fuzz_}
  mkdir -p "$work/$name" "build-fuzz/findings/$name"
  cp -n tests/fuzz/corpus/"$name"/* "$work/$name/" 2>/dev/null || true
done
# A small model file as the loader's seed: the reference net is too large, so a tiny graph.
if [[ " $harnesses " == *" fuzz_model "* ]] && [ ! -f "$work/model/tiny.h5" ]; then
  /usr/bin/python3 - "$work/model/tiny.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format_version"] = np.int32(1)
    f.attrs["name"] = "tiny"
    f.attrs["graph"] = ("input image channels=3\nc = conv2d(image) out=2 k=3\nr = relu(c)\n"
                        "scores = conv2d(r) out=2 k=1\nlabels_full = argmax(scores)\noutput scores labels_full\n")
    f["params/c/weight"] = np.full((2, 3, 3, 3), 0.1, np.float32)
    f["params/c/bias"] = np.zeros(2, np.float32)
    f["params/scores/weight"] = np.full((2, 2, 1, 1), 0.5, np.float32)
    f["params/scores/bias"] = np.zeros(2, np.float32)
    f.create_dataset("meta/class_names", data=np.array(["a", "b"], dtype=h5py.string_dtype()))
    f["meta/palette"] = np.array([[0, 0, 0], [255, 255, 255]], np.uint8)
PY
fi
# ... and one with the detection head's settings (the `detect` attribute the loader parses).
if [[ " $harnesses " == *" fuzz_model "* ]] && [ ! -f "$work/model/tiny_detect.h5" ]; then
  cp "$work/model/tiny.h5" "$work/model/tiny_detect.h5"
  /usr/bin/python3 -c 'import sys, h5py; h5py.File(sys.argv[1], "a").attrs["detect"] = "b: heights=3,4 aspects=0.5,1 threshold=0.3 nms=0.2"' \
    "$work/model/tiny_detect.h5"
fi
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# leaks reviewed and found inside libraries we do not build (each explained there)
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp
# fuzz_model's reader runs in a forked child (weights/isolated.h) that inherits libFuzzer's malloc
# limit: HDF5 asking there for what a corrupt vlen length says (16 GB) was written as an "oom" of
# the parent. Past the limit here the allocation fails or faults in the child, which the parent
# turns into an error; the parent's own memory stays bounded by -rss_limit_mb.
declare -A extra=([model]="-malloc_limit_mb=1000000")
# ... and a corrupt length makes HDF5 allocate and fill gigabytes in that child, where the address-
# space cap of weights/isolated.cpp is off (ASan reserves huge ranges): ASan refuses allocations
# over 1 GiB (HDF5 then fails, in the child), and a 16 MB quarantine keeps the parent small, so
# that each execution's fork stays cheap (2026-11-23: 5 -> 44 executions a second).
declare -A asan_extra=([model]=":max_allocation_size_mb=1024:quarantine_size_mb=16")
status=0
for h in $harnesses; do
  name=${h#fuzz_}
  ( cd "build-fuzz/findings/$name" && export ASAN_OPTIONS="$ASAN_OPTIONS${asan_extra[$name]:-}" &&
    ../../tests/fuzz/$h -max_total_time="$secs" -rss_limit_mb=4096 -timeout=20 -max_len=65536 \
      ${extra[$name]:-} ../../work/"$name" >../"$name".log 2>&1 ) &
  # at most one harness a core
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do sleep 1; done
done
wait || true
for h in $harnesses; do
  name=${h#fuzz_}
  log=build-fuzz/findings/$name.log
  runs=$(grep -oE "Done [0-9]+ runs in [0-9]+ second" "$log" | tail -1 || true)
  found=$(ls build-fuzz/findings/"$name" | grep -cE "^(crash|leak|timeout|oom|slow-unit)-" || true)
  echo "$h: ${runs:-no summary (stopped on a finding)}; findings: ${found}"
  grep -m3 -E "ERROR: |runtime error" "$log" || true
  [ "$found" = 0 ] || status=1
done
exit $status
