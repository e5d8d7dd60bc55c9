// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels=chip=sm_90 -verify-diagnostics

// A hand-written #pisa.kernel_config the op's kernels cannot follow is an
// error naming the field: one case per rule.

// The tiles of the paper's setting (64 rows, bf16, d 128, C 64) on sm_90.
func.func @f(%q: memref<1x16x512x128xbf16>, %k: memref<1x1x512x128xbf16>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config variant = wgmma is not supported here: wgmma needs sm_90a}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = wgmma>}
      : memref<1x16x512x128xbf16>, memref<1x1x512x128xbf16>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}

// -----

func.func @f(%q: memref<1x16x512x128xbf16>, %k: memref<1x1x512x128xbf16>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config threads = 256 does not hold: with the other fields it is 64}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 256>}
      : memref<1x16x512x128xbf16>, memref<1x1x512x128xbf16>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}

// -----

func.func @f(%q: memref<1x16x512x128xbf16>, %k: memref<1x1x512x128xbf16>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config tiles_per_block = 4 is not supported here: the SIMT scorer takes one tile per block}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, tiles_per_block = 4>}
      : memref<1x16x512x128xbf16>, memref<1x1x512x128xbf16>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}

// -----

func.func @f(%q: memref<1x16x512x128xbf16>, %k: memref<1x1x512x128xbf16>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config rows_per_warp = 16 does not apply to this op's kernel}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, rows_per_warp = 16>}
      : memref<1x16x512x128xbf16>, memref<1x1x512x128xbf16>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}

// -----

// Q_tile 4 x G 4 = 16 rows: one warp of 16.
func.func @f(%q: memref<1x4x512x128xbf16>, %k: memref<1x1x512x128xbf16>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config rows_per_warp = 32 with the shared epilogue is not supported here: Q_tile x G (16) is not a multiple of 32 rows per warp}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync, rows_per_warp = 32>}
      : memref<1x4x512x128xbf16>, memref<1x1x512x128xbf16>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x512x128xbf16>, %k: memref<1x1x512x128xbf16>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config epilogue = registers with 16 rows per warp is not supported here: the register epilogue needs G (4) a multiple of 16 dividing the rows per warp}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = registers>}
      : memref<1x4x512x128xbf16>, memref<1x1x512x128xbf16>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}

// -----

// f32 tiles take no tensor cores.
func.func @f(%q: memref<1x16x512x128xf32>, %k: memref<1x1x512x128xf32>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config variant = mma_sync is not supported here: mma_sync scores f16 or bf16 keys}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync>}
      : memref<1x16x512x128xf32>, memref<1x1x512x128xf32>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}

// -----

// The walk has one design per tensor_cores: only its occupancy is free.
func.func @f(%q: memref<1x16x512x128xbf16>, %planes: memref<1x1x15x256xbf16>, %off: index, %n: index,
             %c: memref<1x1x512x16xi32>, %m: memref<1x1x512xi32>) {
  // expected-error @+1 {{kernel_config variant = simt is not supported here: this op's kernel runs on mma_sync}}
  pisa.kernel.walk %q, %planes, %off, %n outs(%c, %m) topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt>, tensor_cores}
      : memref<1x16x512x128xbf16>, memref<1x1x15x256xbf16>, memref<1x1x512x16xi32>, memref<1x1x512xi32>
  return
}

// -----

// g * K = 40 > 32: no candidate per lane.
func.func @f(%q: memref<1x16x1x128xbf16>, %k: memref<1x1x4096x128xbf16>,
             %p: memref<1x1x127x128xf32>, %off: index, %out: memref<1x1x1x20xi32>) {
  // expected-error @+1 {{kernel_config walk = lanes is not supported here: a candidate per lane needs g * K (40) <= 32}}
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out)
      topk = 20 block_size = 64 branching = 2 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, walk = lanes>}
      : memref<1x16x1x128xbf16>, memref<1x1x4096x128xbf16>, memref<1x1x127x128xf32>, memref<1x1x1x20xi32>
  return
}

// -----

