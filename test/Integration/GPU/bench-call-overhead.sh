#!/bin/bash
# Issue 12, item 7 on the H200, one run: per N, the libraries of the
# compiler before the fused top levels (suffix _old, built with the parent
# of fd8b54e) and of this one, static (libprefill<tag>) and dynamic
# (libany), built here into .device/ovh (docs/performance.md has the
# commands). Prints bench_call's line for each.
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
dir=${1:-.device/ovh}
for spec in 4k:4096 16k:16384 64k:65536 256k:262144 1m:1048576; do
  IFS=: read tag n <<< "$spec"
  s=$(( n >= 262144 ? 5 : 15 )); r=$(( n >= 262144 ? 10 : 100 ))
  [ "$n" -eq 65536 ] && r=30
  for v in _old ""; do
    echo "== N=$n static$v"
    python3 -m device_checks.bench_call $dir/libprefill$tag$v.so --samples $s --repeat $r 2>&1 | tail -1
    echo "== N=$n dynamic$v"
    python3 -m device_checks.bench_call $dir/libany$v.so --samples $s --repeat $r \
        --shapes 1x16x${n}x128,1x1x${n}x128 --index-args 0 2>&1 | tail -1
  done
done
