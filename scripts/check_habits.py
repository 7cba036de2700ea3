#!/usr/bin/env python3
"""The habits of docs/architecture.md that drift when no tool checks them, run by CI as ctest tests.

    scripts/check_habits.py complexity   # lizard: no function over 80 lines or with a cyclomatic complexity over 25
    scripts/check_habits.py source       # no file over 400 lines and no measurement in a comment (src/), no comment naming a
                                         # file that does not exist, no LibTorch 1.x behaviour cited as today's
    scripts/check_habits.py format       # clang-format --dry-run over src/, tests/ and fuzz/ (.clang-format)

Each prints one line per offence (file:line and what is wrong) and exits 1, or prints a summary and exits 0.
When its tool is missing (lizard from the tests' environment, clang-format) it prints the line ctest reports
as *skipped* (tests/CMakeLists.txt) and exits 0.
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SOURCE_FOLDERS = ["src", "tests", "fuzz"]
MAX_FUNCTION_LINES, MAX_COMPLEXITY, MAX_FILE_LINES = 80, 25, 400
SKIPPED = "MPT-SKIPPED: "

# A duration or a throughput with a number: "from 1.2 to 144 ms", "2.3x faster", "900 samples/s". Numbers that
# configure something ("a timeout of 10 s" in code) belong in the code itself, not in a comment.
MEASUREMENT = re.compile(r"\b\d[\d,.]*\s*(ns|us|µs|ms|s|sec|seconds?|minutes?|hours?)\b"
                         r"|\b\d[\d.]*\s*x\s+(faster|slower)\b"
                         r"|\b\d[\d,.]*\s*(samples|img|images|tokens|seq|GFLOP|TFLOP|GB|MB)/s\b")
REPO_PATH = re.compile(r"\b((?:src|tests|scripts|docs|configs|fuzz)/[\w./-]+\.\w+)")
BARE_SOURCE = re.compile(r"(?<![\w/.-])([\w-]+\.(?:h|cpp|py|sh))\b")
STALE_TORCH = re.compile(r"LibTorch 1\.\d+")


SOURCE_EXTENSIONS = (".h", ".cpp", ".cu", ".cuh")  # device kernels keep the same habits


def sources(extensions):
    for folder in SOURCE_FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(names):
                if name.endswith(extensions):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def comments(lines):
    """(line number, comment text) of every // comment, and of # comments in Python and shell files."""
    for number, line in enumerate(lines, 1):
        at = line.find("//")
        if at >= 0 and line.count('"', 0, at) % 2 == 0:  # not inside a string literal
            yield number, line[at + 2:]


def check_source():
    repo_files = set()
    basenames = set()
    for dirpath, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        for name in names:
            path = os.path.relpath(os.path.join(dirpath, name), ROOT)
            repo_files.add(path)
            basenames.add(name)
    problems = []
    files = list(sources(SOURCE_EXTENSIONS))
    for path in files:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            lines = f.read().splitlines()
        if path.startswith("src/") and len(lines) > MAX_FILE_LINES:
            problems.append(f"{path}: {len(lines)} lines; split it by concept before {MAX_FILE_LINES}")
        for number, text in comments(lines):
            where = f"{path}:{number}"
            if path.startswith("src/") and MEASUREMENT.search(text):
                problems.append(f"{where}: a measurement in a comment ({MEASUREMENT.search(text).group(0)!r}); "
                                "measurements go to docs/ with their date and command")
            for named in REPO_PATH.findall(text):
                if named.rstrip(".") not in repo_files:
                    problems.append(f"{where}: the comment names {named}, which does not exist")
            for named in BARE_SOURCE.findall(text):
                if named not in basenames:
                    problems.append(f"{where}: the comment names {named}, which is no file of this repository")
            if STALE_TORCH.search(text):
                problems.append(f"{where}: cites {STALE_TORCH.search(text).group(0)}; mpt builds on the pinned "
                                "LibTorch 2.x (scripts/requirements-torch.txt)")
    return problems, f"{len(files)} files within {MAX_FILE_LINES} lines (src/), comments free of measurements, " \
                     "dangling file names and stale LibTorch versions"


def analyze(lizard, path):
    """lizard's reading of a source file; CUDA files are read as the C++ they are (lizard knows no .cu)."""
    if not path.endswith((".cu", ".cuh")):
        return lizard.analyze_file(os.path.join(ROOT, path))
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return lizard.analyze_file.analyze_source_code(path + ".cpp", f.read())


def check_complexity():
    try:
        import lizard
    except ImportError:
        print(SKIPPED + "lizard is not installed here (scripts/test.sh installs it into the tests' environment)")
        sys.exit(0)
    problems = []
    count = 0
    for path in sources(SOURCE_EXTENSIONS):
        if not path.startswith("src/"):
            continue
        for function in analyze(lizard, path).function_list:
            count += 1
            if function.length > MAX_FUNCTION_LINES or function.cyclomatic_complexity > MAX_COMPLEXITY:
                problems.append(f"{path}:{function.start_line}: {function.name}: {function.length} lines, "
                                f"cyclomatic complexity {function.cyclomatic_complexity} (at most "
                                f"{MAX_FUNCTION_LINES} and {MAX_COMPLEXITY})")
    return problems, f"{count} functions in src/ within {MAX_FUNCTION_LINES} lines and complexity {MAX_COMPLEXITY}"


def check_format():
    tool = shutil.which("clang-format") or shutil.which("clang-format-14")
    if not tool:
        print(SKIPPED + "clang-format is not installed here")
        sys.exit(0)
    files = list(sources(SOURCE_EXTENSIONS))
    result = subprocess.run([tool, "--dry-run", "--Werror", "--style=file"] + files, cwd=ROOT,
                            capture_output=True, text=True)
    problems = sorted({line.split(": ")[0] + ": not formatted (clang-format -i it)"
                       for line in result.stderr.splitlines() if ": error:" in line})
    return problems, f"{len(files)} files formatted as .clang-format says"


def main():
    checks = {"complexity": check_complexity, "source": check_source, "format": check_format}
    if len(sys.argv) != 2 or sys.argv[1] not in checks:
        sys.exit(__doc__)
    problems, summary = checks[sys.argv[1]]()
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_habits {sys.argv[1]}: {len(problems)} problem(s)")
        sys.exit(1)
    print(f"check_habits {sys.argv[1]}: {summary}")


if __name__ == "__main__":
    main()