func.func @f(%q: memref<1x16x1x128xbf16>, %k: memref<1x1x4096x128xbf16>,
             %p: memref<1x1x127x128xf32>, %off: index, %out: memref<1x1x1x8xi32>) {
  // expected-error @+1 {{kernel_config warps_per_query = 8 is not supported here: a query takes 1 or 16 warps}}
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out)
      topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, warps_per_query = 8>}
      : memref<1x16x1x128xbf16>, memref<1x1x4096x128xbf16>, memref<1x1x127x128xf32>, memref<1x1x1x8xi32>
  return
}

// -----

func.func @f(%q: memref<1x16x1x128xbf16>, %k: memref<1x1x4096x128xbf16>,
             %p: memref<1x1x127x128xf32>, %off: index, %out: memref<1x1x1x8xi32>) {
  // expected-error @+1 {{kernel_config level_variant = mma_sync is not supported here: tensor-core levels need tensor-core leaves (variant mma_sync), bf16 queries and fanout 2}}
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out)
      topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, level_variant = mma_sync>}
      : memref<1x16x1x128xbf16>, memref<1x1x4096x128xbf16>, memref<1x1x127x128xf32>, memref<1x1x1x8xi32>
  return
}

// -----

// A warp per query (many queries) has no lane walk to score leaves with.
func.func @f(%q: memref<1x16x64x128xbf16>, %k: memref<1x1x4096x128xbf16>,
             %p: memref<1x1x127x128xf32>, %off: index, %out: memref<1x1x64x8xi32>) {
  // expected-error @+1 {{kernel_config variant = mma_sync is not supported here: only the walk with a candidate per lane scores its leaves on tensor cores}}
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out)
      topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync>}
      : memref<1x16x64x128xbf16>, memref<1x1x4096x128xbf16>, memref<1x1x127x128xf32>, memref<1x1x64x8xi32>
  return
}

// -----

// G = 32 does not fit the register attention kernel.
func.func @f(%q: memref<1x32x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x32x10x64xf16>, %l: memref<1x32x10xf32>) {
  // expected-error @+1 {{kernel_config epilogue = registers is not supported here: the register kernel needs G <= 16}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = registers>}
      : memref<1x32x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x32x10x64xf16>, memref<1x32x10xf32>
  return
}

// -----

// G = 32 does not fit the query-tile attention kernel either.
func.func @f(%q: memref<1x32x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x32x10x64xf16>, %l: memref<1x32x10xf32>) {
  // expected-error @+1 {{kernel_config union_queries = 4 is not supported here: the query-tile kernel needs G <= 16, d a multiple of 16 up to 128, dv a multiple of 8 up to 128, C of 16, 32 or 64 and 16-bit inputs}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 4>}
      : memref<1x32x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x32x10x64xf16>, memref<1x32x10xf32>
  return
}

// -----

// The query-tile kernel finishes its rows in registers.
func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{kernel_config epilogue = shared is not supported here: the query-tile kernel finishes its rows in registers}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared, union_queries = 4>}
      : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

// A query tile takes at most 8 queries: a warp each keeps its rows' state in
// up to 255 registers.
func.func @f(%q: memref<1x16x64x128xbf16>, %k: memref<1x1x64x128xbf16>, %v: memref<1x1x64x128xbf16>, %s: memref<1x1x64x8xi32>, %off: index, %o: memref<1x16x64x128xbf16>, %l: memref<1x16x64xf32>) {
  // expected-error @+1 {{kernel_config union_queries = 16 is not supported here: a query tile takes at most 7 queries (a warp each and one that copies, up to 255 registers a lane: 8 warps fill an SM's 65,536 registers)}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 16>}
      : memref<1x16x64x128xbf16>, memref<1x1x64x128xbf16>, memref<1x1x64x128xbf16>, memref<1x1x64x8xi32>, memref<1x16x64x128xbf16>, memref<1x16x64xf32>
  return
}

// -----

// Seven queries of d = dv = 128 with K = 2048: their lists exceed a block's
// shared memory.
func.func @f(%q: memref<1x16x64x128xbf16>, %k: memref<1x1x64x128xbf16>, %v: memref<1x1x64x128xbf16>, %s: memref<1x1x64x2048xi32>, %off: index, %o: memref<1x16x64x128xbf16>, %l: memref<1x16x64xf32>) {
  // expected-error @+1 {{kernel_config union_queries = 7 is not supported here: its tiles take 272176 bytes of shared memory, more than a block's 232448}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 7>}
      : memref<1x16x64x128xbf16>, memref<1x1x64x128xbf16>, memref<1x1x64x128xbf16>, memref<1x1x64x2048xi32>, memref<1x16x64x128xbf16>, memref<1x16x64xf32>
  return
}

