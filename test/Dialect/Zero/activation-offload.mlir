// RUN: zero-opt %s | zero-opt | FileCheck %s

// The activation offload ops print and parse back, with and without a
// token.
// CHECK-LABEL: func.func @round_trip
// CHECK: %[[H:.*]], %[[T:.*]] = zero.offload_activation %{{.*}} : tensor<4x8xbf16> -> !zero.token
// CHECK-NEXT: zero.wait %[[T]]
// CHECK-NEXT: %[[Y:.*]], %[[T2:.*]] = zero.reload_activation %[[H]] : tensor<4x8xbf16> -> !zero.token
// CHECK-NEXT: zero.wait %[[T2]]
// CHECK-NEXT: %[[H2:.*]] = zero.offload_activation %[[Y]] : tensor<4x8xbf16>
// CHECK-NEXT: zero.reload_activation %[[H2]] : tensor<4x8xbf16>
func.func @round_trip(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %h, %t = zero.offload_activation %x : tensor<4x8xbf16> -> !zero.token
  zero.wait %t
  %y, %t2 = zero.reload_activation %h : tensor<4x8xbf16> -> !zero.token
  zero.wait %t2
  %h2 = zero.offload_activation %y : tensor<4x8xbf16>
  %z = zero.reload_activation %h2 : tensor<4x8xbf16>
  return %z : tensor<4x8xbf16>
}
