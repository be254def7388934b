#!/usr/bin/env python3
"""Train one of tools/seg_nets.py's published networks on CamVid and export it to ONNX.

  python3 tools/train_seg_net.py --data ../shared/data/camvid --net ddrnet23slim --out ddrnet.onnx
         [--epochs 200] [--minutes 30] [--batch 16] [--crop 360x480] [--lr 2e-3] [--seed 0]
         [--workers N] [--split train]

The batches are tools/train.py's (tools/train_augment.py: random scale 0.5-2, crops, flips,
rotations, photometric jitter, exposure, illumination field, JPEG re-compression; the same
seeded draws), the loss its class-weighted cross-entropy (square roots of the median-frequency
weights, void ignored); AdamW with a one-cycle schedule laid out over --epochs, bf16 autocast and
channels-last on a GPU. --minutes stops early (the schedule then ends before its rate decays).
The last epoch is exported, with its state_dict beside it (OUT less .onnx, plus .pt) (nothing is selected on the frames scored later): torch.onnx, opset
17, the batch and size free, the scores at the input's size, with CamVid's class names and
palette in the metadata (RGB in [0, 1], no standardisation: the nets' batch normalisation takes
the input as it is). Score it with `build/tools/eval_labels --model OUT.onnx --data DIR/val`.
"""
import argparse
import math
import os
import sys
import time
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seg_nets  # noqa: E402
from seg_nets import onnx_export  # noqa: E402
from train_augment import BatchMaker, Batches, median_frequency_weights  # noqa: E402
from train_data import (CLASSES, DEFAULT_EXPOSURE, DEFAULT_SCALE, DEFAULT_SHADING, PALETTE,  # noqa: E402
                        VOID, load_split)


def export(net, path, seed, epochs):
    import onnx
    net = net.float().eval().to("cpu", memory_format=torch.contiguous_format)
    x = torch.rand(1, 3, 360, 480)
    with torch.no_grad():
        onnx_export(net, x, path, opset_version=17, input_names=["image"], output_names=["scores"],
                          dynamic_axes={"image": {0: "n", 2: "h", 3: "w"}, "scores": {0: "n", 2: "h", 3: "w"}})
    m = onnx.load(path)
    for k, v in {"class_names": ",".join(CLASSES), "palette": ";".join(",".join(map(str, c)) for c in PALETTE),
                 "name": f"{type(net).__name__} (tools/train_seg_net.py, seed {seed}, {epochs} epochs)"}.items():
        p = m.metadata_props.add()
        p.key, p.value = k, v
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--net", choices=sorted(seg_nets.NETS), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--split", default="train")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--crop", default="360x480")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    crop_h, crop_w = map(int, a.crop.split("x"))
    _, x, y = load_split(a.data, a.split)
    steps = max(1, x.shape[0] // a.batch)
    opts = types.SimpleNamespace(seed=a.seed, batch=a.batch, epochs=a.epochs, aug="full",
                                 exposure=tuple(map(float, DEFAULT_EXPOSURE.split(","))), gamma=None,
                                 shading=DEFAULT_SHADING, scale=DEFAULT_SCALE, mix=None)
    workers = a.workers if a.workers is not None else min(16, max(1, len(os.sched_getaffinity(0)) - 1))
    maker = BatchMaker(Batches(x, y, opts, crop_h, crop_w, steps), workers, 1, dev)
    net = seg_nets.NETS[a.net](classes=len(CLASSES)).to(dev)
    if dev.type == "cuda":
        net = net.to(memory_format=torch.channels_last)
    weights = median_frequency_weights(y, 0.5).float().to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=a.epochs * steps, pct_start=0.1)
    t0 = time.time()
    epoch = 0
    try:
        for epoch in range(1, a.epochs + 1):
            total = 0.0
            for _ in range(steps):
                xb, yb = maker.next()
                if dev.type == "cuda":
                    xb = xb.contiguous(memory_format=torch.channels_last)
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
                    scores = net(xb)
                loss = torch.nn.functional.cross_entropy(scores.float(), yb, weight=weights, ignore_index=VOID)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                total += loss.detach()
            if epoch % 10 == 0 or epoch == 1:
                print(f"epoch {epoch}: loss {float(total) / steps:.4f}, {time.time() - t0:.0f} s", flush=True)
            if not math.isfinite(float(total)):
                raise SystemExit(f"train_seg_net: the loss is {float(total)} at epoch {epoch}")
            if time.time() - t0 > a.minutes * 60:
                print(f"stopped by --minutes {a.minutes:g} after epoch {epoch} of {a.epochs}", flush=True)
                break
    finally:
        maker.stop()
    torch.save({k: v.float().cpu() for k, v in net.state_dict().items()}, os.path.splitext(a.out)[0] + ".pt")
    export(net, a.out, a.seed, epoch)
    print(f"{a.net}: {epoch} epochs in {time.time() - t0:.0f} s -> {a.out}")


if __name__ == "__main__":
    main()
