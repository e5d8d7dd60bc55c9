// RUN: pisa-opt %s -split-input-file -verify-diagnostics

// One case per verifier branch of the kernel-level ops.

func.func @f(%k: tensor<1x1x8x4xf32>, %p: memref<1x1x3x4xf32>) {
  // expected-error @+1 {{expected all operands to be tensors or all to be buffers but got both}}
  pisa.kernel.pyramid %k outs(%p) block_size = 4 branching = 2 : tensor<1x1x8x4xf32>, memref<1x1x3x4xf32>
  return
}

// -----

func.func @f(%k: memref<2x1x8x4xf32>, %p: memref<3x1x3x4xf32>) {
  // expected-error @+1 {{expected batch B (dim 0) of an operand (3) to match the first operand's (2)}}
  pisa.kernel.pyramid %k outs(%p) block_size = 4 branching = 2 : memref<2x1x8x4xf32>, memref<3x1x3x4xf32>
  return
}

// -----

func.func @f(%k: memref<1x1x8x4xf32>, %p: memref<1x1x3x8xf32>) {
  // expected-error @+1 {{expected d of pyramid (8) to match keys (4)}}
  pisa.kernel.pyramid %k outs(%p) block_size = 4 branching = 2 : memref<1x1x8x4xf32>, memref<1x1x3x8xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x8x4xf32>, %p: tensor<1x1x3x4xf32>) {
  // expected-error @+1 {{expected the number of tensor results (0) to be equal to the number of output tensors (1)}}
  pisa.kernel.pyramid %k outs(%p) block_size = 4 branching = 2 : tensor<1x1x8x4xf32>, tensor<1x1x3x4xf32>
  return
}

// -----

func.func @f(%p: memref<1x1x3x4xf32>, %planes: memref<1x1x3x4xbf16>) {
  // expected-error @+1 {{expected values per row of planes (4) to be twice the pyramid's d (4)}}
  pisa.kernel.fragment_planes %p outs(%planes) : memref<1x1x3x4xf32>, memref<1x1x3x4xbf16>
  return
}

// -----

func.func @f(%p: memref<1x1x3x4xf32>, %planes: memref<1x1x5x8xbf16>) {
  // expected-error @+1 {{expected rows of planes (5) to match pyramid (3)}}
  pisa.kernel.fragment_planes %p outs(%planes) : memref<1x1x3x4xf32>, memref<1x1x5x8xbf16>
  return
}

// -----

func.func @f(%q: memref<1x2x8x4xbf16>, %p: memref<1x1x3x4xf32>, %c: memref<1x1x8x6xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected bf16 fragment planes with tensor_cores}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 3 block_size = 4 branching = 2 scale = 0.5 {tensor_cores}
      : memref<1x2x8x4xbf16>, memref<1x1x3x4xf32>, memref<1x1x8x6xi32>, memref<1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x2x8x4xf32>, %p: memref<1x1x3x8xbf16>, %c: memref<1x1x8x6xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected an f32 pyramid without tensor_cores}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 3 block_size = 4 branching = 2 scale = 0.5
      : memref<1x2x8x4xf32>, memref<1x1x3x8xbf16>, memref<1x1x8x6xi32>, memref<1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x2x8x4xf32>, %p: memref<1x1x3x4xf32>, %c: memref<1x1x8x4xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected g * K of contenders (4) to match the attributes (6)}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 3 block_size = 4 branching = 2 scale = 0.5
      : memref<1x2x8x4xf32>, memref<1x1x3x4xf32>, memref<1x1x8x4xi32>, memref<1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x2x8x4xf32>, %p: memref<1x1x3x4xf32>, %c: memref<1x1x8x6xi32>, %n: memref<1x1x9xi32>, %i: index) {
  // expected-error @+1 {{expected Nq of counts (9) to match queries (8)}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 3 block_size = 4 branching = 2 scale = 0.5
      : memref<1x2x8x4xf32>, memref<1x1x3x4xf32>, memref<1x1x8x6xi32>, memref<1x1x9xi32>
  return
}

// -----

