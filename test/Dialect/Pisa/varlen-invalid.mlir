// RUN: pisa-opt %s -split-input-file -verify-diagnostics

// One case per verifier branch of the varlen ops.

func.func @f(%k: tensor<1000x2x64xf16>, %cu: tensor<4xi32>) {
  // expected-error @+1 {{expected the varlen pyramid to have 2 floor(Tk / C) + 32 B = 126 rows for Tk = 1000, B = 3, C = 64 but got 127}}
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cu) block_size = 64 branching = 2 : tensor<1000x2x64xf16>, tensor<4xi32> -> tensor<127x2x64xf32>
  return
}

// -----

func.func @f(%k: tensor<?x2x64xf16>, %cu: tensor<0xi32>) {
  // expected-error @+1 {{expected cu_seqlens to have B + 1 >= 1 entries but got 0}}
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cu) block_size = 64 branching = 2 : tensor<?x2x64xf16>, tensor<0xi32> -> tensor<?x2x64xf32>
  return
}

// -----

func.func @f(%k: tensor<?x?x64xf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{expected a static Hkv (dim 1) in keys}}
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cu) block_size = 64 branching = 2 : tensor<?x?x64xf16>, tensor<?xi32> -> tensor<?x2x64xf32>
  return
}

// -----

func.func @f(%k: tensor<?x2x64xf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{expected d of pyramid (32) to match keys (64)}}
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cu) block_size = 64 branching = 2 : tensor<?x2x64xf16>, tensor<?xi32> -> tensor<?x2x32xf32>
  return
}

// -----

func.func @f(%k: tensor<?x2x64xf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 0}}
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cu) block_size = 0 branching = 2 : tensor<?x2x64xf16>, tensor<?xi32> -> tensor<?x2x64xf32>
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf16>, %p: tensor<?x2x64xf32>, %cuq: tensor<3xi32>, %cuk: tensor<4xi32>) {
  // expected-error @+1 {{expected B + 1 of cu_seqlens_q (3) to match cu_seqlens_k (4)}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2
      : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<3xi32>, tensor<4xi32> -> tensor<?x2x8xi32>
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf16>, %k: tensor<?x3x64xf16>, %p: tensor<?x3x64xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) {
  // expected-error @+1 {{expected Hq (8) to be a multiple of Hkv (3)}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2
      : tensor<?x8x64xf16>, tensor<?x3x64xf16>, tensor<?x3x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x3x8xi32>
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf32>, %p: tensor<?x2x64xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) {
  // expected-error @+1 {{expected queries and keys to have the same element type but got 'f16' and 'f32'}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2
      : tensor<?x8x64xf16>, tensor<?x2x64xf32>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x8xi32>
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf16>, %p: tensor<?x2x64xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) {
  // expected-error @+1 {{expected topk K in [3, 4096] (room for the forced blocks) but got 2}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 2 block_size = 64 branching = 2
      : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x2xi32>
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf16>, %p: tensor<?x2x64xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) {
  // expected-error @+1 {{expected K of selection (4) to match topk (8)}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2
      : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x4xi32>
  return
}

// -----

func.func @f(%q: tensor<10x8x64xf16>, %k: tensor<?x2x64xf16>, %p: tensor<?x2x64xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) {
  // expected-error @+1 {{expected Tq of selection (11) to match queries (10)}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2
      : tensor<10x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<11x2x8xi32>
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf16>, %p: tensor<?x2x64xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) {
  // expected-error @+1 {{expected a finite positive scale but got -1.000000e+00}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2 scale = -1.0
      : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x8xi32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<11x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) {
  // expected-error @+1 {{expected Tk of values (11) to match keys (12)}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<11x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<10x4x8xf16>, tensor<10x4xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf32>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) {
  // expected-error @+1 {{expected queries, keys, values and output to have one element type but got 'f16', 'f16', 'f32' and 'f16'}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf32>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<10x4x8xf16>, tensor<10x4xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<9x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) {
  // expected-error @+1 {{expected Tq of selection (9) to match queries (10)}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<9x2x3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<10x4x8xf16>, tensor<10x4xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<4xi32>, %ck: tensor<3xi32>) {
  // expected-error @+1 {{expected B + 1 of cu_seqlens_q (4) to match cu_seqlens_k (3)}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<4xi32>, tensor<3xi32> -> tensor<10x4x8xf16>, tensor<10x4xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<0xi32>, %ck: tensor<0xi32>) {
  // expected-error @+1 {{expected cu_seqlens_q to have B + 1 >= 1 entries but got 0}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<0xi32>, tensor<0xi32> -> tensor<10x4x8xf16>, tensor<10x4xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) {
  // expected-error @+1 {{expected Hq of lse (2) to match queries (4)}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<10x4x8xf16>, tensor<10x2xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) {
  // expected-error @+1 {{expected dv of output (16) to match values (8)}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<10x4x16xf16>, tensor<10x4xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) {
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 0}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 0 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<10x4x8xf16>, tensor<10x4xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf16>, %l: tensor<10x4xf32>, %do: tensor<9x4x8xf16>) {
  // expected-error @+1 {{expected dimension 0 of grad_output (9) to match output (10)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) out(%o, %l) grad(%do) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<10x4x8xf16>, tensor<10x4xf32>, tensor<9x4x8xf16> -> tensor<10x4x16xf32>, tensor<12x2x16xf32>, tensor<12x2x8xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf16>, %l: tensor<10x4xf32>, %do: tensor<10x4x8xf32>) {
  // expected-error @+1 {{expected grad_output of the output's element type 'f16' but got 'f32'}}
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) out(%o, %l) grad(%do) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<10x4x8xf16>, tensor<10x4xf32>, tensor<10x4x8xf32> -> tensor<10x4x16xf32>, tensor<12x2x16xf32>, tensor<12x2x8xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf16>, %l: tensor<10x4xf32>, %do: tensor<10x4x8xf16>) {
  // expected-error @+1 {{expected dimension 0 of grad_keys (10) to match keys (12)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) out(%o, %l) grad(%do) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<10x4x8xf16>, tensor<10x4xf32>, tensor<10x4x8xf16> -> tensor<10x4x16xf32>, tensor<10x2x16xf32>, tensor<12x2x8xf32>
  return
}

// -----

func.func @f(%q: tensor<10x4x16xf16>, %k: tensor<12x2x16xf16>, %v: tensor<12x2x8xf16>, %s: tensor<10x2x3xi32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf16>, %l: tensor<10x4xf32>, %do: tensor<10x4x8xf16>) {
  // expected-error @+1 {{expected grad_values of element type f32 or 'f16' (that of values) but got 'bf16'}}
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) out(%o, %l) grad(%do) block_size = 4 : tensor<10x4x16xf16>, tensor<12x2x16xf16>, tensor<12x2x8xf16>, tensor<10x2x3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<10x4x8xf16>, tensor<10x4xf32>, tensor<10x4x8xf16> -> tensor<10x4x16xf32>, tensor<12x2x16xf32>, tensor<12x2x8xbf16>
  return
}
