// RUN: pisa-opt %s --split-input-file --convert-pisa-to-gpu=chip=sm_90 -verify-diagnostics

// --convert-pisa-to-gpu builds each kernel as its op's kernel_config says:
// an op without one, with one --pisa-configure-kernels has not completed,
// or with one the chip cannot run is an error.

func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{has no kernel_config: run --pisa-configure-kernels first (pisa-lower-to-nvvm-pipeline does)}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

// A configuration of some fields (no variant) is completed by
// --pisa-configure-kernels, never built as it is.
func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{has an incomplete kernel_config (#pisa.kernel_config<threads = 128>, complete: #pisa.kernel_config<variant = simt, threads = 128>): run --pisa-configure-kernels}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      {kernel_config = #pisa.kernel_config<threads = 128>}
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{has an incomplete kernel_config (#pisa.kernel_config<>, complete: #pisa.kernel_config<variant = simt, threads = 128>): run --pisa-configure-kernels}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      {kernel_config = #pisa.kernel_config<>}
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

func.func @f(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  // expected-error @+1 {{has an incomplete kernel_config (#pisa.kernel_config<variant = simt>, complete: #pisa.kernel_config<variant = simt, threads = 128>): run --pisa-configure-kernels}}
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      {kernel_config = #pisa.kernel_config<variant = simt>}
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

func.func @f(%q: memref<1x16x512x128xbf16>, %k: memref<1x1x512x128xbf16>, %off: index,
             %lc: memref<1x1x8xi32>, %ls: memref<1x1x8xi32>, %tl: memref<1x1x2056xi32>,
             %tf: memref<1x1x2056xi32>, %nt: memref<1x1xi32>, %sp: memref<1x1x8192xi32>,
             %out: memref<1x1x512x16xf32>) {
  // expected-error @+1 {{kernel_config variant = wgmma is not supported here: wgmma needs sm_90a}}
  pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = wgmma, threads = 128, tiles_per_block = 8, min_blocks_per_sm = 6>}
      : memref<1x16x512x128xbf16>, memref<1x1x512x128xbf16>, memref<1x1x8xi32>, memref<1x1x8xi32>,
        memref<1x1x2056xi32>, memref<1x1x2056xi32>, memref<1x1xi32>, memref<1x1x8192xi32>,
        memref<1x1x512x16xf32>
  return
}