// -----

// union_queries is sparse attention's field alone.
func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{kernel_config union_queries = 4 does not apply to this op's kernel}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      {kernel_config = #pisa.kernel_config<variant = simt, union_queries = 4>}
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{kernel_config variant = mma_sync is not supported here: this op's kernel runs on simt}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      {kernel_config = #pisa.kernel_config<variant = mma_sync>}
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

// The pyramid's kernels take no occupancy hint.
func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{kernel_config min_blocks_per_sm = 4 does not apply to this op's kernel}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      {kernel_config = #pisa.kernel_config<variant = simt, min_blocks_per_sm = 4>}
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

// expected-error @+1 {{unknown kernel_config field 'warps' (expected variant, threads, warps_per_query, walk, level_variant, rows_per_warp, tiles_per_block, epilogue, union_queries, min_blocks_per_sm or prefetch_ahead)}}
#bad = #pisa.kernel_config<variant = simt, warps = 2>

// -----

// expected-error @+1 {{kernel_config field 'threads' is given twice}}
#bad = #pisa.kernel_config<variant = simt, threads = 32, threads = 64>

// -----

// expected-error @+1 {{expected variant to be one of simt, mma_sync, wgmma but got 'tensor'}}
#bad = #pisa.kernel_config<variant = tensor>

// -----

// expected-error @+1 {{expected kernel_config threads in [1, 1024] but got 0}}
#bad = #pisa.kernel_config<variant = simt, threads = 0>

// -----

// expected-error @+1 {{expected kernel_config min_blocks_per_sm in [1, 32] but got 0}}
#bad = #pisa.kernel_config<variant = simt, min_blocks_per_sm = 0>

// -----

// A union entry's mask has a bit per query of the block.
// expected-error @+1 {{expected kernel_config union_queries in [1, 32] but got 33}}
#bad = #pisa.kernel_config<variant = mma_sync, union_queries = 33>

// -----

// expected-error @+1 {{expected kernel_config rows_per_warp 16 or 32 (mma.sync's m16 rows, once or twice) but got 8}}
#bad = #pisa.kernel_config<variant = mma_sync, rows_per_warp = 8>

// -----

// C = 128 does not fit the register key kernel (a warp owns 16 keys of 64).
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{kernel_config epilogue = registers is not supported here: the register key kernel needs C of 16, 32 or 64}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 128 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = registers>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

// The backward's query kernel on query tiles, asked for where it does not
// fit (G = 32), with the staged kernel's epilogue, or past shared memory.
func.func @f(%q: memref<1x32x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x32x10x64xbf16>, %l: memref<1x32x10xf32>, %do: memref<1x32x10x64xbf16>, %dq: memref<1x32x10x64xf32>, %dd: memref<1x32x10xf32>) {
  // expected-error @+1 {{kernel_config union_queries = 4 is not supported here: the query-tile kernel needs G <= 16, d a multiple of 16 up to 128, dv a multiple of 16, C of 16, 32 or 64 and 16-bit inputs}}
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 4>}
      : memref<1x32x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x32x10x64xbf16>, memref<1x32x10xf32>, memref<1x32x10x64xbf16>, memref<1x32x10x64xf32>, memref<1x32x10xf32>
  return
}

// -----

func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xbf16>, %l: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dq: memref<1x4x10x64xf32>, %dd: memref<1x4x10xf32>) {
  // expected-error @+1 {{kernel_config union_queries = 2 is not supported here: the query-tile kernel finishes dq in registers, not through shared memory}}
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared, union_queries = 2>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xbf16>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x4x10x64xf32>, memref<1x4x10xf32>
  return
}

// -----

func.func @f(%q: memref<1x16x10x128xbf16>, %k: memref<1x1x10x128xbf16>, %v: memref<1x1x10x128xbf16>, %s: memref<1x1x10x8xi32>, %off: index, %o: memref<1x16x10x128xbf16>, %l: memref<1x16x10xf32>, %do: memref<1x16x10x128xbf16>, %dq: memref<1x16x10x128xf32>, %dd: memref<1x16x10xf32>) {
  // expected-error @+1 {{kernel_config union_queries = 32 is not supported here: a query tile takes at most 7 queries}}
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 32>}
      : memref<1x16x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x8xi32>, memref<1x16x10x128xbf16>, memref<1x16x10xf32>, memref<1x16x10x128xbf16>, memref<1x16x10x128xf32>, memref<1x16x10xf32>
  return
}

