"""Two published real-time segmentation networks, written in PyTorch from their papers, for
tools/train_seg_net.py (training on CamVid, export to ONNX) and tests/weights/onnx_peer_test.py:

- DDRNet-23-slim: Hong, Pan, Sun, Jia, "Deep Dual-resolution Networks for Real-time and Accurate
  Semantic Segmentation of Road Scenes" (2021), Table 1 and Sec. 3: a 1/8 high-resolution branch
  beside a low-resolution one (1/16, 1/32, 1/64) exchanging features by bilateral fusion (3x3
  stride-2 convolutions down, 1x1 convolution and bilinear resampling up), bottleneck blocks last,
  and the Deep Aggregation Pyramid Pooling Module (DAPPM: average pools of 5/9/17 at strides
  2/4/8 and a global one, each fused hierarchically with the one before by a 3x3 convolution).
- BiSeNet V2: Yu, Gao, Wang, Yu, Shen, Sang, "BiSeNet V2: Bilateral Network with Guided
  Aggregation for Real-time Semantic Segmentation" (IJCV 2021), Table 1 and Sec. 4: a wide,
  shallow detail branch (1/8) and a narrow, deep semantic branch (stem, gather-and-expansion
  layers, context embedding, 1/32) joined by the bilateral guided aggregation layer.

Every resampling goes to another map's size (F.interpolate(size=y.shape[-2:])), so any input
size runs; the scores come back at the input's size (bilinear). The auxiliary heads that both
papers train with are left out (the nets train with the single loss of tools/train_seg_net.py).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def onnx_export(*args, **kw):
    """torch.onnx.export by TorchScript: one file, opset 13-17 (PyTorch 2.9+ defaults to its dynamo exporter, opset 18,
    the weights in a second file; the importer reads both kinds, tests/weights/onnx_peer_test.py)."""
    try:
        return torch.onnx.export(*args, dynamo=False, **kw)
    except TypeError:  # before the dynamo argument
        return torch.onnx.export(*args, **kw)


def conv_bn(cin, cout, k=3, stride=1, groups=1, relu=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


def resize_to(x, ref):
    return F.interpolate(x, size=ref.shape[-2:], mode="bilinear", align_corners=False)


# ---- DDRNet-23-slim -------------------------------------------------------------------------

class Basic(nn.Module):
    """The residual basic block: two 3x3 convolutions; a 1x1 projection where the shape changes.
    `last_relu` False leaves the sum without its ReLU (a block before a bilateral fusion)."""

    def __init__(self, cin, cout, stride=1, last_relu=True):
        super().__init__()
        self.a = conv_bn(cin, cout, 3, stride)
        self.b = conv_bn(cout, cout, 3, 1, relu=False)
        self.proj = conv_bn(cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else None
        self.last_relu = last_relu

    def forward(self, x):
        y = self.b(self.a(x)) + (x if self.proj is None else self.proj(x))
        return F.relu(y) if self.last_relu else y


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 2, with a projection shortcut; no ReLU at the end."""

    def __init__(self, cin, planes, stride=1):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, planes, 1), conv_bn(planes, planes, 3, stride),
                                  conv_bn(planes, planes * 2, 1, relu=False))
        self.proj = conv_bn(cin, planes * 2, 1, stride, relu=False)

    def forward(self, x):
        return self.body(x) + self.proj(x)


def stage(cin, cout, blocks, stride, last_relu=False):
    return nn.Sequential(*[Basic(cin if i == 0 else cout, cout, stride if i == 0 else 1,
                                 last_relu=last_relu or i < blocks - 1) for i in range(blocks)])


def bn_relu_conv(cin, cout, k):
    """The pre-activation unit of DAPPM and the head: batch norm, ReLU, then the convolution."""
    return nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, cout, k, 1, k // 2, bias=False))


