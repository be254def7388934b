#!/usr/bin/env python3
"""Chooses the detection head's settings per class from sweeps on held-out sets, by the rule the
shipped settings were chosen by (docs/BENCHMARKS.md at fb0dc9a): the best mean AP50 over the sets among the
settings with at most --max-boxes boxes per ground-truth object on every set and at most
--max-mean-boxes on average over the sets (one box an object, as a user counts them).

    for s in 0001TP 0006R0 0016E5; do
      build/tools/eval_detections --data /tmp/seq90/$s --model cv/multiscale-full-$s.h5 \\
          --classes Car --sweep 'threshold=0.25,0.3;nms=0.1,0.2' --json sweep-$s.json
    done
    python3 tools/select_detect.py sweep-*.json [--max-boxes 1.5] [--max-mean-boxes 1.0] [--top 10]
                                   [--write MODEL.h5 ...]

Each file is one set's `eval_detections --json` output (the held-out model on the sequence it never
saw). A setting counts only where every file has it. The table shows the best settings by mean
AP50, each set's AP50 and boxes per object, and whether it keeps the limits; the pick is the
first that does (ties: fewer boxes per object at worst). With three sets or more it also checks
the rule itself, leaving each set out in turn: the rule applied to the other sets, its pick scored
on the set left out - does --max-boxes hold on a set the choice never saw? `--write` merges each
pick into the models' `detect` attribute (the swept keys replace those of the class's setting
there, the other keys stay; `tools/set_detect.py` shows the result), the weights untouched. Exit
status 1 when a class has no setting within the limits (nothing is written then).
"""
import argparse
import json
import os
import sys


def load(paths):
    """{class: {setting: [(ap50, boxes per object), ... one a file]}} for settings in every file."""
    per_file = []
    for p in paths:
        try:
            with open(p) as f:
                d = json.load(f)
            rows = d["results"]
            table = {}
            for r in rows:
                boxes = r["detections"] / r["objects"] if r["objects"] else float("inf")
                table[(r["class"], r["setting"])] = (float(r["ap50"]), boxes)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"select_detect: {p}: not an eval_detections --json result ({e!r})")
        if not table:
            raise SystemExit(f"select_detect: {p}: no results")
        per_file.append(table)
    common = set(per_file[0]).intersection(*per_file[1:])
    if not common:
        raise SystemExit("select_detect: no class and setting is in every file (were they swept alike?)")
    out = {}
    for cls, setting in sorted(common):
        out.setdefault(cls, {})[setting] = [t[(cls, setting)] for t in per_file]
    return out


def rank(settings, max_boxes, max_mean_boxes):
    """[(mean AP50, worst boxes per object, within the limits, setting, per-file figures)], the
    settings within the limits first, each group by mean AP50 then by fewer boxes per object."""
    rows = []
    for setting, figs in settings.items():
        mean = sum(ap for ap, _ in figs) / len(figs)
        worst = max(b for _, b in figs)
        within = worst <= max_boxes and sum(b for _, b in figs) / len(figs) <= max_mean_boxes
        rows.append((mean, worst, within, setting, figs))
    rows.sort(key=lambda r: (not r[2], -r[0], r[1]))
    return rows


def leave_one_out(settings, max_boxes, max_mean_boxes):
    """[(index of the set left out, the pick on the others or None, its (AP50, boxes per object)
    on the set left out or None)]."""
    out = []
    for i in range(len(next(iter(settings.values())))):
        others = {s: figs[:i] + figs[i + 1:] for s, figs in settings.items()}
        best = rank(others, max_boxes, max_mean_boxes)[0]
        out.append((i, best[3], settings[best[3]][i]) if best[2] else (i, None, None))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="eval_detections --json files, one a held-out set")
    ap.add_argument("--max-boxes", type=float, default=1.5, help="boxes per object allowed on every set")
    ap.add_argument("--max-mean-boxes", type=float, default=1.0,
                    help="boxes per object allowed on average over the sets")
    ap.add_argument("--top", type=int, default=10, help="rows shown a class")
    ap.add_argument("--write", nargs="*", default=[], metavar="MODEL.h5", help="models to write the picks into")
    a = ap.parse_args()
    classes = load(a.results)
    names = [os.path.basename(p) for p in a.results]
    picks, failed = {}, False
    for cls, settings in classes.items():
        rows = rank(settings, a.max_boxes, a.max_mean_boxes)
        print(f"{cls}: {len(settings)} settings on {len(names)} sets ({', '.join(names)}); "
              f"at most {a.max_boxes:g} boxes per object on every set, {a.max_mean_boxes:g} on average")
        print("| setting | mean AP50 | " + " | ".join(f"{n}: AP50 @ boxes/object" for n in names) + " | within |")
        print("|---|---|" + "---|" * len(names) + "---|")
        for mean, worst, ok, setting, figs in rows[:a.top]:
            print(f"| {setting} | {mean:.4f} | " + " | ".join(f"{ap50:.3f} @ {b:.2f}" for ap50, b in figs)
                  + f" | {'yes' if ok else 'no'} |")
        if rows[0][2]:
            picks[cls] = rows[0][3]
            print(f"{cls}: pick '{rows[0][3]}' (mean AP50 {rows[0][0]:.4f}, at most {rows[0][1]:.2f} boxes per object)")
        else:
            failed = True
            print(f"{cls}: no setting within {a.max_boxes:g} boxes per object on every set and "
                  f"{a.max_mean_boxes:g} on average (the fewest at worst: {min(r[1] for r in rows):.2f})")
        if len(names) >= 3:
            held = 0
            print(f"{cls}, leaving each set out: the rule on the other sets, its pick on the set left out")
            print("| set left out | pick of the others | AP50 | boxes/object | within |\n|---|---|---|---|---|")
            for i, pick, figs in leave_one_out(settings, a.max_boxes, a.max_mean_boxes):
                if pick is None:
                    print(f"| {names[i]} | none within the limits | | | |")
                    continue
                kept = figs[1] <= a.max_boxes
                held += kept
                print(f"| {names[i]} | {pick} | {figs[0]:.3f} | {figs[1]:.2f} | {'yes' if kept else 'no'} |")
            print(f"{cls}: the limit of {a.max_boxes:g} held on {held} of {len(names)} sets left out")
        print()
    if failed:
        sys.exit(1)
    if a.write:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import scenelab_torch as st
        for path in a.write:
            try:
                detect = st.parse_detect(st.get_detect(path))
                for cls, setting in picks.items():
                    if setting != "model's":  # eval_detections' name for the unswept setting
                        detect[cls] = st.merge_detect(detect.get(cls, ""), setting)  # swept keys replaced
                new = st.set_detect(path, detect)
            except (OSError, KeyError, ValueError) as e:
                sys.exit(f"select_detect: {path}: {e}")
            print(f"{path}:\n{new.rstrip()}")


if __name__ == "__main__":
    main()
