// zero-opt prints in local scope unless --mlir-print-debuginfo or the option
// itself is given: the zero dialects define no aliases, and the alias pass
// (one more print of every op) is skipped. A builtin attribute that has an
// alias prints inline by default and as an alias when asked.

// RUN: zero-opt %s | FileCheck %s --check-prefix=LOCAL
// RUN: zero-opt %s --mlir-print-local-scope=false | FileCheck %s --check-prefix=ALIAS
// RUN: zero-opt %s --mlir-print-debuginfo | FileCheck %s --check-prefix=DEBUG
// RUN: zero-opt %s | zero-opt | FileCheck %s --check-prefix=LOCAL

// LOCAL-NOT: #map
// LOCAL: zero.param @w : tensor<4xf32> init zeros {layout = affine_map<(d0) -> (d0 floordiv 2)>}
// ALIAS: #map = affine_map<(d0) -> (d0 floordiv 2)>
// ALIAS: zero.param @w : tensor<4xf32> init zeros {layout = #map}
// DEBUG: zero.param @w {{.*}} loc(#loc
// DEBUG: #loc{{[0-9]*}} = loc(

zero.param @w : tensor<4xf32> init zeros {layout = affine_map<(d0) -> (d0 floordiv 2)>}
