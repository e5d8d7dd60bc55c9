#!/usr/bin/env bash
# The AOT call contract on the GPU machine (docs/embedding.md), on a
# library and the C++ example built here:
#   build/bin/pisa-compile docs/examples/prefill-select.mlir -o ABI_DIR/libprefill.so
#   c++ -std=c++17 -IABI_DIR -I/usr/local/cuda/include docs/examples/aot-call.cpp \
#       -LABI_DIR -lprefill -L/usr/local/cuda/lib64 -lcudart_static -ldl -lpthread -lrt \
#       -Wl,-rpath,'$ORIGIN' -Wl,--allow-shlib-undefined -o ABI_DIR/aot-call
#   bash test/Integration/GPU/run-abi-on-device.sh ABI_DIR SWEEP_DIR NAME...
# runs the C++ example (direct call, CUDA graph replays, a refused call) and
# device_checks.check_abi / device_checks.check_stream_order on sweep libraries NAME....
set -uo pipefail
abi=${1:?usage: run-abi-on-device.sh ABI_DIR SWEEP_DIR NAME...}
dir=${2:?usage: run-abi-on-device.sh ABI_DIR SWEEP_DIR NAME...}
shift 2
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
rc=0
"$abi/aot-call" || rc=1
python3 -m device_checks.check_abi "$dir" --only "$@" || rc=1
python3 -m device_checks.check_stream_order "$dir" --only "$@" || rc=1
exit $rc
