// UNSUPPORTED: asan
// The stock mlir-opt (Debian's mlir-opt-22) loads pisa from one plugin,
// as a dialect plugin and as a pass plugin, and runs pisa's passes and
// pipelines.
// RUN: %mlir_opt %s --load-dialect-plugin=%pisa_plugin --load-pass-plugin=%pisa_plugin \
// RUN:   --pass-pipeline="builtin.module(pisa-select-schedule)" | FileCheck %s --enable-var-scope --check-prefix=SCHED
// RUN: %mlir_opt %s --load-dialect-plugin=%pisa_plugin --load-pass-plugin=%pisa_plugin \
// RUN:   --pass-pipeline="builtin.module(pisa-cpu-pipeline)" | FileCheck %s --enable-var-scope --check-prefix=CPU
// RUN: %mlir_opt %s --load-dialect-plugin=%pisa_plugin --load-pass-plugin=%pisa_plugin \
// RUN:   --pass-pipeline="builtin.module(pisa-lower-to-nvvm-pipeline{format=isa})" | FileCheck %s --enable-var-scope --check-prefix=GPU
// Without the plugin the dialect is unknown there.
// RUN: not %mlir_opt %s 2>&1 | FileCheck %s --enable-var-scope --check-prefix=NOPLUGIN

// SCHED-LABEL: func.func @select
// SCHED: pisa.hier_topk {{.*}}{schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 1024, io_single_stage = 2048>}

// CPU-LABEL: llvm.func @select
// CPU-NOT: pisa.
// CPU: llvm.func @_mlir_ciface_select

// GPU: gpu.binary @pisa_kernels
// GPU-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

// NOPLUGIN: error: Dialect `pisa' not found for custom op 'pisa.pyramid_build'

func.func @select(%q: tensor<1x16x300x32xbf16>, %k: tensor<1x1x300x32xbf16>)
    -> tensor<1x1x300x4xi32> attributes {llvm.emit_c_interface} {
  %off = arith.constant 0 : index
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x1x300x32xbf16> -> tensor<1x1x11x32xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2
      : tensor<1x16x300x32xbf16>, tensor<1x1x300x32xbf16>, tensor<1x1x11x32xf32>
      -> tensor<1x1x300x4xi32>
  return %s : tensor<1x1x300x4xi32>
}
