// Unsupported chips and formats are one error and a failure before any
// lowering (sm_70 aborted in the NVPTX backend; format=xyz printed an error
// and exited 0 with output written; chip=bogus reported "Minimum NVVM
// target SM version is sm_20").
// RUN: not pisa-opt %s --pisa-lower-to-nvvm-pipeline=chip=sm_70 -o %t.sm70 2>&1 | FileCheck %s --enable-var-scope --check-prefix=SM70
// RUN: test ! -e %t.sm70
// RUN: not pisa-opt %s --pisa-lower-to-nvvm-pipeline=chip=bogus 2>&1 | FileCheck %s --enable-var-scope --check-prefix=BOGUS
// RUN: not pisa-opt %s --pisa-lower-to-nvvm-pipeline=format=xyz -o %t.xyz 2>&1 | FileCheck %s --enable-var-scope --check-prefix=FORMAT
// RUN: test ! -e %t.xyz
// RUN: pisa-opt %s --pisa-check-gpu-target=chip=sm_90a | FileCheck %s --enable-var-scope --check-prefix=OK
// The conversion's own chip option (it picks the kernels) is checked too.
// RUN: not pisa-opt %s --convert-pisa-to-gpu=chip=sm_70 2>&1 | FileCheck %s --enable-var-scope --check-prefix=SM70

// SM70: error: unsupported GPU chip 'sm_70': pisa's kernels are built for sm_90 and sm_90a (Hopper) only
// SM70-NOT: LLVM ERROR
// BOGUS: error: unsupported GPU chip 'bogus'
// BOGUS-NOT: Minimum NVVM
// FORMAT: error: unsupported GPU binary format 'xyz': expected isa, bin or fatbin
// OK-LABEL: func.func @f

func.func @f(%k: tensor<1x1x100x32xf32>) -> tensor<1x1x3x32xf32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x1x100x32xf32> -> tensor<1x1x3x32xf32>
  return %p : tensor<1x1x3x32xf32>
}
