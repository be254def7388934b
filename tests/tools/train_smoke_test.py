#!/usr/bin/env python3
"""tools/train.py on a tiny synthetic CamVid-like set (two sequences), on the CPU with Debian's
PyTorch (the augmentation and the losses: train_augment_test.py, train_losses_test.py): short runs: --holdout SEQ (cross-sequence
selection) and --final, each exporting a model file, a fine-tuning run (--init) and a run stopped by
--minutes. Exit 77 (skipped) without torch or OpenCV.
    train_smoke_test.py SOURCE_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tool_test_env  # noqa: E402

src = tool_test_env.setup('cv2', 'numpy', 'torch')
import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import train  # noqa: E402


def make_set(root):
    rng = np.random.default_rng(0)
    for split, seqs in (("train", ["AAA1", "BBB2"]), ("val", ["CCC3"])):
        os.makedirs(os.path.join(root, split, "images"))
        os.makedirs(os.path.join(root, split, "labels"))
        for seq in seqs:
            for i in range(3):
                lab = np.zeros((72, 96), np.uint8)
                lab[:36] = 0  # sky above, road below, a car box: learnable from colour
                lab[36:] = 3
                lab[40:60, 20 + 10 * i:50 + 10 * i] = 8
                img = np.array(train.PALETTE, np.uint8)[lab][:, :, ::-1].copy()
                img = np.clip(img.astype(int) + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
                name = f"{seq}_{i:05d}"
                cv2.imwrite(os.path.join(root, split, "images", name + ".jpg"), img)
                cv2.imwrite(os.path.join(root, split, "labels", name + ".png"), lab)


def run(root, out, *extra):
    cmd = [sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network", "reference",
           "--out", out, "--epochs", "2", "--batch", "2", "--crop", "64x80", "--eval-every", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = [l for l in r.stdout.splitlines() if l.startswith("SUMMARY ")]
    assert summary and os.path.getsize(out) > 0, r.stdout[-2000:]
    return summary[0]


def check_bench_batches(root, tmp):
    """tools/bench_batches.py runs on a set, reports images a second for this train.py and a peer
    (here a copy of itself: bit-identical batches), and refuses a peer that is not a train.py."""
    peer = os.path.join(tmp, "peer_train.py")
    shutil.copy(os.path.join(src, "tools", "train.py"), peer)
    bench = [sys.executable, os.path.join(src, "tools", "bench_batches.py"), "--data", root, "--images", "4",
             "--batch", "2", "--batches", "2", "--rounds", "2", "--crop", "64x80"]
    r = subprocess.run(bench + ["--peer", peer], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stdout.count(" images/s ") == 2 and "bit-identical to the peer's: yes" in r.stdout, r.stdout
    # train.py's own checks apply to the augmentation arguments
    r = subprocess.run(bench + ["--", "--exposure", "none"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "augmentation --exposure none" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run(bench + ["--", "--scale", "9,1"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "--scale 9,1: needs" in r.stderr, r.stderr[-2000:]
    r = subprocess.run(bench + ["--peer", os.path.join(src, "tools", "crossval.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0 and "no Batches class" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def check_crossval(root, work):
    """tools/crossval.py: one run per held-out sequence plus the final and the train-only run, a
    table of the three, the gap between val and their mean; spread over two GPUs by image count."""
    cmd = [sys.executable, os.path.join(src, "tools", "crossval.py"), "--data", root, "--networks",
           "reference", "--epochs", "1", "--work", work, "--final", "--trainonly", "reference",
           "--jobs", "3", "--gpus", "0,1", "--workers", "2", "--", "--batch", "2", "--crop", "64x80",
           "--eval-every", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cv = json.load(open(os.path.join(work, "crossval.json")))
    # without --workers: the cores less one a run, shared by the runs' images where all run at once
    # (largest remainders get the cores left by rounding down), equally where runs wait their turn
    import crossval
    assert crossval.share_workers(32, [406, 367, 163], 3) == [13, 11, 5]
    assert crossval.share_workers(16, [406, 367, 163], 3) == [6, 5, 2]
    assert crossval.share_workers(16, [406, 367, 163], 2) == [7, 7, 7]
    assert crossval.share_workers(2, [406, 367, 163], 3) == [1, 1, 1]
    assert cv["sequences"] == ["AAA1", "BBB2", "CCC3"], cv
    assert sorted(cv["runs"]) == ["camvid-reference", "reference-full-AAA1", "reference-full-BBB2",
                                  "reference-full-CCC3", "reference-full-trainonly"], cv["runs"]
    mean = cv["means"]["reference-full"]["global_acc"]
    runs = [cv["runs"]["reference-full-" + s]["global_acc"] for s in cv["sequences"]]
    assert abs(mean - sum(runs) / 3) < 1e-9, (mean, runs)
    gap = cv["gaps"]["reference-full"]["global_acc"]
    assert abs(gap - (cv["runs"]["reference-full-trainonly"]["global_acc"] - mean)) < 1e-9, cv["gaps"]
    assert "val (train only) - mean reference-full" in r.stdout, r.stdout
    # --workers reaches every run, each worker with one thread (train.py's default)
    assert "5 runs, 3 at once, 2 batch workers each" in r.stdout, r.stdout
    for name in cv["runs"]:
        with open(os.path.join(work, name + ".out")) as f:
            s = json.loads([l for l in f if l.startswith("SUMMARY ")][0][len("SUMMARY "):])
        assert (s["workers"], s["threads"]) == (2, 1), (name, s["workers"], s["threads"])
    # longest first, each to the GPU with fewer images running: train + val 9 images, 3 a sequence
    # (make_set), so the final starts on GPU 0, then two held-out runs (6 each) on GPU 1 (6 < 9, 6 < 9)
    placed = [l for l in r.stdout.splitlines() if ": GPU " in l]
    assert placed[:3] == ["camvid-reference: GPU 0, 9 images an epoch", "reference-full-AAA1: GPU 1, 6 images an epoch",
                          "reference-full-BBB2: GPU 1, 6 images an epoch"], placed
    assert os.path.getsize(os.path.join(work, "camvid-reference.h5")) > 0
    assert "mean reference-full" in r.stdout, r.stdout
    assert cv["pending"] == [], cv["pending"]
    # as each run ends crossval.json is rewritten with the figures so far and the runs pending (a
    # batch cut short keeps what it finished): report() on this batch's logs, two runs pending
    import types
    a = types.SimpleNamespace(work=work, epochs=1)
    runs = [(n, [], 0) for n in sorted(cv["runs"])]
    plan = crossval.Plan(["reference"], ["full"], [0], cv["sequences"], ["reference"], runs)
    pending = {"reference-full-CCC3", "camvid-reference"}
    failed = crossval.report(a, plan, pending=pending, show=False)
    part = json.load(open(os.path.join(work, "crossval.json")))
    assert not failed and part["pending"] == sorted(pending), part["pending"]
    assert sorted(part["runs"]) == ["reference-full-AAA1", "reference-full-BBB2", "reference-full-trainonly"], part
    assert part["runs"]["reference-full-AAA1"] == cv["runs"]["reference-full-AAA1"], part["runs"]
    assert part["means"] == {} and part["gaps"] == {}, part  # no mean until every sequence is in
    # --progress: a running run's epoch and time left at its pace since its first epoch (which
    # holds the start-up), from its log, a line being written skipped; nothing before two epochs
    log = os.path.join(work, "progress.log")
    with open(log, "w") as f:
        f.write('{"epoch": 1, "loss": 2.5, "time_s": 60.0}\n{"epoch": 2, "loss": 2.0, "time_s": 62.0}\n'
                '{"epoch": 11, "loss": 1.0, "time_s": 80.0, "global_acc": 0.5}\n{"epoch": 12, "lo')
    assert crossval.progress_of(log, 100) == (11, 80.0, 178.0), crossval.progress_of(log, 100)
    with open(log, "w") as f:
        f.write('{"epoch": 1, "loss": 2.5, "time_s": 60.0}\n')
    assert crossval.progress_of(log, 100) is None and crossval.progress_of(log + ".none", 100) is None
    # a run that ended without a summary is reported (and fails the batch); pending ones are not
    assert crossval.report(a, crossval.Plan(["reference"], ["full"], [0], cv["sequences"], [],
                                            runs + [("reference-full-ZZZ9", [], 0)]), show=False)


def check_crossval_seeds(root, work):
    """crossval.py --seeds 0,1: every held-out sequence once a seed, each run given its seed; each
    seed's mean over the sequences, the mean over all runs and the spread between the seeds."""
    base = [sys.executable, os.path.join(src, "tools", "crossval.py"), "--data", root, "--networks",
            "reference", "--epochs", "1", "--work", work, "--jobs", "3", "--workers", "0"]
    tail = ["--", "--batch", "2", "--crop", "64x80", "--eval-every", "1", "--threads", "1"]
    for bad, why in ((["--seeds", "0,x"], "expected seeds"), (["--seeds", "1,1"], "named twice")):
        r = subprocess.run(base + bad + tail, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and why in r.stderr, (bad, r.stderr)
    r = subprocess.run(base + ["--seeds", "3,1"] + tail[:-2] + ["--seed", "2"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "not train.py's --seed" in r.stderr, r.stderr
    r = subprocess.run(base + ["--seeds", "3,1"] + tail, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cv = json.load(open(os.path.join(work, "crossval.json")))
    assert cv["seeds"] == [3, 1], cv["seeds"]
    names = [f"reference-full-{q}-seed{k}" for k in (3, 1) for q in cv["sequences"]]
    assert sorted(cv["runs"]) == sorted(names), cv["runs"]
    for name in names:
        with open(os.path.join(work, name + ".out")) as f:
            s = json.loads([l for l in f if l.startswith("SUMMARY ")][0][len("SUMMARY "):])
        assert s["seed"] == int(name[-1]), (name, s["seed"])
    per_seed = cv["seed_means"]["reference-full"]
    for k in ("3", "1"):
        runs = [cv["runs"][f"reference-full-{q}-seed{k}"]["mean_iou"] for q in cv["sequences"]]
        assert abs(per_seed[k]["mean_iou"] - sum(runs) / 3) < 1e-9, (k, per_seed, runs)
    every = [cv["runs"][n]["global_acc"] for n in names]
    assert abs(cv["means"]["reference-full"]["global_acc"] - sum(every) / 6) < 1e-9, cv["means"]
    spread = cv["spread"]["reference-full"]["class_acc"]
    assert abs(spread - abs(per_seed["3"]["class_acc"] - per_seed["1"]["class_acc"])) < 1e-9, cv["spread"]
    assert "mean reference-full seed 3" in r.stdout and "spread reference-full (2 seeds)" in r.stdout, r.stdout


def check_set_detect(model):
    """train.py writes CamVid's detection settings; tools/set_detect.py shows, replaces and
    clears them in place, and refuses an unknown class or key leaving the file as it was."""
    import h5py

    def attr(path=model):
        with h5py.File(path, "r") as f:
            v = f.attrs.get("detect", None)
        return v.decode() if isinstance(v, bytes) else v

    def tool(*args):
        return subprocess.run([sys.executable, os.path.join(src, "tools", "set_detect.py"), model, *args],
                              capture_output=True, text=True, timeout=120)

    shipped = train.st.detect_text(train.st.parse_detect(train.CAMVID_DETECT), train.CLASSES)
    assert shipped.startswith("Car: ") and "\nPedestrian: " in shipped, shipped  # one line a class
    assert attr() == shipped, attr()
    for name in ("camvid-multiscale.h5", "camvid-reference.h5"):  # the shipped files carry the same
        v = attr(os.path.join(src, "weights", name))
        assert v == shipped, f"weights/{name}: detect attribute {v!r}, train.py's --detect gives {shipped!r}"
    r = tool()
    assert r.returncode == 0 and r.stdout.strip() == shipped.strip(), r.stdout + r.stderr
    with open(model, "rb") as f:
        params = f.read()
    for bad, why in (("Bus: threshold=0.3", "unknown classes ['Bus']"), ("Car: treshold=0.3", "'treshold=0.3'"),
                     ("Car threshold=0.3", "is not 'CLASS: key=value ...'")):
        r = tool("--set", bad)
        assert r.returncode != 0 and why in r.stderr, (bad, r.stderr)
        assert attr() == shipped, attr()
    r = tool("--set", "Car: threshold=0.35; Pedestrian: aspects=0.3,0.5")
    assert r.returncode == 0 and attr() == "Car: threshold=0.35\nPedestrian: aspects=0.3,0.5\n", attr()
    # --update: only the keys and classes named change (a key replaced in place, a new one appended)
    r = tool("--update", "Pedestrian: threshold=0.2 aspects=0.4")
    assert r.returncode == 0 and attr() == "Car: threshold=0.35\nPedestrian: aspects=0.4 threshold=0.2\n", attr()
    for bad, why in (("Bus: threshold=0.3", "unknown classes ['Bus']"), ("Car: nms", "'nms' is not key=value"),
                     ("Car: treshold=0.3", "'treshold=0.3'")):
        r = tool("--update", bad)
        assert r.returncode != 0 and why in r.stderr, (bad, r.stderr)
        assert attr() == "Car: threshold=0.35\nPedestrian: aspects=0.4 threshold=0.2\n", attr()
    r = tool("--clear")
    assert r.returncode == 0 and attr() is None and "no detection settings" in r.stdout, r.stdout
    with open(model, "rb") as f:
        assert len(f.read()) <= len(params) + 4096  # attributes only: the weights are not rewritten


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "camvid")
        make_set(root)
        check_bench_batches(root, tmp)
        s = run(root, os.path.join(tmp, "holdout.h5"), "--holdout", "BBB2")
        assert '"selection": "sequence BBB2"' in s and '"exposure": [0.3, 1.2], "gamma": null' in s, s
        # the recipe's defaults: the illumination field with --aug full, dropout on the classifier,
        # batch normalisation (folded at export)
        assert '"shading": 0.3,' in s and '"dropout": 0.5,' in s and '"batchnorm": true,' in s, s
        assert '"scale": [0.5, 2.0], "ohem": 1.0,' in s, s  # the recipe: scale 0.5-2, every pixel
        check_crossval(root, os.path.join(tmp, "cv"))
        check_crossval_seeds(root, os.path.join(tmp, "cv-seeds"))
        s = run(root, os.path.join(tmp, "final.h5"), "--final", "--aug", "basic")
        assert '"best_epoch": 2' in s and "--final" in s and '"exposure": null' in s and '"shading": null' in s, s
        assert '"scale": null,' in s, s  # --aug basic draws its own scales
        s = run(root, os.path.join(tmp, "plain.h5"), "--last", "--exposure", "none", "--gamma", "1,2", "--epochs", "1",
                "--threads", "2", "--workers", "0")
        assert '"exposure": null, "gamma": [1.0, 2.0]' in s and '"workers": 0, "threads": 2,' in s, s
        assert '"compile": false' in s, s  # --compile auto compiles on a GPU only
        # --ema exports the moving average and logs the raw weights' figures beside it; --mix is recorded
        s = run(root, os.path.join(tmp, "ema.h5"), "--last", "--mix", "0.5", "--ema", "0.9")
        assert '"mix": 0.5, "ema": 0.9' in s and '"val_raw_last": {' in s, s
        s = run(root, os.path.join(tmp, "paste.h5"), "--last", "--paste", "0.5", "--paste-classes", "Car,Pole",
                "--epochs", "1")
        assert '"paste": 0.5, "paste_classes": ["Car", "Pole"],' in s, s
        # the exported model's name gives the recipe options given (here run()'s and the paste's),
        # so a file trained off the recipe says so; the recipe's own options name none
        import h5py
        with h5py.File(os.path.join(tmp, "paste.h5"), "r") as f:
            got = f.attrs["name"]
        got = got.decode() if isinstance(got, bytes) else str(got)
        assert got == ("camvid-reference (tools/train.py --epochs 1 --batch 2 --crop 64x80 --paste 0.5 "
                       "--paste-classes Car,Pole, seed 0, epoch 1)"), got
        assert train.parse_args(["--data", "d", "--out", "o"]).departures == ""
        assert train.parse_args(["--data", "d", "--out", "o", "--no-batchnorm", "--balance", "1",
                                 "--shading", "none"]).departures == "--shading none --no-batchnorm --balance 1"
        assert train.parse_args(["--data", "d", "--out", "o", "--init", "/x/a.h5", "--teacher", "/y/t-{seq}.h5,u.h5"]
                                ).departures == "--teacher t-{seq}.h5,u.h5 --init a.h5"  # model files by name
        s = run(root, os.path.join(tmp, "dropout.h5"), "--last", "--dropout", "0.3", "--epochs", "1")
        assert '"dropout": 0.3' in s, s
        s = run(root, os.path.join(tmp, "noshade.h5"), "--last", "--dropout", "0", "--shading", "none", "--epochs", "1",
                "--no-batchnorm")
        assert '"shading": null' in s and '"dropout": 0.0' in s and '"batchnorm": false,' in s, s
        # --batchnorm: the file holds the plain graph's parameters (folded), and labels as trained
        s = run(root, os.path.join(tmp, "bn.h5"), "--last", "--batchnorm", "--epochs", "2")
        assert '"batchnorm": true,' in s, s
        import scenelab_torch as st
        bn_net = st.load_model(os.path.join(tmp, "bn.h5"))[0]
        assert [k for k, _ in bn_net.param_items()] == [k for k, _ in st.TorchNet(bn_net.text).param_items()]
        summary = json.loads(s[len("SUMMARY "):])  # run() returns the SUMMARY line
        _, xv, yv = train.load_split(root, "val")
        m = train.metrics(train.evaluate(bn_net, xv, yv, torch.device("cpu")))
        assert abs(m["global_acc"] - summary["val"]["global_acc"]) < 1e-3, (m, summary["val"])
        s = run(root, os.path.join(tmp, "ohem.h5"), "--last", "--scale", "0.75,1.5", "--ohem", "0.3", "--epochs", "1")
        assert '"scale": [0.75, 1.5], "ohem": 0.3,' in s, s
        assert '"batch": 2, "crop": "64x80",' in s, s  # run()'s --batch and --crop, as given
        missing = set(train.RECIPE_OPTIONS) - set(json.loads(s[len("SUMMARY "):]))
        assert not missing, f"SUMMARY leaves out recipe options {sorted(missing)}: {s}"
        s = run(root, os.path.join(tmp, "shade.h5"), "--last", "--shading", "0.5", "--rare", "0.5", "--epochs", "1")
        assert '"shading": 0.5,' in s and '"rare": 0.5,' in s, s
        # --aux: the heads train beside the multiscale net; the file holds the plain graph's parameters
        s = run(root, os.path.join(tmp, "aux.h5"), "--network", "multiscale", "--last", "--aux", "0.4", "--epochs", "1")
        assert '"aux": 0.4, "optimizer": "adamw", "lr": 0.002, "weight_decay": 0.05,' in s, s  # the recipe's
        # --optimizer sgd: its own defaults for the rate and the L2 factor, recorded
        s = run(root, os.path.join(tmp, "sgd.h5"), "--last", "--optimizer", "sgd", "--epochs", "1")
        assert '"optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0005,' in s, s
        aux_net = st.load_model(os.path.join(tmp, "aux.h5"))[0]
        assert [k for k, _ in aux_net.param_items()] == [k for k, _ in st.TorchNet(st.network_text("multiscale", 11)).param_items()]
        s = run(root, os.path.join(tmp, "lovasz.h5"), "--last", "--lovasz", "0.5", "--lr", "0.001", "--epochs", "1")
        assert '"lovasz": 0.5,' in s and '"lr": 0.001,' in s, s  # the summary records the rate
        # --balance: the median-frequency weights to a power (0.5 their square roots, 0 none);
        # --weight-decay reaches the optimiser (recorded in the summary; 0.01, not the default 0.05)
        weights = {}
        for power in ("1", "0.5", "0"):
            r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network",
                                "reference", "--out", os.path.join(tmp, "b.h5"), "--epochs", "1", "--batch", "2",
                                "--crop", "64x80", "--last", "--balance", power, "--weight-decay", "0.01"],
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0 and '"weight_decay": 0.01' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
            line = [l for l in r.stdout.splitlines() if l.startswith("class weights ")][0]
            weights[power] = np.array(json.loads(line[len("class weights "):]))
        w1, w5, w0 = weights["1"], weights["0.5"], weights["0"]
        present = w1 > 0  # the synthetic set has Sky, Road and Car only
        assert present.sum() == 3 and not np.allclose(w1[present], 1), w1
        assert np.allclose(w5, np.sqrt(w1), rtol=2e-3, atol=2e-3), (w5, w1)
        assert np.array_equal(w0, present.astype(float)), w0
        for bad, why in (("--mix=1.5", "a probability"), ("--paste=2", "--paste 2: a probability, 0-1"),
                         (["--paste", "1", "--paste-classes", "Pole,Lamp"], "--paste-classes Pole,Lamp: expected names from Sky, "),
                         ("--paste-classes=Pole", "--paste-classes needs --paste P"), ("--balance=-1", "--balance -1: expected a power"),
                         ("--weight-decay=nan", "--weight-decay nan: expected 0 <= WD < 1"), ("--ema=1", "a decay between 0 and 1"),
                         ("--threads=0", "--threads 0: at least 1"),
                         ("--shading=-1", "--shading -1: needs 0 <= AMP <= 2"),
                         ("--shading=x", "--shading x: expected an amplitude"),
                         ("--dropout=1", "--dropout 1: a probability in [0, 1)"),
                         ("--rare=2", "--rare 2: a probability, 0-1, and --aug full"),
                         (["--aug", "basic", "--rare", "0.5"], "--rare 0.5: a probability, 0-1, and --aug full"),
                         ("--scale=0,1", "--scale 0,1: needs 0.1 <= LO <= HI <= 10"),
                         ("--scale=2", "--scale 2: expected LO,HI"),
                         ("--scale=none", "--scale none: expected LO,HI, e.g. 0.5,2"),
                         ("--gamma=x", "--gamma x: expected LO,HI, e.g. 1,2"),
                         (["--aug", "basic", "--scale", "1,2"], "--scale 1,2: needs 0.1 <= LO <= HI <= 10 and --aug full"),
                         ("--ohem=0", "--ohem 0: the fraction of pixels kept"),
                         ("--ohem=nan", "--ohem nan: the fraction of pixels kept"),
                         (["--ohem", "0.5", "--teacher", "t.h5"], "--ohem with --teacher: not supported"),
                         (["--batchnorm", "--init", "x.h5"], "--batchnorm with --init: a model file holds no batch"),
                         ("--aux=-1", "--aux -1: a weight from 0 (none) to 10"),
                         ("--lr=0", "--lr 0: expected a rate above 0"),
                         (["--network", "reference", "--aux", "0.4"], "--aux 0.4: deep supervision needs --network multiscale"),
                         ("--lovasz=-1", "--lovasz -1: a weight from 0 (none) to 10"), ("--workers=-1", "--workers -1: 0 or more"),
                         *((("--compile=on", "--compile on: needs torch.compile (PyTorch 2)"),)
                           if not hasattr(torch, "compile") else ())):
            r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                                os.path.join(tmp, "z.h5"), *([bad] if isinstance(bad, str) else bad)],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode != 0 and why in r.stderr, (bad, r.stderr[-2000:])
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                            os.path.join(tmp, "z.h5"), "--aug", "basic", "--exposure", "0.3,1.2"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "needs 0 < LO <= HI < 100 and --aug full" in r.stderr, r.stderr[-2000:]
        missing = os.path.join(tmp, "no-such-set")
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", missing, "--out",
                            os.path.join(tmp, "z.h5")], capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and os.path.join(missing, "train", "images") + ": no .jpg images" in r.stderr \
            and "Traceback" not in r.stderr, r.stderr[-2000:]
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                            os.path.join(tmp, "z.h5"), "--aug", "basic", "--shading", "0.3"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "needs 0 <= AMP <= 2 (0: none) and --aug full" in r.stderr, r.stderr[-2000:]
        check_set_detect(os.path.join(tmp, "final.h5"))
        # --teacher: {seq} becomes the held-out sequence; the summary records the files and share;
        # a missing teacher is refused naming the file, before any training
        os.makedirs(os.path.join(tmp, "teachers"))
        shutil.copy(os.path.join(tmp, "final.h5"), os.path.join(tmp, "teachers", "t-BBB2.h5"))
        s = run(root, os.path.join(tmp, "student.h5"), "--holdout", "BBB2", "--epochs", "1", "--teacher",
                os.path.join(tmp, "teachers", "t-{seq}.h5") + "," + os.path.join(tmp, "holdout.h5"),
                "--distill", "0.7", "--teacher-mirror")
        assert ('"teacher": ["%s", "%s"], "distill": 0.7, "teacher_mirror": true' % (
            os.path.join(tmp, "teachers", "t-BBB2.h5"), os.path.join(tmp, "holdout.h5"))) in s, s
        for extra, why in ((["--holdout", "AAA1", "--teacher", os.path.join(tmp, "teachers", "t-{seq}.h5")],
                            "--teacher " + os.path.join(tmp, "teachers", "t-AAA1.h5") + ": no such file"),
                           (["--teacher", os.path.join(tmp, "holdout.h5"), "--distill", "1.5"],
                            "--distill 1.5: the teachers' share of the target, 0 to 1"),
                           (["--teacher-mirror"], "--teacher-mirror needs --teacher")):
            r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                                os.path.join(tmp, "z.h5"), *extra], capture_output=True, text=True, timeout=300)
            assert r.returncode != 0 and why in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr[-2000:])
        # --init: fine-tuning starts from the file's weights and statistics; a file of another network is refused
        s = run(root, os.path.join(tmp, "tuned.h5"), "--final", "--init", os.path.join(tmp, "final.h5"), "--lr", "1e-4")
        assert '"batchnorm": false,' in s, s  # a file holds no batch statistics: fine-tuned without them
        import h5py
        with h5py.File(os.path.join(tmp, "final.h5"), "r") as f0, h5py.File(os.path.join(tmp, "tuned.h5"), "r") as f1:
            assert np.array_equal(f0["params/pre/mean"][()], f1["params/pre/mean"][()]), "statistics not kept"
            w0, w1 = f0["params/conv1/weight"][()], f1["params/conv1/weight"][()]
            # trained on, not reinitialised: close to the start, not equal to it
            assert not np.array_equal(w0, w1) and np.abs(w1 - w0).max() < 0.1 * np.abs(w0).max(), np.abs(w1 - w0).max()
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network",
                            "multiscale", "--out", os.path.join(tmp, "y.h5"), "--init", os.path.join(tmp, "final.h5")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "its graph is not this --network's" in r.stderr + r.stdout, r.stderr[-2000:]
        # a run cut short by --minutes says so (its one-cycle rate had not decayed) and keeps its last epoch
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network",
                            "reference", "--out", os.path.join(tmp, "short.h5"), "--epochs", "3", "--batch", "2",
                            "--crop", "64x80", "--final", "--minutes", "0"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "stopped by --minutes 0 after epoch 1 of 3" in r.stderr, r.stderr[-2000:]
        assert '"epochs_run": 1' in r.stdout and os.path.getsize(os.path.join(tmp, "short.h5")) > 0, r.stdout[-2000:]
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root,
                            "--out", os.path.join(tmp, "x.h5"), "--holdout", "ZZZ9"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "no image of sequence ZZZ9" in r.stderr + r.stdout, r.stderr
    print("train.py smoke test passed")


if __name__ == "__main__":
    main()
