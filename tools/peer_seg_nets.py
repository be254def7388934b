#!/usr/bin/env python3
"""The published nets (tools/seg_nets.py) from their .onnx files against the peers that run them:
ONNX Runtime on the CPU, PyTorch eager and torch.compile on the GPU; same weights, same run.

  .venv/bin/python3 tools/peer_seg_nets.py --build build --device cpu [--threads 2] [--sizes 480x360]
  python3 tools/peer_seg_nets.py --build build-gpu --device cuda [--sizes 1920x1080,960x720]
         [--compile default|max-autotune-no-cudagraphs|none] [--images DIR]
  common: [--nets ddrnet23slim,bisenetv2] [--weights DIR] [--runs 20]

--weights DIR: NET.onnx (and, for the GPU's PyTorch peers, NET.pt, its state_dict) as
tools/train_seg_net.py writes them; without it each net has PyTorch's initial weights and random
batch-normalisation statistics (tests/weights/onnx_peer_test.py's), exported here (opset 17,
sizes free). Ours: tools/bench_gops on the .onnx file (median ms after warm-up, the whole graph
to the label map; fp32 on the CPU, fp16 on the GPU). CPU: ONNX Runtime's CPU provider, --threads
intra-op threads, one inter-op, every graph optimisation; five alternating rounds of ours and
theirs (--runs / 5 runs each), the median of the rounds' medians; before timing both
score one image and ORT's scores must be within 1e-4 (relative to the largest) of ours; ORT's
model has an ArgMax over the classes added as a second output, so that both compute the label
map (bench_gops times ours to it). GPU:
PyTorch fp16 channels-last, eager as one CUDA graph, and torch.compile (--compile mode; compile
time not timed), CUDA-event medians; label agreement of our fp16 labels with PyTorch's fp32 on
the first --images JPEGs (or one random image), which must be >= 99.9%.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seg_nets  # noqa: E402
from seg_nets import onnx_export  # noqa: E402
from peer_torch import alternate_cpu, median_event_ms, ours_ms  # noqa: E402

REL_BOUND = 1e-4
ROUNDS = 5  # CPU: alternating rounds of ours and ONNX Runtime
LABEL_AGREEMENT = 0.999


def load_net(name, weights, tmp):
    """(module in eval mode, path of its .onnx file)."""
    net = seg_nets.NETS[name]()
    if weights and os.path.exists(os.path.join(weights, name + ".onnx")):
        pt = os.path.join(weights, name + ".pt")
        if os.path.exists(pt):
            net.load_state_dict(torch.load(pt, map_location="cpu"))
        return net.eval(), os.path.join(weights, name + ".onnx")
    g = torch.Generator().manual_seed(7)
    torch.manual_seed(7)
    net = seg_nets.NETS[name]()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_((torch.rand(c, generator=g) - 0.5) * 0.2)
                m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
    path = os.path.join(tmp, name + ".onnx")
    with torch.no_grad():
        onnx_export(net.eval(), torch.rand(1, 3, 360, 480), path, opset_version=17, input_names=["image"],
                          output_names=["scores"], dynamic_axes={"image": {0: "n", 2: "h", 3: "w"}})
    return net.eval(), path


def infer(build, model, x, tmp, device="cpu", precision="fp32", threads=2):
    import h5py
    inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("input", data=x)
    subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", model, "--input", inp,
                           "--out", out, "--nodes", "scores,labels_full", "--device", device, "--precision",
                           precision, "--threads", str(threads)])
    with h5py.File(out, "r") as f:
        return np.asarray(f["scores"]), np.asarray(f["labels_full"])


def with_labels(path, tmp):
    """The model with an ArgMax over the classes as a second output: ORT computes the label map
    too, as bench_gops's timing of ours does."""
    import onnx
    from onnx import helper
    m = onnx.load(path)
    out = m.graph.output[0].name
    m.graph.node.append(helper.make_node("ArgMax", [out], ["labels"], axis=1, keepdims=1))
    m.graph.output.append(helper.make_tensor_value_info("labels", onnx.TensorProto.INT64, None))
    dst = os.path.join(tmp, "with_labels.onnx")
    onnx.save(m, dst)
    return dst


