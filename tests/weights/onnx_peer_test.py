#!/usr/bin/env python3
"""ONNX models in, against PyTorch: small networks written in PyTorch (convolutions with batch
normalisation kept as a node and folded by the exporter, ReLU, max-pool, a concatenation of two
branches, bilinear and nearest x2 resizes, softmax; strided, depthwise and dilated convolutions,
a squeeze-and-excitation gate, a residual sum, hard-swish, leaky ReLU, ReLU6, a transposed
convolution), exported with torch.onnx at random weights,
run by our engine from the .onnx file (tools/scenelab_infer, which reads it through read_model) and
by PyTorch on the same input: scores within 1e-4 relative (max |ours - torch| / max |torch|) and
the labels (the scores brought onto the input bilinearly, argmax) equal on >= 99.9% of pixels.
Batch 2, odd sizes (the branching net: multiples of 4), the input size free (dynamic axes).
A hand-written graph checks the folding of constant arithmetic (pads computed through Transpose,
Flatten, Squeeze, Gather, Unsqueeze, Cast). Then two published real-time segmentation nets (tools/seg_nets.py: DDRNet-23-slim and BiSeNet V2,
each with PyTorch's initial weights and random batch statistics), at batch 2 and an odd size.
Where this PyTorch has the dynamo exporter (torch.onnx.export(dynamo=True), PyTorch 2.5+ with
onnxscript), the resized nets and the published ones again through it, opset 18, the input's size
free (torch.export's dynamic shapes): its resize sizes are arithmetic on the input's size, such as
(h - 1) // 8 + 1, and its global pooling a ReduceMean; the published nets' weights in a file beside
the model (its external data, as it writes them by default).

usage: onnx_peer_test.py BUILD_DIR   (exit 77 = skipped: PyTorch, h5py or ONNX support missing)
"""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIPPED: PyTorch/h5py not importable ({e})")
    sys.exit(77)

REL_BOUND = 1e-4
LABEL_AGREEMENT = 0.999


class Plain(nn.Module):
    """conv 3x3 + BN + ReLU, max-pool, conv 3x3 + BN + ReLU, conv 1x1: scores at half size."""

    def __init__(self, classes=6):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
        self.b = nn.Sequential(nn.Conv2d(8, 12, 3, padding=1, bias=False), nn.BatchNorm2d(12), nn.ReLU())
        self.head = nn.Conv2d(12, classes, 1)

    def forward(self, x):
        return self.head(self.b(self.a(x)))


class Branches(nn.Module):
    """Two branches (full and half resolution, the second brought back by nearest x2), concatenated,
    a 5x5 convolution, bilinear x2 back from a pool, softmax over the classes."""

    def __init__(self, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU())
        self.low = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(6, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())
        self.mix = nn.Conv2d(12, 8, 5, padding=2)
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        s = self.stem(x)
        low = F.interpolate(self.low(s), scale_factor=2, mode="nearest")
        y = F.relu(self.mix(torch.cat([s, low], 1)))
        y = F.interpolate(F.max_pool2d(y, 2), scale_factor=2, mode="bilinear", align_corners=False)
        return torch.softmax(self.head(y), 1)


class Modern(nn.Module):
    """What real-time nets are made of: a stride-2 stem, a depthwise-separable block with a
    residual sum, a dilated convolution, a squeeze-and-excitation gate (global average pool, 1x1
    convolutions, sigmoid, product), hard-swish, leaky ReLU, ReLU6 (clip), a transposed
    convolution x2 back."""

    def __init__(self, classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU6(),
                                nn.Conv2d(8, 8, 1))
        self.dil = nn.Sequential(nn.Conv2d(8, 12, 3, padding=2, dilation=2), nn.LeakyReLU(0.1))
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(12, 4, 1), nn.ReLU(), nn.Conv2d(4, 12, 1),
                                nn.Sigmoid())
        self.up = nn.ConvTranspose2d(12, 6, 3, stride=2, padding=1, output_padding=1)
        self.head = nn.Conv2d(6, classes, 1)

    def forward(self, x):
        s = self.stem(x)
        y = self.dil(s + self.dw(s))
        y = y * self.se(y)
        return self.head(F.relu(self.up(y)))


