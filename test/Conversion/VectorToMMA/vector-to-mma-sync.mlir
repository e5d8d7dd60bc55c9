// RUN: pisa-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(gpu.module(pisa-vector-to-mma-sync))' | FileCheck %s --enable-var-scope

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

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
!smem = memref<32x24xbf16, #gpu.address_space<workgroup>>

// A register epilogue on the 32 x 16 product (two m-tiles, two n-tiles):
// per row a log-sum-exp, per 16 rows a sum. It stays in the accumulator
// fragments: a row reduction combines the lane's two columns per tile, the
// tiles, then the quad (shuffles xor 1 and 2, once per row); the row max
// is broadcast back into 2x2 fragments; the sum over 16 rows combines the
// lane's two rows and then the quads (xor 4, 8, 16). Nothing goes through
// memory and no 32 x 16 vector is left.
// CHECK-LABEL: gpu.func @row_epilogue
// CHECK-COUNT-4: nvvm.mma.sync
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<2x2xf32>
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : vector<2xf32>
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK-NEXT: arith.maximumf
// CHECK-NEXT: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK-NEXT: arith.maximumf
// CHECK: vector.broadcast %{{.*}} : f32 to vector<2xf32>
// CHECK: vector.insert %{{.*}} [0] : vector<2xf32> into vector<2x2xf32>
// CHECK: arith.subf %{{.*}}, %{{.*}} : vector<2x2xf32>
// CHECK: math.exp2 %{{.*}} : vector<2x2xf32>
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK-NEXT: arith.addf
// CHECK-NEXT: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK-COUNT-2: math.log2 %{{.*}} : vector<2xf32>
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[X4:.*]], %{{.*}} = gpu.shuffle  xor %[[SUM]], %c4_i32, %c32_i32 : f32
// CHECK-NEXT: %[[S4:.*]] = arith.addf %[[SUM]], %[[X4]] : f32
// CHECK-NEXT: %[[X8:.*]], %{{.*}} = gpu.shuffle  xor %[[S4]], %c8_i32, %c32_i32 : f32
// CHECK-NEXT: %[[S8:.*]] = arith.addf %[[S4]], %[[X8]] : f32
// CHECK-NEXT: %[[X16:.*]], %{{.*}} = gpu.shuffle  xor %[[S8]], %c16_i32, %c32_i32 : f32
// CHECK-NEXT: %[[T0:.*]] = arith.addf %[[S8]], %[[X16]] : f32
// CHECK: memref.store %[[T0]], %{{.*}}[%c0]
// CHECK: memref.store %{{.*}}, %{{.*}}[%c1]
// CHECK-NOT: vector.multi_reduction
// CHECK-NOT: vector<32x16xf32>
// CHECK-NOT: vector<16x8xf32>
gpu.module @k {
  gpu.func @row_epilogue(%out: memref<2xf32>) workgroup(%q: !smem, %keys: !smem) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %pad = arith.constant 0.0 : bf16
    %zero = arith.constant dense<0.0> : vector<32x16xf32>
    %scale = arith.constant dense<0.5> : vector<32x16xf32>
    %ninf = arith.constant dense<0xFF800000> : vector<32xf32>
    %zrow = arith.constant dense<0.0> : vector<32xf32>
    %va = vector.transfer_read %q[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<32x16xbf16>
    %vb = vector.transfer_read %keys[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<16x16xbf16>
    %p = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<32x16xbf16>, vector<16x16xbf16> into vector<32x16xf32>
    %s = arith.mulf %p, %scale : vector<32x16xf32>
    %m = vector.multi_reduction <maximumf>, %s, %ninf [1] : vector<32x16xf32> to vector<32xf32>
    %mc = vector.shape_cast %m : vector<32xf32> to vector<32x1xf32>
    %mb = vector.broadcast %mc : vector<32x1xf32> to vector<32x16xf32>
    %d = arith.subf %s, %mb : vector<32x16xf32>
    %e = math.exp2 %d : vector<32x16xf32>
    %z = vector.multi_reduction <add>, %e, %zrow [1] : vector<32x16xf32> to vector<32xf32>
    %lz = math.log2 %z : vector<32xf32>
    %l = arith.addf %m, %lz : vector<32xf32>
    %h0 = vector.extract_strided_slice %l {offsets = [0], sizes = [16], strides = [1]} : vector<32xf32> to vector<16xf32>
    %t0 = vector.reduction <add>, %h0 : vector<16xf32> into f32
    %h1 = vector.extract_strided_slice %l {offsets = [16], sizes = [16], strides = [1]} : vector<32xf32> to vector<16xf32>
    %t1 = vector.reduction <add>, %h1 : vector<16xf32> into f32
    memref.store %t0, %out[%c0] : memref<2xf32>
    memref.store %t1, %out[%c1] : memref<2xf32>
    gpu.return
  }
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
!smem = memref<16x24xbf16, #gpu.address_space<workgroup>>

// An accumulator combined with a value whose lanes are not known: an error,
// not a silent wrong layout.
gpu.module @k {
  gpu.func @unknown_layout(%bias: vector<16x8xf32>, %out: memref<1xf32>) workgroup(%q: !smem, %keys: !smem) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    %va = vector.transfer_read %q[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<16x16xbf16>
    %vb = vector.transfer_read %keys[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<8x16xbf16>
    %p = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
    // expected-error @+1 {{mixes an accumulator with a value of no known layout}}
    %s = arith.mulf %p, %bias : vector<16x8xf32>
    %x = vector.extract %s[0, 0] : f32 from vector<16x8xf32>
    memref.store %x, %out[%c0] : memref<1xf32>
    gpu.return
  }
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
!smem = memref<16x24xbf16, #gpu.address_space<workgroup>>

// A reduction over rows (dim 0) would need lanes of different quads: an
// error, as is a combining kind with no lane-shuffle form here.
gpu.module @k {
  gpu.func @column_reduction(%out: memref<8xf32>) workgroup(%q: !smem, %keys: !smem) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    %zcol = arith.constant dense<0.0> : vector<8xf32>
    %va = vector.transfer_read %q[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<16x16xbf16>
    %vb = vector.transfer_read %keys[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<8x16xbf16>
    %p = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
    // expected-error @+1 {{is not a supported row reduction of an accumulator}}
    %s = vector.multi_reduction <add>, %p, %zcol [0] : vector<16x8xf32> to vector<8xf32>
    vector.store %s, %out[%c0] : memref<8xf32>, vector<8xf32>
    gpu.return
  }
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
!smem = memref<16x24xbf16, #gpu.address_space<workgroup>>

gpu.module @k {
  gpu.func @product_reduction(%out: memref<1xf32>) workgroup(%q: !smem, %keys: !smem) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    %one = arith.constant dense<1.0> : vector<16xf32>
    %va = vector.transfer_read %q[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<16x16xbf16>
    %vb = vector.transfer_read %keys[%c0, %c0], %pad {in_bounds = [true, true]} : !smem, vector<8x16xbf16>
    %p = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
    // expected-error @+1 {{is not a supported row reduction of an accumulator}}
    %s = vector.multi_reduction <mul>, %p, %one [1] : vector<16x8xf32> to vector<16xf32>
    %e = vector.extract %s[0] : f32 from vector<16xf32>
    memref.store %e, %out[%c0] : memref<1xf32>
    gpu.return
  }
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
!probs = memref<16x24xbf16, #gpu.address_space<workgroup>>
!values = memref<16x40xbf16, #gpu.address_space<workgroup>>
!out = memref<16x36xf32, #gpu.address_space<workgroup>>

// The value product of attention, O += P V: the B operand a k-major (k, n)
// value tile, loaded with ldmatrix.trans (lane l at row l % 16, no column
// offset), and the f32 accumulator read from shared memory per fragment
// (the inverse of the result's store) instead of a zero constant.
// CHECK-LABEL: gpu.func @value_tile
// CHECK: %[[LANE:.*]] = gpu.lane_id
// CHECK: %[[ROW:.*]] = arith.divui %[[LANE]], %c4
// CHECK: vector.load %{{.*}} : memref<16x36xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: vector.load %{{.*}} : memref<16x36xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x24xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: %[[L:.*]] = gpu.lane_id
// CHECK: %[[K:.*]] = arith.remui %[[L]], %c16
// CHECK: nvgpu.ldmatrix %{{.*}}[%[[K]], %c0] {numTiles = 2 : i32, transpose = true} : memref<16x40xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: nvvm.mma.sync
// CHECK: %[[L2:.*]] = gpu.lane_id
// CHECK: %[[K2:.*]] = arith.remui %[[L2]], %c16
// CHECK: nvgpu.ldmatrix %{{.*}}[%[[K2]], %c8] {numTiles = 2 : i32, transpose = true}
// CHECK: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-COUNT-4: vector.store %{{.*}} : memref<16x36xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK-NOT: vector.contract
// CHECK-NOT: vector.transfer_
gpu.module @k {
  gpu.func @value_tile() workgroup(%p: !probs, %v: !values, %o: !out) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %fpad = arith.constant 0.0 : f32
    %vp = vector.transfer_read %p[%c0, %c0], %pad {in_bounds = [true, true]} : !probs, vector<16x16xbf16>
    %vv = vector.transfer_read %v[%c0, %c0], %pad {in_bounds = [true, true]} : !values, vector<16x16xbf16>
    %acc = vector.transfer_read %o[%c0, %c0], %fpad {in_bounds = [true, true]} : !out, vector<16x16xf32>
    %r = vector.contract {indexing_maps = [#a, #kn, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %vp, %vv, %acc : vector<16x16xbf16>, vector<16x16xbf16> into vector<16x16xf32>
    vector.transfer_write %r, %o[%c0, %c0] {in_bounds = [true, true]} : vector<16x16xf32>, !out
    gpu.return
  }
}