func.func @f(%c: memref<1x1x8x6xi32>, %n: memref<1x1x7xi32>, %l: memref<1x1x2xi32>, %t: memref<1x1x20xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x32xi32>, %i: index) {
  // expected-error @+1 {{expected Nq of counts (7) to match contenders (8)}}
  pisa.kernel.bucket %i, %c, %n outs(%l, %l, %l, %t, %t, %nt, %sp, %l) topk = 3 block_size = 4 q_tile = 2
      : memref<1x1x8x6xi32>, memref<1x1x7xi32>, memref<1x1x2xi32>, memref<1x1x2xi32>, memref<1x1x2xi32>, memref<1x1x20xi32>, memref<1x1x20xi32>, memref<1x1xi32>, memref<1x1x32xi32>, memref<1x1x2xi32>
  return
}

// -----

func.func @f(%q: memref<1x2x8x4xf32>, %k: memref<1x1x8x8xf32>, %l: memref<1x1x2xi32>, %t: memref<1x1x20xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x32xi32>, %u: memref<1x1x8x6xf32>, %i: index) {
  // expected-error @+1 {{expected d of keys (8) to match queries (4)}}
  pisa.kernel.score_tiles %q, %k, %i, %l, %l, %t, %t, %nt, %sp outs(%u) topk = 3 block_size = 4 q_tile = 2 scale = 0.5
      : memref<1x2x8x4xf32>, memref<1x1x8x8xf32>, memref<1x1x2xi32>, memref<1x1x2xi32>, memref<1x1x20xi32>, memref<1x1x20xi32>, memref<1x1xi32>, memref<1x1x32xi32>, memref<1x1x8x6xf32>
  return
}

// -----

func.func @f(%c: memref<1x1x8x6xi32>, %n: memref<1x1x8xi32>, %u: memref<1x1x8x6xf32>, %s: memref<1x1x8x5xi32>, %i: index) {
  // expected-error @+1 {{expected K of selection (5) to match the attributes (3)}}
  pisa.kernel.select_final %i, %i, %c, %n, %u outs(%s) topk = 3 block_size = 4
      : memref<1x1x8x6xi32>, memref<1x1x8xi32>, memref<1x1x8x6xf32>, memref<1x1x8x5xi32>
  return
}

// -----

func.func @f(%q: memref<1x2x1x4xf32>, %k: memref<1x1x8x4xf32>, %p: memref<1x1x3x4xf32>, %s: memref<1x1x2x3xi32>, %i: index) {
  // expected-error @+1 {{expected Nq of selection (2) to match queries (1)}}
  pisa.kernel.select_single_stage %q, %k, %p, %i outs(%s) topk = 3 block_size = 4 branching = 2 scale = 0.5
      : memref<1x2x1x4xf32>, memref<1x1x8x4xf32>, memref<1x1x3x4xf32>, memref<1x1x2x3xi32>
  return
}

// -----

func.func @f(%k: memref<?x2x4xf32>, %cu: memref<?xi32>, %p: memref<?x1x4xf32>) {
  // expected-error @+1 {{expected Hkv of pyramid (1) to match keys (2)}}
  pisa.kernel.pyramid_varlen %k, %cu outs(%p) block_size = 4 branching = 2 : memref<?x2x4xf32>, memref<?xi32>, memref<?x1x4xf32>
  return
}

// -----

func.func @f(%q: memref<?x4x4xf32>, %k: memref<?x2x4xf32>, %p: memref<?x2x4xf32>, %cuq: memref<3xi32>, %cuk: memref<4xi32>, %s: memref<?x2x8xi32>) {
  // expected-error @+1 {{expected B + 1 of cu_seqlens_q (3) to match cu_seqlens_k (4)}}
  pisa.kernel.select_single_stage_varlen %q, %k, %p, %cuq, %cuk outs(%s) topk = 8 block_size = 4 branching = 2 scale = 0.5
      : memref<?x4x4xf32>, memref<?x2x4xf32>, memref<?x2x4xf32>, memref<3xi32>, memref<4xi32>, memref<?x2x8xi32>
  return
}

// -----

