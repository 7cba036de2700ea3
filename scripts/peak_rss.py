#!/usr/bin/env python3
"""The peak resident memory of a command and of each process it starts, as the OS sees it (docs/memory.md).

    scripts/peak_rss.py [--json] [--until GLOB] [--mark GLOB[::TEXT]] -- COMMAND [ARG ...]

Runs COMMAND and polls /proc/PID/status of it and of its descendants every 2 ms until they end; prints each one's
peak (the highest VmHWM or VmRSS seen while it runs: VmHWM between polls catches the peaks a poll misses; the
counts of a process tearing down its memory at exit are not its run's) and exits with COMMAND's exit code. With
--until GLOB it stops counting once a file matches GLOB (an mpt run's summary.json: what follows is the process's
exit, whose static destructors page in library code, not its run); with --mark GLOB it also prints each process's
peak before a file first matched GLOB, or first held TEXT (`metrics.jsonl::"step":8`: the training steps up to the
log line of step 8, written before that step's evaluation and checkpoint). mpt resets VmHWM between its phases (summary.json's memory.resident_peak_bytes), so a poll
taken just before a reset and the peak it would have shown may be up to one poll apart.
"""
import glob
import json
import subprocess
import sys
import time


def resident_kib(pid):
    """max(VmHWM, VmRSS) of a live process; None once it exits (a process tearing down its memory shows VmRSS
    without VmHWM, and counts that are not its run's)."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmHWM", "VmRSS"):
                    fields[name] = int(value.split()[0])
    except (OSError, ValueError):
        return None
    return max(fields.values()) if len(fields) == 2 else None


def matches(pattern):
    path, _, text = pattern.partition("::")
    for name in glob.glob(path):
        if not text:
            return True
        try:
            with open(name, errors="replace") as f:
                if text in f.read():
                    return True
        except OSError:
            pass
    return False


def descendants(pid):
    found = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            for child in children.read().split():
                found.append(int(child))
                found.extend(descendants(int(child)))
    except OSError:
        pass
    return found


def main():
    args = sys.argv[1:]
    as_json = args[:1] == ["--json"]
    if as_json:
        args = args[1:]
    until = mark = None
    while args[:1] in (["--until"], ["--mark"]):
        if args[0] == "--until":
            until = args[1]
        else:
            mark = args[1]
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    process = subprocess.Popen(args)
    peaks = {}  # pid -> (peak KiB, command line)
    before_mark = None  # the peaks when a file first matched --mark
    while process.poll() is None and not (until and matches(until)):
        if mark and before_mark is None and matches(mark):
            before_mark = {pid: kib for pid, (kib, _) in peaks.items()}
        for pid in [process.pid] + descendants(process.pid):
            resident = resident_kib(pid)
            if resident is None:
                continue
            if pid not in peaks:
                try:
                    with open(f"/proc/{pid}/cmdline") as cmdline:
                        name = cmdline.read().replace("\0", " ").strip()
                except OSError:
                    name = "?"
                peaks[pid] = (0, name)
            peaks[pid] = (max(peaks[pid][0], resident), peaks[pid][1])
        time.sleep(0.002)
    process.wait()
    rows = [{"pid": pid, "peak_mib": round(kib / 1024, 1), "command": name[:120]}
            for pid, (kib, name) in sorted(peaks.items())]
    for row in rows:
        if before_mark is not None:
            row["before_mark_mib"] = round(before_mark.get(row["pid"], 0) / 1024, 1)
    if as_json:
        print(json.dumps(rows))
    else:
        for row in rows:
            before = f"  (before the mark {row['before_mark_mib']:.1f} MiB)" if "before_mark_mib" in row else ""
            print(f"peak_rss {row['peak_mib']:10.1f} MiB{before}  pid {row['pid']}  {row['command']}", file=sys.stderr)
    sys.exit(process.returncode)


if __name__ == "__main__":
    main()
