#!/usr/bin/env bash
# The generated shape sweep and the sanitizers on the GPU machine, on
# libraries built here by `python3 -m device_checks.sweep build` (docs/testing.md):
#   bash test/Integration/GPU/run-sweep-on-device.sh SWEEP_DIR OUT_DIR [PART]
# PART (I/N) checks every N-th case only, so that each device call ends in
# time. With VARIANTS_DIR set, each kernel variant there also runs under
# compute-sanitizer racecheck and synccheck, and a sample of the sweep
# under memcheck (VARIANTS and SANITIZER_TOOLS narrow the first to some
# variants and tools, so that slow ones get a call of their own). Every checked case is also called once with inf and NaN
# planted in its inputs (--nonfinite: the result must be a valid selection,
# and memcheck sees those calls too).
set -uo pipefail
dir=${1:?usage: run-sweep-on-device.sh SWEEP_DIR OUT_DIR [PART]}
out=${2:?usage: run-sweep-on-device.sh SWEEP_DIR OUT_DIR [PART]}
part=${3:-0/1}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
rc=0
nvidia-smi -L
[ "$part" = none ] || python3 -m device_checks.sweep check "$dir" --part "$part" --budget "${BUDGET:-420}" --nonfinite \
    --json "$out/sweep-${part//\//of}.json" 2>&1 | tee "$out/sweep-${part//\//of}.log" || rc=1
if [ -n "${VARIANTS_DIR:-}" ]; then
  names=${VARIANTS:-$(python3 -c 'import json,sys; print(" ".join(c["name"] for c in json.load(open(sys.argv[1]))["cases"]))' "$VARIANTS_DIR/sweep.json")}
  for tool in ${SANITIZER_TOOLS:-racecheck synccheck}; do
    for name in $names; do
      echo "== $tool $name"
      timeout "${SANITIZER_TIMEOUT:-90}" compute-sanitizer --tool $tool --error-exitcode 3 \
        python3 -m device_checks.sweep check "$VARIANTS_DIR" --only "$name" --rows 256 2>&1 |
        grep -E "^(ok|FAIL)|ERROR SUMMARY|RACECHECK SUMMARY|error" | tee -a "$out/sanitizers.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    done
  done
fi
if [ -n "${MEMCHECK:-}" ]; then
  echo "== memcheck on $MEMCHECK"
  compute-sanitizer --tool memcheck --error-exitcode 3 \
    python3 -m device_checks.sweep check "$dir" --only $MEMCHECK --rows 256 --nonfinite 2>&1 |
    grep -E "^(ok|FAIL)|ERROR SUMMARY|sweep:" | tee -a "$out/sanitizers.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
exit $rc