func.func @f(%q: memref<5x4x4xf32>, %k: memref<?x2x4xf32>, %p: memref<?x2x4xf32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>, %s: memref<6x2x8xi32>) {
  // expected-error @+1 {{expected Tq of selection (6) to match queries (5)}}
  pisa.kernel.select_single_stage_varlen %q, %k, %p, %cuq, %cuk outs(%s) topk = 8 block_size = 4 branching = 2 scale = 0.5
      : memref<5x4x4xf32>, memref<?x2x4xf32>, memref<?x2x4xf32>, memref<?xi32>, memref<?xi32>, memref<6x2x8xi32>
  return
}

// -----

func.func @f(%k: memref<1x1x8x4xf32>, %p: memref<1x1x3x8xf32>, %from: memref<1xi32>, %to: memref<1xi32>) {
  // expected-error @+1 {{expected d of pyramid (8) to match keys (4)}}
  pisa.kernel.pyramid_append %k, %from, %to outs(%p) block_size = 4 branching = 2 : memref<1x1x8x4xf32>, memref<1xi32>, memref<1xi32>, memref<1x1x3x8xf32>
  return
}

// -----

func.func @f(%k: memref<2x1x8x4xf32>, %p: memref<2x1x3x4xf32>, %from: memref<1xi32>, %to: memref<2xi32>) {
  // expected-error @+1 {{expected B of from (1) to match keys (2)}}
  pisa.kernel.pyramid_append %k, %from, %to outs(%p) block_size = 4 branching = 2 : memref<2x1x8x4xf32>, memref<1xi32>, memref<2xi32>, memref<2x1x3x4xf32>
  return
}

// -----

func.func @f(%q: memref<2x8x1x64xf16>, %k: memref<2x1x4096x64xf16>, %p: memref<2x1x127x64xf32>, %n: memref<3xi32>, %s: memref<2x1x1x8xi32>) {
  // expected-error @+1 {{expected B of seq_lens (3) to match queries (2)}}
  pisa.kernel.select_decode %q, %k, %p, %n outs(%s) topk = 8 block_size = 64 branching = 2 scale = 0.125 : memref<2x8x1x64xf16>, memref<2x1x4096x64xf16>, memref<2x1x127x64xf32>, memref<3xi32>, memref<2x1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x12x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected N of values (12) to match keys (10)}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125 : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x12x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x32xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected dv of output (32) to match values (64)}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125 : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x32xf16>, memref<1x4x10xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf32>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected output of the queries' element type 'f16' but got 'f32'}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125 : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf32>, memref<1x4x10xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected keys of the queries' element type 'f16' but got 'bf16'}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125 : memref<1x4x10x64xf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

// A packed batch (cu_seqlens) is token-major.
func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected token_major with cu_seqlens (a packed batch is token-major)}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off cu_seqlens(%cq, %ck : memref<3xi32>, memref<3xi32>) outs(%o, %l) block_size = 32 scale = 0.125 : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

// cu_seqlens hold B + 1 >= 1 entries.
func.func @f(%q: memref<1x10x4x64xf16>, %k: memref<1x10x1x64xf16>, %v: memref<1x10x1x64xf16>, %s: memref<1x10x1x3xi32>, %off: index, %cq: memref<0xi32>, %ck: memref<0xi32>, %o: memref<1x10x4x64xf16>, %l: memref<1x10x4xf32>) {
  // expected-error @+1 {{expected cu_seqlens_q to have B + 1 >= 1 entries but got 0}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off cu_seqlens(%cq, %ck : memref<0xi32>, memref<0xi32>) outs(%o, %l) block_size = 32 scale = 0.125 {token_major} : memref<1x10x4x64xf16>, memref<1x10x1x64xf16>, memref<1x10x1x64xf16>, memref<1x10x1x3xi32>, memref<1x10x4x64xf16>, memref<1x10x4xf32>
  return
}

// -----

