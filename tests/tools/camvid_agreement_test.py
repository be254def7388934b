#!/usr/bin/env python3
"""The shipped CamVid models in PyTorch (the training code, fp32, CPU) and in our engine agree on
at least 99.5% of the pixels of a few val images. Skips (77) when ../shared/data/camvid or
PyTorch is absent.

usage: camvid_agreement_test.py BUILD_DIR SOURCE_DIR [N_IMAGES]
(SCENELAB_TEST_DEVICE=cuda runs our side on the GPU.)
"""
import glob
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIPPED: PyTorch/h5py not importable ({e})")
    sys.exit(77)

build, src = sys.argv[1], sys.argv[2]
n_images = int(sys.argv[3]) if len(sys.argv) > 3 else 4
sys.path.insert(0, os.path.join(src, "tools"))
import scenelab_torch as st  # noqa: E402

data = os.environ.get("SCENELAB_CAMVID", os.path.join(src, "..", "shared", "data", "camvid"))
val = sorted(glob.glob(os.path.join(data, "val", "images", "*.jpg")))
if not val:
    print(f"SKIPPED: no CamVid val images under {data} (set SCENELAB_CAMVID; tools/get_camvid.sh)")
    sys.exit(77)
torch.set_num_threads(2)
device = os.environ.get("SCENELAB_TEST_DEVICE", "cpu")
ok = True
# every shipped single model (the accurate files are combinations of these, tests/job/combine_test.cpp)
models = sorted(m for m in glob.glob(os.path.join(src, "weights", "camvid-*.h5")) if not m.endswith("-accurate.h5"))
assert len(models) >= 2, models
for model in models:
    name = os.path.basename(model)[:-3]
    net, _, _, _ = st.load_model(model)
    net.eval()
    agree = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for img in val[:: max(1, len(val) // n_images)][:n_images]:
            out = os.path.join(tmp, "o.h5")
            subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", model,
                                   "--image", img, "--out", out, "--nodes", "image,labels_full",
                                   "--threads", "2", "--device", device])
            with h5py.File(out, "r") as f:
                x = torch.from_numpy(np.asarray(f["image"]))  # the exact decoded pixels
                ours = np.asarray(f["labels_full"])
            with torch.no_grad():
                theirs = net(x, ["labels_full"])["labels_full"].numpy()
            agree += int((ours == theirs).sum())
            total += ours.size
    frac = agree / total
    good = frac >= 0.995
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} {name} ({device}): {100 * frac:.3f}% of {total} val pixels agree "
          f"with PyTorch (bound 99.5%)")
print("camvid_agreement_test:", "passed" if ok else "FAILED")
sys.exit(0 if ok else 1)
