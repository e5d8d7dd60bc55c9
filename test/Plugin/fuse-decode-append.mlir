// UNSUPPORTED: asan
// The stock mlir-opt runs the decode fusion, the decomposition (whose op
// models come with the dialect plugin) and the kernel configuration from
// pisa's plugin.
// RUN: %mlir_opt %S/../Transforms/fuse-decode-append.mlir --load-dialect-plugin=%pisa_plugin --load-pass-plugin=%pisa_plugin \
// RUN:   --split-input-file --pass-pipeline="builtin.module(func.func(pisa-fuse-decode-append))" | FileCheck %s --enable-var-scope --check-prefix=FUSE
// RUN: %mlir_opt %s --load-dialect-plugin=%pisa_plugin --load-pass-plugin=%pisa_plugin \
// RUN:   --pass-pipeline="builtin.module(pisa-decompose-to-kernels,pisa-configure-kernels)" | FileCheck %s --enable-var-scope --check-prefix=KERNELS

// FUSE-LABEL: func.func @decode_step
// FUSE: pisa.kernel.append_select_single_stage
// FUSE-LABEL: func.func @two_queries
// FUSE: pisa.kernel.pyramid_append

// KERNELS-LABEL: func.func @score
// KERNELS: pisa.kernel.lse_score {{.*}}kernel_config = #pisa.kernel_config<variant = simt, threads = 128>
func.func @score(%q: tensor<1x4x8x32xf16>, %k: tensor<1x1x40x32xf16>,
                 %n: tensor<1x1x8x3xi32>, %off: index) -> tensor<1x1x8x3xf32> {
  %u = pisa.lse_score %q, %k, %n, %off level = 1 block_size = 16 branching = 2
      : tensor<1x4x8x32xf16>, tensor<1x1x40x32xf16>, tensor<1x1x8x3xi32> -> tensor<1x1x8x3xf32>
  return %u : tensor<1x1x8x3xf32>
}