// ... seen as a batch of one.
func.func @f(%q: memref<2x10x4x64xf16>, %k: memref<2x10x1x64xf16>, %v: memref<2x10x1x64xf16>, %s: memref<2x10x1x3xi32>, %off: index, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<2x10x4x64xf16>, %l: memref<2x10x4xf32>) {
  // expected-error @+1 {{expected B of queries (2) to match a packed batch (1)}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off cu_seqlens(%cq, %ck : memref<3xi32>, memref<3xi32>) outs(%o, %l) block_size = 32 scale = 0.125 {token_major} : memref<2x10x4x64xf16>, memref<2x10x1x64xf16>, memref<2x10x1x64xf16>, memref<2x10x1x3xi32>, memref<2x10x4x64xf16>, memref<2x10x4xf32>
  return
}

// -----

func.func @f(%q: memref<1x10x4x64xf16>, %k: memref<1x10x1x64xf16>, %v: memref<1x10x1x64xf16>, %s: memref<1x10x1x3xi32>, %off: index, %cq: memref<3xi32>, %ck: memref<4xi32>, %o: memref<1x10x4x64xf16>, %l: memref<1x10x4xf32>) {
  // expected-error @+1 {{expected B + 1 of cu_seqlens_q (3) to match cu_seqlens_k (4)}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off cu_seqlens(%cq, %ck : memref<3xi32>, memref<4xi32>) outs(%o, %l) block_size = 32 scale = 0.125 {token_major} : memref<1x10x4x64xf16>, memref<1x10x1x64xf16>, memref<1x10x1x64xf16>, memref<1x10x1x3xi32>, memref<1x10x4x64xf16>, memref<1x10x4xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected kernel_config to be a #pisa.kernel_config but got "mma"}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125 {kernel_config = "mma"} : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

// The kernel ops take the user-level ops' attribute ranges (one definition,
// lib/pisa/IR/ContractChecks.h). K = 2^62 with g = 4 made the walk's g * K
// overflow int64 (UBSan, the sixteenth session's fuzz run).
func.func @f(%q: memref<1x2x8x4xf32>, %p: memref<1x1x3x4xf32>, %c: memref<1x1x8x6xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected topk K in [3, 4096] (room for the forced blocks) but got 4611686018427387904}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 4611686018427387904 block_size = 4 branching = 4 scale = 0.5
      : memref<1x2x8x4xf32>, memref<1x1x3x4xf32>, memref<1x1x8x6xi32>, memref<1x1x8xi32>
  return
}

// -----

func.func @f(%k: memref<1x1x8x4xf32>, %p: memref<1x1x3x4xf32>) {
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 0}}
  pisa.kernel.pyramid %k outs(%p) block_size = 0 branching = 2 : memref<1x1x8x4xf32>, memref<1x1x3x4xf32>
  return
}

// -----

func.func @f(%k: memref<1x1x8x4xf32>, %p: memref<1x1x3x4xf32>) {
  // expected-error @+1 {{expected branching g in [2, 64] but got 1}}
  pisa.kernel.pyramid %k outs(%p) block_size = 4 branching = 1 : memref<1x1x8x4xf32>, memref<1x1x3x4xf32>
  return
}

// -----

func.func @f(%q: memref<1x2x8x4xf32>, %k: memref<1x1x8x4xf32>, %l: memref<1x1x2xi32>, %t: memref<1x1x20xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x32xi32>, %u: memref<1x1x8x6xf32>, %i: index) {
  // expected-error @+1 {{expected q_tile in [1, 1024] but got 0}}
  pisa.kernel.score_tiles %q, %k, %i, %l, %l, %t, %t, %nt, %sp outs(%u) topk = 3 block_size = 4 q_tile = 0 scale = 0.5
      : memref<1x2x8x4xf32>, memref<1x1x8x4xf32>, memref<1x1x2xi32>, memref<1x1x2xi32>, memref<1x1x20xi32>, memref<1x1x20xi32>, memref<1x1xi32>, memref<1x1x32xi32>, memref<1x1x8x6xf32>
  return
}

// -----

