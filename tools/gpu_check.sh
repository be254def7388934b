#!/bin/bash
# The GPU machine's run, in one call (../shared/gpu/README.md): build, every test (the gpu-labelled
# ones run there), compute-sanitizer over the GPU tests, then the benchmarks named by $BENCH
# (space-separated: pipeline peer1080 plan batch gops torch power compile hog nms detect python train
# cluster soak twoproc allgpus half fp32 ncu mirror;
# default: the first four). Logs go to $OUT
# (or ./gpu-out), a summary at the end of stdout.
#   source .gpu/env.sh && tools/gpu_check.sh
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BENCH=${BENCH-"pipeline peer1080 plan batch"}  # BENCH="" runs none
SANITIZE=${SANITIZE-memcheck}  # SANITIZE="" runs none; entries TOOL or TOOL=GTEST_FILTER;
# SANITIZE_FILTER: the gtest filter of entries without one;
# SANITIZE_TIMEOUT: seconds per tool (rc 124 when it ran out); SKIP_CPU_TESTS=1: the gpu label only;
# CMAKE_ARGS: more arguments for the configure step
J=$(nproc)
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

# The staged packages where .gpu/env.sh left no stb header (seen 2026-11-23: the build could not
# find stb/stb_image.h after sourcing it): .gpu/debs unpacked into a folder of our own.
if [ -d .gpu/debs ] && ! ls /opt/deps/usr/include/stb/stb_image.h >/dev/null 2>&1; then
  D=${TMPDIR:-/tmp}/scenelab-deps
  # unpacked once: a second run beside the first uses it as it is
  [ -f "$D/usr/include/stb/stb_image.h" ] || { mkdir -p "$D" && for f in .gpu/debs/*.deb; do dpkg -x "$f" "$D"; done; }
  export CMAKE_PREFIX_PATH=$D/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export HDF5_ROOT=$D/usr/lib/x86_64-linux-gnu/hdf5/serial
  export CPATH=$D/usr/include:$D/usr/include/hdf5/serial${CPATH:+:$CPATH}
  export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  CMAKE_ARGS="${CMAKE_ARGS:-} -DSTB_INCLUDE_DIR=$D/usr/include"
  log "staged packages unpacked into $D"
fi

# The Python module too where this machine's python3 has nanobind (the GPU machine's does).
PYARGS=""
python3 -c "import nanobind" 2>/dev/null && PYARGS="-DPython_EXECUTABLE=$(command -v python3)"
# SKIP_BUILD=1: build-gpu as an earlier run left it (two runs side by side must not both build it)
if [ -n "${SKIP_BUILD:-}" ]; then
  echo "SKIP_BUILD: build-gpu as it is" >"$OUT/build.log"; [ -x build-gpu/tests/scenelab_gpu_tests ]
else
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release $PYARGS ${CMAKE_ARGS:-} >"$OUT/build.log" 2>&1 &&
    cmake --build build-gpu -j"$J" >>"$OUT/build.log" 2>&1
fi
rc=$?
log "build rc=$rc"
tail -3 "$OUT/build.log"
[ $rc -eq 0 ] || { tail -40 "$OUT/build.log"; exit 1; }

# The CamVid val images for the accuracy test and the benchmarks: ../shared beside the checkout,
# else the copy tools/stage_gpu.sh put in .gpu/.
CAMVID=../shared/data/camvid
[ -d "$CAMVID/val" ] || CAMVID=.gpu/camvid
export SCENELAB_CAMVID=$(readlink -f "$CAMVID")
[ -n "${SKIP_TESTS:-}" ] || ctest --test-dir build-gpu -L gpu --output-on-failure >"$OUT/ctest-gpu.log" 2>&1
log "gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest-gpu.log")"
grep -E "Skipped|Failed|\*\*\*" "$OUT/ctest-gpu.log" | head -20
[ -n "${SKIP_TESTS:-}${SKIP_CPU_TESTS:-}" ] || ctest --test-dir build-gpu -L cpu -j8 --output-on-failure >"$OUT/ctest-cpu.log" 2>&1
log "cpu tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest-cpu.log")"
grep -E "\(Failed\)" "$OUT/ctest-cpu.log" | head

# SANITIZE_PARALLEL=1: the entries run at once (each its own process on the one GPU), so that
# slow tools share one time limit. Tests that read SCENELAB_TEST_QUICK run a smaller set there.
# The test programs the sanitizers run: the GPU tests, and the API tests' GPU cases (those whose
# names end in OnTheGpu, tests/CMakeLists.txt), which sweeps (SANITIZE_EACH) also run.
GPU_TESTS=build-gpu/tests/scenelab_gpu_tests
API_TESTS=build-gpu/tests/scenelab_api_tests
SAN_TMP=${SANITIZE_TMPDIR:-$PWD/build-gpu/tests/tmp}
mkdir -p "$SAN_TMP"  # the tools' TMPDIR (below): ctest makes its own, but not with SKIP_TESTS
sanitize_one() {  # TOOL FILTER [PROGRAM]
  local tool=$1 filter=$2 program=${3:-$GPU_TESTS} extra=()
  # cuDNN's Hopper kernels use more cuda::barrier objects than the default tracks
  [ "$tool" = synccheck ] || [ "$tool" = racecheck ] && extra=(--num-cuda-barriers 1024)
  # cuBLAS's and cuDNN's Hopper kernels may store their results with TMA bulk copies, which
  # initcheck tracks only when asked to; SANITIZE_EXTRA: more options for every tool
  [ "$tool" = initcheck ] && extra=(--check-bulk-copy yes)
  # every report printed, so that tools/sanitizer_summary.py can say whose each one is
  extra+=(--print-limit 100000 ${SANITIZE_EXTRA:-})
  local logname="$tool-$(echo "$filter" | tr -c 'A-Za-z0-9\n' '_' | cut -c1-120)"
  # SANITIZE_CUDNN_LEGACY=1: cuDNN's legacy API alone under the tools (racecheck never finishes
  # in its graph engines' Hopper kernels; docs/RELIABILITY.md); SANITIZE_OWN_KERNELS=1: no cuBLAS
  # or cuDNN kernel at all, every convolution on our direct kernel (racecheck fails inside cuBLAS's
  # Hopper GEMMs; the tests of those libraries' algorithms are not meant to run under it)
  # TMPDIR: ctest's (tests/CMakeLists.txt), where the ctest run above left the tests' plan caches;
  # SANITIZE_TMPDIR another, for a sweep beside a ctest run of the same build
  TMPDIR=$SAN_TMP SCENELAB_CUDNN_LEGACY=${SANITIZE_CUDNN_LEGACY:-} SCENELAB_OWN_KERNELS=${SANITIZE_OWN_KERNELS:-} SCENELAB_TEST_QUICK=1 timeout -k 5 "${SANITIZE_TIMEOUT:-0}" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 \
    "$program" --gtest_filter="$filter" >"$OUT/sanitizer-$logname.log" 2>&1
  log "compute-sanitizer $tool ${extra[*]} ($filter) rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/sanitizer-$logname.log" | tr '\n' ' ')"
}
# SANITIZE_EACH=N: every test the entries' filters name runs in a process of its own, N at once,
# all entries' tests in one queue (so that tools run side by side: a slow test under one tool does
# not hold back the others'), the tests named in SANITIZE_SLOW (a regex) first, the entries in
# their order within each part. SANITIZE_TIMEOUT is then the time left to the whole sweep, each
# process given what remains of it. A test the tool takes down, or one that runs out of time, then
# costs only itself. SANITIZE_UNTIL (seconds since 1970, `date +%s`): the sweep ends by then,
# whatever SANITIZE_TIMEOUT says (a call's own time limit). SANITIZE_GPUS=G: the processes go
# round-robin to the machine's GPUs 0..G-1 (CUDA_VISIBLE_DEVICES one each; a test of several GPUs
# then sees one), so that G GPUs share the sweep (docs/RELIABILITY.md).
sanitize_each() {  # "TOOL TEST PROGRAM" lines on stdin
  local end=$(( $(date +%s) + ${SANITIZE_TIMEOUT:-3600} ))
  [ -n "${SANITIZE_UNTIL:-}" ] && [ "$SANITIZE_UNTIL" -lt "$end" ] && end=$SANITIZE_UNTIL
  local tool t program n=0
  while read -r tool t program; do
    [ -n "$t" ] || continue
    while [ "$(jobs -rp | wc -l)" -ge "$SANITIZE_EACH" ]; do wait -n; done
    local left=$(( end - $(date +%s) ))
    [ $left -gt 5 ] || { log "compute-sanitizer $tool ($t): not started, the sweep's time ran out"; continue; }
    ( [ -n "${SANITIZE_GPUS:-}" ] && export CUDA_VISIBLE_DEVICES=$(( n % SANITIZE_GPUS ))
      SANITIZE_TIMEOUT=$left sanitize_one "$tool" "$t" "$program" ) </dev/null &  # the queue is stdin
    n=$(( n + 1 ))
  done
  wait
}
sweep_tests() {  # TOOL FILTER: "TOOL TEST PROGRAM" a line, the filter's tests of both programs
  { list_tests "$GPU_TESTS" "$2"; list_tests "$API_TESTS" "$2" | grep -E '^\S+OnTheGpu '; } |
    sed "s/^/$1 /"
}
list_tests() {  # PROGRAM FILTER: its tests the filter names, "TEST PROGRAM" a line
  [ -x "$1" ] || return 0
  "$1" --gtest_list_tests --gtest_filter="$2" | awk -v p="$1" '/^[^ ]/ {s = $1} /^  / {print s $1, p}'
}
set -f  # filters hold '*'
queue=""
for spec in $SANITIZE; do  # TOOL or TOOL=GTEST_FILTER
  tool=${spec%%=*}
  filter=${SANITIZE_FILTER:-*}
  [ "$spec" != "$tool" ] && filter=${spec#*=}
  if [ -n "${SANITIZE_EACH:-}" ]; then
    queue+="$(sweep_tests "$tool" "$filter")"$'\n'
  elif [ -n "${SANITIZE_PARALLEL:-}" ]; then
    sanitize_one "$tool" "$filter" &
  else
    sanitize_one "$tool" "$filter"
    pkill -9 -f '^build-gpu/tests/scenelab_(gpu|api)_tests' 2>/dev/null && sleep 1  # a timed-out tool leaves its target running
  fi
done
if [ -n "$queue" ]; then
  slow=${SANITIZE_SLOW:-Whole|HalfAccuracy|Pipeline|LabelImage|EveryAlgorithm|Replan|Pyramid|Split}
  { echo "$queue" | grep -E "^\S+ \S*($slow)"; echo "$queue" | grep -vE "^\S+ \S*($slow)"; } | sanitize_each
fi
wait
pkill -9 -f '^build-gpu/tests/scenelab_(gpu|api)_tests' 2>/dev/null
set +f
# What the tools found, by whose kernel it is in (ours, NVIDIA's libraries'), and which runs
# were not complete.
if [ -n "$SANITIZE" ] && ls "$OUT"/sanitizer-*.log >/dev/null 2>&1; then
  python3 tools/sanitizer_summary.py "$OUT"/sanitizer-*.log >"$OUT/sanitizers.txt" 2>&1
  log "sanitizer summary rc=$? (tools/sanitizer_summary.py; every log: $OUT/sanitizers.txt)"
  grep -vE '^(\S+\.log|    )' "$OUT/sanitizers.txt" | tee -a "$OUT/summary.txt"
  # A sweep leaves a log a test: one archive of them, since a lent machine brings back a limited
  # number of files (2026-11-26: 11 of 17 logs did not come back).
  if [ -n "${SANITIZE_EACH:-}" ]; then
    tar czf "$OUT/sanitizer-logs.tgz" -C "$OUT" $(cd "$OUT" && ls sanitizer-*.log) && rm -f "$OUT"/sanitizer-*.log &&
      log "sanitizer logs: $OUT/sanitizer-logs.tgz"
  fi
fi

VAL=$SCENELAB_CAMVID/val/images
export PYTHONUNBUFFERED=1
# DIR REPEAT: DIR holds the val images REPEAT times, as links under new names.
frames() {
  mkdir -p "$1"
  for r in $(seq 0 $(($2 - 1))); do for f in "$VAL"/*.jpg; do
    ln -sf "$(readlink -f "$f")" "$1/r${r}_$(basename "$f")"; done; done
}
# REPORT.json KEY...: those fields of a label_image JSON report on one line (floats rounded).
report() {
  python3 - "$@" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = lambda v: {k: r(x) for k, x in v.items()} if isinstance(v, dict) else round(v, 3) if isinstance(v, float) else v
print(", ".join(f"{k} {r(j[k])}" for k in sys.argv[2:]))
PY
}
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
# Dask for the cluster benchmark: the wheels tools/stage_gpu.sh put in .gpu/whl, where python3
# lacks it (into its environment, a virtualenv there; pip takes what is installed already).
if [[ " $BENCH " == *" cluster "* ]] && ! python3 -c "import distributed" 2>/dev/null; then
  python3 -m pip install -q --break-system-packages --no-index --find-links .gpu/whl \
    dask==2024.12.1 distributed==2024.12.1 >"$OUT/pip.log" 2>&1
  log "Dask from .gpu/whl: rc=$? $(python3 -c 'import distributed; print(distributed.__version__)' 2>&1 | tail -1)"
fi
for b in $BENCH; do
  case $b in
  pipeline)
    for args in "--precision fp16" "--precision fp16 --save classes" "--precision fp32"; do
      log "peer_pipeline 1010 x 480x360 $args"
      python3 tools/peer_pipeline.py --build build-gpu --images "$VAL" --repeat 10 $args 2>&1 |
        tee -a "$OUT/pipeline.log" | tail -5 | tee -a "$OUT/summary.txt"
    done ;;
  mirror)
    # test-time mirroring and scaling (label_image --mirror --scales; job/combine.h) against the
    # plain model, each against PyTorch running the same graph (the file make_model --combine writes)
    build-gpu/tools/make_model --combine weights/camvid-multiscale.h5 --mirror --out /tmp/mirrored.h5
    build-gpu/tools/make_model --combine weights/camvid-multiscale.h5 --mirror --scales 0.5,0.75,1,1.25 \
      --out /tmp/scaled.h5
    for prec in fp16 fp32; do
      for model in weights/camvid-multiscale.h5 /tmp/mirrored.h5 /tmp/scaled.h5; do
        log "peer_pipeline 1010 x 480x360 --precision $prec --save classes, model $model"
        python3 tools/peer_pipeline.py --build build-gpu --images "$VAL" --repeat 10 --precision $prec \
          --save classes --model $model 2>&1 | tee -a "$OUT/mirror.log" | tail -5 | tee -a "$OUT/summary.txt"
      done
    done ;;
  png)
    # the PNG writers on this machine's cores: one thread, then all of them at once
    log "bench_png, 1 and $(nproc) threads"
    build-gpu/tools/bench_png "$(ls "$VAL"/*.jpg | head -1)" --runs 50 --threads "$(nproc)" 2>&1 |
      tee -a "$OUT/summary.txt" ;;
  steady)
    for streams in 1 2; do
      log "label_image 5050 x 480x360 fp16 --save classes, streams $streams (steady state)"
      python3 tools/peer_pipeline.py --build build-gpu --images "$VAL" --repeat 50 --precision fp16 \
        --save classes --skip-peer -- --streams $streams 2>&1 | tee -a "$OUT/pipeline.log" | tail -2 | tee -a "$OUT/summary.txt"
    done ;;
  detect)
    # 100 val images upscaled to 1920x1080 (JPEG), the detection head on Car and Pedestrian on
    # the GPU workers: the detect stage's time per image in the JSON report
    python3 - "$VAL" <<'EOF'
import cv2, sys, glob, os
os.makedirs("/tmp/det1080", exist_ok=True)
for f in sorted(glob.glob(sys.argv[1] + "/*.jpg"))[:100]:
    cv2.imwrite("/tmp/det1080/" + os.path.basename(f), cv2.resize(cv2.imread(f), (1920, 1080)), [cv2.IMWRITE_JPEG_QUALITY, 90])
EOF
    for prec in fp16 fp32; do
      build-gpu/tools/label_image --precision $prec --detect Car,Pedestrian --save classes --quiet \
        --out /tmp/det-out --json /tmp/det.json /tmp/det1080 >/dev/null 2>"$OUT/detect-$prec.log"
      log "label_image --detect Car,Pedestrian, 100 x 1920x1080, $prec: $(report /tmp/det.json images_per_s stage_ms_per_image)"
    done ;;
  nms)
    # the head with its defaults and with each class setting the shipped model carries
    SPECS=$(python3 tools/set_detect.py weights/camvid-multiscale.h5 2>"$OUT/set_detect.log" |
            sed -n 's/^[A-Za-z][A-Za-z]*: //p' | paste -sd ';')
    log "bench_nms: the GPU NMS on clustered boxes, then the sliding-window head at 1920x1080 (defaults; ${SPECS:-no setting read})"
    build-gpu/tools/bench_nms --sizes 1000,10000 --runs 50 ${SPECS:+--head-spec "$SPECS"} 2>&1 | tee "$OUT/bench_nms.log" |
      tail -18 | tee -a "$OUT/summary.txt" ;;
  train)
    # tools/train.py's GPU ceiling: one training step eager, channels_last, bf16, compiled
    for net in multiscale reference; do
      log "bench_train_step --network $net"
      python3 tools/bench_train_step.py --network $net 2>&1 | grep -v Warning | tee -a "$OUT/train_step.log" |
        tail -7 | tee -a "$OUT/summary.txt"
    done
    # and its CPU side: the batches one batch worker makes (the runs' bound when the steps outrun them)
    if [ -d .gpu/camvid/train ]; then
      log "bench_batches: one batch worker's images a second"
      python3 tools/bench_batches.py --data .gpu/camvid 2>&1 | tee -a "$OUT/train_step.log" | tail -2 |
        tee -a "$OUT/summary.txt"
    fi ;;
  python)
    log "pytest: the Python module's cases (the GPU ones: CUDA tensors in and out)"
    SCENELAB_BUILD_DIR=build-gpu python3 -m pytest -q tests/python/test_module.py 2>&1 | tee "$OUT/pytest.log" |
      tail -3 | tee -a "$OUT/summary.txt"
    grep -E "PASSED|SKIPPED|FAILED" "$OUT/pytest.log" | head -20
    log "Python overhead: Model.label against the C++ call (tools/bench_python.py)"
    for dev in cuda cpu; do
      python3 tools/bench_python.py --build build-gpu --device $dev --size 480x360 --runs 50 2>&1 |
        tail -2 | tee -a "$OUT/summary.txt"
    done ;;
  hog)
    log "bench_hog on the GPU (CUDA events), every level, greedy and group fusion"
    for fusion in greedy group; do
      build-gpu/tools/bench_hog --device cuda --fusion $fusion --runs 20 --warmup 3 \
        --image "$VAL/0016E5_07959.jpg" 2>&1 | tee -a "$OUT/hog.log" | tail -4 | tee -a "$OUT/summary.txt"
    done ;;
  peer1080)
    log "peer_pipeline 1920x1080 fp16"
    python3 tools/peer_pipeline.py --build build-gpu --images "$VAL" --repeat 3 --size 1920x1080 \
      --precision fp16 2>&1 | tee -a "$OUT/pipeline.log" | tail -5 | tee -a "$OUT/summary.txt" ;;
  plan)
    python3 - "$VAL" <<'EOF'
import cv2, sys, glob
img = cv2.imread(sorted(glob.glob(sys.argv[1] + "/*.jpg"))[0])
cv2.imwrite("/tmp/p1080.jpg", cv2.resize(img, (1920, 1080)))
EOF
    rm -rf /tmp/pc
    # one image: --runtime-fusion auto is off; then on (what a long run at this size plans)
    for prec in fp16 fp32 fp16+fusion; do
      for k in cold cached; do
        rf=auto; [ "$prec" = fp16+fusion ] && rf=on
        SCENELAB_TRACE_TUNING=1 build-gpu/tools/label_image --precision ${prec%+fusion} --runtime-fusion $rf \
          --plan-cache /tmp/pc/$prec --quiet --batch 1 --out /tmp/plan-out --json /tmp/plan.json /tmp/p1080.jpg >/dev/null 2>"$OUT/tuning-$prec-$k.log"
        log "planning 1920x1080 $prec $k: $(grep -E '"planning_ms"|"first_pass_ms"|"wall_s"' /tmp/plan.json | tr -d '\n')"
        grep -E "timing took|cudnn" "$OUT/tuning-$prec-$k.log" | cut -c1-220 | tee -a "$OUT/summary.txt"
      done
    done ;;
  cluster)
    W=1; [ "$GPUS" -ge 2 ] && W="1,$GPUS"
    log "Dask: scenelab.cluster, workers $W (one per GPU), against one GPU's label_image (tools/bench_cluster.py)"
    python3 tools/bench_cluster.py --build build-gpu --images "$VAL" --repeat "${CLUSTER_REPEAT:-100}" \
      --workers "$W" --precision fp16 --save classes 2>&1 | tee "$OUT/cluster.log" | grep -v '^$' |
      tail -9 | tee -a "$OUT/summary.txt" ;;
  soak)
    log "GPU soak: ${SOAK_IMAGES:-20000} generated images of 8 sizes through one label_image, fp16 (tools/soak.py)"
    python3 tools/soak.py --label-image build-gpu/tools/label_image --images "${SOAK_IMAGES:-20000}" \
      --device cuda --json "$OUT/soak.json" -- --precision fp16 >"$OUT/soak.log" 2>&1
    log "soak rc=$? $(grep -E '"(labelled|wall_s|images_per_s|rss_mib_kept_at_end|fds_kept_at_end|gpu_mib_after_warmup|gpu_mib_max_growth|gpu_mib_kept_at_end|verdict)"' "$OUT/soak.log" | tr -d '\n ')" ;;
  allgpus)
    # Outputs on tmpfs by default (ALLGPUS_OUT): the GPU machines' virtual disk caps the writes of
    # one process (finish 3.6 ms an image there against 1.1 on tmpfs), and outputs removed and
    # written again under the same names ran slower still; each run writes into a fresh folder.
    AO=${ALLGPUS_OUT:-/dev/shm}
    log "label_image --device cuda:0 against cuda:all (one pipeline per GPU), $GPUS GPUs, 30300 frames, fp16, classes into $AO"
    frames /tmp/all-in 300
    k=0
    for dev in cuda:all cuda:0 cuda:all cuda:0 cuda:all; do  # the first fills the plan cache
      k=$((k + 1))
      build-gpu/tools/label_image --device $dev --precision fp16 --save classes --quiet --out "$AO/all-out-$k" \
        --json /tmp/all.json /tmp/all-in >/dev/null 2>>"$OUT/allgpus.err"
      log "$dev rc=$? $(report /tmp/all.json ok images_per_s first_pass_ms stage_ms_per_image)"
      rm -rf "$AO/all-out-$k"
    done ;;
  twoproc)
    log "two label_image processes on one GPU at once: 1010 frames each, fp16, one fresh plan cache shared"
    frames /tmp/two-in 10
    rm -rf /tmp/two1 /tmp/two2 /tmp/two-pc
    pids=()
    for k in 1 2; do
      build-gpu/tools/label_image --device cuda:0 --precision fp16 --save classes --quiet --plan-cache /tmp/two-pc \
        --out /tmp/two$k --json /tmp/two$k.json /tmp/two-in >/dev/null 2>"$OUT/two$k.err" &
      pids+=($!)
    done
    for k in 1 2; do
      wait "${pids[$((k - 1))]}"
      log "process $k rc=$? $(report /tmp/two$k.json ok failed images_per_s)"
    done
    log "outputs: $(ls /tmp/two1 | wc -l) and $(ls /tmp/two2 | wc -l) files, $(diff -rq /tmp/two1 /tmp/two2 | wc -l) differ" ;;
  batch)
    frames /tmp/b1010 10
    for streams in 1 2 3; do for batch in 4 8 16; do
      build-gpu/tools/label_image --precision fp16 --save classes --quiet --batch $batch --streams $streams \
        --out /tmp/bout --json /tmp/b.json /tmp/b1010 >/dev/null
      build-gpu/tools/label_image --precision fp16 --save classes --quiet --batch $batch --streams $streams \
        --out /tmp/bout --json /tmp/b.json /tmp/b1010 >/dev/null
      log "save classes fp16 batch $batch streams $streams: $(grep -E '"images_per_s"|"stage_ms_per_image"' /tmp/b.json | tr -d '\n')"
    done; done ;;
  half)
    build-gpu/tests/scenelab_gpu_tests --gtest_filter='HalfAccuracy*' 2>&1 | grep -E "rel. error" | tee -a "$OUT/summary.txt"
    SCENELAB_TRACE_TUNING=1 build-gpu/tools/bench_gops --device cuda --precision fp16 --nets reference \
      --sizes 1920x1080 --runs 3 2>&1 | grep -E "cudnn graph|tuning" | cut -c1-200 | tee -a "$OUT/summary.txt"
    for prec in ${HALF_PRECISIONS:-fp16 bf16 fp32}; do
      build-gpu/tools/bench_gops --device cuda --precision $prec --sizes 320x240,640x480,1920x1080,3840x2160 \
        --runs 20 2>&1 | tee -a "$OUT/gops.log" | grep -E "^\| (reference|multiscale)" | sed "s/^/$prec /" | tee -a "$OUT/summary.txt"
    done
    build-gpu/tools/bench_gops --device cuda --precision fp16 --nets multiscale --sizes 480x360 --batch 8 \
      --runs 20 2>&1 | grep multiscale | sed "s/^/fp16 batch 8 /" | tee -a "$OUT/summary.txt"
    build-gpu/tools/bench_gops --device cuda --precision fp16 --nets reference --sizes 1920x1080 --layers \
      --runs 10 2>&1 | tee -a "$OUT/gops.log" | tail -22 | tee -a "$OUT/summary.txt" ;;
  fp32)  # the fp32 path: what auto picks per layer, then each convolution algorithm, then per layer
    SCENELAB_TRACE_TUNING=1 build-gpu/tools/bench_gops --device cuda --precision fp32 --nets reference \
      --sizes 1920x1080 --runs 3 2>&1 | grep -E "cudnn graph|tuning" | cut -c1-240 | tee -a "$OUT/summary.txt"
    for conv in auto split gemm2s; do
      build-gpu/tools/bench_gops --device cuda --precision fp32 --conv $conv \
        --sizes ${FP32_SIZES:-320x240,640x480,1920x1080,3840x2160} --runs 20 2>&1 | tee -a "$OUT/gops.log" |
        grep -E "^\| (reference|multiscale)" | sed "s/^/fp32 $conv /" | tee -a "$OUT/summary.txt"
    done
    SCENELAB_TRACE_TUNING=1 build-gpu/tools/bench_gops --device cuda --precision fp32 --conv split --nets reference \
      --sizes 3840x2160 --runs 3 2>&1 | grep -E "cudnn graph" | cut -c1-400 | tee -a "$OUT/summary.txt"
    build-gpu/tools/bench_gops --device cuda --precision fp32 --nets reference --sizes 1920x1080 --layers \
      --runs 10 2>&1 | tee -a "$OUT/gops.log" | tail -16 | tee -a "$OUT/summary.txt" ;;
  gops)
    for b in 1 8 16; do
      build-gpu/tools/bench_gops --device cuda --precision fp16 --nets multiscale --sizes 480x360,1920x1080 \
        --batch $b --runs 20 2>&1 | tee -a "$OUT/gops.log" | grep multiscale | tee -a "$OUT/summary.txt"
    done
    build-gpu/tools/bench_gops --device cuda --precision fp32 --nets multiscale --sizes 480x360 --batch 8 \
      --runs 20 2>&1 | tee -a "$OUT/gops.log" | grep multiscale | tee -a "$OUT/summary.txt" ;;
  power)
    log "bench_gops fp16 with board power (NVML energy counter, 2 s of back-to-back passes a size)"
    build-gpu/tools/bench_gops --device cuda --precision fp16 --sizes 320x240,640x480,1920x1080,3840x2160 \
      --runs 20 --power-s 2 2>&1 | tee -a "$OUT/gops.log" | grep -E "^\| (reference|multiscale)|power" | tee -a "$OUT/summary.txt" ;;
  compile)
    # torch.compile compiles per size (1.5-2 minutes each on the H100): COMPILE_SIZES, largest first.
    log "peer_torch --compile (max-autotune-no-cudagraphs) with board power, reference net, fp16"
    python3 tools/peer_torch.py --build build-gpu --device cuda --precision fp16 --nets reference \
      --sizes "${COMPILE_SIZES:-1920x1080,320x240}" --runs 20 --compile --power-s 2 2>&1 |
      tee "$OUT/compile.log" | grep -E "^\||^#" | tee -a "$OUT/summary.txt" ;;
  ncu)
    # Each kernel's GPU time in the timed passes of bench_gops (its NVTX range "timed"), by Nsight
    # Compute, caches and clocks left as they are; NCU_CASES: "NET:SIZE:PRECISION ..."
    for c in ${NCU_CASES:-reference:1920x1080:fp16 multiscale:1920x1080:fp16 reference:320x240:fp16}; do
      IFS=: read -r net size prec <<<"$c"
      f="$OUT/ncu-$net-$size-$prec.csv"
      ncu --nvtx --nvtx-include "timed/" --metrics gpu__time_duration.sum --clock-control none \
        --cache-control none --csv --print-units base build-gpu/tools/bench_gops --device cuda \
        --precision "$prec" --nets "$net" --sizes "$size" --runs 2 --warmup 1 >"$f" 2>"$OUT/ncu.err"
      log "ncu $net $size $prec (rc=$?): kernels of one pass, us"
      python3 tools/ncu_summary.py "$f" 4 | tee -a "$OUT/summary.txt"
    done ;;
  torch)
    python3 tools/peer_torch.py --build build-gpu --device cuda --precision ${TORCH_PRECISION:-fp16} \
      --sizes ${TORCH_SIZES:-320x240,640x480,1920x1080} --runs 20 2>&1 | tee "$OUT/torch.log" | tail -12 ;;
  esac
done
echo; cat "$OUT/summary.txt"
