#!/usr/bin/env python3
"""Cross-sequence selection for tools/train.py: train on two CamVid sequences, score on the third.

  python3 tools/crossval.py --data ../shared/data/camvid --networks multiscale,reference \
         --augs full,basic --epochs 480 --work cv [--final] [--trainonly NETS] [--jobs 6] \
         [--gpus 0,1] [--seeds 0,1] [-- EXTRA train.py ARGS]

For every network x augmentation x sequence (0001TP, 0006R0, 0016E5: the prefixes of the file
names in train + val) it runs `train.py --holdout SEQ` - the sequence held out is never trained on
and is where the epoch is chosen - as parallel processes (one GPU serves them all), then prints
and writes (WORK/crossval.json) each held-out sequence's global accuracy, class-average accuracy
and mean IoU, their mean over the sequences and the best epochs (crossval.json is also rewritten
as each run ends, with the runs still to finish under "pending": a batch cut short keeps the
figures of the runs it finished; every --progress seconds it prints each running run's epoch
and the minutes it has left at its pace). `--final` also trains, in the same
batch of processes, each network on train + val for --epochs with the first augmentation listed
(`train.py --final`, the last epoch exported to WORK/camvid-NET.h5): the candidates to ship.
`--trainonly NETS` also trains those networks on train alone (`train.py --last`, the last epoch,
WORK/NET-AUG-trainonly.h5) and scores val, frames of a training sequence: the table then shows the
gap between that val figure and the cross-sequence mean, when the network is also in --networks
(how much frames of a training sequence flatter a model).
`--gpus 0,1` spreads the processes over those GPUs (CUDA_VISIBLE_DEVICES): the longest runs start
first, each on the GPU whose running processes train on the fewest images an epoch. Each run gets
`--workers` processes making its batches (train.py --workers), by default the machine's cores
less one for each run's training loop, shared by the runs' training images where all run at once
(so that they end together), else equally (the batches are made on the CPU; more processes than
cores oversubscribe the machine, weights/MODELS.md at fb0dc9a). The cores are those this process may run on:
two crossval.py batches share a machine when each is started on its own cores (`taskset -c 0-41
python3 tools/crossval.py ...` beside `taskset -c 42-63 ...`; their runs inherit the affinity).
`--seeds 0,1,2` trains every held-out sequence once a seed (`train.py --seed`; runs named
NET-AUG-SEQ-seedK): the table then gives each seed's mean over the sequences and their spread
(largest less smallest), the difference reruns alone make, against which a change to the recipe
is judged; the means are over every seed. The final and train-only runs use the first seed.
Logs: WORK/*.log (train.py's JSON lines) and WORK/*.out (its stdout).
"""
import argparse
import dataclasses
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sequences_of(data, splits=("train", "val")):
    """The sequence (file name prefix) of every image in the splits, one entry an image."""
    return [os.path.basename(p).split("_")[0] for split in splits
            for p in glob.glob(os.path.join(data, split, "images", "*.jpg"))]


def sequences(data):
    return sorted(set(sequences_of(data)))


def images_of(data, splits, but=None):
    """Training images of a run: the splits' images, less those of the sequence held out."""
    return sum(1 for s in sequences_of(data, splits) if s != but)


def summary_of(out_path):
    """A run's SUMMARY (train.py's last line), or None where it wrote none or never started."""
    if not os.path.exists(out_path):
        return None
    with open(out_path) as f:
        for line in f:
            if line.startswith("SUMMARY "):
                return json.loads(line[len("SUMMARY "):])
    return None


def progress_of(log_path, epochs):
    """(epoch, seconds so far, seconds left) of a running train.py from its JSON lines log, the
    time left at the pace since its first epoch (which holds the start-up and compilation); None
    before its second epoch is logged."""
    first = last = None
    try:
        with open(log_path) as f:
            for line in f:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue  # a line being written
                if isinstance(j, dict) and "epoch" in j and "time_s" in j:
                    first = first or j
                    last = j
    except FileNotFoundError:
        return None
    if last is None or last["epoch"] <= first["epoch"]:
        return None
    pace = (last["time_s"] - first["time_s"]) / (last["epoch"] - first["epoch"])
    return last["epoch"], last["time_s"], max(0.0, (epochs - last["epoch"]) * pace)