// A q_tile past the bound (a fuzz finding: the tile arithmetic of the GPU
// configuration overflowed int64).
func.func @f(%q: memref<1x2x8x4xf32>, %k: memref<1x1x8x4xf32>, %l: memref<1x1x2xi32>, %t: memref<1x1x20xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x32xi32>, %u: memref<1x1x8x6xf32>, %i: index) {
  // expected-error @+1 {{expected q_tile in [1, 1024] but got 9223372036854775807}}
  pisa.kernel.score_tiles %q, %k, %i, %l, %l, %t, %t, %nt, %sp outs(%u) topk = 3 block_size = 4 q_tile = 9223372036854775807 scale = 0.5
      : memref<1x2x8x4xf32>, memref<1x1x8x4xf32>, memref<1x1x2xi32>, memref<1x1x2xi32>, memref<1x1x20xi32>, memref<1x1x20xi32>, memref<1x1xi32>, memref<1x1x32xi32>, memref<1x1x8x6xf32>
  return
}

// -----

func.func @f(%q: memref<1x2x1x4xf32>, %k: memref<1x1x8x4xf32>, %p: memref<1x1x3x4xf32>, %s: memref<1x1x1x3xi32>, %i: index) {
  // expected-error @+1 {{expected a finite positive scale but got -5.000000e-01}}
  pisa.kernel.select_single_stage %q, %k, %p, %i outs(%s) topk = 3 block_size = 4 branching = 2 scale = -0.5
      : memref<1x2x1x4xf32>, memref<1x1x8x4xf32>, memref<1x1x3x4xf32>, memref<1x1x1x3xi32>
  return
}

// -----

// The planes' row width against 2 d without forming 2 d: d = 2^62 made
// `2 * d` overflow; a dynamic d (kDynamic) did too with tensor_cores.
func.func @f(%p: memref<1x1x3x4611686018427387904xf32>, %planes: memref<1x1x3x8xbf16>) {
  // expected-error @+1 {{expected values per row of planes (8) to be twice the pyramid's d (4611686018427387904)}}
  pisa.kernel.fragment_planes %p outs(%planes) : memref<1x1x3x4611686018427387904xf32>, memref<1x1x3x8xbf16>
  return
}

// -----

func.func @f(%q: memref<1x16x8x?xbf16>, %p: memref<1x1x3x32xbf16>, %c: memref<1x1x8x8xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected a static dim 3 (the kernels' tiling) in queries but got 'memref<1x16x8x?xbf16>'}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 4 block_size = 4 branching = 2 scale = 0.5 {tensor_cores}
      : memref<1x16x8x?xbf16>, memref<1x1x3x32xbf16>, memref<1x1x8x8xi32>, memref<1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x16x8x16xbf16>, %p: memref<1x1x3x31xbf16>, %c: memref<1x1x8x8xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected row width of planes (31) to be twice queries' d (16)}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 4 block_size = 4 branching = 2 scale = 0.5 {tensor_cores}
      : memref<1x16x8x16xbf16>, memref<1x1x3x31xbf16>, memref<1x1x8x8xi32>, memref<1x1x8xi32>
  return
}

// -----

// The tensor-core walk's tiling (pisa/Analysis/TensorCoreWalk.h): a
// hand-written walk with G = 2 was lowered as if G were 16 (reading other
// heads' queries).
func.func @f(%q: memref<1x2x8x16xbf16>, %p: memref<1x1x3x32xbf16>, %c: memref<1x1x8x8xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected G = 16 query heads per KV head, not 2 with tensor_cores}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 4 block_size = 4 branching = 2 scale = 0.5 {tensor_cores}
      : memref<1x2x8x16xbf16>, memref<1x1x3x32xbf16>, memref<1x1x8x8xi32>, memref<1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x16x8x16xbf16>, %p: memref<1x1x3x32xbf16>, %c: memref<1x1x8x6xi32>, %n: memref<1x1x8xi32>, %i: index) {
  // expected-error @+1 {{expected g * K a multiple of 4 and at most 32, not 6 with tensor_cores}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 3 block_size = 4 branching = 2 scale = 0.5 {tensor_cores}
      : memref<1x16x8x16xbf16>, memref<1x1x3x32xbf16>, memref<1x1x8x6xi32>, memref<1x1x8xi32>
  return
}

// -----

