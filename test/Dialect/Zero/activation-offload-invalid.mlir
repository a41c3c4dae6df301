// RUN: zero-opt %s -split-input-file -verify-diagnostics

// What the activation offload ops' verifiers reject, one per case.

// Checks that only zero.reload_activation reads a host copy: kernels read
// the step arena.
func.func @host_read(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'zero.offload_activation' op host copy is read by 'func.return'; only zero.reload_activation reads host memory}}
  %h = zero.offload_activation %x : tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

// Checks that a reload reads a host copy an offload wrote.
func.func @reload_device(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'zero.reload_activation' op reads a value that zero.offload_activation did not write to host memory}}
  %y = zero.reload_activation %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Checks that an asynchronous copy is waited.
func.func @unwaited(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zero.offload_activation' op token must be waited by exactly one zero.wait}}
  %h, %t = zero.offload_activation %x : tensor<4xf32> -> !zero.token
  return
}

// -----

// Checks the reload's token the same way.
func.func @reload_unwaited(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = zero.offload_activation %x : tensor<4xf32>
  // expected-error @+1 {{'zero.reload_activation' op token must be waited by exactly one zero.wait}}
  %y, %t = zero.reload_activation %h : tensor<4xf32> -> !zero.token
  return %y : tensor<4xf32>
}

// -----

// Checks that the host copy has the value's type.
func.func @host_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'zero.offload_activation' op failed to verify that all of {input, host} have same type}}
  %h = "zero.offload_activation"(%x) : (tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

// Checks that the reloaded value has the host copy's type.
func.func @reload_type(%x: tensor<4xf32>) {
  %h = zero.offload_activation %x : tensor<4xf32>
  // expected-error @+1 {{'zero.reload_activation' op failed to verify that all of {host, result} have same type}}
  %y = "zero.reload_activation"(%h) : (tensor<4xf32>) -> tensor<4xbf16>
  return
}
