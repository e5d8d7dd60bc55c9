#!/usr/bin/env bash
# GPU checks, run on a machine with a CUDA GPU, PyTorch and numpy, from the
# repository root, on libraries built elsewhere by `python3 -m device_checks.cases`:
#   bash test/Integration/GPU/run-on-device.sh CASES_DIR [OUT_DIR]
# Correctness of both schedules against the PyTorch reference, a small case
# under compute-sanitizer (memcheck, racecheck), then the timings.
set -uo pipefail
cases=${1:?usage: run-on-device.sh CASES_DIR [OUT_DIR]}
out=${2:-.}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
rc=0
nvidia-smi -L
python3 -m device_checks.check_gpu "$cases" 2>&1 | tee "$out/check.log" || rc=1
if command -v compute-sanitizer >/dev/null; then
  # racecheck is far slower than memcheck: with the G = 8 case (the 32-row
  # shared-memory epilogue) added it did not finish in 5 minutes, where the
  # three cases below had taken under one; memcheck covers it.
  for tool in memcheck racecheck; do
    only="n1000_g16 n63 n65"
    [ $tool = memcheck ] && only="$only n3000_g8"
    compute-sanitizer --tool $tool --error-exitcode 3 \
      python3 -m device_checks.check_gpu "$cases" --only $only 2>&1 |
      tail -4 | tee "$out/sanitizer-$tool.log" || rc=1
  done
fi
python3 -m device_checks.bench_gpu "$cases" 2>&1 | tee "$out/bench.log" || rc=1
exit $rc
