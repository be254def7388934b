#!/usr/bin/env python3
"""Shows or sets a model file's detection head settings (its `detect` attribute: one
`CLASS: key=value ...` a line; weights/FORMAT.md), in place, the weights untouched.

    python3 tools/set_detect.py MODEL.h5                      # prints them
    python3 tools/set_detect.py MODEL.h5 --set "Pedestrian: aspects=0.25,0.33,0.45,0.6 min_area=800"
    python3 tools/set_detect.py MODEL.h5 --update "Pedestrian: threshold=0.25"
    python3 tools/set_detect.py MODEL.h5 --clear              # the head's defaults for every class

--set replaces every class's settings (classes not named lose theirs: the head's defaults).
--update changes only the keys it names, of the classes it names; the rest stay as they were. A
class the model has not, or a key the head has not, is refused by name and the file is left as it
was.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--set", default=None, help="'CLASS: key=value ...; CLASS: ...'")
    g.add_argument("--update", default=None, help="'CLASS: key=value ...; CLASS: ...': those keys only")
    g.add_argument("--clear", action="store_true")
    a = ap.parse_args()
    try:
        if a.update is not None:
            detect = st.parse_detect(st.get_detect(a.model))
            for cls, spec in st.parse_detect(a.update).items():
                detect[cls] = st.merge_detect(detect.get(cls, ""), spec)
            st.set_detect(a.model, detect)
        elif a.set is not None or a.clear:
            st.set_detect(a.model, {} if a.clear else st.parse_detect(a.set))
        text = st.get_detect(a.model)
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"set_detect: {a.model}: {e}")
    print(text.rstrip("\n") if text else f"{a.model}: no detection settings (the head's defaults)")


if __name__ == "__main__":
    main()
