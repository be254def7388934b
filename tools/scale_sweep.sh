#!/bin/bash
# Test-time scale sets on held-out models: eval_labels on each held-out sequence with each set,
# plain and mirrored, then the means over the sequences (weights/MODELS.md at fb0dc9a, "Test-time scaling").
#   tools/scale_sweep.sh BUILD SEQ_SETS MODEL_PATTERN OUT SET [SET...]
#     SEQ_SETS: tools/sequence_sets.py's output (SEQ_SETS/SEQ/images, labels)
#     MODEL_PATTERN: the held-out model of each sequence, SEQ standing for it
#                    (e.g. cv/multiscale-full-SEQ.h5, as train.py --holdout SEQ writes them)
#     SET: scales, e.g. 1 0.5,1 0.5,0.75,1,1.25
#   DEVICE: eval_labels' --device (default auto: a GPU where there is one); JOBS: eval_labels
#   processes at once (default 4).
# Each run's JSON lands in OUT (NAME SEQ-SET-plain|mirror.json, commas as _); a table on stdout.
set -euo pipefail
[ $# -ge 5 ] || { sed -n 2,12p "$0" >&2; exit 2; }
BUILD=$1 SETS=$2 PATTERN=$3 OUT=$4
shift 4
mkdir -p "$OUT"
one() {  # SEQ SET plain|mirror MODEL
  local extra=()
  [ "$3" = mirror ] && extra=(--mirror)
  "$BUILD/tools/eval_labels" --data "$SETS/$1" --model "$4" --scales "$2" "${extra[@]}" --device "${DEVICE:-auto}" \
    --json "$OUT/$1-${2//,/_}-$3.json" > /dev/null || echo "scale_sweep: eval_labels failed on $1, scales $2, $3" >&2
}
export -f one
export BUILD SETS OUT
for seq in $(ls "$SETS"); do
  model=${PATTERN//SEQ/$seq}
  [ -f "$model" ] || { echo "scale_sweep: no held-out model $model for $SETS/$seq" >&2; exit 2; }
  for set in "$@"; do
    for mir in plain mirror; do echo "$seq $set $mir $model"; done
  done
done | xargs -P "${JOBS:-4}" -L 1 bash -c 'one "$@"' _
python3 - "$OUT" "$@" <<'PY'
import glob, json, os, sys
out, sets = sys.argv[1], sys.argv[2:]
print(f"{'scales':28s} {'':7s} global  class   mIoU   (means over the sequences)")
for s in sets:
    for mir in ("plain", "mirror"):
        runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"*-{s.replace(',', '_')}-{mir}.json")))]
        if runs:
            m = [100 * sum(r[k] for r in runs) / len(runs) for k in ("global_accuracy", "class_accuracy", "mean_iou")]
            print(f"{s:28s} {mir:7s} {m[0]:6.2f} {m[1]:6.2f} {m[2]:6.2f}   ({len(runs)} sequences)")
PY
