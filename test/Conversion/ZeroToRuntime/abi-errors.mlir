// RUN: zero-opt %s -split-input-file -verify-diagnostics -test-zero-runtime-abi | FileCheck %s

// The lowering's checks of a runtime call against the runtime's ABI table
// (zero_rt/abi.def). The lowering builds every call with fixed types, so the
// test-only pass -test-zero-runtime-abi builds them instead: it calls the
// function an llvm.func names in `test.runtime_call` with that llvm.func's
// arguments, through the lowering's RuntimeCallBuilder.

// A call the table allows is emitted, and its function declared once with
// the table's type.
// CHECK-LABEL: module @allowed
// CHECK: llvm.func @wait(%[[CTX:[a-z0-9]+]]: !llvm.ptr, %[[SLOT:[a-z0-9]+]]: i32)
// CHECK-NEXT: llvm.call @zrt_ctx_wait(%[[CTX]], %[[SLOT]]) : (!llvm.ptr, i32) -> ()
// CHECK: llvm.func @step(%[[CTX2:[a-z0-9]+]]: !llvm.ptr, %[[OFF:[a-z0-9]+]]: i64)
// CHECK-NEXT: = llvm.call @zrt_ctx_step(%[[CTX2]], %[[OFF]]) : (!llvm.ptr, i64) -> !llvm.ptr
// CHECK: llvm.func @wait_again
// CHECK-NEXT: llvm.call @zrt_ctx_wait
// CHECK-DAG: llvm.func @zrt_ctx_wait(!llvm.ptr, i32)
// CHECK-DAG: llvm.func @zrt_ctx_step(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-NOT: llvm.func @zrt_
module @allowed {
  llvm.func @wait(%ctx: !llvm.ptr, %slot: i32) attributes {test.runtime_call = "zrt_ctx_wait"} {
    llvm.return
  }
  llvm.func @step(%ctx: !llvm.ptr, %offset: i64) attributes {test.runtime_call = "zrt_ctx_step"} {
    llvm.return
  }
  llvm.func @wait_again(%ctx: !llvm.ptr, %slot: i32) attributes {test.runtime_call = "zrt_ctx_wait"} {
    llvm.return
  }
}

// -----

// An argument of another type than the table's.
module @wrong_type {
  // expected-error@+1 {{'llvm.func' op calls 'zrt_ctx_wait' with 'i64' as argument 1; the runtime's ABI table has 'i32'}}
  llvm.func @wait(%ctx: !llvm.ptr, %slot: i64) attributes {test.runtime_call = "zrt_ctx_wait"} {
    llvm.return
  }
}

// -----

// An integer where the table has a pointer.
module @integer_for_pointer {
  // expected-error@+1 {{'llvm.func' op calls 'zrt_ctx_step' with 'i64' as argument 0; the runtime's ABI table has '!llvm.ptr'}}
  llvm.func @step(%ctx: i64, %offset: i64) attributes {test.runtime_call = "zrt_ctx_step"} {
    llvm.return
  }
}

// -----

// A kernel's dtype as i64 (the table's zrt_dtype is an int32_t).
module @kernel_dtype {
  // expected-error@+1 {{'llvm.func' op calls 'zrt_relu' with 'i64' as argument 0; the runtime's ABI table has 'i32'}}
  llvm.func @relu(%dtype: i64, %x: !llvm.ptr, %y: !llvm.ptr, %n: i64) attributes {test.runtime_call = "zrt_relu"} {
    llvm.return
  }
}

// -----

// Too few arguments.
module @too_few {
  // expected-error@+1 {{'llvm.func' op calls 'zrt_ctx_wait' with 1 arguments; the runtime's ABI table has 2}}
  llvm.func @wait(%ctx: !llvm.ptr) attributes {test.runtime_call = "zrt_ctx_wait"} {
    llvm.return
  }
}

// -----

// Too many arguments.
module @too_many {
  // expected-error@+1 {{'llvm.func' op calls 'zrt_ctx_wait' with 3 arguments; the runtime's ABI table has 2}}
  llvm.func @wait(%ctx: !llvm.ptr, %slot: i32, %extra: i32) attributes {test.runtime_call = "zrt_ctx_wait"} {
    llvm.return
  }
}

// -----

// A function the table does not list.
module @unknown {
  // expected-error@+1 {{'llvm.func' op calls 'zrt_no_such_kernel', which the runtime's ABI table (zero_rt/abi.def) does not list as callable from generated code}}
  llvm.func @f(%ctx: !llvm.ptr) attributes {test.runtime_call = "zrt_no_such_kernel"} {
    llvm.return
  }
}

// -----

// A runtime entry point of the table that generated code must not call:
// zrt_wait is the driver's and the context calls', not a kernel's.
module @not_callable {
  // expected-error@+1 {{'llvm.func' op calls 'zrt_wait', which the runtime's ABI table (zero_rt/abi.def) does not list as callable from generated code}}
  llvm.func @f(%token: i64) attributes {test.runtime_call = "zrt_wait"} {
    llvm.return
  }
}

// -----

// The test pass's own errors.
module @not_a_string {
  // expected-error@+1 {{'llvm.func' op expects 'test.runtime_call' to be a string, got 1 : i64}}
  llvm.func @f(%ctx: !llvm.ptr) attributes {test.runtime_call = 1} {
    llvm.return
  }
}

// -----

module @no_body {
  // expected-error@+1 {{'llvm.func' op has no body to call 'zrt_ctx_wait' from}}
  llvm.func @f(!llvm.ptr, i32) attributes {test.runtime_call = "zrt_ctx_wait"}
}
