"""PyTorch side of scenelab: the same graph description, layers and model file as the C++ engine.

Used as the peer oracle (tests compare our scores with these), by the exporter and by training.
Every layer here mirrors one file of layers/; keep them in step (tests/tools check that).
"""
import math
import os

import h5py
import numpy as np
import torch
import torch.nn.functional as F

FORMAT_VERSION = 1


# ---------------------------------------------------------------- graph text (engine/networks.cpp)
def _extractor(p, inp, pad):
    return (f"{p}c1 = conv2d({inp}) out=16 k=7 pad={pad} params=conv1\n"
            f"{p}r1 = relu({p}c1)\n"
            f"{p}p1 = maxpool2d({p}r1) k=2\n"
            f"{p}c2 = conv2d({p}p1) out=64 k=7 pad={pad} params=conv2\n"
            f"{p}r2 = relu({p}c2)\n"
            f"{p}p2 = maxpool2d({p}r2) k=2\n"
            f"{p}c3 = conv2d({p}p2) out=256 k=7 pad={pad} params=conv3\n"
            f"{p}r3 = relu({p}c3)\n")


def _classifier(inp, classes):
    return (f"fc1 = conv2d({inp}) out=64 k=1\n"
            "fc1r = relu(fc1)\n"
            f"scores = conv2d(fc1r) out={classes} k=1\n"
            "full = upsample(scores, image) mode=bilinear align=geometry\n"
            "labels_full = argmax(full)\n"
            "output scores labels_full\n")


_PRE = ("input image channels=3\n"
        "yuv = rgb_to_yuv(image)\n"
        "lcn = contrast_norm(yuv) size=13\n"
        "pre = standardize(lcn)\n")


def network_text(name, classes):
    if name == "reference":
        return _PRE + _extractor("s1", "pre", "valid") + _classifier("s1r3", classes)
    if name == "multiscale":
        return (_PRE + "half = downscale(pre) factor=2\n" + "quarter = downscale(pre) factor=4\n"
                + _extractor("s1", "pre", "same") + _extractor("s2", "half", "same")
                + _extractor("s4", "quarter", "same")
                + "s2up = upsample(s2r3, s1r3) mode=bilinear\n"
                + "s4up = upsample(s4r3, s1r3) mode=bilinear\n"
                + "features = concat(s1r3, s2up, s4up)\n" + _classifier("features", classes))
    raise ValueError(f"unknown network '{name}'")


def parse_graph(text):
    """-> (input_name, input_channels, [(name, type, [inputs], {attrs})], [outputs])"""
    inp, ch, nodes, outs = "image", 3, [], []
    for raw in text.splitlines():
        s = raw.split("#")[0].strip()
        if not s:
            continue
        toks = s.split()
        if toks[0] == "input":
            inp = toks[1]
            for t in toks[2:]:
                k, v = t.split("=")
                if k == "channels":
                    ch = int(v)
            continue
        if toks[0] == "output":
            outs += toks[1:]
            continue
        name, rest = s.split("=", 1)
        typ, rest = rest.split("(", 1)
        ins, attrs = rest.split(")", 1)
        kv = dict(t.split("=", 1) for t in attrs.split())
        nodes.append((name.strip(), typ.strip(), [i.strip() for i in ins.split(",")], kv))
    if not outs:
        outs = [nodes[-1][0]]
    return inp, ch, nodes, outs


# ---------------------------------------------------------------- preprocessing (layers/*.cpp)
RGB_TO_YUV = torch.tensor([[0.299, 0.587, 0.114],
                           [-0.14713, -0.28886, 0.436],
                           [0.615, -0.51499, -0.10001]])


_CONST = {}  # small constants per device: made once, outside any CUDA graph capture


def _const(key, make):
    if key not in _CONST:
        _CONST[key] = make()
    return _CONST[key]