def cpu_rows(a, nets, tmp):
    import onnxruntime as ort
    print(f"# peer_seg_nets, CPU: onnxruntime {ort.__version__}, {a.threads} threads each, {ROUNDS} alternating "
          f"rounds of {max(3, a.runs // ROUNDS)} runs each, medians; {time.strftime('%Y-%m-%d')}")
    print("| net | size | GOp | scenelab ms | ONNX Runtime ms | ONNX Runtime / scenelab | scores vs ORT |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    for name, (_, path) in nets.items():
        for size in a.sizes.split(","):
            w, h = map(int, size.split("x"))
            so = ort.SessionOptions()
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            so.intra_op_num_threads, so.inter_op_num_threads = a.threads, 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            sess = ort.InferenceSession(with_labels(path, tmp), so, providers=["CPUExecutionProvider"])
            x = np.random.RandomState(w + h).rand(1, 3, h, w).astype(np.float32)
            theirs = sess.run(None, {"image": x})[0]
            ours, _ = infer(a.build, path, x, tmp, threads=a.threads)
            rel = float(np.max(np.abs(ours - theirs)) / max(float(np.max(np.abs(theirs))), 1e-30))
            ok &= rel < REL_BOUND
            for _ in range(3):
                sess.run(None, {"image": x})
            gop, our, theirs_ms = alternate_cpu(a.build, path, size, a.threads, a.runs,
                                                lambda: sess.run(None, {"image": x}), ROUNDS)
            print(f"| {name} | {size} | {gop:.2f} | {our:.2f} | {theirs_ms:.2f} | {theirs_ms / our:.2f}x | {rel:.1e} |",
                  flush=True)
    return ok


def images(a, w, h):
    if a.images:
        import cv2
        for p in sorted(glob.glob(os.path.join(a.images, "*.jpg")))[:a.agree_images]:
            im = cv2.resize(cv2.imread(p)[:, :, ::-1], (w, h), interpolation=cv2.INTER_LINEAR)
            yield np.ascontiguousarray(im.transpose(2, 0, 1)[None], dtype=np.float32) / 255
    else:
        yield np.random.RandomState(w * 3 + h).rand(1, 3, h, w).astype(np.float32)


def gpu_rows(a, nets, tmp):
    print(f"# peer_seg_nets, GPU ({torch.cuda.get_device_name()}): scenelab fp16 against PyTorch {torch.__version__} "
          f"fp16 channels-last (eager as a CUDA graph; torch.compile mode {a.compile}); CUDA-event medians of "
          f"{a.runs} runs; {time.strftime('%Y-%m-%d')}")
    print("| net | size | GOp | scenelab ms | PyTorch ms | torch.compile ms | compile / scenelab | "
          "fp16 labels = PyTorch fp32 |")
    print("|---|---|---|---|---|---|---|---|")
    torch.backends.cudnn.benchmark = True
    ok = True
    for name, (net, path) in nets.items():
        net32 = net.cuda()
        for size in a.sizes.split(","):
            w, h = map(int, size.split("x"))
            same = total = 0
            for x in images(a, w, h):
                _, labels = infer(a.build, path, x, tmp, "cuda", "fp16")
                with torch.no_grad():
                    tl = net32(torch.from_numpy(x).cuda()).argmax(1, keepdim=True).cpu().numpy()
                same += int(np.sum(labels.reshape(tl.shape) == tl))
                total += tl.size
            agree = same / total
            ok &= agree >= LABEL_AGREEMENT
            gop, our, _ = ours_ms(a.build, path, size, 1, a.runs, "cuda", "fp16")
            half = seg_nets.NETS[name]()
            half.load_state_dict(net.state_dict())
            half = half.eval().cuda().half().to(memory_format=torch.channels_last)
            x = torch.rand(1, 3, h, w, device="cuda").half().contiguous(memory_format=torch.channels_last)
            with torch.no_grad():
                for _ in range(3):
                    half(x)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    half(x)
                eager = median_event_ms(g.replay, a.runs)
                comp = float("nan")
                if a.compile != "none":
                    fn = torch.compile(half, mode=None if a.compile == "default" else a.compile, dynamic=False)
                    t0 = time.perf_counter()
                    for _ in range(3):
                        fn(x)
                    torch.cuda.synchronize()
                    print(f"# torch.compile {name} {size}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                          flush=True)
                    comp = median_event_ms(lambda: fn(x), a.runs)
            print(f"| {name} | {size} | {gop:.2f} | {our:.3f} | {eager:.3f} | {comp:.3f} | {comp / our:.2f}x | "
                  f"{100 * agree:.3f}% |", flush=True)
        net.cpu()
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--nets", default="ddrnet23slim,bisenetv2")
    ap.add_argument("--weights", default=None)
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--compile", default="default")
    ap.add_argument("--images", default=None)
    ap.add_argument("--agree-images", type=int, default=10)
    a = ap.parse_args()
    a.sizes = a.sizes or ("480x360" if a.device == "cpu" else "1920x1080,960x720")
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        nets = {n: load_net(n, a.weights, tmp) for n in a.nets.split(",")}
        ok = cpu_rows(a, nets, tmp) if a.device == "cpu" else gpu_rows(a, nets, tmp)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
