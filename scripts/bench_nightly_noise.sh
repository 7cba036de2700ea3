#!/usr/bin/env bash
# Benchmark (not a test): the nightly throughput rule on a busy machine, for real. A neighbour keeps one core busy
# the whole time (a shell busy loop); NIGHTS clean nights of one MLP job run beside it, then one night with a
# planted 10% slowdown (debug.slow_down=0.1). Prints each night's judged throughput and notes, the false alarms
# among the clean nights, and whether the planted night was caught. With THREADS below the core count the job runs
# on the idle cores and is judged; on every core the neighbour takes part of them and each night says so instead.
#
#   scripts/bench_nightly_noise.sh [NIGHTS] [THREADS]      # default 10 nights, 1 thread
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh  # median, rate; OPENBLAS_CORETYPE unset for the measurement
nights=${1:-10}
threads=${2:-1}
mpt=$PWD/build/mpt
work=$(mktemp -d /tmp/mpt-nightly-noise.XXXXXX)
busy_pid=
cleanup() { [[ -n $busy_pid ]] && kill "$busy_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

suite() {  # $1: extra override
  cat >"$work/suite$2.yaml" <<YAML
suite: noise
regression:
  window: 5
jobs:
  - name: mlp
    train: $PWD/configs/mlp_fmnist_mixed.yaml
    overrides: [train.max_steps=1500, train.log_every_steps=100, device.threads=$threads$1]
YAML
}
suite "" ""
suite ", debug.slow_down=0.1" "-slow"

sh -c 'while :; do :; done' &
busy_pid=$!
echo "neighbour: pid $busy_pid keeps one of $(nproc) cores busy; the job runs $threads thread(s)"
alarms=0
report() {  # $1: label; prints the night's line from history and counts alarms
  python3 - "$work/root/history.jsonl" "$1" <<'PY'
import json, sys
record = [json.loads(line) for line in open(sys.argv[1]) if line.strip()][-1]
m, load = record.get("metrics", {}), record.get("load", {})
print(f"{sys.argv[2]:>8}: training {m.get('samples_per_sec', 0):6.0f}  bench median {m.get('bench_samples_per_sec') or 0:6.0f} "
      f"samples/s ({len(m.get('bench_rounds', []))} runs{', timed again' if m.get('retimed') else ''})  "
      f"other_cpu {load.get('other_cpu', float('nan')):.2f}  "
      f"regressions {len(record.get('regressions', []))}")
for text in record.get("regressions", []) + record.get("notes", []):
    print("          ", text)
PY
}
for n in $(seq 1 "$nights"); do
  code=0
  "$mpt" nightly "$work/suite.yaml" --root "$work/root" >"$work/night.log" 2>&1 || code=$?
  [[ $code == 3 ]] && alarms=$((alarms + 1))
  [[ $code != 0 && $code != 3 ]] && { cat "$work/night.log"; exit 1; }
  report "clean $n"
done
code=0
"$mpt" nightly "$work/suite-slow.yaml" --root "$work/root" >"$work/night.log" 2>&1 || code=$?
report "planted"
echo "false alarms: $alarms of $nights clean nights; planted 10% slowdown: $([[ $code == 3 ]] && echo caught || echo MISSED)"
