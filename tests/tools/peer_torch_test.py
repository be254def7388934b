#!/usr/bin/env python3
"""Peer oracle: both networks run in PyTorch (tools/scenelab_torch.py) on the same HDF5 file as
our engine; scores must agree to a relative error (max |ours - torch| / max |torch|) under 1e-4
and the full-resolution labels on at least 99.9% of pixels. Also checks that a model file written
by the Python exporter (h5py) is read by the engine and gives the same scores.

usage: peer_torch_test.py BUILD_DIR   (exit 77 = skipped: PyTorch or h5py missing)
"""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:  # ctest maps 77 to "skipped"
    print(f"SKIPPED: PyTorch/h5py not importable ({e}); apt-get install python3-torch python3-h5py")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import scenelab_torch as st  # noqa: E402

REL_BOUND = 1e-4
LABEL_AGREEMENT = 0.999


def run_ours(build, model, x, tmp):
    inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("input", data=x)
    subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", model,
                           "--input", inp, "--out", out, "--nodes", "scores,labels_full",
                           "--threads", "2"])
    with h5py.File(out, "r") as f:
        return np.asarray(f["scores"]), np.asarray(f["labels_full"])


def compare(tag, ours, theirs):
    scores, labels = ours
    ts, tl = theirs
    assert scores.shape == ts.shape, f"{tag}: shape {scores.shape} vs torch {ts.shape}"
    rel = float(np.max(np.abs(scores - ts)) / max(np.max(np.abs(ts)), 1e-30))
    agree = float(np.mean(labels == tl))
    ok = rel < REL_BOUND and agree >= LABEL_AGREEMENT
    print(f"{'ok  ' if ok else 'FAIL'} {tag}: scores {scores.shape} rel err {rel:.2e} "
          f"(bound {REL_BOUND:g}), label agreement {100 * agree:.3f}%")
    return ok


def main():
    build = sys.argv[1]
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = np.random.RandomState(5)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for net in ("reference", "multiscale"):
            model = os.path.join(tmp, f"{net}.h5")
            subprocess.check_call([os.path.join(build, "tools", "make_model"), "--network", net,
                                   "--classes", "11", "--seed", "3", "--out", model])
            tnet, names, pal, name = st.load_model(model)
            # Preprocessing with non-trivial statistics, through the Python exporter.
            with torch.no_grad():
                tnet.p("pre", "mean").copy_(torch.tensor([0.1, -0.2, 0.05]))
                tnet.p("pre", "std").copy_(torch.tensor([0.9, 1.3, 0.7]))
            exported = os.path.join(tmp, f"{net}-exported.h5")
            st.save_model(exported, tnet, names, pal, name + "-exported")
            for h, w in ((61, 83), (97, 131)):
                x = rng.rand(1, 3, h, w).astype(np.float32)
                with torch.no_grad():
                    out = tnet(torch.from_numpy(x))
                theirs = (out["scores"].numpy(), out["labels_full"].numpy())
                ok &= compare(f"{net} {w}x{h} (h5py-exported model)",
                              run_ours(build, exported, x, tmp), theirs)
    print("peer_torch_test:", "passed" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
