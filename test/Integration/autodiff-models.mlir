// The backward of generated models: one zero.grad per parameter, in reverse
// layer order, the tied GPT-2 embedding summed, no gradient of the inputs.

// RUN: zero-model-gen mlp --sizes 784,256,256,10 --batch 64 | zero-opt --zero-autodiff | FileCheck %s --check-prefix=MLP
// MLP-LABEL: zero.train_step @train
// MLP-NOT: zero.grad
// MLP: nn.softmax_cross_entropy_grad
// MLP: zero.grad @fc3.bias
// MLP-NEXT: nn.matmul {{.*}} transpose_rhs
// MLP-NEXT: nn.matmul {{.*}} transpose_lhs
// MLP-NEXT: zero.grad @fc3.weight
// MLP: zero.grad @fc2.bias
// MLP: zero.grad @fc2.weight
// MLP: zero.grad @fc1.bias
// The gradient of the input batch is never computed: fc1's weight gradient
// is the last backward op.
// MLP-NEXT: nn.matmul %arg0, %{{.*}} transpose_lhs : tensor<64x784xf32>, tensor<64x256xf32> -> tensor<784x256xf32>
// MLP-NEXT: zero.grad @fc1.weight
// MLP-NEXT: zero.return

// RUN: zero-model-gen gpt2 --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --batch 2 | zero-opt --zero-autodiff | FileCheck %s --check-prefix=GPT
// GPT-LABEL: zero.train_step @train
// GPT-NOT: zero.grad
// GPT: zero.grad @transformer.ln_f.weight
// GPT-NEXT: zero.grad @transformer.ln_f.bias
// GPT: zero.grad @transformer.h.1.mlp.c_proj.bias
// GPT: zero.grad @transformer.h.1.mlp.c_proj.weight
// GPT: zero.grad @transformer.h.1.mlp.c_fc.bias
// GPT: zero.grad @transformer.h.1.mlp.c_fc.weight
// GPT: zero.grad @transformer.h.1.ln_2.weight
// GPT: zero.grad @transformer.h.1.ln_2.bias
// GPT: zero.grad @transformer.h.1.attn.c_proj.bias
// GPT: zero.grad @transformer.h.1.attn.c_proj.weight
// GPT: nn.attention_grad
// GPT: zero.grad @transformer.h.1.attn.c_attn.bias
// GPT: zero.grad @transformer.h.1.attn.c_attn.weight
// GPT: zero.grad @transformer.h.1.ln_1.weight
// GPT: zero.grad @transformer.h.1.ln_1.bias
// GPT: zero.grad @transformer.h.0.mlp.c_proj.bias
// GPT: zero.grad @transformer.h.0.ln_1.bias
// GPT: zero.grad @transformer.wpe.weight
// GPT-NEXT: %[[EMB:.*]] = nn.embedding_grad
// GPT-NEXT: %[[SUM:.*]] = nn.add %{{.*}}, %[[EMB]] : tensor<64x32xf32>, tensor<64x32xf32>
// GPT-NEXT: zero.grad @transformer.wte.weight, %[[SUM]]
// GPT-NEXT: zero.return

// Exactly one zero.grad per parameter: 2 + 12 per layer + 2.
// RUN: zero-model-gen gpt2 --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --batch 2 | zero-opt --zero-autodiff | grep -c "zero.grad @" | FileCheck %s --check-prefix=COUNT
// COUNT: 28
// RUN: zero-model-gen gpt2 --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --batch 2 --untied | zero-opt --zero-autodiff | grep -c "zero.grad @" | FileCheck %s --check-prefix=UNTIED
// UNTIED: 29
