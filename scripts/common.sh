# Shared by the benchmark scripts (source it): the helpers each of them needs alike.

# The best FP32 baseline for a measurement: OpenBLAS picks its own kernels (an inherited OPENBLAS_CORETYPE=Haswell
# halves FP32 GEMM on an AVX-512 CPU; mpt doctor warns about it). Only benchmarks unset it; tests and CI leave it.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

# The median of the numbers on standard input, one per line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# samples/s from an `mpt bench --json` result on standard input, or 0 when the run failed or timed out.
rate() { python3 -c 'import json,sys
try: print(json.load(sys.stdin)["samples_per_sec"])
except Exception: print(0)'; }
