// Stage-3 gathers of a 2-layer GPT-2 (groups transformer.wte 16384,
// transformer.wpe 2048, transformer.h.0 and transformer.h.1 49984 elements
// each, transformer.ln_f persistent), with max-reuse-distance=0 so that the
// layers are gathered again in the backward.
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather="param-persistence-threshold=1000 max-reuse-distance=0" --zero-prefetch | FileCheck %s --check-prefix=DEFAULT
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather="param-persistence-threshold=1000 max-reuse-distance=0" --zero-prefetch="prefetch-bucket-size=1" | FileCheck %s --check-prefix=NONE
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather="param-persistence-threshold=1000 max-reuse-distance=0" --zero-prefetch="prefetch-bucket-size=60000" | FileCheck %s --check-prefix=DEPTH
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather="param-persistence-threshold=1000 max-reuse-distance=0" --zero-prefetch="max-live-parameters=100000" | FileCheck %s --check-prefix=LIVE
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | not zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather --zero-prefetch="prefetch-bucket-size=0" 2>&1 | FileCheck %s --check-prefix=BAD

// DeepSpeed's budgets (5e7 in flight, 1e9 live) hoist the whole forward to
// the top; a re-gather never rises above the free of its previous buffer.
// DEFAULT-NOT: zero.all_gather
// DEFAULT: zero.prefetch group @transformer.ln_f persistent
// DEFAULT-NEXT: %[[WTE:.*]], %[[TWTE:.*]] = zero.prefetch group @transformer.wte
// DEFAULT-NEXT: zero.prefetch group @transformer.wpe
// DEFAULT-NEXT: zero.prefetch group @transformer.h.0
// DEFAULT-NEXT: %[[H1:.*]], %{{.*}} = zero.prefetch group @transformer.h.1
// DEFAULT-NEXT: zero.wait %[[TWTE]]
// DEFAULT-NEXT: zero.get_param @transformer.wte.weight from %[[WTE]]
// DEFAULT: zero.free %[[WTE]]
// DEFAULT-NEXT: zero.prefetch group @transformer.wte
// DEFAULT: zero.free %[[H1]]
// DEFAULT-NEXT: zero.prefetch group @transformer.h.1
// DEFAULT-NEXT: zero.prefetch group @transformer.h.0
// DEFAULT-NOT: zero.all_gather

// A budget below one group: every prefetch is waited for at once.
// NONE: %{{.*}}, %[[T0:.*]] = zero.prefetch group @transformer.wte
// NONE-NEXT: zero.wait %[[T0]]
// NONE: %{{.*}}, %[[T1:.*]] = zero.prefetch group @transformer.wpe
// NONE-NEXT: zero.wait %[[T1]]
// NONE: %{{.*}}, %[[T2:.*]] = zero.prefetch group @transformer.h.0
// NONE-NEXT: zero.wait %[[T2]]
// NONE: %{{.*}}, %[[T3:.*]] = zero.prefetch group @transformer.h.1
// NONE-NEXT: zero.wait %[[T3]]

// 60000 elements in flight: h.0 (49984) cannot overlap wte (16384) but
// overlaps wpe; h.1 is issued only once h.0 has arrived.
// DEPTH: %{{.*}}, %[[TWTE:.*]] = zero.prefetch group @transformer.wte
// DEPTH-NEXT: zero.prefetch group @transformer.wpe
// DEPTH-NEXT: zero.wait %[[TWTE]]
// DEPTH-NEXT: zero.get_param @transformer.wte.weight
// DEPTH-NEXT: %{{.*}}, %[[TH0:.*]] = zero.prefetch group @transformer.h.0
// DEPTH: zero.wait %[[TH0]]
// DEPTH-NEXT: zero.get_param
// DEPTH-NEXT: zero.prefetch group @transformer.h.1

// 100000 live elements: ln_f + h.0 + h.1 = 100096 do not fit, so h.1 is
// prefetched only after h.0 is freed.
// LIVE: %[[H0:.*]], %{{.*}} = zero.prefetch group @transformer.h.0
// LIVE-NOT: zero.prefetch group @transformer.h.1
// LIVE: zero.free %[[H0]]
// LIVE-NEXT: zero.prefetch group @transformer.h.1

// BAD: zero-prefetch: prefetch-bucket-size and max-live-parameters must be positive, got 0 and 1000000000
