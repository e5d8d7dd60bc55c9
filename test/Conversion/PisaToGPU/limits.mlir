// Shapes the GPU kernels cannot take are errors that name the limit, found
// before any IR is built.
// RUN: pisa-opt %s --split-input-file --pisa-decompose-to-kernels --verify-diagnostics

func.func @head_dim(%k: tensor<1x1x100x2048xf32>) -> tensor<1x1x3x2048xf32> {
  // expected-error @+1 {{has head dim d = 2048 above the GPU limit of 1024 (one thread per feature)}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x1x100x2048xf32> -> tensor<1x1x3x2048xf32>
  return %p : tensor<1x1x3x2048xf32>
}

// -----

func.func @candidates(%q: tensor<1x2x100x32xf32>, %k: tensor<1x1x100x32xf32>, %p: tensor<1x1x3x32xf32>) -> tensor<1x1x100x300xi32> {
  %off = arith.constant 0 : index
  // expected-error @+1 {{keeps g * K = 600 candidates per query, above the GPU limit of 512 (per-thread candidate lists)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 300 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x2x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x3x32xf32> -> tensor<1x1x100x300xi32>
  return %s : tensor<1x1x100x300xi32>
}

// -----

func.func @threads(%q: tensor<1x32x100x32xf32>, %k: tensor<1x1x100x32xf32>, %p: tensor<1x1x3x32xf32>) -> tensor<1x1x100x8xi32> {
  %off = arith.constant 0 : index
  // expected-error @+1 {{has q_tile * G = 40 * 32 above the GPU limit of 1024 threads per stage-2 block}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 40, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x32x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x3x32xf32> -> tensor<1x1x100x8xi32>
  return %s : tensor<1x1x100x8xi32>
}

// -----

