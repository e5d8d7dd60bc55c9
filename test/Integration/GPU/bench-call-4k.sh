#!/bin/bash
# On the H200: the 4K call's cost beyond its kernels, over ROUNDS rounds
# (default 3) of 25 samples each, on libraries built into DIR (default
# .device/ovh) as docs/performance.md says ("The host part of a call");
# a library of another compiler with the suffix _old, when present, is
# interleaved with it. Prints bench_call's line for each.
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
dir=${1:-.device/ovh}
for round in $(seq "${ROUNDS:-3}"); do
  for lib in libprefill4k_old libprefill4k; do
    [ -f "$dir/$lib.so" ] || continue
    echo "== $round $lib"
    python3 -m device_checks.bench_call $dir/$lib.so --samples 25 2>&1 | tail -1
  done
  echo "== $round libany (dynamic)"
  python3 -m device_checks.bench_call $dir/libany.so --samples 25 \
      --shapes 1x16x4096x128,1x1x4096x128 --index-args 0 2>&1 | tail -1
done
