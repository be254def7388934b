#!/usr/bin/env python3
"""Checks that every #include between the project's folders follows the floors of
docs/ARCHITECTURE.md: a file may include its own floor's folders and those its floor's row
allows, never a floor above it. The table in ARCHITECTURE.md is the one statement of the
arrows; this script reads it from there.

Usage: tools/check_includes.py [ROOT]   (ROOT: the source tree, default this script's ../)
Exit 0 when every include keeps to the arrows; 1 with one line per include that does not
(FILE:LINE: floor F includes "X/..." (floor G), which F may not); 2 when the table is missing."""
import os
import re
import sys

SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
ROW = re.compile(r"^\|\s*([a-z_]+)\s*\|([^|]*)\|([^|]*)\|")
FOLDER = re.compile(r"`([a-z_/]+)/`")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/[^"]+"')


def read_floors(doc_path):
    """Rows of the table under '## Floors': floor name, its folders, the folders it may include."""
    floors, in_section = [], False
    with open(doc_path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_section = line.strip() == "## Floors"
                continue
            m = ROW.match(line) if in_section else None
            if m and m.group(1) != "floor":
                folders = FOLDER.findall(m.group(2))
                allowed = FOLDER.findall(m.group(3))
                floors.append((m.group(1), folders, set(allowed)))
    return floors


def include_name(folder):
    """How files name a folder in an #include: include/scenelab/ is included as "scenelab/...";
    everything else by its path from the source root (first component)."""
    return folder.split("/")[-1] if folder.startswith("include/") else folder.split("/")[0]


def check(root):
    doc = os.path.join(root, "docs", "ARCHITECTURE.md")
    if not os.path.exists(doc):
        print(f"check_includes: {doc} not found (its '## Floors' table states the arrows)")
        return 2
    floors = read_floors(doc)
    if not floors:
        print(f"check_includes: {doc} has no '## Floors' table")
        return 2
    floor_of_dir = {}    # source folder -> floor
    floor_of_name = {}   # name used in #include -> floor
    may = {}
    for name, folders, allowed in floors:
        may[name] = {include_name(a) for a in allowed} | {include_name(d) for d in folders}
        for d in folders:
            floor_of_dir[d] = name
            floor_of_name[include_name(d)] = name
    bad, files = [], 0
    for d, floor in sorted(floor_of_dir.items()):
        top = os.path.join(root, d)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [x for x in dirnames if not x.startswith(".")]
            for fn in sorted(filenames):
                if not fn.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, fn)
                files += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) not in floor_of_name:
                            continue
                        if m.group(1) not in may[floor]:
                            rel = os.path.relpath(path, root)
                            bad.append(f'{rel}:{lineno}: floor {floor} includes "{m.group(1)}/..." '
                                       f'(floor {floor_of_name[m.group(1)]}), which {floor} may not')
    for b in bad:
        print(b)
    print(f"check_includes: {files} files, {len(bad)} include(s) against the arrows of docs/ARCHITECTURE.md")
    return 1 if bad else 0


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(check(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, ".."))))
