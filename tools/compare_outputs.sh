#!/bin/bash
# Every output of label_image, eval_labels, eval_detections, the C++ library (through the Python
# module, which is its binding) and the Python module, on the CPU tests' sample and on CamVid val
# images, reduced to a manifest of SHA-256 sums: two builds that must agree (a restructuring)
# give the same manifest. The JSON reports are compared without their timings and with the
# build's paths made relative.
#
#   tools/compare_outputs.sh BUILD OUT [DATA [N]]
#     BUILD  a build folder (its tools/, python/, samples/)
#     OUT    written: OUT/manifest.txt (one line a file: sum, path) and the outputs themselves
#     DATA   CamVid-style folder with images/ and labels/ (default ../shared/data/camvid/val;
#            SCENELAB_CAMVID/val if set); N: how many of its images (default 40)
# Then: diff OUT_BEFORE/manifest.txt OUT_AFTER/manifest.txt (empty: byte-identical).
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
data=${3:-${SCENELAB_CAMVID:+$SCENELAB_CAMVID/val}}
data=$(cd "${data:-$here/../shared/data/camvid/val}" && pwd)
root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")  # the build's source tree
n=${4:-40}
tools=$build/tools
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)
sample=$build/samples/street.png
mapfile -t images < <(ls "$data/images" | sort | head -n "$n" | sed "s|^|$data/images/|")
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
li() { "$tools/label_image" --quiet --plan-cache off "$@" >/dev/null; }

# label_image: the three outputs, the report, the convnet detection head
li "$sample" --out "$out/li_sample" --json "$out/li_sample.json" --detect Car,Pedestrian
li "${images[@]}" --out "$out/li_val" --json "$out/li_val.json" --detect Car,Pedestrian
# the accuracy modes: mirrored, two scales, refined
li "$sample" "${images[@]:0:3}" --out "$out/li_accurate" --json "$out/li_accurate.json" --mirror --scales 0.75,1 --refine
# the HOG detector over the pyramid, and detection without labelling
li "${images[@]:0:8}" --out "$out/li_hog" --json "$out/li_hog.json" --detect person --detector hog
li "$sample" "${images[@]:0:8}" --out "$out/li_detonly" --json "$out/li_detonly.json" --detect person --detector hog --detect-only
# the evaluators
"$tools/eval_labels" --data "$data" --limit "$n" --plan-cache off --json "$out/eval_labels.json" >"$out/eval_labels.txt"
"$tools/eval_detections" --data "$data" --limit "$n" --json "$out/eval_detections.json" >"$out/eval_detections.txt"
# the library through the Python module: labels, scores' argmax, label_files
if [ -d "$build/python/scenelab" ]; then
  PYTHONPATH=$build/python /usr/bin/python3 - "$out" "$sample" "${images[@]:0:4}" <<'PY'
import os, sys
import numpy as np
import scenelab
out, files = sys.argv[1], sys.argv[2:]
m = scenelab.Model(device="cpu")
imgs = [scenelab.load_image(f) for f in files]
np.save(os.path.join(out, "py_label.npy"), m.label(imgs[0]))
for i, lab in enumerate(m.label(imgs)):
    np.save(os.path.join(out, f"py_list_{i}.npy"), lab)
os.makedirs(os.path.join(out, "py_files"))
r = m.label_files(files, os.path.join(out, "py_files"), plan_cache=None)
assert r["images"] == len(files) and not r["failures"], r
PY
fi

# Reports without timings; the output folder's, the build's and the data's paths made relative.
/usr/bin/python3 - "$out" "$build" "$root" "$data" <<'PY'
import json, os, re, sys
out, build, root, data = sys.argv[1:5]
TIMING = re.compile(r"(^|_)(ms|s|gops|gop_s|per_s|seconds)$|_ms_|^wall|^images_per_s$|^times_ms$|^planning|^first_pass")
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if not TIMING.search(k)}
    if isinstance(v, list):
        return [clean(x) for x in v]
    if isinstance(v, str):
        return v.replace(out, "OUT").replace(build, "BUILD").replace(data, "DATA").replace(root, "ROOT")
    return v
for dirpath, _, names in os.walk(out):
    for fn in names:
        p = os.path.join(dirpath, fn)
        if fn.endswith(".json"):
            with open(p) as f:
                r = json.load(f)
            with open(p, "w") as f:
                json.dump(clean(r), f, indent=1, sort_keys=True)
        elif fn.endswith(".txt"):
            # the evaluators' printed tables: the lines that carry no timing
            with open(p) as f:
                lines = [l for l in f if not re.search(r"\b(ms|images/s|s wall|GOp/s)\b", l)]
            with open(p, "w") as f:
                f.writelines(l.replace(out, "OUT").replace(build, "BUILD").replace(data, "DATA").replace(root, "ROOT") for l in lines)
PY
(cd "$out" && find . -type f ! -name manifest.txt | LC_ALL=C sort | xargs sha256sum) > "$out/manifest.txt"
echo "compare_outputs: $(wc -l < "$out/manifest.txt") files in $out/manifest.txt"
