#!/usr/bin/env bash
# The project's main job on the bundled examples: choose each selection's
# schedule and show why. Usage: run-examples.sh BIN_DIR
set -euo pipefail
bin=${1:?usage: run-examples.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
for f in "$here"/prefill-select.mlir "$here"/decode-select.mlir; do
  echo "== $(basename "$f"): schedule"
  "$bin/pisa-opt" "$f" --pisa-select-schedule=emit-remarks \
      --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 |
    sed -n 's/.*remark: /  /p'
done