// -----

// G = 32 fits neither the register dq kernel nor the query-tile kernel (a
// warp's 16 head rows).
func.func @f(%q: memref<1x32x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x32x10x64xbf16>, %l: memref<1x32x10xf32>, %do: memref<1x32x10x64xbf16>, %dq: memref<1x32x10x64xf32>, %dd: memref<1x32x10xf32>) {
  // expected-error @+1 {{kernel_config epilogue = registers is not supported here: the register dq kernel needs G <= 16}}
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = registers>}
      : memref<1x32x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x32x10x64xbf16>, memref<1x32x10xf32>, memref<1x32x10x64xbf16>, memref<1x32x10x64xf32>, memref<1x32x10xf32>
  return
}

// -----

// The warpgroup key kernel needs sm_90a (this file configures for sm_90).
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{kernel_config variant = wgmma is not supported here: the warpgroup key kernel needs sm_90a, C = 64}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = wgmma>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

// Only the register key kernel has a warpgroup form.
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{kernel_config variant = wgmma is not supported here: the staged key kernel runs on mma_sync}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = wgmma, epilogue = shared>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

// expected-error @+1 {{expected kernel_config prefetch_ahead in [0, 8] but got 9}}
#bad = #pisa.kernel_config<variant = mma_sync, prefetch_ahead = 9>

// -----

// The key kernel prefetches step s + 2 and later: step s + 1 is being copied.
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{kernel_config prefetch_ahead = 1 is not supported here: step s + 1's rows are being copied then: 0 or 2 and more}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, prefetch_ahead = 1>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

// The staged key kernel does not prefetch.
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  // expected-error @+1 {{kernel_config prefetch_ahead = 2 is not supported here: the staged key kernel does not prefetch}}
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared, prefetch_ahead = 2>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

// Kernels that do not prefetch take no prefetch_ahead.
func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{kernel_config prefetch_ahead = 1 does not apply to this op's kernel}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      {kernel_config = #pisa.kernel_config<variant = simt, prefetch_ahead = 1>}
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

// The dq kernel from dS tiles asks for the next block's tile only.
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %scores: memref<1x1x10x768xbf16>, %dq: memref<1x4x10x64xf32>) {
  // expected-error @+1 {{kernel_config prefetch_ahead = 2 is not supported here: this kernel asks for the next block's dS tile only: 0 or 1}}
  pisa.kernel.sparse_attention_grad_queries_from_scores %q, %k, %s, %off, %scores outs(%dq) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, prefetch_ahead = 2>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x1x10x768xbf16>, memref<1x4x10x64xf32>
  return
}

// -----

// Only the register attention kernel asks the L2 for later entries: not the
// staged one.
func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{kernel_config prefetch_ahead = 2 is not supported here: only the register kernel (a warp a query, epilogue registers, no union_queries) prefetches}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared, prefetch_ahead = 2>}
      : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

// Nor the query-tile one.
func.func @f(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  // expected-error @+1 {{kernel_config prefetch_ahead = 1 is not supported here: only the register kernel (a warp a query, epilogue registers, no union_queries) prefetches}}
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 3, prefetch_ahead = 1>}
      : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

// Nor the staged dq kernel.
func.func @f(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xbf16>, %l: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dq: memref<1x4x10x64xf32>, %dd: memref<1x4x10xf32>) {
  // expected-error @+1 {{kernel_config prefetch_ahead = 1 is not supported here: only the register kernel (a warp a query, epilogue registers, no union_queries) prefetches}}
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared, prefetch_ahead = 1>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xbf16>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x4x10x64xf32>, memref<1x4x10xf32>
  return
}
