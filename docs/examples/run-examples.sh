#!/usr/bin/env bash
# The project's main job on the bundled examples: choose each selection's
# schedule and say why, run PISA selection on the CPU through MLIR
# (pisa-run) and show what a few queries selected, then compile the prefill,
# sparse prefill (selection + attention) and decode programs into AOT GPU
# libraries (pisa-compile) for a GPU machine.
# Usage: run-examples.sh BIN_DIR [WORK_DIR]
set -euo pipefail
bin=${1:?usage: run-examples.sh BIN_DIR [WORK_DIR]}
work=${2:-$bin/../examples}
here=$(cd "$(dirname "$0")" && pwd)

for f in "$here"/prefill-select.mlir "$here"/decode-select.mlir; do
  echo "== $(basename "$f"): schedule"
  "$bin/pisa-opt" "$f" --pisa-select-schedule=emit-remarks \
      --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 |
    sed -n 's/.*remark: /  /p'
done

echo "== pisa-run plan (paper setting: G=16, C=64, Q_tile=4, 4096 queries)"
"$bin/pisa-run" plan --group-size 16 --block-size 64 --q-tile 4 --queries 4096

echo "== pisa-run select on a 1024-token f16 prefill (G=8, d=64, C=64, K=8)"
/usr/bin/python3 "$here/make-inputs.py" "$work"
"$bin/pisa-run" select --q "$work/q.npy" --k "$work/k.npy" \
    --block-size 64 --topk 8 --out "$work/selection.npy"
/usr/bin/python3 - "$work/selection.npy" <<'PY'
import sys
import numpy as np
sel = np.load(sys.argv[1])
print(f"  selection {sel.dtype}{list(sel.shape)} [B, Hkv, Nq, K], ascending, -1 = padding")
for t in (0, 100, 511, 1023):
    print(f"  query {t:4d} (block {t // 64:2d}) attends leaf blocks {sel[0, 0, t].tolist()}")
PY

echo "== pisa-run select on a packed varlen batch (keys 1024, 300, 65, 1; queries 1024, 100, 1, 1)"
/usr/bin/python3 "$here/make-inputs.py" "$work" --varlen
"$bin/pisa-run" select --q "$work/q_varlen.npy" --k "$work/k_varlen.npy" \
    --cu-seqlens-q "$work/cu_seqlens_q.npy" --cu-seqlens-k "$work/cu_seqlens_k.npy" \
    --block-size 64 --topk 8 --out "$work/selection_varlen.npy"
/usr/bin/python3 - "$work/selection_varlen.npy" "$work/cu_seqlens_q.npy" <<'PY'
import sys
import numpy as np
sel, cu = np.load(sys.argv[1]), np.load(sys.argv[2])
print(f"  selection {sel.dtype}{list(sel.shape)} [Tq, Hkv, K], leaf indices local to each sequence")
for b in range(len(cu) - 1):
    print(f"  sequence {b}: last query (row {cu[b + 1] - 1}) attends {sel[cu[b + 1] - 1, 0].tolist()}")
PY

echo "== pisa-run attend: the whole sparse prefill (pyramid, selection, attention) on the CPU"
"$bin/pisa-run" attend --q "$work/q.npy" --k "$work/k.npy" --v "$work/v.npy" \
    --block-size 64 --topk 8 --out "$work/attention.npy" --lse-out "$work/lse.npy"
/usr/bin/python3 - "$work/attention.npy" "$work/lse.npy" <<'PY'
import sys
import numpy as np
o, lse = np.load(sys.argv[1]), np.load(sys.argv[2])
print(f"  output {o.dtype}{list(o.shape)} [B, Hq, Nq, dv], lse {list(lse.shape)}; "
      f"query 1023 head 0: lse {lse[0, 0, 1023]:.4f}, o[:4] {[round(float(x), 4) for x in o[0, 0, 1023, :4]]}")
PY

if [ ! -x "$bin/pisa-compile" ]; then
  echo "== pisa-compile: not built (configured without the CUDA toolkit)"
  exit 0
fi
echo "== pisa-compile: AOT libraries for sm_90a (run them with python/pisa/aot.py)"
for spec in prefill-select:prefill sparse-prefill:sparse-prefill \
            decode-select:decode varlen-select:varlen decode-step:decode-step \
            decode-paged:decode-paged; do
  src=${spec%%:*} name=${spec##*:}
  "$bin/pisa-compile" "$here/$src.mlir" -o "$work/lib$name.so"
  echo "  $work/lib$name.so ($(wc -c < "$work/lib$name.so") bytes): $(
    /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))
print("; ".join(e["symbol"] + " -> " + ", ".join("%s %s" % (r["dtype"], r["shape"])
                                                  for r in e["results"])
                for e in m["entry_points"]))' "$work/lib$name.json")"
done
