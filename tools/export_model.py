#!/usr/bin/env python3
"""Export a PyTorch state_dict to a scenelab HDF5 model file.

  export_model.py --network multiscale --classes 11 --state weights.pt --out model.h5 \
      [--names sky,building,...] [--palette palette.txt] [--name NAME]
      [--detect "Car: threshold=0.4 aspects=0.7,1,1.4,2; Pedestrian: threshold=0.5"]

The state_dict's keys are the engine's dataset names with '/' or '.' between group and
parameter (conv1.weight, conv1.bias, ..., pre.mean, pre.std); see weights/FORMAT.md. A key the
network needs but the state lacks, or a shape mismatch, is an error naming the key.
"""
import argparse
import sys

import numpy as np
import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
import scenelab_torch as st  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", required=True, choices=["reference", "multiscale"])
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--state", required=True, help="torch.save'd state_dict")
    ap.add_argument("--out", required=True)
    ap.add_argument("--names", help="comma separated class names")
    ap.add_argument("--palette", help="text file, one 'R G B' line per class")
    ap.add_argument("--name", default=None)
    ap.add_argument("--detect", default="", help="per-class detection settings: 'CLASS: k=v ...; ...'")
    a = ap.parse_args()
    net = st.TorchNet(st.network_text(a.network, a.classes))
    state = torch.load(a.state, map_location="cpu")
    # Accept 'conv1.weight', 'conv1/weight' or a TorchNet state_dict ('params.conv1__weight').
    state = {k.replace("params.", "", 1).replace("__", ".").replace("/", "."): v
             for k, v in state.items()}
    with torch.no_grad():
        for key, t in net.param_items():
            k = key.replace("/", ".")
            if k not in state:
                sys.exit(f"export_model: state_dict lacks '{k}'")
            if tuple(state[k].shape) != tuple(t.shape):
                sys.exit(f"export_model: '{k}' has shape {tuple(state[k].shape)}, expected {tuple(t.shape)}")
            t.copy_(state[k])
    names = a.names.split(",") if a.names else [f"class{i}" for i in range(a.classes)]
    if len(names) != a.classes:
        sys.exit(f"export_model: {len(names)} names for {a.classes} classes")
    if a.palette:
        pal = np.loadtxt(a.palette, dtype=np.int64).reshape(-1, 3)
    else:
        rng = np.random.RandomState(0)
        pal = rng.randint(40, 256, size=(a.classes, 3))
    try:
        detect = st.parse_detect(a.detect)
        st.save_model(a.out, net, names, pal, a.name or f"{a.network}-{a.classes}", detect)
    except ValueError as e:
        sys.exit(f"export_model: {e}")


if __name__ == "__main__":
    main()
