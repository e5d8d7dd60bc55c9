// RUN: pisa-opt %s --pisa-fast-exp2-to-nvvm | FileCheck %s --enable-var-scope

// math.exp2 fastmath<afn> on f32, scalar or vector of any shape, becomes
// llvm.nvvm.ex2.approx.ftz.f32 element by element; without afn, or on
// f64, it is left to upstream's lowering (libdevice).

// CHECK-LABEL: func.func @scalar(
// CHECK-SAME: %[[X:.+]]: f32
// CHECK: %[[E:.+]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[X]]) : (f32) -> f32
// CHECK: return %[[E]]
func.func @scalar(%x: f32) -> f32 {
  %e = math.exp2 %x fastmath<afn> : f32
  return %e : f32
}

// CHECK-LABEL: func.func @matrix(
// CHECK-SAME: %[[X:.+]]: vector<2x2xf32>
// CHECK: %[[X0:.+]] = vector.extract %[[X]][0, 0]
// CHECK: %[[E0:.+]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[X0]])
// CHECK: %[[X3:.+]] = vector.extract %[[X]][1, 1]
// CHECK: %[[E3:.+]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[X3]])
// CHECK: %[[V:.+]] = vector.from_elements %[[E0]], %{{.+}}, %{{.+}}, %[[E3]] : vector<4xf32>
// CHECK: %[[R:.+]] = vector.shape_cast %[[V]] : vector<4xf32> to vector<2x2xf32>
// CHECK: return %[[R]]
func.func @matrix(%x: vector<2x2xf32>) -> vector<2x2xf32> {
  %e = math.exp2 %x fastmath<afn> : vector<2x2xf32>
  return %e : vector<2x2xf32>
}

// fastmath<fast> includes afn.
// CHECK-LABEL: func.func @flags(
// CHECK: %[[A:.+]] = math.exp2 %{{.+}} : f32
// CHECK: %[[B:.+]] = math.exp2 %{{.+}} fastmath<afn> : f64
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: return %[[A]], %[[B]], %{{.+}}
func.func @flags(%x: f32, %y: f64, %z: vector<2xf32>) -> (f32, f64, vector<2xf32>) {
  %a = math.exp2 %x : f32
  %b = math.exp2 %y fastmath<afn> : f64
  %c = math.exp2 %z fastmath<fast> : vector<2xf32>
  return %a, %b, %c : f32, f64, vector<2xf32>
}