func.func @too_many_keys(%q: tensor<1x1x1x32xf32>, %k: tensor<1x1x2147483648x32xf32>, %p: tensor<1x1x67108863x32xf32>, %off: index) -> tensor<1x1x1x8xi32> {
  // expected-error @+1 {{has N = 2147483648 above the GPU limit of 2147483647 (32-bit leaf indices)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<single_stage, q_tile = 1, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x1x1x32xf32>, tensor<1x1x2147483648x32xf32>, tensor<1x1x67108863x32xf32> -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// -----

func.func @attention_f32(%q: tensor<1x4x10x32xf32>, %k: tensor<1x2x10x32xf32>, %v: tensor<1x2x10x32xf32>, %s: tensor<1x2x10x3xi32>, %off: index) -> tensor<1x4x10x32xf32> {
  // expected-error @+1 {{has f32 inputs: the GPU kernel takes f16 or bf16 (tensor cores; tf32 would round f32 inputs), pisa-cpu-pipeline lowers f32}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<1x4x10x32xf32>, tensor<1x2x10x32xf32>, tensor<1x2x10x32xf32>, tensor<1x2x10x3xi32> -> tensor<1x4x10x32xf32>, tensor<1x4x10xf32>
  return %o : tensor<1x4x10x32xf32>
}

// -----

func.func @attention_block(%q: tensor<1x64x10x32xf16>, %k: tensor<1x2x10x32xf16>, %v: tensor<1x2x10x32xf16>, %s: tensor<1x2x10x3xi32>, %off: index) -> tensor<1x64x10x32xf16> {
  // expected-error @+1 {{has block size C = 16: the GPU kernel takes a multiple of 32 up to 128 (four warps split a block's keys)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 16 : tensor<1x64x10x32xf16>, tensor<1x2x10x32xf16>, tensor<1x2x10x32xf16>, tensor<1x2x10x3xi32> -> tensor<1x64x10x32xf16>, tensor<1x64x10xf32>
  return %o : tensor<1x64x10x32xf16>
}

// -----

func.func @attention_head_dim(%q: tensor<1x4x10x40xbf16>, %k: tensor<1x2x10x40xbf16>, %v: tensor<1x2x10x32xbf16>, %s: tensor<1x2x10x3xi32>, %off: index) -> tensor<1x4x10x32xbf16> {
  // expected-error @+1 {{has head dim d = 40: the GPU kernel takes a multiple of 16 from 16 to 256 (tensor-core k-steps)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<1x4x10x40xbf16>, tensor<1x2x10x40xbf16>, tensor<1x2x10x32xbf16>, tensor<1x2x10x3xi32> -> tensor<1x4x10x32xbf16>, tensor<1x4x10xf32>
  return %o : tensor<1x4x10x32xbf16>
}

// -----

func.func @attention_value_dim(%q: tensor<1x4x10x32xbf16>, %k: tensor<1x2x10x32xbf16>, %v: tensor<1x2x10x48xbf16>, %s: tensor<1x2x10x3xi32>, %off: index) -> tensor<1x4x10x48xbf16> {
  // expected-error @+1 {{has value dim dv = 48: the GPU kernel takes a multiple of 32 from 32 to 256 (four warps split dv)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<1x4x10x32xbf16>, tensor<1x2x10x32xbf16>, tensor<1x2x10x48xbf16>, tensor<1x2x10x3xi32> -> tensor<1x4x10x48xbf16>, tensor<1x4x10xf32>
  return %o : tensor<1x4x10x48xbf16>
}

// -----

func.func @attention_group(%q: tensor<1x65x10x32xbf16>, %k: tensor<1x1x10x32xbf16>, %v: tensor<1x1x10x32xbf16>, %s: tensor<1x1x10x3xi32>, %off: index) -> tensor<1x65x10x32xbf16> {
  // expected-error @+1 {{has G = 65 query heads per KV head, above the GPU limit of 64 (a block's score rows)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<1x65x10x32xbf16>, tensor<1x1x10x32xbf16>, tensor<1x1x10x32xbf16>, tensor<1x1x10x3xi32> -> tensor<1x65x10x32xbf16>, tensor<1x65x10xf32>
  return %o : tensor<1x65x10x32xbf16>
}

// -----

func.func @attention_shared(%q: tensor<1x64x10x256xbf16>, %k: tensor<1x1x10x256xbf16>, %v: tensor<1x1x10x256xbf16>, %s: tensor<1x1x10x3xi32>, %off: index) -> tensor<1x64x10x256xbf16> {
  // expected-error @+1 {{needs 286736 bytes of shared memory per block, above the 232448 an sm_90 block may use}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 128 : tensor<1x64x10x256xbf16>, tensor<1x1x10x256xbf16>, tensor<1x1x10x256xbf16>, tensor<1x1x10x3xi32> -> tensor<1x64x10x256xbf16>, tensor<1x64x10xf32>
  return %o : tensor<1x64x10x256xbf16>
}

// -----

func.func @attention_groups(%q: tensor<65536x4x10x32xbf16>, %k: tensor<65536x1x10x32xbf16>, %v: tensor<65536x1x10x32xbf16>, %s: tensor<65536x1x10x3xi32>, %off: index) -> tensor<65536x4x10x32xbf16> {
  // expected-error @+1 {{has B * Hkv = 65536 above the GPU limit of 65535 (grid y)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<65536x4x10x32xbf16>, tensor<65536x1x10x32xbf16>, tensor<65536x1x10x32xbf16>, tensor<65536x1x10x3xi32> -> tensor<65536x4x10x32xbf16>, tensor<65536x4x10xf32>
  return %o : tensor<65536x4x10x32xbf16>
}

// -----

func.func @cache(%q: tensor<1x16x1x64xbf16>, %k: tensor<1x1x200x64xbf16>, %p: tensor<1x1x127x64xf32>, %off: index) -> tensor<1x1x1x8xi32> {
  // expected-error @+1 {{reads a pyramid cache (capacity = 4096) with the two-stage schedule: the GPU reads caches with the single-stage kernel only, for now (give #pisa.schedule<single_stage, ...>)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 capacity = 4096
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x16x1x64xbf16>, tensor<1x1x200x64xbf16>, tensor<1x1x127x64xf32> -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// -----

func.func @varlen(%q: tensor<?x4x16xf16>, %k: tensor<?x2x16xf16>, %p: tensor<?x2x16xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) -> tensor<?x2x300xi32> {
  // expected-error @+1 {{keeps g * K = 600 candidates per query, above the GPU limit of 512 (per-thread candidate lists)}}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 300 block_size = 8 branching = 2
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x300xi32>
  return %s : tensor<?x2x300xi32>
}

// -----

func.func @append(%k: tensor<1x1x200x2048xf32>, %p: tensor<1x1x7x2048xf32>, %from: tensor<1xi32>, %to: tensor<1xi32>) -> tensor<1x1x7x2048xf32> {
  // expected-error @+1 {{has head dim d = 2048 above the GPU limit of 1024 (one thread per feature)}}
  %r = pisa.pyramid_append %k, %p, %from, %to block_size = 64 branching = 2 : tensor<1x1x200x2048xf32>, tensor<1x1x7x2048xf32>, tensor<1xi32>, tensor<1xi32> -> tensor<1x1x7x2048xf32>
  return %r : tensor<1x1x7x2048xf32>
}

// -----

func.func @paged(%q: tensor<40000x4x1x32xf16>, %pages: tensor<64x16x2x32xf16>, %p: tensor<40000x2x63x32xf32>, %n: tensor<40000xi32>, %bt: tensor<40000x128xi32>) -> tensor<40000x2x1x4xi32> {
  // A paged cache's B * Hkv comes from the cache, not the page pool.
  // expected-error @+1 {{has B * Hkv = 80000 above the GPU limit of 65535 (grid y)}}
  %s = pisa.decode_select %q, %pages, %p seq_lens(%n) block_table(%bt : tensor<40000x128xi32>) topk = 4 block_size = 64 branching = 2 : tensor<40000x4x1x32xf16>, tensor<64x16x2x32xf16>, tensor<40000x2x63x32xf32>, tensor<40000xi32> -> tensor<40000x2x1x4xi32>
  return %s : tensor<40000x2x1x4xi32>
}

// -----

// The message names the factors of a product past a limit.
func.func @large_q_tile(%q: tensor<1x16x4096x128xf32>, %k: tensor<1x1x4096x128xf32>, %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  // expected-error @+1 {{has q_tile * G = 1024 * 16 above the GPU limit of 1024 threads per stage-2 block}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 1024, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xf32>, tensor<1x1x4096x128xf32>, tensor<1x1x127x128xf32> -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

// -----

// A q_tile past 1024 is refused by the schedule attribute itself.
func.func @huge_q_tile(%q: tensor<1x16x4096x128xf32>, %k: tensor<1x1x4096x128xf32>, %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      // expected-error @+1 {{expected q_tile in [1, 1024] but got 9223372036854775807}}
      {schedule = #pisa.schedule<two_stage, q_tile = 9223372036854775807, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xf32>, tensor<1x1x4096x128xf32>, tensor<1x1x127x128xf32> -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

// -----

// Empty value rows (the fuzzer's kind of shape): a limit, not a crash.
func.func @attention_no_values(%q: tensor<1x4x10x16xbf16>, %k: tensor<1x2x10x16xbf16>, %v: tensor<1x2x10x0xbf16>, %s: tensor<1x2x10x3xi32>, %off: index) -> tensor<1x4x10x0xbf16> {
  // expected-error @+1 {{has value dim dv = 0: the GPU kernel takes a multiple of 32 from 32 to 256 (four warps split dv)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<1x4x10x16xbf16>, tensor<1x2x10x16xbf16>, tensor<1x2x10x0xbf16>, tensor<1x2x10x3xi32> -> tensor<1x4x10x0xbf16>, tensor<1x4x10xf32>
  return %o : tensor<1x4x10x0xbf16>
}

// -----

func.func @attention_no_features(%q: tensor<1x4x10x0xbf16>, %k: tensor<1x2x10x0xbf16>, %v: tensor<1x2x10x32xbf16>, %s: tensor<1x2x10x3xi32>, %off: index) -> tensor<1x4x10x32xbf16> {
  // expected-error @+1 {{has head dim d = 0: the GPU kernel takes a multiple of 16 from 16 to 256 (tensor-core k-steps)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<1x4x10x0xbf16>, tensor<1x2x10x0xbf16>, tensor<1x2x10x32xbf16>, tensor<1x2x10x3xi32> -> tensor<1x4x10x32xbf16>, tensor<1x4x10xf32>
  return %o : tensor<1x4x10x32xbf16>
}

// -----

// A selection row of any static K: bounded before its shared list is sized.
func.func @attention_huge_k(%q: tensor<1x4x10x32xbf16>, %k: tensor<1x2x10x32xbf16>, %v: tensor<1x2x10x32xbf16>, %s: tensor<1x2x10x4611686018427387904xi32>, %off: index) -> tensor<1x4x10x32xbf16> {
  // expected-error @+1 {{selects K = 4611686018427387904 blocks per query, above the GPU limit of 4096 (the block list in shared memory)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 : tensor<1x4x10x32xbf16>, tensor<1x2x10x32xbf16>, tensor<1x2x10x32xbf16>, tensor<1x2x10x4611686018427387904xi32> -> tensor<1x4x10x32xbf16>, tensor<1x4x10xf32>
  return %o : tensor<1x4x10x32xbf16>
}

// -----

func.func @score_groups(%q: tensor<70000x2x4x32xf32>, %k: tensor<70000x1x9x32xf32>, %n: tensor<70000x1x4x3xi32>) -> tensor<70000x1x4x3xf32> {
  %off = arith.constant 0 : index
  // expected-error @+1 {{has B * Hkv = 70000 above the GPU limit of 65535 (grid y)}}
  %u = pisa.lse_score %q, %k, %n, %off level = 1 block_size = 8 branching = 2
      : tensor<70000x2x4x32xf32>, tensor<70000x1x9x32xf32>, tensor<70000x1x4x3xi32> -> tensor<70000x1x4x3xf32>
  return %u : tensor<70000x1x4x3xf32>
}

// -----

func.func @score_queries(%q: tensor<1x2x2147483648x32xf32>, %k: tensor<1x1x9x32xf32>, %n: tensor<1x1x2147483648x3xi32>) -> tensor<1x1x2147483648x3xf32> {
  %off = arith.constant 0 : index
  // expected-error @+1 {{has Nq = 2147483648 above the GPU limit of 2147483647 (grid x)}}
  %u = pisa.lse_score %q, %k, %n, %off level = 1 block_size = 8 branching = 2
      : tensor<1x2x2147483648x32xf32>, tensor<1x1x9x32xf32>, tensor<1x1x2147483648x3xi32> -> tensor<1x1x2147483648x3xf32>
  return %u : tensor<1x1x2147483648x3xf32>
}

// -----

func.func @score_offset(%q: tensor<1x2x4x32xf32>, %k: tensor<1x1x9x32xf32>, %n: tensor<1x1x4x3xi32>) -> tensor<1x1x4x3xf32> {
  %off = arith.constant 2147483648 : index
  // expected-error @+1 {{has query_offset = 2147483648 above the GPU limit of 2147483647 (i32 positions)}}
  %u = pisa.lse_score %q, %k, %n, %off level = 1 block_size = 8 branching = 2
      : tensor<1x2x4x32xf32>, tensor<1x1x9x32xf32>, tensor<1x1x4x3xi32> -> tensor<1x1x4x3xf32>
  return %u : tensor<1x1x4x3xf32>
}

// -----

// The backward's GPU kernels split dq's and dk's columns over four warps:
// d = 16, which the forward takes, is refused by the backward.
func.func @attend_grad_d16(%q: tensor<1x4x64x16xbf16>, %k: tensor<1x2x64x16xbf16>, %v: tensor<1x2x64x32xbf16>, %s: tensor<1x2x64x3xi32>, %o: tensor<1x4x64x32xbf16>, %l: tensor<1x4x64xf32>, %do: tensor<1x4x64x32xbf16>, %off: index) {
  // expected-error @+1 {{has head dim d = 16: the GPU backward takes a multiple of 32 from 32 to 256 (four warps split dq's and dk's columns)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 32 : tensor<1x4x64x16xbf16>, tensor<1x2x64x16xbf16>, tensor<1x2x64x32xbf16>, tensor<1x2x64x3xi32>, tensor<1x4x64x32xbf16>, tensor<1x4x64xf32>, tensor<1x4x64x32xbf16> -> tensor<1x4x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x32xf32>
  return
}

// -----

// G = 64, d = dv = 256, C = 128: the key kernel's tiles (the block's keys,
// values and f32 dk, dv accumulators) do not fit a block's shared memory.
func.func @attend_grad_shared(%q: tensor<1x64x64x256xbf16>, %k: tensor<1x1x64x256xbf16>, %v: tensor<1x1x64x256xbf16>, %s: tensor<1x1x64x3xi32>, %o: tensor<1x64x64x256xbf16>, %l: tensor<1x64x64xf32>, %do: tensor<1x64x64x256xbf16>, %off: index) {
  // expected-error @+1 {{bytes of shared memory per block for the backward, above the 232448 an sm_90 block may use}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 128 : tensor<1x64x64x256xbf16>, tensor<1x1x64x256xbf16>, tensor<1x1x64x256xbf16>, tensor<1x1x64x3xi32>, tensor<1x64x64x256xbf16>, tensor<1x64x64xf32>, tensor<1x64x64x256xbf16> -> tensor<1x64x64x256xf32>, tensor<1x1x64x256xf32>, tensor<1x1x64x256xf32>
  return
}

// -----

// The packed backward has the batched backward's limits (d here).
func.func @attend_grad_varlen(%q: tensor<?x4x16xbf16>, %k: tensor<?x2x16xbf16>, %v: tensor<?x2x32xbf16>, %s: tensor<?x2x3xi32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %o: tensor<?x4x32xbf16>, %l: tensor<?x4xf32>, %do: tensor<?x4x32xbf16>) {
  // expected-error @+1 {{has head dim d = 16: the GPU backward takes a multiple of 32 from 32 to 256 (four warps split dq's and dk's columns)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) out(%o, %l) grad(%do) block_size = 32 : tensor<?x4x16xbf16>, tensor<?x2x16xbf16>, tensor<?x2x32xbf16>, tensor<?x2x3xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x4x32xbf16>, tensor<?x4xf32>, tensor<?x4x32xbf16> -> tensor<?x4x16xf32>, tensor<?x2x16xf32>, tensor<?x2x32xf32>
  return
}

// -----

// Packed sparse attention has the batched kernels' limits (C = 16 with
// G = 32 here).
func.func @attend_varlen(%q: tensor<?x64x32xbf16>, %k: tensor<?x2x32xbf16>, %v: tensor<?x2x32xbf16>, %s: tensor<?x2x3xi32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) {
  // expected-error @+1 {{has block size C = 16: the GPU kernel takes a multiple of 32 up to 128 (four warps split a block's keys), or 16 where the register kernel takes the sizes (G <= 16, d a multiple of 32 up to 128, dv of 8 up to 128)}}
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 16 : tensor<?x64x32xbf16>, tensor<?x2x32xbf16>, tensor<?x2x32xbf16>, tensor<?x2x3xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x64x32xbf16>, tensor<?x64xf32>
  return
}
