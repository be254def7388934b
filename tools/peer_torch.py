#!/usr/bin/env python3
"""Times our engine and PyTorch on the same HDF5 model, same sizes, same thread count.

  /usr/bin/python3 tools/peer_torch.py --build build [--threads 2] [--sizes 320x240,640x480,1920x1080]
                                      [--nets reference,multiscale] [--runs 5] [--model FILE.h5]

Ours: tools/bench_gops --model (median ms after warm-up). PyTorch: tools/scenelab_torch.py's
TorchNet on the same file (torch.no_grad, median ms after warm-up), the whole graph from RGB to
the label map, as ours. Prints a markdown table with both times and the ratio.

--device cuda: PyTorch with cudnn.benchmark, the pass captured as a CUDA graph, the same
precision (tf32 switches; fp16: the model and input in half precision, channels_last). Before
timing, both run one random image (scenelab_infer for ours): the table reports the maximum
relative error of our scores against PyTorch's and the label agreement. --compile adds
torch.compile(mode="max-autotune-no-cudagraphs") of the same net as a second peer (compiled per
size, minutes each); --power-s S adds GOp/s per watt of each from the board's energy counter
(NVML) over S seconds of back-to-back passes (ours through bench_gops --power-s).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402


def ours_ms(build, model, size, threads, runs, device="cpu", precision="fp32", conv="auto", power_s=0):
    """(GOp, median ms, GOp/s/W or None) from tools/bench_gops."""
    out = subprocess.check_output([os.path.join(build, "tools", "bench_gops"), "--model", model,
                                   "--sizes", size, "--threads", str(threads), "--runs", str(runs),
                                   "--warmup", "3", "--device", device, "--precision", precision,
                                   "--conv", conv, "--power-s", str(power_s)], text=True)
    lines = out.splitlines()
    header = [c.strip() for c in [l for l in lines if l.startswith("| network")][0].strip("|").split("|")]
    row = [l for l in lines if l.startswith("| ") and size in l][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    per_watt = None
    if "GOp/s/W" in header and cells[header.index("GOp/s/W")] != "n/a":
        per_watt = float(cells[header.index("GOp/s/W")])
    return float(cells[2]), float(cells[3]), per_watt


def alternate_cpu(build, model, size, threads, runs, theirs, rounds=5):
    """(GOp, our median ms, their median ms) on the CPU in `rounds` alternating rounds, each ours
    (bench_gops on `model`) then theirs (`theirs()` timed runs // rounds times), so that this
    2-core machine's drift (up to 20% over minutes) falls on both alike: the medians of the
    rounds' medians."""
    per_round = max(3, runs // rounds)
    our_rounds, their_rounds = [], []
    for _ in range(rounds):
        gop, m, _ = ours_ms(build, model, size, threads, per_round)
        our_rounds.append(m)
        ts = []
        for _ in range(per_round):
            t0 = time.perf_counter()
            theirs()
            ts.append((time.perf_counter() - t0) * 1e3)
        their_rounds.append(float(np.median(ts)))
    return gop, float(np.median(our_rounds)), float(np.median(their_rounds))


class Energy:
    """The board's energy counter through NVML (the driver's libnvidia-ml.so.1, by ctypes), as
    tools/energy_meter.h reads it for bench_gops; None where it cannot be read."""

    def __init__(self):
        import ctypes
        self.ct = ctypes
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            if self.lib.nvmlInit_v2() != 0:
                raise OSError("nvmlInit failed")
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            bus = "%08x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0), props.pci_bus_id,
                                        props.pci_device_id)
            self.dev = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(self.dev)) != 0:
                raise OSError("no NVML device at " + bus)
            self.mj()
            self.ok = True
        except (OSError, AttributeError) as e:
            print(f"# no board power figures: {e}", file=sys.stderr)
            self.ok = False

    def mj(self):
        v = self.ct.c_ulonglong()
        if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.dev, self.ct.byref(v)) != 0:
            raise OSError("energy counter not readable")
        return float(v.value)


def per_watt(energy, fn, gop, seconds):
    """GOp/s/W of fn() run back to back for `seconds` (board energy counter around it)."""
    if energy is None or not energy.ok or seconds <= 0:
        return None
    torch.cuda.synchronize()
    mj0, t0, n = energy.mj(), time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(16):
            fn()
        n += 16
        torch.cuda.synchronize()
    joules = (energy.mj() - mj0) * 1e-3
    return gop * n / joules if joules > 0 else None


def median_event_ms(fn, runs):
    ts = []
    for _ in range(runs):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    return float(np.median(ts))


def agreement_cuda(build, model, net, w, h, precision, conv, dtype, tmp):
    """Our scores and labels vs PyTorch's on one random image: (max rel. error, label agreement)."""
    import h5py
    x = np.random.RandomState(w * 7 + h).rand(1, 3, h, w).astype(np.float32)
    inp, out = os.path.join(tmp, "x.h5"), os.path.join(tmp, "y.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("input", data=x)
    subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", model,
                           "--input", inp, "--out", out, "--nodes", "scores,labels_full",
                           "--device", "cuda", "--precision", precision, "--conv", conv])
    with h5py.File(out, "r") as f:
        scores, labels = np.asarray(f["scores"]), np.asarray(f["labels_full"])
    xt = torch.from_numpy(x).cuda().to(dtype)
    if dtype == torch.float16:
        xt = xt.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        r = net(xt, ["scores", "labels_full"])
    ts = r["scores"].float().cpu().numpy()
    tl = r["labels_full"].float().cpu().numpy()
    rel = float(np.max(np.abs(scores - ts)) / max(float(np.max(np.abs(ts))), 1e-30))
    return rel, float(np.mean(labels == tl))


