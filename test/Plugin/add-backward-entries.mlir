// The mlir-opt plugin runs --pisa-add-backward-entries as pisa-opt does:
// the training entry points of an attention entry, and the GPU limit that
// leaves an entry without them (the op models come with the plugin).
// UNSUPPORTED: asan
// RUN: %mlir_opt %S/../Transforms/add-backward-entries.mlir --load-dialect-plugin=%pisa_plugin --load-pass-plugin=%pisa_plugin \
// RUN:   --split-input-file --pass-pipeline="builtin.module(pisa-add-backward-entries)" | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @prefill
// CHECK-SAME: pisa.backward = {backward = @prefill_backward, forward = @prefill_forward
// CHECK-LABEL: func.func @prefill_forward
// CHECK-LABEL: func.func @prefill_backward
// CHECK: pisa.sparse_attention_grad
// CHECK-LABEL: func.func @big
// CHECK-SAME: pisa.no_backward = "needs {{[0-9]+}} bytes of shared memory per block for the backward