// Heads and features are the kernels' tiling: static, Hq a multiple of Hkv.
// A hand-written walk with a dynamic Hq and d divided by zero in the
// lowering; Hq = 3 over Hkv = 2 was lowered with G = 1.
func.func @f(%q: memref<1x?x8x?xf32>, %p: memref<1x2x3x4xf32>, %c: memref<1x2x8x6xi32>, %n: memref<1x2x8xi32>, %i: index) {
  // expected-error @+1 {{expected a static dim 1 (the kernels' tiling) in queries but got 'memref<1x?x8x?xf32>'}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 3 block_size = 4 branching = 2 scale = 0.5
      : memref<1x?x8x?xf32>, memref<1x2x3x4xf32>, memref<1x2x8x6xi32>, memref<1x2x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x3x8x4xf32>, %p: memref<1x2x3x4xf32>, %c: memref<1x2x8x6xi32>, %n: memref<1x2x8xi32>, %i: index) {
  // expected-error @+1 {{expected Hq (3) to be a multiple of Hkv (2)}}
  pisa.kernel.walk %q, %p, %i, %i outs(%c, %n) topk = 3 block_size = 4 branching = 2 scale = 0.5
      : memref<1x3x8x4xf32>, memref<1x2x3x4xf32>, memref<1x2x8x6xi32>, memref<1x2x8xi32>
  return
}

// -----

func.func @f(%k: memref<?x?x64xf16>, %cu: memref<?xi32>, %p: memref<?x?x64xf32>) {
  // expected-error @+1 {{expected a static dim 1 (the kernels' tiling) in keys but got 'memref<?x?x64xf16>'}}
  pisa.kernel.pyramid_varlen %k, %cu outs(%p) block_size = 4 branching = 2 : memref<?x?x64xf16>, memref<?xi32>, memref<?x?x64xf32>
  return
}

// -----

func.func @f(%q: memref<2x8x1x64xf16>, %k: memref<?x?x1x64xf16>, %p: memref<2x1x127x64xf32>, %n: memref<2xi32>, %t: memref<2x4xi32>, %s: memref<2x1x1x8xi32>) {
  // expected-error @+1 {{expected a static dim 1 (the kernels' tiling) in keys but got 'memref<?x?x1x64xf16>'}}
  pisa.kernel.select_decode %q, %k, %p, %n block_table(%t : memref<2x4xi32>) outs(%s) topk = 8 block_size = 64 branching = 2 scale = 0.125 : memref<2x8x1x64xf16>, memref<?x?x1x64xf16>, memref<2x1x127x64xf32>, memref<2xi32>, memref<2x1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x16xf32>, %c: memref<1x1x20x16xf32>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x3xf32>) {
  // expected-error @+1 {{expected level >= 1 but got 0}}
  pisa.kernel.lse_score %q, %c, %n, %off outs(%u) level = 0 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x16xf32>, memref<1x1x20x16xf32>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x16xf32>, %c: memref<1x1x20x16xf32>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x3xf32>) {
  // expected-error @+1 {{expected a level whose children cover at most 2^31 - 1 keys (C g^(level - 2)) but got level 40}}
  pisa.kernel.lse_score %q, %c, %n, %off outs(%u) level = 40 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x16xf32>, memref<1x1x20x16xf32>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x16xf16>, %c: memref<1x1x20x16xf16>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x3xf32>) {
  // expected-error @+1 {{expected level-2 children (summaries) to be f32 but got 'f16'}}
  pisa.kernel.lse_score %q, %c, %n, %off outs(%u) level = 2 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x16xf16>, memref<1x1x20x16xf16>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x?xf32>, %c: memref<1x1x20x16xf32>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x3xf32>) {
  // expected-error @+1 {{expected a static dim 3 (the kernels' tiling) in queries but got 'memref<1x4x10x?xf32>'}}
  pisa.kernel.lse_score %q, %c, %n, %off outs(%u) level = 1 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x?xf32>, memref<1x1x20x16xf32>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x16xf32>, %c: memref<1x1x20x16xf32>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x4xf32>) {
  // expected-error @+1 {{expected S of scores (4) to match candidates (3)}}
  pisa.kernel.lse_score %q, %c, %n, %off outs(%u) level = 1 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x16xf32>, memref<1x1x20x16xf32>, memref<1x1x10x3xi32>, memref<1x1x10x4xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x16xf32>, %c: memref<1x1x20x8xf32>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x3xf32>) {
  // expected-error @+1 {{expected d of children (8) to match queries (16)}}
  pisa.kernel.lse_score %q, %c, %n, %off outs(%u) level = 1 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x16xf32>, memref<1x1x20x8xf32>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x16xf32>, %c: memref<1x2x20x16xf32>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x3xf32>) {
  // expected-error @+1 {{expected Hkv of candidates (1) to match children (2)}}
  pisa.kernel.lse_score %q, %c, %n, %off outs(%u) level = 1 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x16xf32>, memref<1x2x20x16xf32>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x1x32xf16>, %k: tensor<2x1x64x32xf16>, %p: tensor<2x1x7x32xf32>, %off: index, %from: tensor<2xi32>, %to: tensor<2xi32>, %s: tensor<2x1x1x4xi32>) -> tensor<2x1x1x4xi32> {
  // expected-error @+1 {{expected the buffer form: --pisa-fuse-decode-append makes this op after bufferization}}
  %r = pisa.kernel.append_select_single_stage %q, %k, %p, %off, %k, %from, %to outs(%s) topk = 4 block_size = 16 branching = 2 scale = 0.125 capacity = 64
      : tensor<2x4x1x32xf16>, tensor<2x1x64x32xf16>, tensor<2x1x7x32xf32>, tensor<2x1x64x32xf16>, tensor<2xi32>, tensor<2xi32>, tensor<2x1x1x4xi32> -> tensor<2x1x1x4xi32>
  return %r : tensor<2x1x1x4xi32>
}