def cuda_input(w, h, dtype):
    x = torch.rand(1, 3, h, w, device="cuda").to(dtype)
    if dtype == torch.float16:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def torch_ms_cuda(net, w, h, runs, dtype=torch.float32, energy=None, gop=0, power_s=0):
    """CUDA: cudnn.benchmark, the whole graph captured once as a CUDA graph and replayed.
    Returns (median ms, GOp/s/W or None)."""
    x = cuda_input(w, h, dtype)
    with torch.no_grad():
        for _ in range(3):
            net(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            net(x)
        for _ in range(3):
            g.replay()
        ms = median_event_ms(g.replay, runs)
        return ms, per_watt(energy, g.replay, gop, power_s)


def compiled_ms_cuda(net, w, h, runs, dtype, energy=None, gop=0, power_s=0):
    """torch.compile(mode="max-autotune-no-cudagraphs") of the same net at this size (compiled
    here, minutes per size; the compile time is not timed). Returns (median ms, GOp/s/W)."""
    x = cuda_input(w, h, dtype)
    fn = torch.compile(net, mode="max-autotune-no-cudagraphs", dynamic=False)
    with torch.no_grad():
        t0 = time.perf_counter()
        for _ in range(3):
            fn(x)
        torch.cuda.synchronize()
        print(f"# torch.compile {w}x{h}: compiled and warmed up in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)
        ms = median_event_ms(lambda: fn(x), runs)
        return ms, per_watt(energy, lambda: fn(x), gop, power_s)


def torch_ms(net, w, h, runs):
    x = torch.rand(1, 3, h, w)
    with torch.no_grad():
        for _ in range(2):
            net(x)
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            net(x)
            ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--sizes", default="320x240,640x480,1920x1080")
    ap.add_argument("--nets", default="reference,multiscale")
    ap.add_argument("--model", help="one model file instead of generated --nets")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16"])
    ap.add_argument("--conv", default="auto", help="our GPU convolution algorithm")
    ap.add_argument("--compile", action="store_true",
                    help="CUDA: torch.compile (max-autotune-no-cudagraphs) as a second peer")
    ap.add_argument("--power-s", type=float, default=0,
                    help="CUDA: GOp/s per watt of each, each run back to back this long (NVML)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.device == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    where = (f"{torch.cuda.get_device_name()}, {a.precision}, our conv {a.conv}" if a.device == "cuda"
             else f"{a.threads} threads")
    print(f"# peer_torch: PyTorch {torch.__version__} vs scenelab, {where}, "
          f"median of {a.runs} runs after warm-up")
    cuda = a.device == "cuda"
    dtype = torch.float16 if a.precision == "fp16" else torch.float32
    compile_ = cuda and a.compile
    power = cuda and a.power_s > 0
    energy = Energy() if power else None
    extra = " max rel. error | labels agree |" if cuda else ""
    if compile_:
        extra += " compiled ms | compiled / scenelab |"
    if power:
        extra += " scenelab GOp/s/W | PyTorch GOp/s/W |" + (" compiled GOp/s/W |" if compile_ else "")
    print("| model | size | GOp | scenelab ms | GOp/s | PyTorch ms | GOp/s | PyTorch / scenelab |" + extra)
    print("|---|---|---|---|---|---|---|---|" + "---|" * extra.count("|"))
    with tempfile.TemporaryDirectory() as tmp:
        models = []
        if a.model:
            models.append((os.path.basename(a.model), a.model))
        else:
            for n in a.nets.split(","):
                p = os.path.join(tmp, n + ".h5")
                subprocess.check_call([os.path.join(a.build, "tools", "make_model"), "--network", n,
                                       "--classes", "8", "--out", p])
                models.append((n, p))
        for label, path in models:
            net, _, _, _ = st.load_model(path)
            net.eval()
            if cuda:
                net = net.cuda().to(dtype)
                if dtype == torch.float16:
                    net = net.to(memory_format=torch.channels_last)
            for size in a.sizes.split(","):
                w, h = map(int, size.split("x"))
                check = ""
                if cuda:
                    rel, agree = agreement_cuda(a.build, path, net, w, h, a.precision, a.conv, dtype, tmp)
                    check = f" {rel:.1e} | {100 * agree:.2f}% |"
                gop, ours, ours_w = ours_ms(a.build, path, size, a.threads, a.runs, a.device, a.precision,
                                            a.conv, a.power_s if power else 0)
                theirs_w = comp_w = None
                if cuda:
                    theirs, theirs_w = torch_ms_cuda(net, w, h, a.runs, dtype, energy, gop, a.power_s)
                else:
                    theirs = torch_ms(net, w, h, a.runs)
                if compile_:
                    comp, comp_w = compiled_ms_cuda(net, w, h, a.runs, dtype, energy, gop, a.power_s)
                    check += f" {comp:.2f} | {comp / ours:.2f} |"
                if power:
                    fmt = lambda v: "n/a" if v is None else f"{v:.1f}"  # noqa: E731
                    check += f" {fmt(ours_w)} | {fmt(theirs_w)} |" + (f" {fmt(comp_w)} |" if compile_ else "")
                print(f"| {label} | {size} | {gop:.2f} | {ours:.2f} | {gop / ours * 1e3:.1f} | "
                      f"{theirs:.2f} | {gop / theirs * 1e3:.1f} | {theirs / ours:.2f} |" + check, flush=True)


if __name__ == "__main__":
    main()
