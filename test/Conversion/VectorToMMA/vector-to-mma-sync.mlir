// RUN: pisa-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(gpu.module(pisa-vector-to-mma-sync))' | FileCheck %s

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
!smem16 = memref<16x40xbf16, #gpu.address_space<workgroup>>
!scores = memref<16x20xf32, #gpu.address_space<workgroup>>

// A 16 x 16 x 32 bf16 tile product (two n-tiles, two k-steps): one ldmatrix
// per operand tile, loaded where it is first used, k-steps outermost and
// chained through the accumulator, bf16 mma.sync lowered to nvvm with bf16
// operand types, the result stored per fragment row pair.
// CHECK-LABEL: gpu.func @bf16_tile
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[LANE:.*]] = gpu.lane_id
// CHECK: %[[ROW:.*]] = arith.remui %[[LANE]], %[[C16]]
// CHECK: %[[COLTILE:.*]] = arith.divui %[[LANE]], %[[C16]]
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = false} : memref<16x40xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<2x2xbf16>
// CHECK: nvvm.mma.sync
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<2x2xbf16>
// CHECK: nvvm.mma.sync
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<2x2xbf16>
// CHECK: nvvm.mma.sync
// CHECK-NOT: nvgpu.mma.sync
// CHECK-COUNT-4: vector.store %{{.*}} : memref<16x20xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK-NOT: vector.contract
// CHECK-NOT: vector.transfer_
gpu.module @k {
  gpu.func @bf16_tile() workgroup(%q: !smem16, %keys: !smem16, %s: !scores) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %zero = arith.constant dense<0.0> : vector<16x16xf32>
    %va = vector.transfer_read %q[%c0, %c0], %pad {in_bounds = [true, true]} : !smem16, vector<16x32xbf16>
    %vb = vector.transfer_read %keys[%c0, %c0], %pad {in_bounds = [true, true]} : !smem16, vector<16x32xbf16>
    %r = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x32xbf16>, vector<16x32xbf16> into vector<16x16xf32>
    vector.transfer_write %r, %s[%c0, %c0] {in_bounds = [true, true]} : vector<16x16xf32>, !scores
    gpu.return
  }
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
!smem16 = memref<32x24xf16, #gpu.address_space<workgroup>>
!scores = memref<32x12xf32, #gpu.address_space<workgroup>>

// f16, two m-tiles (a warp tile of 32 rows) and one n-tile: both m-tiles
// use the one B fragment right after it is loaded; nvgpu.mma.sync stays for
// upstream convert-nvgpu-to-nvvm, which handles f16.
// CHECK-LABEL: gpu.func @f16_tile
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<4x2xf16>
// CHECK: %[[B:.*]] = nvgpu.ldmatrix {{.*}} -> vector<2x2xf16>
// CHECK: nvgpu.mma.sync(%{{.*}}, %[[B]], %{{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<4x2xf16>
// CHECK-NOT: nvgpu.ldmatrix
// CHECK: nvgpu.mma.sync(%{{.*}}, %[[B]], %{{.*}})
// CHECK-NOT: nvvm.mma.sync
gpu.module @k {
  gpu.func @f16_tile() workgroup(%q: !smem16, %keys: !smem16, %s: !scores) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : f16
    %zero = arith.constant dense<0.0> : vector<32x8xf32>
    %va = vector.transfer_read %q[%c0, %c0], %pad {in_bounds = [true, true]} : !smem16, vector<32x16xf16>
    %vb = vector.transfer_read %keys[%c0, %c0], %pad {in_bounds = [true, true]} : !smem16, vector<8x16xf16>
    %r = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<32x16xf16>, vector<8x16xf16> into vector<32x8xf32>
    vector.transfer_write %r, %s[%c0, %c0] {in_bounds = [true, true]} : vector<32x8xf32>, !scores
    gpu.return
  }
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>

// Operands in global memory have no ldmatrix: a clear error, not a crash.
gpu.module @k {
  gpu.func @global_operand(%q: memref<16x16xbf16>) workgroup(%keys: memref<8x16xbf16, #gpu.address_space<workgroup>>, %s: memref<16x8xf32, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    %va = vector.transfer_read %q[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16>, vector<16x16xbf16>
    %vb = vector.transfer_read %keys[%c0, %c0], %pad {in_bounds = [true, true]} : memref<8x16xbf16, #gpu.address_space<workgroup>>, vector<8x16xbf16>
    // expected-error @+1 {{mma operands must be in-bounds row-major reads of shared memory}}
    %r = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
    vector.transfer_write %r, %s[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}
