// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope

// Decode: one fused kernel from the root to the leaves, nothing else.

// CHECK-LABEL: func.func @decode
// CHECK: %[[SEL:.*]] = gpu.alloc () : memref<1x1x1x8xi32>
// CHECK-NOT: gpu.alloc
// CHECK: gpu.launch_func @pisa_kernels::@select_single_stage blocks in ({{%c1(_[0-9]+)?}}, %c1
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: gpu.dealloc
// CHECK: return %[[SEL]]
// CHECK: gpu.module @pisa_kernels
// CHECK-COUNT-1: gpu.func
// CHECK-SAME: @select_single_stage
// bf16 with G = 16 and g = 2: the levels on tensor cores (each f32 summary
// split into bf16 halves), the log2 of their LSEs one MUFU instruction.
// CHECK: arith.andi %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK: nvgpu.mma.sync
// CHECK: math.log2 %{{.*}} fastmath<afn> : f32
func.func @decode(%q: tensor<1x16x1x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                  %p: tensor<1x1x127x128xf32>, %t: index) -> tensor<1x1x1x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %t topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<single_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x1x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}