// -----

func.func @f(%q: memref<2x4x3x32xf16>, %k: memref<2x1x64x32xf16>, %p: memref<2x1x7x32xf32>, %off: index, %from: memref<2xi32>, %to: memref<2xi32>, %s: memref<2x1x3x4xi32>) {
  // expected-error @+1 {{expected Nq of queries (3) to match a decode step's (1)}}
  pisa.kernel.append_select_single_stage %q, %k, %p, %off, %k, %from, %to outs(%s) topk = 4 block_size = 16 branching = 2 scale = 0.125 capacity = 64
      : memref<2x4x3x32xf16>, memref<2x1x64x32xf16>, memref<2x1x7x32xf32>, memref<2x1x64x32xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x3x4xi32>
  return
}

// -----

func.func @f(%q: memref<2x4x1x32xf16>, %k: memref<2x1x64x32xf16>, %p: memref<2x1x7x32xf32>, %off: index, %from: memref<2xi32>, %to: memref<2xi32>, %s: memref<2x1x1x4xi32>) {
  // expected-error @+1 {{expected Ncap of append_keys (64) to match capacity (128)}}
  pisa.kernel.append_select_single_stage %q, %k, %p, %off, %k, %from, %to outs(%s) topk = 4 block_size = 16 branching = 2 scale = 0.125 capacity = 128
      : memref<2x4x1x32xf16>, memref<2x1x64x32xf16>, memref<2x1x7x32xf32>, memref<2x1x64x32xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x1x4xi32>
  return
}

// -----