class DAPPM(nn.Module):
    def __init__(self, cin, mid, cout):
        super().__init__()
        self.scale0 = bn_relu_conv(cin, mid, 1)
        self.pools = nn.ModuleList([nn.AvgPool2d(k, s, k // 2) for k, s in ((5, 2), (9, 4), (17, 8))])
        self.scales = nn.ModuleList([bn_relu_conv(cin, mid, 1) for _ in range(4)])
        self.process = nn.ModuleList([bn_relu_conv(mid, mid, 3) for _ in range(4)])
        self.compress = bn_relu_conv(mid * 5, cout, 1)
        self.shortcut = bn_relu_conv(cin, cout, 1)

    def forward(self, x):
        ys = [self.scale0(x)]
        for i in range(4):
            p = self.pools[i](x) if i < 3 else F.adaptive_avg_pool2d(x, 1)
            ys.append(self.process[i](resize_to(self.scales[i](p), x) + ys[-1]))
        return self.compress(torch.cat(ys, 1)) + self.shortcut(x)


class DDRNet23Slim(nn.Module):
    def __init__(self, classes=11, planes=32, spp=128, head=64):
        super().__init__()
        p = planes
        self.stem = nn.Sequential(conv_bn(3, p, 3, 2), conv_bn(p, p, 3, 2))            # 1/4
        self.layer1 = stage(p, p, 2, 1, last_relu=True)
        self.layer2 = stage(p, 2 * p, 2, 2)                                             # 1/8
        self.low3, self.high3 = stage(2 * p, 4 * p, 2, 2), stage(2 * p, 2 * p, 2, 1)    # 1/16 | 1/8
        self.down3 = conv_bn(2 * p, 4 * p, 3, 2, relu=False)
        self.up3 = conv_bn(4 * p, 2 * p, 1, relu=False)
        self.low4, self.high4 = stage(4 * p, 8 * p, 2, 2), stage(2 * p, 2 * p, 2, 1)    # 1/32 | 1/8
        self.down4 = nn.Sequential(conv_bn(2 * p, 4 * p, 3, 2), conv_bn(4 * p, 8 * p, 3, 2, relu=False))
        self.up4 = conv_bn(8 * p, 2 * p, 1, relu=False)
        self.low5, self.high5 = Bottleneck(8 * p, 8 * p, 2), Bottleneck(2 * p, 2 * p, 1)  # 1/64 | 1/8
        self.dappm = DAPPM(16 * p, spp, 4 * p)
        self.head = nn.Sequential(bn_relu_conv(4 * p, head, 3), nn.BatchNorm2d(head), nn.ReLU(inplace=True),
                                  nn.Conv2d(head, classes, 1))

    def forward(self, x):
        y = self.layer2(self.layer1(self.stem(x)))
        y = F.relu(y)
        lo, hi = self.low3(y), self.high3(y)
        lo, hi = lo + self.down3(F.relu(hi)), hi + resize_to(self.up3(F.relu(lo)), hi)
        lo, hi = self.low4(F.relu(lo)), self.high4(F.relu(hi))
        lo, hi = lo + self.down4(F.relu(hi)), hi + resize_to(self.up4(F.relu(lo)), hi)
        lo, hi = self.low5(F.relu(lo)), self.high5(F.relu(hi))
        y = hi + resize_to(self.dappm(lo), hi)
        return resize_to(self.head(y), x)


# ---- BiSeNet V2 -----------------------------------------------------------------------------

class StemBlock(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.conv = conv_bn(3, c, 3, 2)
        self.left = nn.Sequential(conv_bn(c, c // 2, 1), conv_bn(c // 2, c, 3, 2))
        self.fuse = conv_bn(2 * c, c, 3)

    def forward(self, x):
        x = self.conv(x)
        return self.fuse(torch.cat([self.left(x), F.max_pool2d(x, 3, 2, 1)], 1))


class GatherExpand(nn.Module):
    """The gather-and-expansion layer: 3x3 conv, depthwise 3x3 expanding the channels e times
    (two of them at stride 2), 1x1 projection; identity or depthwise + 1x1 shortcut."""

    def __init__(self, cin, cout, stride=1, e=6):
        super().__init__()
        mid = cin * e
        body = [conv_bn(cin, cin, 3), conv_bn(cin, mid, 3, stride, groups=cin, relu=False)]
        if stride == 2:
            body.append(conv_bn(mid, mid, 3, 1, groups=mid, relu=False))
        body.append(conv_bn(mid, cout, 1, relu=False))
        self.body = nn.Sequential(*body)
        self.short = None if stride == 1 and cin == cout else nn.Sequential(
            conv_bn(cin, cin, 3, stride, groups=cin, relu=False), conv_bn(cin, cout, 1, relu=False))

    def forward(self, x):
        return F.relu(self.body(x) + (x if self.short is None else self.short(x)))


class ContextEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        self.gap_conv = conv_bn(c, c, 1)
        self.last = conv_bn(c, c, 3)

    def forward(self, x):
        g = self.gap_conv(self.bn(F.adaptive_avg_pool2d(x, 1)))
        return self.last(x + g)


class GuidedAggregation(nn.Module):
    def __init__(self, c=128):
        super().__init__()
        self.d_keep = nn.Sequential(conv_bn(c, c, 3, groups=c, relu=False), nn.Conv2d(c, c, 1, bias=False))
        self.d_down = nn.Sequential(conv_bn(c, c, 3, 2, relu=False), nn.AvgPool2d(3, 2, 1, ceil_mode=False))
        self.s_up = conv_bn(c, c, 3, relu=False)
        self.s_keep = nn.Sequential(conv_bn(c, c, 3, groups=c, relu=False), nn.Conv2d(c, c, 1, bias=False))
        self.out = conv_bn(c, c, 3)

    def forward(self, d, s):
        left = self.d_keep(d) * torch.sigmoid(resize_to(self.s_up(s), d))
        right = self.d_down(d) * torch.sigmoid(self.s_keep(s))
        return self.out(left + resize_to(right, d))


class BiSeNetV2(nn.Module):
    def __init__(self, classes=11, head=1024):
        super().__init__()
        self.detail = nn.Sequential(conv_bn(3, 64, 3, 2), conv_bn(64, 64),                       # 1/2
                                    conv_bn(64, 64, 3, 2), conv_bn(64, 64), conv_bn(64, 64),      # 1/4
                                    conv_bn(64, 128, 3, 2), conv_bn(128, 128), conv_bn(128, 128))  # 1/8
        self.semantic = nn.Sequential(StemBlock(16),                                                # 1/4
                                      GatherExpand(16, 32, 2), GatherExpand(32, 32),                # 1/8
                                      GatherExpand(32, 64, 2), GatherExpand(64, 64),                # 1/16
                                      GatherExpand(64, 128, 2), *[GatherExpand(128, 128) for _ in range(3)],
                                      ContextEmbedding(128))                                        # 1/32
        self.bga = GuidedAggregation(128)
        self.head = nn.Sequential(conv_bn(128, head, 3), nn.Dropout(0.1), nn.Conv2d(head, classes, 1))

    def forward(self, x):
        y = self.bga(self.detail(x), self.semantic(x))
        return resize_to(self.head(y), x)


NETS = {"ddrnet23slim": DDRNet23Slim, "bisenetv2": BiSeNetV2}