def share_workers(cores, images, at_once):
    """Batch-making processes for each run (train.py --workers), the runs training on images[i]
    images an epoch, at_once of them at a time: the cores less one a run for its training loop.
    All at once, they are shared by the runs' image counts, so that the runs end closer together
    (an equal share leaves the longest run to set the pace; on 2026-11-27, shared by hand, 12, 11
    and 5 workers for held-out runs of 406, 367 and 163 images took 6.5, 6.4 and 4.9 minutes);
    queued, equally."""
    if at_once < len(images):
        return [max(1, cores // at_once - 1)] * len(images)
    free = max(at_once, cores - at_once)
    total = sum(images) or 1
    share = [free * n / total for n in images]
    out = [int(x) for x in share]
    # the cores left by rounding down, to the largest remainders
    for i in sorted(range(len(out)), key=lambda i: out[i] - share[i])[:free - sum(out)]:
        out[i] += 1
    return [max(1, n) for n in out]


@dataclasses.dataclass
class Plan:
    """A batch: the networks, augmentations, seeds, sequences and train-only networks it covers, and
    its runs, (name, train.py arguments, training images an epoch) each."""
    nets: list
    augs: list
    seeds: list
    seqs: list
    only: list
    runs: list = dataclasses.field(default_factory=list)

    def held_out(self, net, aug, seq, seed):
        """A held-out run's name: NET-AUG-SEQ, -seedK added where there are several seeds (a single
        seed keeps the names runs had before --seeds)."""
        return f"{net}-{aug}-{seq}" + (f"-seed{seed}" if len(self.seeds) > 1 else "")


def report(a, plan, pending=(), show=True):
    """The batch's table: each finished run's figures, each network x augmentation's mean over the
    held-out sequences (over every seed, with each seed's mean and their spread when there are
    several), the train-only gap; printed when show, and written to WORK/crossval.json, with the
    runs still pending named there ('pending'). Called as each run ends (show False), so that a
    batch cut short leaves the figures of the runs it finished; and at the end. Returns whether a
    run gave no summary."""
    table = {}
    failed = False
    nets, augs, seeds, seqs = plan.nets, plan.augs, plan.seeds, plan.seqs
    for name, _, _ in plan.runs:
        if name in pending:
            continue
        s = summary_of(os.path.join(a.work, name + ".out"))
        if s is None:
            print(f"crossval: {name} gave no summary (see {a.work}/{name}.out)", file=sys.stderr)
            failed = True
            continue
        table[name] = {"best_epoch": s["best_epoch"], "epochs_run": s["epochs_run"],
                       "train_minutes": s["train_minutes"],
                       **{k: s["val"][k] for k in ("global_acc", "class_acc", "mean_iou")}}
    say = print if show else (lambda *args, **kw: None)
    say(f"{'run':34s} {'global':>7s} {'class':>7s} {'mIoU':>7s}  best/run epochs  minutes")
    for name, r in table.items():
        say(f"{name:34s} {100 * r['global_acc']:7.2f} {100 * r['class_acc']:7.2f} "
            f"{100 * r['mean_iou']:7.2f}  {r['best_epoch']:4d}/{r['epochs_run']:<4d}  {r['train_minutes']:6.2f}")
    metrics = ("global_acc", "class_acc", "mean_iou")
    mean_of = lambda rows: {k: sum(r[k] for r in rows) / len(rows) for k in metrics}
    row = lambda label, m: say(f"{label:34s} {100 * m['global_acc']:7.2f} "
                               f"{100 * m['class_acc']:7.2f} {100 * m['mean_iou']:7.2f}")
    means, seed_means, spread = {}, {}, {}
    for n in nets:
        for g in augs:
            key = f"{n}-{g}"
            per_seed = {}
            for k in seeds:
                rows = [table[x] for x in (plan.held_out(n, g, s, k) for s in seqs) if x in table]
                if len(rows) == len(seqs):
                    per_seed[k] = mean_of(rows)
                    if len(seeds) > 1:
                        row(f"mean {key} seed {k}", per_seed[k])
            if len(per_seed) == len(seeds):  # every run of every seed: the mean over all of them
                means[key] = mean_of(list(per_seed.values()))
                row(f"mean {key}", means[key])
                if len(seeds) > 1:
                    seed_means[key] = {str(k): v for k, v in per_seed.items()}
                    spread[key] = {m: max(v[m] for v in per_seed.values()) - min(v[m] for v in per_seed.values())
                                   for m in metrics}
                    row(f"spread {key} ({len(seeds)} seeds)", spread[key])
    gaps = {}
    for n in plan.only:
        key = f"{n}-{augs[0]}"
        if key in means and key + "-trainonly" in table:
            v = table[key + "-trainonly"]
            gaps[key] = {k: v[k] - means[key][k] for k in ("global_acc", "class_acc", "mean_iou")}
            say(f"{'val (train only) - mean ' + key:34s} {100 * gaps[key]['global_acc']:7.2f} "
                f"{100 * gaps[key]['class_acc']:7.2f} {100 * gaps[key]['mean_iou']:7.2f}")
    # written whole to a temporary name and renamed: a batch cut short leaves a complete file
    path = os.path.join(a.work, "crossval.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"sequences": seqs, "epochs": a.epochs, "seeds": seeds, "runs": table, "means": means,
                   "seed_means": seed_means, "spread": spread, "gaps": gaps,
                   "pending": sorted(pending)}, f, indent=1)
    os.replace(path + ".tmp", path)
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--networks", default="multiscale")
    ap.add_argument("--augs", default="full")
    ap.add_argument("--epochs", type=int, default=480)
    ap.add_argument("--minutes", type=float, default=120.0, help="train.py's time limit per run")
    ap.add_argument("--work", required=True, help="folder for models, logs and crossval.json")
    ap.add_argument("--final", action="store_true", help="also train each network on train + val")
    ap.add_argument("--trainonly", default="", metavar="NETS",
                    help="also train these networks on train alone and score val (the gap to cross-sequence)")
    ap.add_argument("--jobs", type=int, default=0, help="processes at once (default: all)")
    ap.add_argument("--gpus", default="", metavar="IDS", help="spread the processes over these GPUs, e.g. 0,1")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="batch-making processes of each run (default: the machine's cores shared by the "
                         "runs at once, less one a run for its training loop; 0: a thread of each run)")
    ap.add_argument("--seeds", default="0", metavar="K,...",
                    help="train.py --seed of the held-out runs, each sequence once a seed (default 0); with "
                         "several, each seed's mean and their spread are reported")
    ap.add_argument("--progress", type=float, default=300, metavar="S",
                    help="every S seconds, each running run's epoch and the minutes it has left at its "
                         "pace (default 300; 0: never)")
    ap.add_argument("extra", nargs="*", help="after --: more train.py arguments")
    a = ap.parse_args()
    try:
        seeds = [int(k) for k in a.seeds.split(",")]
    except ValueError:
        raise SystemExit(f"crossval: --seeds {a.seeds}: expected seeds such as 0,1,2")
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"crossval: --seeds {a.seeds}: a seed named twice")
    if any(e == "--seed" or e.startswith("--seed=") for e in a.extra):
        raise SystemExit("crossval: give seeds with --seeds, not train.py's --seed after --")
    seqs = sequences(a.data)
    if len(seqs) < 2:
        raise SystemExit(f"crossval: {a.data}: need images of at least two sequences, found {seqs}")
    os.makedirs(a.work, exist_ok=True)
    nets, augs = a.networks.split(","), a.augs.split(",")
    only = [n for n in a.trainonly.split(",") if n]
    if any(n not in ("reference", "multiscale") for n in only):
        raise SystemExit(f"crossval: --trainonly {a.trainonly}: networks are reference and multiscale")
    try:
        gpus = [int(g) for g in a.gpus.split(",") if g != ""]
    except ValueError:
        raise SystemExit(f"crossval: --gpus {a.gpus}: expected GPU numbers such as 0,1")
    plan = Plan(nets, augs, seeds, seqs, only)
    runs = plan.runs  # (name, train.py arguments, training images an epoch), filled in place
    runs += [(plan.held_out(n, g, s, k), ["--network", n, "--aug", g, "--holdout", s, "--seed", str(k)],
              images_of(a.data, ("train", "val"), but=s)) for n in nets for g in augs for k in seeds for s in seqs]
    first = ["--seed", str(seeds[0])]
    if a.final:
        runs += [(f"camvid-{n}", ["--network", n, "--aug", augs[0], "--final"] + first,
                  images_of(a.data, ("train", "val"))) for n in nets]
    runs += [(f"{n}-{augs[0]}-trainonly", ["--network", n, "--aug", augs[0], "--last"] + first,
              images_of(a.data, ("train",))) for n in only]
    # with several GPUs the longest runs go first, each to the least loaded GPU
    todo = sorted(runs, key=lambda r: -r[2]) if gpus else list(runs)
    live, t0 = [], time.time()
    shown = t0  # when the runs' progress was last printed
    jobs = a.jobs or len(runs)
    # each run's batch-making processes: the cores shared out, one a run kept for its training loop
    # (train.py's default, the cores less one, in every run would oversubscribe the machine)
    at_once = min(jobs, len(runs))
    own = {}  # run name -> its --workers, unless given after --
    if not any(e == "--workers" or e.startswith("--workers=") for e in a.extra):
        shares = ([a.workers] * len(runs) if a.workers is not None else
                  share_workers(len(os.sched_getaffinity(0)), [r[2] for r in runs], at_once))
        own = {r[0]: n for r, n in zip(runs, shares)}
        if len(set(shares)) == 1:
            print(f"crossval: {len(runs)} runs, {at_once} at once, {shares[0]} batch workers each", flush=True)
        else:
            print(f"crossval: {len(runs)} runs, {at_once} at once, batch workers by images an epoch: "
                  + ", ".join(f"{r[0]} {n}" for r, n in zip(runs, shares)), flush=True)
    while todo or live:
        while todo and len(live) < jobs:
            name, args, images = todo.pop(0)
            cmd = [sys.executable, os.path.join(HERE, "train.py"), "--data", a.data,
                   "--epochs", str(a.epochs), "--minutes", str(a.minutes),
                   "--out", os.path.join(a.work, name + ".h5"),
                   "--log", os.path.join(a.work, name + ".log")] + args + a.extra
            if name in own:
                cmd += ["--workers", str(own[name])]
            env, gpu = None, None
            if gpus:
                gpu = min(gpus, key=lambda g: (sum(x[4] for x in live if x[3] == g), gpus.index(g)))
                env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
                print(f"{name}: GPU {gpu}, {images} images an epoch", flush=True)
            out = open(os.path.join(a.work, name + ".out"), "w")
            live.append((name, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env), out,
                         gpu, images))
        time.sleep(2)
        if a.progress > 0 and time.time() - shown >= a.progress:
            shown = time.time()
            for name, *_ in live:
                p = progress_of(os.path.join(a.work, name + ".log"), a.epochs)
                if p:
                    print(f"{name}: epoch {p[0]}/{a.epochs} after {p[1] / 60:.1f} min, "
                          f"about {p[2] / 60:.1f} min left", flush=True)
        for item in [x for x in live if x[1].poll() is not None]:
            live.remove(item)
            item[2].close()
            print(f"{item[0]}: exit {item[1].returncode} after {time.time() - t0:.0f} s", flush=True)
            if todo or live:  # the figures so far (the last exit's are written below)
                report(a, plan, pending={x[0] for x in live} | {r[0] for r in todo}, show=False)
    sys.exit(1 if report(a, plan) else 0)


if __name__ == "__main__":
    main()