class Sized(nn.Module):
    """Resizes to another map's size, as DDRNet, PIDNet and BiSeNetV2 write it: a low-resolution
    branch brought to the high one's size, the scores to the input's (F.interpolate(size=...))."""

    def __init__(self, classes=3):
        super().__init__()
        self.high = nn.Sequential(nn.Conv2d(3, 6, 3, stride=2, padding=1), nn.ReLU())
        self.low = nn.Sequential(nn.Conv2d(6, 6, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Conv2d(6, classes, 1)

    def forward(self, x):
        h = self.high(x)
        y = h + F.interpolate(self.low(h), size=h.shape[2:], mode="bilinear", align_corners=False)
        return F.interpolate(self.head(y), size=x.shape[2:], mode="bilinear", align_corners=False)


class Padded(nn.Module):
    """Explicit zero padding before a convolution (uneven sides), average pools counting their
    padding (torch.onnx writes these as Pad, then the pool) and not, a padded 3x3 max pool at
    stride 2, and a batch normalisation between a ReLU and a convolution (not foldable)."""

    def __init__(self, classes=5):
        super().__init__()
        self.pad = nn.ZeroPad2d((1, 2, 0, 1))
        self.conv = nn.Conv2d(3, 6, 3)
        self.bn = nn.BatchNorm2d(6)
        self.head = nn.Conv2d(18, classes, 1)

    def forward(self, x):
        y = self.bn(F.relu(self.conv(self.pad(x))))
        a = F.avg_pool2d(y, 3, 2, 1, count_include_pad=True)
        b = F.avg_pool2d(y, 3, 2, 1, count_include_pad=False)
        m = F.max_pool2d(y, 3, 2, 1)
        return self.head(torch.cat([a, b, m], 1))


class ToInput(Plain):
    """Plain's scores brought to the input's size in the net (exported at a fixed size: the sizes
    are constants, the input's)."""

    def forward(self, x):
        return F.interpolate(super().forward(x), size=x.shape[2:], mode="bilinear", align_corners=False)


def randomise(net, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.rand(p.shape, generator=g) - 0.5)
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return net.eval()


def randomise_bn(net, seed):
    """PyTorch's initial weights (the deep nets' activations stay in range) with random batch
    normalisation statistics and affine parameters (each folded or mapped by the importer)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_((torch.rand(c, generator=g) - 0.5) * 0.2)
                m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.copy_((torch.rand(c, generator=g) - 0.5) * 0.2)
    return net.eval()


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import seg_nets  # noqa: E402  (the TorchScript exporter where PyTorch defaults to dynamo)


def published():
    return [(f"published: {name}", lambda cls=cls, k=k: randomise_bn(cls(), 30 + k), True, (131, 173))
            for k, (name, cls) in enumerate(seg_nets.NETS.items())]


def folded_constants(tmp):
    """A hand-written graph whose Pad takes pads computed from constants through Transpose,
    Flatten, Squeeze, Gather, Unsqueeze and Cast (folded when the file loads), then a Conv; the
    reference is PyTorch's F.pad and conv2d with those pads. (net, path, input)"""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = torch.Generator().manual_seed(99)
    w = torch.rand(4, 3, 3, 3, generator=g) - 0.5
    const = lambda name, a: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(a, name))
    # A transposed is [[ends], [begins]]; the gather swaps the halves: [0, 0, 1, 2, 0, 0, 3, 1]
    nodes = [const("A", np.array([[0, 0], [0, 0], [3, 1], [1, 2]], np.int64)),
             const("perm_idx", np.array([4, 5, 6, 7, 0, 1, 2, 3], np.int64)), const("ax0", np.array([0], np.int64)),
             helper.make_node("Transpose", ["A"], ["t2"], perm=[1, 0]),
             helper.make_node("Flatten", ["t2"], ["f"], axis=0),
             helper.make_node("Squeeze", ["f", "ax0"], ["sq"]),
             helper.make_node("Gather", ["sq", "perm_idx"], ["ga"], axis=0),
             helper.make_node("Unsqueeze", ["ga", "ax0"], ["un"]),
             helper.make_node("Squeeze", ["un", "ax0"], ["sq2"]),
             helper.make_node("Cast", ["sq2"], ["pads"], to=TensorProto.INT64),
             helper.make_node("Pad", ["image", "pads"], ["padded"], mode="constant"),
             helper.make_node("Conv", ["padded", "W"], ["scores"], kernel_shape=[3, 3])]
    graph = helper.make_graph(nodes, "folded", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                               ["n", 3, "h", "w"])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w.numpy(), "W")])
    path = os.path.join(tmp, "folded.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)

    def net(x):  # ONNX pads [1, 2] begin, [3, 1] end on (H, W): F.pad's (left, right, top, bottom)
        return F.conv2d(F.pad(x, (2, 1, 1, 3)), w)
    return net, path, torch.rand(2, 3, 31, 41, generator=g)


def dynamo_exporter():
    try:
        import inspect
        import onnxscript  # noqa: F401
        return "dynamo" in inspect.signature(torch.onnx.export).parameters and hasattr(torch, "export")
    except (ImportError, ValueError, TypeError):
        return False


def main():
    build = sys.argv[1]
    infer = os.path.join(build, "tools", "scenelab_infer")
    torch.set_num_threads(2)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("plain, BN kept", Plain, False, (37, 45)), ("plain, BN folded by the exporter", Plain, True, (29, 51)),
                 ("branches", Branches, True, (44, 52)),  # branches: sides of whole x4 (its two x2 paths meet)
                 ("modern: strided, depthwise, dilated, SE gate, residual", Modern, True, (38, 50)),
                 ("resized to other maps' sizes (shape arithmetic)", Sized, True, (36, 44)),
                 ("scores to the input's size, exported at a fixed size", ToInput, "static", (37, 45)),
                 ("padded: Pad before conv and pool, pools counting pads or not, max pool", Padded, True, (33, 47))]
        cases = [(t, lambda cls=cls, k=k: randomise(cls(), 10 + k), f, hw) for k, (t, cls, f, hw) in enumerate(cases)]
        cases.append(("pads computed from constants (folded at load)", None, "written", (0, 0)))
        pub = published()
        cases += pub
        if dynamo_exporter():
            cases += [(f"{t} (dynamo exporter)", m, "dynamo", hw) for t, m, f, hw in cases[4:5] + pub]
        else:
            print(f"dynamo exporter: not in PyTorch {torch.__version__} (or onnxscript missing): its cases not run")
        for k, (tag, make, fold, (h, w)) in enumerate(cases):
            torch.manual_seed(k)
            if fold == "written":
                net, path, x = folded_constants(tmp)
            elif fold == "dynamo":
                net = make()
                path = os.path.join(tmp, f"net{k}.onnx")
                x = torch.rand(2, 3, h, w, generator=torch.Generator().manual_seed(k))
                dim = torch.export.Dim
                torch.onnx.export(net, (x,), path, opset_version=18, input_names=["image"], output_names=["scores"],
                                  dynamic_shapes=({0: dim("n"), 2: dim("h", min=32, max=4096),
                                                   3: dim("w", min=32, max=4096)},),
                                  dynamo=True, external_data="published" in tag, verbose=False)
            else:
                net = make()
                path = os.path.join(tmp, f"net{k}.onnx")
                x = torch.rand(2, 3, h, w, generator=torch.Generator().manual_seed(k))
                seg_nets.onnx_export(net, x, path, opset_version=13, input_names=["image"], output_names=["scores"],
                                     dynamic_axes=None if fold == "static" else {"image": {0: "n", 2: "h", 3: "w"}},
                                     do_constant_folding=bool(fold), training=torch.onnx.TrainingMode.EVAL)
            inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
            with h5py.File(inp, "w") as f:
                f.create_dataset("input", data=x.numpy())
            r = subprocess.run([infer, "--model", path, "--input", inp, "--out", out, "--nodes", "scores,labels_full",
                                "--threads", "2"], capture_output=True, text=True)
            if r.returncode != 0:
                if "reads no ONNX files" in r.stderr:
                    print(f"SKIPPED: {r.stderr.strip()}")
                    sys.exit(77)
                print(f"FAIL {tag}: scenelab_infer: {r.stderr.strip()}")
                ok = False
                continue
            with h5py.File(out, "r") as f:
                scores, labels = np.asarray(f["scores"]), np.asarray(f["labels_full"])
            with torch.no_grad():
                ts = net(x)
                tl = F.interpolate(ts, size=x.shape[2:], mode="bilinear", align_corners=False).argmax(1, keepdim=True)
            ts, tl = ts.numpy(), tl.numpy().astype(np.float32)
            if scores.shape != ts.shape:
                print(f"FAIL {tag}: scores {scores.shape}, torch {ts.shape}")
                ok = False
                continue
            rel = float(np.max(np.abs(scores - ts)) / max(np.max(np.abs(ts)), 1e-30))
            agree = float(np.mean(labels.reshape(tl.shape) == tl))
            good = rel < REL_BOUND and agree >= LABEL_AGREEMENT
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} {tag}: scores {scores.shape} rel err {rel:.2e} (bound {REL_BOUND:g}), "
                  f"labels equal on {100 * agree:.3f}% (bound {100 * LABEL_AGREEMENT:g}%)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