func.func @f(%q: memref<2x4x1x48xf16>, %k: memref<2x1x64x48xf16>, %p: memref<2x1x7x48xf32>, %off: index, %from: memref<2xi32>, %to: memref<2xi32>, %s: memref<2x1x1x4xi32>) {
  // expected-error @+1 {{expected d (48) to divide the decode block's 512 threads}}
  pisa.kernel.append_select_single_stage %q, %k, %p, %off, %k, %from, %to outs(%s) topk = 4 block_size = 16 branching = 2 scale = 0.125 capacity = 64
      : memref<2x4x1x48xf16>, memref<2x1x64x48xf16>, memref<2x1x7x48xf32>, memref<2x1x64x48xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x1x4xi32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xbf16>, %l: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dq: memref<1x4x10x64xf16>, %dd: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected grad_queries of element type f32 or 'bf16' but got 'f16'}}
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xbf16>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x32xbf16>, %l: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dq: memref<1x4x10x64xf32>, %dd: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected dv of output (32) to match grad_output (64)}}
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10x32xbf16>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x4x10x64xf32>, memref<1x4x10xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x2x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{expected Hq of delta (2) to match queries (4)}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x2x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x?x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{expected a static dim 1 (the kernels' tiling) in query_index but got 'memref<1x?x1x6xi32>'}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x?x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x4xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{expected K of query_list (4) to match selection (3)}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x4xi32>, memref<1x1x10x128xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x100xf32>) {
  // expected-error @+1 {{expected d + dv of accumulators (100) to match keys and values (128)}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x100xf32>
  return
}

// -----

// dS tiles for a packed batch: its dq comes from the dq pass.
func.func @f(%q: memref<1x10x4x64xbf16>, %k: memref<1x10x1x64xbf16>, %v: memref<1x10x1x64xbf16>, %s: memref<1x10x1x3xi32>, %off: index, %l: memref<1x10x4xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x10x4x64xbf16>, %cq: memref<2xi32>, %ck: memref<2xi32>, %dk: memref<1x10x1x64xf32>, %dv: memref<1x10x1x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>, %ds: memref<1x1x10x384xbf16>) {
  // expected-error @+1 {{stores dS tiles (scores) for a batched backward only, not with cu_seqlens}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do cu_seqlens(%cq, %ck : memref<2xi32>, memref<2xi32>) outs(%dk, %dv, %index, %list, %acc scores %ds) block_size = 32 scale = 0.125 {token_major} : memref<1x10x4x64xbf16>, memref<1x10x1x64xbf16>, memref<1x10x1x64xbf16>, memref<1x10x1x3xi32>, memref<1x10x4xf32>, memref<1x4x10xf32>, memref<1x10x4x64xbf16>, memref<1x10x1x64xf32>, memref<1x10x1x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>, scores memref<1x1x10x384xbf16>
  return
}

// -----

// scores: [B, Hkv, Nq, K G C] = 3 x 4 x 32 = 384, not 256.
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>, %ds: memref<1x1x10x256xbf16>) {
  // expected-error @+1 {{expected K G C of scores (256) to match the selection's tiles (384)}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc scores %ds) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>, scores memref<1x1x10x256xbf16>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>, %ds: memref<1x1x10x384xf16>) {
  // expected-error @+1 {{expected scores of the queries' element type but got 'memref<1x1x10x384xf16>'}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc scores %ds) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>, scores memref<1x1x10x384xf16>
  return
}

// -----

func.func @f(%o: memref<1x4x10x64xbf16>, %do: memref<1x4x10x32xbf16>, %dd: memref<1x4x10xf32>) {
  // expected-error @+1 {{expected dv of grad_output (32) to match output (64)}}
  pisa.kernel.sparse_attention_grad_delta %o, %do outs(%dd) : memref<1x4x10x64xbf16>, memref<1x4x10x32xbf16>, memref<1x4x10xf32>
  return
}

// -----

func.func @f(%o: memref<1x4x10x64xbf16>, %do: memref<1x4x10x64xbf16>, %dd: memref<1x4x9xf32>) {
  // expected-error @+1 {{expected Nq of delta (9) to match output (10)}}
  pisa.kernel.sparse_attention_grad_delta %o, %do outs(%dd) : memref<1x4x10x64xbf16>, memref<1x4x10x64xbf16>, memref<1x4x9xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %ds: memref<1x1x9x384xbf16>, %dq: memref<1x4x10x64xf32>) {
  // expected-error @+1 {{expected Nq of scores (9) to match queries (10)}}
  pisa.kernel.sparse_attention_grad_queries_from_scores %q, %k, %s, %off, %ds outs(%dq) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x1x9x384xbf16>, memref<1x4x10x64xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x32xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %ds: memref<1x1x10x384xbf16>, %dq: memref<1x4x10x64xf32>) {
  // expected-error @+1 {{expected d of keys (32) to match queries (64)}}
  pisa.kernel.sparse_attention_grad_queries_from_scores %q, %k, %s, %off, %ds outs(%dq) block_size = 32 scale = 0.125 : memref<1x4x10x64xbf16>, memref<1x1x10x32xbf16>, memref<1x1x10x3xi32>, memref<1x1x10x384xbf16>, memref<1x4x10x64xf32>
  return
}
