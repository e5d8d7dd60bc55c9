// RUN: pisa-opt %s --split-input-file --pisa-decompose-to-kernels --pisa-configure-kernels -verify-diagnostics | FileCheck %s --enable-var-scope

// C = 16: the register kernels take it (the forward's, the backward's
// query-tile and register key kernels: each 16-key block is one m16 slab
// or two n8 tiles); the staged ones split a block's keys between four
// warps and need C a multiple of 32.

// CHECK-LABEL: func.func @block16
// CHECK: pisa.kernel.sparse_attention {{.*}} block_size = 16 {{.*}}epilogue = registers
// CHECK: pisa.kernel.sparse_attention_grad_queries {{.*}} block_size = 16 {{.*}}epilogue = registers
// CHECK: pisa.kernel.sparse_attention_grad_keys {{.*}} block_size = 16 {{.*}}epilogue = registers
func.func @block16(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>, %v: tensor<?x1x?x128xbf16>, %s: tensor<?x1x?x8xi32>, %off: index, %do: tensor<?x16x?x128xbf16>) -> (tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>) {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 16 : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x8xi32> -> tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 16 : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x8xi32>, tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>, tensor<?x16x?x128xbf16> -> tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
  return %dq, %dk, %dv : tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
}

// -----

// A staged kernel asked for with C = 16 is refused, naming why.
func.func @staged16(%q: tensor<1x16x64x128xbf16>, %k: tensor<1x1x64x128xbf16>, %v: tensor<1x1x64x128xbf16>, %s: tensor<1x1x64x8xi32>, %off: index, %o0: tensor<1x16x64x128xbf16>, %l0: tensor<1x16x64xf32>) -> tensor<1x16x64x128xbf16> {
  // expected-error @+1 {{the staged kernel needs C a multiple of 32 (four warps split a block's keys)}}
  %o, %l = pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o0, %l0) block_size = 16 scale = 0.0883883461 {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared>} : tensor<1x16x64x128xbf16>, tensor<1x1x64x128xbf16>, tensor<1x1x64x128xbf16>, tensor<1x1x64x8xi32>, tensor<1x16x64x128xbf16>, tensor<1x16x64xf32> -> tensor<1x16x64x128xbf16>, tensor<1x16x64xf32>
  return %o : tensor<1x16x64x128xbf16>
}