def refine_scores(scores, image, sigma_s, sigma_r, iterations=3):
    """The refine layer (layers/refine.cpp): softmax(scores) (N, C, H, W) filtered by the domain
    transform's recursive filter guided by image (N, Ci, H, W), along rows then columns, each
    iteration's weights exp(-sqrt(2) / sigma_k * (1 + sigma_s / sigma_r * |step|_1)); the log of the
    result, at least log(FLT_MIN). Inference only (a loop over columns and rows)."""
    p = torch.softmax(scores, dim=1).clone()
    dx = (image[:, :, :, 1:] - image[:, :, :, :-1]).abs().sum(1, keepdim=True)  # (N, 1, H, W-1)
    dy = (image[:, :, 1:, :] - image[:, :, :-1, :]).abs().sum(1, keepdim=True)  # (N, 1, H-1, W)
    ratio = sigma_s / sigma_r
    for it in range(iterations):
        sigma = sigma_s * math.sqrt(3) * 2 ** (iterations - 1 - it) / math.sqrt(4 ** iterations - 1)
        vx = torch.exp(-math.sqrt(2) / sigma * (1 + ratio * dx))
        vy = torch.exp(-math.sqrt(2) / sigma * (1 + ratio * dy))
        for j in range(1, p.shape[3]):
            p[:, :, :, j] += vx[:, :, :, j - 1] * (p[:, :, :, j - 1] - p[:, :, :, j])
        for j in range(p.shape[3] - 2, -1, -1):
            p[:, :, :, j] += vx[:, :, :, j] * (p[:, :, :, j + 1] - p[:, :, :, j])
        for i in range(1, p.shape[2]):
            p[:, :, i, :] += vy[:, :, i - 1, :] * (p[:, :, i - 1, :] - p[:, :, i, :])
        for i in range(p.shape[2] - 2, -1, -1):
            p[:, :, i, :] += vy[:, :, i, :] * (p[:, :, i + 1, :] - p[:, :, i, :])
    return torch.log(p.clamp_min(torch.finfo(torch.float32).tiny))


def rgb_to_yuv(x):
    m = _const(("yuv", str(x.device), x.dtype), lambda: RGB_TO_YUV.to(x.dtype).to(x.device))
    return torch.einsum("oc,nchw->nohw", m, x)


