#!/bin/bash
# Runs what README.md tells a newcomer to run, as written, on a machine without a GPU and without
# CamVid, on the build the README's first command made (build/), and fails on the first that does
# not do what the README says:
#   1. every command of the tools the README shows (code blocks and inline code) names options
#      the tool has (its --help lists them);
#   2. the first command's label_image line writes the three outputs the README names;
#   3. the C++ snippet compiles as a program against the installed library and runs;
#   4. the installed library: the consumer built with CMake and with pkg-config exactly as the
#      README writes them, run with the source tree moved away (the model from the prefix) and
#      without LD_LIBRARY_PATH;
#   5. the Python snippet with the interpreter the README names, on the sample image;
#   6. the Dask path: python -m scenelab.cluster on a few images, outputs as label_image's.
#   tools/try_readme.sh [BUILD]   (BUILD: default build; run from anywhere)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
moved=""
cleanup() {
  [ -n "$moved" ] && [ -d "$moved" ] && mv "$moved" "$root"
  rm -rf "$work"
}
trap cleanup EXIT
step() { echo "try_readme: $*"; }
fail() { echo "try_readme: FAILED: $*" >&2; exit 1; }
py=$root/.venv/bin/python
sample=$build/samples/street.png

step "1. the tools' options in README.md exist"
/usr/bin/python3 - "$root/README.md" "$build/tools" <<'PY' || fail "README.md names an option a tool does not have"
import re, subprocess, sys
readme, tools = sys.argv[1], sys.argv[2]
text = open(readme).read()
# Commands: lines of code blocks, and inline code, that run one of our tools.
snippets = re.findall(r"```(?:sh)?\n(.*?)```", text, re.S) + re.findall(r"`([^`\n]+)`", text)
snippets += [l for l in text.splitlines() if l.startswith("    ")]  # indented blocks
helps, bad, seen = {}, [], 0
for snip in snippets:
    for line in snip.splitlines():
        for m in re.finditer(r"(?:build/tools/)?\b(label_image|eval_labels|eval_detections|bench_gops|bench_nms|bench_hog|make_model)\b((?:\s+[^|;&#`]*)?)", line):
            tool, args = m.group(1), m.group(2)
            if tool not in helps:
                p = subprocess.run([f"{tools}/{tool}", "--help"], capture_output=True, text=True)
                helps[tool] = p.stdout + p.stderr
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", args):
                seen += 1
                if not re.search(re.escape(opt) + r"(?![a-z0-9-])", helps[tool]):
                    bad.append(f"{tool} {opt} (in: {line.strip()[:100]})")
for b in bad:
    print("try_readme: no such option:", b, file=sys.stderr)
print(f"try_readme: {seen} options of {len(helps)} tools checked")
sys.exit(1 if bad else 0)
PY

step "2. label_image on the sample writes labels, overlay and classes"
(cd "$work" && "$build/tools/label_image" "$sample" --out labels --quiet) || fail "label_image on the sample"
for kind in labels overlay classes; do
  [ -s "$work/labels/street_$kind.png" ] || fail "labels/street_$kind.png was not written"
done

