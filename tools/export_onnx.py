#!/usr/bin/env python3
"""Export a scenelab HDF5 model (the paper's networks) to an ONNX file that scenelab loads back
with the same labels, and that any ONNX runtime runs.

  export_onnx.py --model weights/camvid-multiscale.h5 --out multiscale.onnx

The graph's layers become ONNX operators (Conv, Relu, MaxPool, AveragePool, Resize, Concat) up to
the class scores (the output 'scores'; the engine adds the resampling onto the image and the
argmax, as for every .onnx model). The preprocessing layers that ONNX has no operator for are
model-local functions of the domain 'scenelab': RgbToYuv, ContrastNorm(size, eps[, sigma]) and
Standardize(x, mean, std). Each function's body computes the layer from standard operators (so
ONNX Runtime runs the file); scenelab maps a node of these functions by name onto its own layer.
The metadata carries the class names, the palette and scores_align=geometry: the scores are
resampled onto the image by where their pixels lie (the valid convolutions of the reference net
shift their grid), as the HDF5 model's own 'full' node does. Needs the onnx package (Debian's
python3-onnx).
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402

DOMAIN = "scenelab"
OPSET = 17


def const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name))


def rgb_to_yuv_function():
    w = st.RGB_TO_YUV.numpy().astype(np.float32).reshape(3, 3, 1, 1)
    return helper.make_function(DOMAIN, "RgbToYuv", ["x"], ["y"], [
        const("w", w),
        helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1]),
    ], [helper.make_opsetid("", OPSET)])


def contrast_norm_function(channels, size, sigma, eps):
    """layers/contrast_norm.cpp from standard operators: the separable Gaussian blur (zero
    padding) normalised by the blur of ones, then (x - mean) / max(sd, max(mean of sd, eps))."""
    g = st.gaussian_window(size, sigma).numpy().astype(np.float32)
    r = size // 2
    gx = np.tile(g.reshape(1, 1, 1, size), (channels, 1, 1, 1))
    gy = np.tile(g.reshape(1, 1, size, 1), (channels, 1, 1, 1))
    nodes = [const("gx", gx), const("gy", gy), const("zero", np.float32(0)), const("eps", np.float32(eps))]

    def blur(src, dst):
        nodes.append(helper.make_node("Conv", [src, "gx"], [dst + "_x"], group=channels, kernel_shape=[1, size],
                                      pads=[0, r, 0, r]))
        nodes.append(helper.make_node("Conv", [dst + "_x", "gy"], [dst], group=channels, kernel_shape=[size, 1],
                                      pads=[r, 0, r, 0]))

    nodes.append(helper.make_node("Shape", ["x"], ["shape"]))
    nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["ones"],
                                  value=numpy_helper.from_array(np.ones(1, np.float32))))
    blur("ones", "coef")
    blur("x", "bx")
    nodes += [helper.make_node("Div", ["bx", "coef"], ["mean"]),
              helper.make_node("Sub", ["x", "mean"], ["cen"]),
              helper.make_node("Mul", ["cen", "cen"], ["sq"])]
    blur("sq", "bsq")
    nodes += [helper.make_node("Div", ["bsq", "coef"], ["var"]),
              helper.make_node("Max", ["var", "zero"], ["var0"]),
              helper.make_node("Sqrt", ["var0"], ["sd"]),
              helper.make_node("ReduceMean", ["sd"], ["sdm"], axes=[2, 3], keepdims=1),
              helper.make_node("Max", ["sdm", "eps"], ["thr"]),
              helper.make_node("Max", ["sd", "thr"], ["den"]),
              helper.make_node("Div", ["cen", "den"], ["y"])]
    attrs = ["size", "eps"] + (["sigma"] if sigma is not None else [])
    return helper.make_function(DOMAIN, "ContrastNorm", ["x"], ["y"], nodes, [helper.make_opsetid("", OPSET)],
                                attrs)


def standardize_function():
    return helper.make_function(DOMAIN, "Standardize", ["x", "mean", "std"], ["y"], [
        const("axes", np.array([0, 2, 3], np.int64)),
        helper.make_node("Unsqueeze", ["mean", "axes"], ["m"]),
        helper.make_node("Unsqueeze", ["std", "axes"], ["s"]),
        helper.make_node("Sub", ["x", "m"], ["c"]),
        helper.make_node("Div", ["c", "s"], ["y"]),
    ], [helper.make_opsetid("", OPSET)])


def export(model_path, out_path):
    net, names, palette, name = st.load_model(model_path)
    params = {k: t.detach().numpy() for k, t in net.param_items()}
    inp, channels, nodes, _ = st.parse_graph(net.text)
    onnx_nodes, inits, functions, done = [], [], {}, False
    chans = {inp: channels}

    def init(key):
        if key not in {i.name for i in inits}:
            inits.append(numpy_helper.from_array(params[key], key))
        return key

    def shape_sizes(x, ref, out):
        """Concat(Shape(x)[0:2], Shape(ref)[2:4]): the Resize sizes onto ref's map."""
        onnx_nodes.extend([
            helper.make_node("Shape", [x], [out + "_xs"]),
            helper.make_node("Shape", [ref], [out + "_rs"]),
            const(out + "_0", np.array([0], np.int64)), const(out + "_2", np.array([2], np.int64)),
            const(out + "_4", np.array([4], np.int64)),
            helper.make_node("Slice", [out + "_xs", out + "_0", out + "_2"], [out + "_nc"]),
            helper.make_node("Slice", [out + "_rs", out + "_2", out + "_4"], [out + "_hw"]),
            helper.make_node("Concat", [out + "_nc", out + "_hw"], [out], axis=0)])

    for node, typ, ins, a in nodes:
        if done:
            break
        group = a.get("params", node)
        x = ins[0]
        if typ == "rgb_to_yuv":
            functions["RgbToYuv"] = rgb_to_yuv_function()
            onnx_nodes.append(helper.make_node("RgbToYuv", [x], [node], domain=DOMAIN))
        elif typ == "contrast_norm":
            size, eps = int(a.get("size", 13)), float(a.get("eps", 1e-4))
            sigma = float(a["sigma"]) if "sigma" in a else None
            if "ContrastNorm" in functions:
                raise SystemExit(f"{model_path}: more than one contrast_norm (one function a model)")
            functions["ContrastNorm"] = contrast_norm_function(chans[x], size, sigma, eps)
            kw = {"size": size, "eps": eps}
            if sigma is not None:
                kw["sigma"] = sigma
            onnx_nodes.append(helper.make_node("ContrastNorm", [x], [node], domain=DOMAIN, **kw))
        elif typ == "standardize":
            functions["Standardize"] = standardize_function()
            onnx_nodes.append(helper.make_node("Standardize", [x, init(group + "/mean"), init(group + "/std")],
                                               [node], domain=DOMAIN))
        elif typ == "conv2d":
            k = int(a.get("k", 1))
            pad = k // 2 if a.get("pad", "valid") == "same" else 0
            cin = [init(group + "/weight")] + ([init(group + "/bias")] if int(a.get("bias", 1)) else [])
            onnx_nodes.append(helper.make_node("Conv", [x] + cin, [node], kernel_shape=[k, k], pads=[pad] * 4))
            chans[node] = int(a["out"])
            continue
        elif typ == "relu":
            onnx_nodes.append(helper.make_node("Relu", [x], [node]))
        elif typ == "maxpool2d":
            k = int(a.get("k", 2))
            s = int(a.get("stride", k))
            onnx_nodes.append(helper.make_node("MaxPool", [x], [node], kernel_shape=[k, k], strides=[s, s]))
        elif typ == "downscale":
            f = int(a["factor"])
            onnx_nodes.append(helper.make_node("AveragePool", [x], [node], kernel_shape=[f, f], strides=[f, f]))
        elif typ == "upsample" and node == "full":
            done = True  # the engine resamples the scores onto the image itself
            continue
        elif typ == "upsample" and "scale" not in a and a.get("align", "size") == "size":
            mode = "linear" if a.get("mode", "bilinear") == "bilinear" else "nearest"
            shape_sizes(x, ins[1], node + "_sizes")
            onnx_nodes.append(helper.make_node("Resize", [x, "", "", node + "_sizes"], [node], mode=mode,
                                               coordinate_transformation_mode="half_pixel"))
        elif typ == "concat":
            onnx_nodes.append(helper.make_node("Concat", ins, [node], axis=1))
            chans[node] = sum(chans[i] for i in ins)
            continue
        else:
            raise SystemExit(f"{model_path}: node '{node}' ({typ} {a}) has no ONNX export here")
        chans[node] = chans[x]
    if "scores" not in chans:
        raise SystemExit(f"{model_path}: no node 'scores' before 'full'")
    graph = helper.make_graph(
        onnx_nodes, name or "scenelab",
        [helper.make_tensor_value_info(inp, TensorProto.FLOAT, ["n", channels, "h", "w"])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", chans["scores"], "sh", "sw"])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(DOMAIN, 1)],
                          functions=list(functions.values()), producer_name="scenelab tools/export_onnx.py")
    m.ir_version = 8
    meta = {"class_names": ",".join(names), "palette": ";".join(",".join(str(int(c)) for c in p) for p in palette),
            "scores_align": "geometry", "name": name}
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    checker.check_model(m)
    save(m, out_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a scenelab HDF5 model (weights/*.h5)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    export(a.model, a.out)
    print(f"export_onnx: {a.model} -> {a.out} ({os.path.getsize(a.out) / 2 ** 20:.1f} MiB)")


if __name__ == "__main__":
    main()
