#!/bin/bash
# Issue 12, item 7: the 4K call's cost beyond its kernels on the H200,
# old and new libraries interleaved over ROUNDS rounds (default 3) of 25
# samples each, on libraries built into DIR (default .device/ovh) as
# docs/performance.md says. Prints bench_call's line for each.
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
dir=${1:-.device/ovh}
for round in $(seq "${ROUNDS:-3}"); do
  for lib in libprefill4k_old libprefill4k; do
    echo "== $round $lib"
    python3 -m device_checks.bench_call $dir/$lib.so --samples 25 2>&1 | tail -1
  done
  echo "== $round libany (dynamic)"
  python3 -m device_checks.bench_call $dir/libany.so --samples 25 \
      --shapes 1x16x4096x128,1x1x4096x128 --index-args 0 2>&1 | tail -1
done