step "3-4. the installed library: the README's C++ snippet and the consumer, the source tree moved away"
prefix=$work/home/scenelab
cmake --install "$build" --prefix "$prefix" >/dev/null
cp -r "$root/examples/consumer" "$work/consumer"
cp "$sample" "$work/street.png"
{
  echo "#include <cstdio>"
  sed -n '/^```cpp$/,/^```$/p' "$root/README.md" | sed '1d;$d' | grep '^#include'
  echo "int main() {"
  sed -n '/^```cpp$/,/^```$/p' "$root/README.md" | sed '1d;$d' | grep -v '^#include' |
    sed 's/"street.jpg"/"street.png"/; s/options.precision = "fp16";/options.precision = "fp32";  \/\/ (fp16 needs a GPU)/'
  echo '  std::printf("snippet: %dx%d labels, %zu cars, %zu people\n", labels.width, labels.height, cars.size(), found.size());'
  echo "}"
} > "$work/snippet.cpp"
moved=$root.moved.$$
# The installed library must not need the source or build tree: the tree is moved away for the
# run (where its folder cannot be renamed, the run goes on in place and says so).
mv "$root" "$moved" 2>/dev/null || { moved=""; step "(the source tree could not be moved away: run in place)"; }
(
  cd "$work"
  export HOME=$work/home PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  unset LD_LIBRARY_PATH
  g++ snippet.cpp $(pkg-config --cflags --libs scenelab) -o snippet && ./snippet
  [ -s street_labels.png ] || { echo "the snippet wrote no street_labels.png"; exit 1; }
  # The README's block, as written (the consumer's folder is here, not in the moved tree).
  cmake -S consumer -B build-consumer -DCMAKE_PREFIX_PATH=$HOME/scenelab >/dev/null && cmake --build build-consumer >/dev/null
  build-consumer/label_one street.png street cpu > label_one.txt
  grep -q "^$prefix/share/scenelab/weights/camvid-multiscale.h5 on " label_one.txt ||
    { echo "the installed library did not take its own model: $(head -1 label_one.txt)"; exit 1; }
  PKG_CONFIG_PATH=$HOME/scenelab/lib/pkgconfig g++ consumer/label_one.cpp \
    $(PKG_CONFIG_PATH=$HOME/scenelab/lib/pkgconfig pkg-config --cflags --libs scenelab) -o label_one
  ./label_one street.png street_pc cpu >/dev/null
  cmp street_labels.png street_pc_labels.png
  cmp street_classes.png labels/street_classes.png  # the library's class map is label_image's
  # NMS alone: scenelab::nms without the engine.
  build-consumer/nms_only >/dev/null
  if ldd build-consumer/nms_only | grep -q "libscenelab\.so"; then echo "nms_only brings the engine"; exit 1; fi
) || { [ -n "$moved" ] && mv "$moved" "$root"; moved=""; fail "the installed library as the README builds it"; }
[ -n "$moved" ] && mv "$moved" "$root"
moved=""

step "5. the README's Python snippet with $py"
(
  cd "$root"
  sed -n '/^```python$/,/^```$/p' README.md | sed '1d;$d' > "$work/snippet.py"
  PYTHONPATH=$build/python "$py" - "$work/snippet.py" "$work/py_out" <<'PY'
import re, sys
import numpy as np
src, out = open(sys.argv[1]).read(), sys.argv[2]
import scenelab
rgb = scenelab.load_image("build/samples/street.png")
env = {"batch": np.stack([rgb, rgb]), "paths": ["build/samples/street.png"]}
lines = []
for line in src.splitlines():
    if "torch CUDA tensor" in line:  # needs a GPU
        continue
    lines.append(line.replace('"out"', repr(out)))
exec("\n".join(lines), env)
assert env["labels"].shape == (2, 360, 480), env["labels"].shape
assert env["r"]["images"] == 1 and not env["r"]["failures"], env["r"]
for kind in ("classes", "labels"):
    assert (__import__("os").path.exists(f"{out}/street_{kind}.png")), kind
print("snippet: labels", env["labels"].shape, "boxes", len(env["boxes"]), "kept", len(env["keep"]))
PY
) || fail "the README's Python snippet"

step "6. Dask: python -m scenelab.cluster on a few images equals label_image"
mkdir -p "$work/frames"
for k in 1 2 3; do cp "$sample" "$work/frames/frame_$k.png"; done
(cd "$root" && PYTHONPATH=$build/python "$py" -m scenelab.cluster "$work/frames" --out "$work/cluster" --device cpu) \
  >"$work/cluster.txt" 2>&1 || { cat "$work/cluster.txt"; fail "python -m scenelab.cluster"; }
for k in 1 2 3; do
  cmp "$work/cluster/frame_${k}_classes.png" "$work/labels/street_classes.png" || fail "cluster's frame_$k differs from label_image's"
done
step "every README path ran as written"
