#!/bin/bash
# Static vs dynamic library, paper setting, N = 16K .. 1M, on libraries
# built here into .device/dabi (docs/performance.md has the commands).
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for spec in 16k:16384 64k:65536 256k:262144 1m:1048576; do
  IFS=: read tag n <<< "$spec"
  s=$(( n >= 262144 ? 5 : 9 )); r=$(( n >= 262144 ? 10 : 30 ))
  echo "== N=$n static"
  python3 -m device_checks.bench_call .device/dabi/libprefill$tag.so --samples $s --repeat $r 2>&1 | tail -3
  echo "== N=$n dynamic"
  python3 -m device_checks.bench_call .device/dabi/libany.so --samples $s --repeat $r \
      --shapes 1x16x${n}x128,1x1x${n}x128 --index-args 0 2>&1 | tail -3
done
