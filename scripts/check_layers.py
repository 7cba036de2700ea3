#!/usr/bin/env python3
"""The include graph of src/ against mpt's layers (docs/architecture.md), run by CI as a ctest test.

Fails, naming each offending #include, when
  - a file includes a folder of its own layer or of a higher one (layers only include downwards),
  - the folders or the files form an include cycle,
  - a torch-free folder (common, config, tools) reaches a LibTorch header, directly or
    through the headers it includes.

    scripts/check_layers.py            # exit 0 and a one-line summary when the graph is clean
    scripts/check_layers.py --graph    # also print the folder graph (edges with include counts)
"""
import os
import re
import sys
from collections import defaultdict

# Lowest first. A file may include its own folder and the folders of any lower layer, nothing else.
LAYERS = [
    ["common"],
    ["hardware"],
    ["ops"],
    ["precision", "data", "distributed"],
    ["models", "io", "config"],
    ["train", "tools"],
    ["run"],
    ["bench"],
    ["app"],
]
TORCH_FREE = ["common", "config", "tools"]
TORCH_HEADER = re.compile(r'#\s*include\s*<(torch|ATen|c10|caffe2)/')
PROJECT_HEADER = re.compile(r'#\s*include\s*"([^"]+)"')
GENERATED = {"mpt/version.h"}  # configured into the build folder; includes nothing


def folder_of(path):
    return path.split("/")[0]  # tools/compare and tools/nightly are one layer of report tools


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    rank = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith((".h", ".cpp", ".cu", ".cuh")):
                path = os.path.relpath(os.path.join(dirpath, name), root)
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    files[path] = f.read().splitlines()

    problems = []
    includes = defaultdict(list)  # file -> project headers it includes
    folder_edges = defaultdict(int)
    for path, lines in sorted(files.items()):
        folder = folder_of(path)
        if folder not in rank:
            problems.append(f"src/{path}: folder {folder} is in no layer (scripts/check_layers.py LAYERS)")
            continue
        for number, line in enumerate(lines, 1):
            match = PROJECT_HEADER.match(line.strip())
            if not match or match.group(1) in GENERATED:
                continue
            header = match.group(1)
            where = f"src/{path}:{number}"
            if header not in files:
                problems.append(f"{where}: includes {header}, which is not under src/")
                continue
            includes[path].append(header)
            target = folder_of(header)
            if target == folder:
                continue
            folder_edges[(folder, target)] += 1
            if rank.get(target, len(LAYERS)) >= rank[folder]:
                problems.append(f"{where}: {folder} (layer {rank[folder]}) includes {header} of {target} "
                                f"(layer {rank.get(target)}): layers include only downwards")

    # Header cycles (#pragma once hides them from the compiler, not from the reader).
    state = {}

    def visit(path, stack):
        state[path] = "open"
        stack.append(path)
        for header in includes[path]:
            if state.get(header) == "open":
                cycle = stack[stack.index(header):] + [header]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif header not in state:
                visit(header, stack)
        stack.pop()
        state[path] = "done"

    sys.setrecursionlimit(10000)
    for path in sorted(files):
        if path not in state:
            visit(path, [])

    # Folder cycles (impossible when the layer check passes; checked on their own so the proof does not lean on it).
    graph = defaultdict(set)
    for (a, b) in folder_edges:
        graph[a].add(b)
    colour = {}

    def folder_cycle(node, stack):
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if colour.get(nxt) == 1:
                problems.append("folder cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in colour:
                folder_cycle(nxt, stack)
        stack.pop()
        colour[node] = 2

    for node in sorted(graph):
        if node not in colour:
            folder_cycle(node, [])

    # Torch-free folders: no LibTorch header reachable from any of their files.
    reaches_torch = {}

    def torch_path(path, seen):
        if path in reaches_torch:
            return reaches_torch[path]
        if path in seen:
            return None
        seen.add(path)
        result = None
        for number, line in enumerate(files[path], 1):
            if TORCH_HEADER.match(line.strip()):
                result = [f"src/{path}:{number} {line.strip()}"]
                break
        if result is None:
            for header in includes[path]:
                below = torch_path(header, seen)
                if below:
                    result = [f"src/{path}"] + below
                    break
        reaches_torch[path] = result
        return result

    for path in sorted(files):
        if folder_of(path) in TORCH_FREE:
            chain = torch_path(path, set())
            if chain:
                problems.append(f"torch-free folder {folder_of(path)} reaches LibTorch: " + " -> ".join(chain))

    if "--graph" in sys.argv:
        for (a, b), n in sorted(folder_edges.items(), key=lambda e: (rank.get(e[0][0], 99), e[0])):
            print(f"  {a:15} -> {b:15} {n:3} includes")
    if problems:
        for p in problems:
            print(p)
        print(f"check_layers: {len(problems)} problem(s) in {len(files)} files")
        return 1
    print(f"check_layers: {len(files)} files, {sum(folder_edges.values())} includes across {len(folder_edges)} "
          f"folder pairs, all downwards; no include cycle; torch-free folders stay torch-free")
    return 0


if __name__ == "__main__":
    sys.exit(main())
