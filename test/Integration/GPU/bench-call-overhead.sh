#!/bin/bash
# On the H200: per N from 4K to 1M, a static library compiled for that
# length (libprefill<tag>) and the dynamic one (libany), GPU time per call
# and host enqueue (bench_call), from libraries built here into DIR
# (default .device/ovh; docs/performance.md, "The host part of a call",
# has the commands). Libraries of another compiler with the suffix _old,
# when present, are timed beside them. Prints bench_call's line for each.
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
dir=${1:-.device/ovh}
for spec in 4k:4096 16k:16384 64k:65536 256k:262144 1m:1048576; do
  IFS=: read tag n <<< "$spec"
  s=$(( n >= 262144 ? 5 : 15 )); r=$(( n >= 262144 ? 10 : 100 ))
  [ "$n" -eq 65536 ] && r=30
  for v in _old ""; do
    if [ -f "$dir/libprefill$tag$v.so" ]; then
      echo "== N=$n static$v"
      python3 -m device_checks.bench_call $dir/libprefill$tag$v.so --samples $s --repeat $r 2>&1 | tail -1
    fi
    if [ -f "$dir/libany$v.so" ]; then
      echo "== N=$n dynamic$v"
      python3 -m device_checks.bench_call $dir/libany$v.so --samples $s --repeat $r \
          --shapes 1x16x${n}x128,1x1x${n}x128 --index-args 0 2>&1 | tail -1
    fi
  done
done
