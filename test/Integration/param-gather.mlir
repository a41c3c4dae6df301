// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=2 world-size=4" --zero-grad-sync --zero-optimizer --zero-param-gather="allgather-bucket-size=100000" | FileCheck %s --check-prefix=S2
// The optimizer may also run after the gathers: it goes before them.
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=1 world-size=4" --zero-grad-sync --zero-param-gather="allgather-bucket-size=100000" --zero-optimizer | FileCheck %s --check-prefix=S2
// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff --zero-partition="stage=0 world-size=4" --zero-grad-sync --zero-param-gather --zero-optimizer | FileCheck %s --check-prefix=S0
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather | FileCheck %s --check-prefix=PERSIST
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather="param-persistence-threshold=1000 max-reuse-distance=0" | FileCheck %s --check-prefix=REGATHER
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather="param-persistence-threshold=1000 max-reuse-distance=60000" | FileCheck %s --check-prefix=REUSE
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 | zero-opt --zero-autodiff --zero-partition="stage=3 world-size=4" --zero-param-gather="param-persistence-threshold=1000" | FileCheck %s --check-prefix=KEEP

// Stages 1-2: the updated 16-bit parameters are gathered in place after the
// optimizer step, in buckets of allgather-bucket-size.
// S2: zero.grad @fc1.weight
// S2-NOT: zero.all_gather
// S2: zero.optimizer_step group @flat
// S2-NEXT: zero.all_gather group @flat in params [0, 100000) phase post_step
// S2-NEXT: zero.all_gather group @flat in params [100000, 200000) phase post_step
// S2-NEXT: zero.all_gather group @flat in params [200000, 269322) phase post_step
// S2-NEXT: zero.return

// S0-NOT: zero.all_gather
// S0: zero.optimizer_step
// S0-NOT: zero.all_gather

// Stage 3 defaults: every group of this small model is below DeepSpeed's
// persistence threshold (1e5): gathered once at the top, freed at the end.
// PERSIST: zero.train_step
// PERSIST-NEXT: %[[WTE:.*]] = zero.all_gather group @transformer.wte persistent : tensor<16384xf32>
// PERSIST-NEXT: %[[WPE:.*]] = zero.all_gather group @transformer.wpe persistent
// PERSIST-NEXT: %[[H0:.*]] = zero.all_gather group @transformer.h.0 persistent : tensor<49984xf32>
// PERSIST-NEXT: %[[H1:.*]] = zero.all_gather group @transformer.h.1 persistent
// PERSIST-NEXT: %[[LNF:.*]] = zero.all_gather group @transformer.ln_f persistent
// PERSIST-NEXT: zero.get_param @transformer.wte.weight from %[[WTE]] : tensor<16384xf32> -> tensor<256x64xf32>
// PERSIST-NOT: zero.all_gather
// PERSIST-NOT: zero.free %[[H0]]
// PERSIST: zero.grad @transformer.wte.weight
// PERSIST: zero.free %[[LNF]] phase step_end
// PERSIST-NEXT: zero.free %[[H1]] phase step_end
// PERSIST-NEXT: zero.free %[[H0]] phase step_end
// PERSIST-NEXT: zero.free %[[WPE]] phase step_end
// PERSIST-NEXT: zero.free %[[WTE]] phase step_end
// PERSIST-NEXT: zero.return

// max-reuse-distance=0: each layer is gathered before its first forward use,
// freed after its last forward use, and gathered again in the backward with
// fresh views. The tied wte is gathered for the embedding and again for the
// LM head; ln_f (128 elements) stays persistent.
// REGATHER: %[[LNF:.*]] = zero.all_gather group @transformer.ln_f persistent
// REGATHER-NEXT: %[[WTE0:.*]] = zero.all_gather group @transformer.wte :
// REGATHER-NEXT: zero.get_param @transformer.wte.weight from %[[WTE0]]
// REGATHER-NEXT: nn.embedding
// REGATHER-NEXT: zero.free %[[WTE0]]
// REGATHER: %[[H0:.*]] = zero.all_gather group @transformer.h.0 :
// REGATHER-NEXT: zero.get_param @transformer.h.0.ln_1.weight from %[[H0]]
// REGATHER: zero.get_param @transformer.h.0.mlp.c_proj.bias from %[[H0]]
// REGATHER-NEXT: nn.add
// REGATHER-NEXT: zero.free %[[H0]]
// REGATHER-NEXT: nn.add
// REGATHER-NEXT: %[[H1:.*]] = zero.all_gather group @transformer.h.1 :
// REGATHER: zero.free %[[H1]]
// REGATHER: zero.get_param @transformer.ln_f.weight from %[[LNF]]
// REGATHER: %[[WTE1:.*]] = zero.all_gather group @transformer.wte :
// REGATHER-NEXT: zero.get_param @transformer.wte.weight from %[[WTE1]]
// REGATHER-NEXT: nn.matmul
// REGATHER: nn.fill 1.000000e+00 {zero.loss_seed}
// The LM head's backward follows at once: same buffer.
// REGATHER: nn.matmul %{{.*}}, %{{.*}} :
// REGATHER-NEXT: zero.free %[[WTE1]]
// REGATHER: zero.grad @transformer.h.1.mlp.c_proj.bias
// REGATHER-NEXT: %[[H1B:.*]] = zero.all_gather group @transformer.h.1 :
// REGATHER-NEXT: %[[V:.*]] = zero.get_param @transformer.h.1.mlp.c_proj.weight from %[[H1B]]
// REGATHER: nn.matmul %{{.*}}, %[[V]] transpose_rhs
// REGATHER: zero.free %[[H1B]]
// REGATHER: %[[H0B:.*]] = zero.all_gather group @transformer.h.0 :
// REGATHER: zero.free %[[H0B]]
// REGATHER-NOT: zero.all_gather
// REGATHER: zero.free %[[LNF]] phase step_end
// REGATHER-NEXT: zero.return

// max-reuse-distance=60000: between h.1's last forward use and its first
// backward use only wte (16384) is used, so h.1 stays gathered; h.0 sees
// h.1 + wte = 66368 > 60000 elements in between and is gathered again.
// REUSE: %[[H0:.*]] = zero.all_gather group @transformer.h.0 :
// REUSE: zero.free %[[H0]]
// REUSE: %[[H1:.*]] = zero.all_gather group @transformer.h.1 :
// REUSE-NOT: zero.free %[[H1]]
// REUSE: nn.fill 1.000000e+00 {zero.loss_seed}
// REUSE-NOT: zero.all_gather group @transformer.h.1
// REUSE: zero.free %[[H1]]
// REUSE: %[[H0B:.*]] = zero.all_gather group @transformer.h.0 :
// REUSE: zero.free %[[H0B]]

// DeepSpeed's default reuse distance (1e9) keeps every layer of this model
// alive from its forward to its backward: one gather per group.
// KEEP-COUNT-5: zero.all_gather
// KEEP-NOT: zero.all_gather