def gaussian_window(size, sigma=None):
    sigma = 0.25 * size if sigma is None else sigma
    t = (torch.arange(size, dtype=torch.float64) - size // 2) / sigma
    g = torch.exp(-0.5 * t * t)
    return g / g.sum()


def contrast_norm(x, size=13, sigma=None, eps=1e-4):
    """Per-channel local contrast normalisation; layers/contrast_norm.cpp is the same function."""
    n, c, h, w = x.shape
    g = _const(("gauss", size, sigma, str(x.device), x.dtype),
               lambda: gaussian_window(size, sigma).to(x.dtype).to(x.device))
    r = size // 2

    def blur(z):
        z = z.reshape(-1, 1, z.shape[-2], z.shape[-1])
        z = F.conv2d(z, g.view(1, 1, 1, size), padding=(0, r))
        return F.conv2d(z, g.view(1, 1, size, 1), padding=(r, 0))

    coef = _const(("coef", size, sigma, h, w, str(x.device), x.dtype),
                  lambda: blur(torch.ones(1, 1, h, w, dtype=x.dtype, device=x.device)))
    mean = (blur(x) / coef).view(n, c, h, w)
    cen = x - mean
    sd = torch.sqrt(torch.clamp((blur(cen * cen) / coef).view(n, c, h, w), min=0))
    thr = torch.clamp(sd.mean(dim=(2, 3), keepdim=True), min=eps)
    return cen / torch.maximum(sd, thr)


def preprocess(x, mean, std, size=13):
    """RGB in [0,1] (NCHW) -> the network input, as the engine's first three nodes compute it."""
    y = contrast_norm(rgb_to_yuv(x), size)
    return (y - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)


# ---------------------------------------------------------------- the network
class Geometry:
    def __init__(self, sy=1.0, sx=1.0, oy=0.0, ox=0.0):
        self.sy, self.sx, self.oy, self.ox = sy, sx, oy, ox

    def window(self, k, s, pad=0):
        return Geometry(self.sy * s, self.sx * s, self.oy + self.sy * ((k - 1) / 2 - pad),
                        self.ox + self.sx * ((k - 1) / 2 - pad))


def _geometry_taps(n_in, n_out, gi_o, gi_s, go_o, go_s):
    src = (go_o + go_s * np.arange(n_out) - gi_o) / gi_s
    src = np.clip(src, 0, n_in - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return torch.from_numpy(i0), torch.from_numpy(i1), torch.from_numpy(src - i0)


_TAPS = {}  # (sizes, geometry, device, dtype) -> taps on the device; built once (CUDA graphs)


def upsample_geometry(x, gi, go, h, w, bilinear=True):
    key = (x.shape[2], x.shape[3], h, w, gi.oy, gi.sy, gi.ox, gi.sx, go.oy, go.sy, go.ox, go.sx,
           str(x.device))
    if key not in _TAPS:
        ty = _geometry_taps(x.shape[2], h, gi.oy, gi.sy, go.oy, go.sy)
        tx = _geometry_taps(x.shape[3], w, gi.ox, gi.sx, go.ox, go.sx)
        _TAPS[key] = tuple(t.to(x.device) for t in ty + tx)
    y0, y1, wy, x0, x1, wx = _TAPS[key]
    dev = x.device
    if not bilinear:
        ys = torch.floor(y0 + wy + 0.5).long().clamp(max=x.shape[2] - 1).to(dev)
        xs = torch.floor(x0 + wx + 0.5).long().clamp(max=x.shape[3] - 1).to(dev)
        return x[:, :, ys][:, :, :, xs]
    wy = wy.to(x.dtype).to(dev).view(1, 1, -1, 1)
    wx = wx.to(x.dtype).to(dev).view(1, 1, 1, -1)
    r0, r1 = x[:, :, y0.to(dev)], x[:, :, y1.to(dev)]
    top = r0[:, :, :, x0.to(dev)] + wx * (r0[:, :, :, x1.to(dev)] - r0[:, :, :, x0.to(dev)])
    bot = r1[:, :, :, x0.to(dev)] + wx * (r1[:, :, :, x1.to(dev)] - r1[:, :, :, x0.to(dev)])
    return top + wy * (bot - top)


class TorchNet(torch.nn.Module):
    """Runs a scenelab graph description in PyTorch; parameters named 'group/name' as in HDF5."""

    def __init__(self, text):
        super().__init__()
        self.text = text
        self.input_name, self.input_channels, self.nodes, self.outputs = parse_graph(text)
        self.params = torch.nn.ParameterDict()
        self.buffers_ = {}
        ch = {self.input_name: self.input_channels}
        for name, typ, ins, a in self.nodes:
            c = ch[ins[0]]
            group = a.get("params", name)
            if typ == "conv2d":
                out, k = int(a["out"]), int(a.get("k", 1))
                key = group + "/weight"
                if key.replace("/", "__") not in self.params:
                    self.params[key.replace("/", "__")] = torch.nn.Parameter(torch.zeros(out, c, k, k))
                    if int(a.get("bias", 1)):
                        self.params[(group + "/bias").replace("/", "__")] = torch.nn.Parameter(torch.zeros(out))
                c = out
            elif typ == "standardize":
                for p in ("mean", "std"):
                    key = (group + "/" + p).replace("/", "__")
                    if key not in self.params:
                        self.params[key] = torch.nn.Parameter(torch.ones(c) if p == "std" else torch.zeros(c),
                                                              requires_grad=False)
            elif typ == "concat":
                c = sum(ch[i] for i in ins)
            elif typ == "argmax":
                c = 1
            ch[name] = c
        self.channels = ch
        # Training only (tools/train.py --dropout): each element of a 1x1 convolution's input (the
        # pixel-wise classifier's features) is zeroed with this probability and the rest scaled by
        # 1 / (1 - p) while the module is in training mode; evaluation and export are unaffected.
        self.dropout = 0.0
        # Training only (tools/train.py --batchnorm, add_batchnorm): batch normalisation after the
        # convolutions that feed a ReLU, one per parameter group; folded() exports the net without it.
        self.norms = torch.nn.ModuleDict()

    def add_batchnorm(self, eps=1e-5, momentum=0.1):
        """Batch normalisation (a scale and shift per channel, trained, and running statistics)
        after every convolution whose output feeds a ReLU, one per parameter group: where the
        multiscale net's shared extractor runs at three scales, the statistics of a batch are those
        of the group's first use in the pass (full resolution), applied at every scale, so that
        training normalises as the folded net will. folded() puts it into the weights and biases;
        the graph, the engine and the model file do not change."""
        consumers = {}
        for name, typ, ins, _ in self.nodes:
            for i in ins:
                consumers.setdefault(i, []).append(typ)
        for name, typ, ins, a in self.nodes:
            group = a.get("params", name)
            if typ != "conv2d" or consumers.get(name) != ["relu"] or group in self.norms:
                continue
            if not int(a.get("bias", 1)):
                raise ValueError(f"batch normalisation of '{name}': a convolution without a bias cannot hold it")
            self.norms[group] = torch.nn.BatchNorm2d(int(a["out"]), eps=eps, momentum=momentum,
                                                     device=self.p(group, "weight").device)
        return self

    def _normalise(self, group, v, stats):
        bn = self.norms[group]
        if self.training:
            if group not in stats:  # the group's first use in this pass: its batch statistics
                mean, var = v.mean((0, 2, 3)), v.var((0, 2, 3), unbiased=False)
                stats[group] = (mean, var)
                n = v.numel() // v.shape[1]
                with torch.no_grad():
                    bn.running_mean.lerp_(mean.detach(), bn.momentum)
                    bn.running_var.lerp_(var.detach() * (n / max(n - 1, 1)), bn.momentum)
            mean, var = stats[group]
        else:
            mean, var = bn.running_mean, bn.running_var
        scale = bn.weight * torch.rsqrt(var + bn.eps)
        return v * scale.view(1, -1, 1, 1) + (bn.bias - mean * scale).view(1, -1, 1, 1)

    def folded(self):
        """A TorchNet of the same graph without batch normalisation (on the CPU): each normalised
        convolution's weight scaled by gamma / sqrt(running var + eps) and its bias set to
        (bias - running mean) * that + beta, in float64 before rounding; the same function as this
        net in evaluation mode (without normalisation, a copy of the net)."""
        out = TorchNet(self.text)
        with torch.no_grad():
            for key, t in self.params.items():
                out.params[key].copy_(t.detach().cpu())
            for group, bn in self.norms.items():
                s = bn.weight.detach().cpu().double() * torch.rsqrt(bn.running_var.cpu().double() + bn.eps)
                w, b = self.p(group, "weight").detach().cpu().double(), self.p(group, "bias").detach().cpu().double()
                out.p(group, "weight").copy_(w * s.view(-1, 1, 1, 1))
                out.p(group, "bias").copy_((b - bn.running_mean.cpu().double()) * s + bn.bias.detach().cpu().double())
        return out

    def param_items(self):
        """(dataset name 'group/name', tensor) pairs, as stored under /params in the model file."""
        return [(k.replace("__", "/"), v) for k, v in self.params.items()]

    def p(self, group, name):
        return self.params[(group + "/" + name).replace("/", "__")]

    def forward(self, x, want=None):
        vals = {self.input_name: x}
        geo = {self.input_name: Geometry()}
        stats = {}  # batch normalisation's statistics of this pass, a group (add_batchnorm)
        for name, typ, ins, a in self.nodes:
            v = vals[ins[0]]
            g = geo[ins[0]]
            group = a.get("params", name)
            if typ == "conv2d":
                k = int(a.get("k", 1))
                pad = k // 2 if a.get("pad", "valid") == "same" else 0
                b = self.p(group, "bias") if int(a.get("bias", 1)) else None
                if k == 1 and self.dropout > 0 and self.training:
                    v = F.dropout(v, self.dropout, training=True)
                v = F.conv2d(v, self.p(group, "weight"), b, padding=pad)
                if group in self.norms:
                    v = self._normalise(group, v, stats)
                g = g.window(k, 1, pad)
            elif typ == "relu":
                v = F.relu(v)
            elif typ == "maxpool2d":
                k = int(a.get("k", 2))
                s = int(a.get("stride", k))
                v = F.max_pool2d(v, k, s)
                g = g.window(k, s)
            elif typ == "downscale":
                f = int(a["factor"])
                v = F.avg_pool2d(v, f, f)
                g = g.window(f, f)
            elif typ == "upsample" and "scale" in a:  # by a factor (layers/upsample.cpp): test-time scaling
                sc = float(a["scale"])
                h, w = (max(1, math.floor(n * sc + 0.5)) for n in v.shape[2:])  # C's lround
                ry, rx = v.shape[2] / h, v.shape[3] / w
                if a.get("mode", "bilinear") == "bilinear":
                    v = F.interpolate(v, size=(h, w), mode="bilinear", align_corners=False)
                else:
                    v = F.interpolate(v, size=(h, w), mode="nearest")
                g = Geometry(g.sy * ry, g.sx * rx, g.oy + g.sy * (0.5 * ry - 0.5), g.ox + g.sx * (0.5 * rx - 0.5))
            elif typ == "upsample":
                ref = vals[ins[1]]
                h, w = ref.shape[2], ref.shape[3]
                bil = a.get("mode", "bilinear") == "bilinear"
                if a.get("align", "size") == "geometry":
                    v = upsample_geometry(v, g, geo[ins[1]], h, w, bil)
                elif bil:
                    v = F.interpolate(v, size=(h, w), mode="bilinear", align_corners=False)
                else:
                    v = F.interpolate(v, size=(h, w), mode="nearest")
                g = geo[ins[1]]
            elif typ == "concat":
                v = torch.cat([vals[i] for i in ins], dim=1)
            elif typ == "argmax":
                v = torch.argmax(v, dim=1, keepdim=True).to(x.dtype)
            elif typ == "softmax":
                v = torch.softmax(v, dim=1)
            elif typ == "flip":  # job/combine.h: test-time mirroring
                rows = a.get("axis", "w") == "h"
                v = torch.flip(v, dims=[2 if rows else 3])
                if len(ins) > 1:  # the geometry mirrored about the reference's middle (layers/flip.cpp)
                    r, ref = geo[ins[1]], vals[ins[1]]
                    if rows:
                        g = Geometry(g.sy, g.sx, 2 * r.oy + r.sy * (ref.shape[2] - 1) - g.oy - g.sy * (v.shape[2] - 1), g.ox)
                    else:
                        g = Geometry(g.sy, g.sx, g.oy, 2 * r.ox + r.sx * (ref.shape[3] - 1) - g.ox - g.sx * (v.shape[3] - 1))
            elif typ == "softmax_mean":  # log of the mean of the inputs' softmax probabilities
                logp = torch.stack([torch.log_softmax(vals[i], dim=1) for i in ins])
                v = torch.logsumexp(logp, dim=0) - math.log(len(ins))
            elif typ == "refine":  # layers/refine.cpp: the domain transform on the probabilities
                v = refine_scores(v, vals[ins[1]], float(a["sigma_s"]), float(a["sigma_r"]), int(a.get("iterations", 3)))
            elif typ == "rgb_to_yuv":
                v = rgb_to_yuv(v)
            elif typ == "contrast_norm":
                v = contrast_norm(v, int(a.get("size", 13)),
                                  float(a["sigma"]) if "sigma" in a else None,
                                  float(a.get("eps", 1e-4)))
            elif typ == "standardize":
                v = (v - self.p(group, "mean").view(1, -1, 1, 1)) / self.p(group, "std").view(1, -1, 1, 1)
            else:
                raise ValueError(f"unknown layer type '{typ}' at node '{name}'")
            vals[name] = v
            geo[name] = g
        want = want or self.outputs
        return {k: vals[k] for k in want}


# ---------------------------------------------------------------- model files (weights/FORMAT.md)
def load_model(path):
    """-> (TorchNet with weights loaded, class_names, palette (C,3) uint8, name)"""
    with h5py.File(path, "r") as f:
        text = f.attrs["graph"]
        text = text.decode() if isinstance(text, bytes) else text
        net = TorchNet(text)
        with torch.no_grad():
            for key, t in net.param_items():
                t.copy_(torch.from_numpy(np.asarray(f["params/" + key], dtype=np.float32)))
        names = [n.decode() if isinstance(n, bytes) else n for n in f["meta/class_names"][()]]
        palette = np.asarray(f["meta/palette"], dtype=np.uint8)
        name = f.attrs.get("name", path)
        name = name.decode() if isinstance(name, bytes) else name
    return net, names, palette, name


def open_model(path, who, classes=None):
    """load_model for a program: a missing or unreadable file, or one whose class names are not
    `classes` (when given), ends it with an error naming `who` (e.g. 'train: --teacher') and the
    file."""
    if not os.path.exists(path):
        raise SystemExit(f"{who} {path}: no such file")
    try:
        net, names, palette, name = load_model(path)
    except (OSError, KeyError, ValueError) as e:
        raise SystemExit(f"{who} {path}: cannot read the model: {e}")
    if classes is not None and list(names) != list(classes):
        raise SystemExit(f"{who} {path}: its classes {names} are not {list(classes)}")
    return net, names, palette, name


# The keys of a class's detection head settings (nms/sliding_window.h, parse_window_spec).
DETECT_KEYS = ("threshold", "ring", "nms", "stride", "heights", "aspects", "min_area", "size_weight")


def detect_text(detect, class_names):
    """The model file's `detect` attribute for {class name: 'key=value ...'}: one line a class.
    Classes the model has not, lines that are not key=value pairs and unknown keys are errors
    (ValueError); the engine checks the values when it loads the file."""
    unknown = [c for c in detect if c not in class_names]
    if unknown:
        raise ValueError(f"detection settings for unknown classes {unknown}")
    for c, spec in detect.items():
        for item in spec.split():
            key, eq, value = item.partition("=")
            if not eq or not value or key not in DETECT_KEYS:
                raise ValueError(f"detection settings for {c}: '{item}' is not one of "
                                 f"{', '.join(k + '=...' for k in DETECT_KEYS)}")
    return "".join(f"{c}: {spec}\n" for c, spec in detect.items())


def parse_detect(text):
    """{class name: spec} from 'CLASS: key=value ...; CLASS: ...' (or one a line)."""
    out = {}
    for item in filter(None, (x.strip() for x in text.replace("\n", ";").split(";"))):
        cls, colon, spec = item.partition(":")
        if not colon or not cls.strip():
            raise ValueError(f"'{item}' is not 'CLASS: key=value ...'")
        out[cls.strip()] = spec.strip()
    return out


def merge_detect(spec, update):
    """A class's spec ('key=value ...') with the keys of `update` replacing its own (order kept,
    new keys appended); ValueError where an item of `update` is not key=value."""
    keys = dict(item.partition("=")[::2] for item in spec.split())
    for item in update.split():
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise ValueError(f"'{item}' is not key=value")
        keys[key] = value
    return " ".join(f"{k}={v}" for k, v in keys.items())


def get_detect(path):
    """The detection head settings of the model file at `path` (its `detect` attribute, one
    `CLASS: key=value ...` a line), '' where it has none."""
    with h5py.File(path, "r") as f:
        text = f.attrs.get("detect", "")
    return text.decode() if isinstance(text, bytes) else str(text)


def set_detect(path, detect):
    """Replaces the detection head settings of the model file at `path` in place (the weights
    untouched); an empty `detect` removes them. Returns the attribute's new text."""
    with h5py.File(path, "r+") as f:
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["meta/class_names"][()]]
        if not detect:
            if "detect" in f.attrs:
                del f.attrs["detect"]
            return ""
        text = detect_text(detect, names)
        f.attrs["detect"] = text
        return text


def save_model(path, net, class_names, palette, name, detect=None):
    """Exports a TorchNet's parameters (its state) in the engine's HDF5 model format. detect: an
    optional {class name: 'key=value ...'} of detection head settings (weights/FORMAT.md)."""
    palette = np.asarray(palette, dtype=np.uint8)
    assert palette.shape == (len(class_names), 3), "palette must be (classes, 3)"
    with h5py.File(path, "w") as f:
        f.attrs["format_version"] = np.int32(FORMAT_VERSION)
        f.attrs["name"] = name
        f.attrs["graph"] = net.text
        for key, t in net.param_items():
            a = t.detach().cpu().numpy().astype(np.float32)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"parameter {key} holds NaN or Inf")
            f.create_dataset("params/" + key, data=a)
        f.create_dataset("meta/class_names", data=np.array(class_names, dtype=h5py.string_dtype()))
        f.create_dataset("meta/palette", data=palette)
        if detect:
            f.attrs["detect"] = detect_text(detect, class_names)
