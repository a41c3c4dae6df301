//===- NNOps.td - Compute dialect for training steps --------*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_NN_IR_NNOPS
#define ZERO_DIALECT_NN_IR_NNOPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"
include "zero/Interfaces/BiasFusionOpInterface.td"
include "zero/Interfaces/DerivativeInterface.td"
include "zero/Interfaces/IndexOperandOpInterface.td"
include "zero/Interfaces/PaddingOpInterface.td"
include "zero/Dialect/NN/IR/NNInterfaces.td"
include "zero/Dialect/FloatTensors.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::mlir::nn";
  let summary = "Tensor compute ops of an MLP or transformer training step";
  let description = [{
    The `nn` dialect holds the compute of one training step on value-semantic
    ranked tensors: the forward ops a user writes (matmul, bias add, GELU,
    layer norm, RMS norm, causal attention, embedding, softmax cross-entropy,
    ...) and the backward ops that `zero-autodiff` emits from each forward
    op's derivative rule (`DerivativeOpInterface`). Element types are `f32`,
    `f16` and `bf16`; kernels store 16-bit values and accumulate in fp32.
    Token ids and labels are `i32` or `i64` tensors.

    The ZeRO passes do not look inside these ops: they only see parameter
    values, their uses in program order and the gradients.
  }];
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, !listconcat(traits, [Pure])> {
  // The PyTorch operations that compute the op one to one, their tensor
  // arguments being its operands in order, named as zero-import's messages
  // name them: `torch.tanh`, `Tensor.tanh`, `nn.Tanh` (a module),
  // `torch.nn.functional.silu`. zero-import maps each of them to the op
  // (python/zero_import/nn_ops.py is generated from this file). Only for ops
  // with SameOperandsAndResultType, one result and no attributes.
  list<string> torchOps = [];
}

def NN_FloatTensor : Zero_AnyRankFloatTensor;
def NN_IndexTensor : RankedTensorOf<[I32, I64]>;
def NN_ScalarF32 : 0DTensorOf<[F32]>;

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def NN_MatmulOp : NN_Op<"matmul", [NN_MatrixProduct,
    DeclareOpInterfaceMethods<NN_ProjectionOpInterface>,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>,
    DeclareOpInterfaceMethods<PaddingOpInterface>]> {
  let summary = "(Batched) matrix product with transpose flags";
  let description = [{
    `lhs` has rank >= 2; its last two dimensions form the matrix, leading
    dimensions are batch dimensions. `rhs` has either the same rank and batch
    dimensions (batched product) or rank 2 (a weight shared by every batch
    element). `transpose_lhs`/`transpose_rhs` swap the last two dimensions of
    the operand before the product. Accumulation is in fp32.

    Two attributes describe padding (`zero-pad-vocab`): `columns N` says
    that the result's columns from N on are padding (zero rows of a padded
    rhs table), and `contract N` that the contraction runs over its first N
    entries only, the rest being padding that the sums leave out, so that
    they round exactly as the unpadded product. The derivative of a product
    with `columns N` contracts over those columns with `contract N`.

    ```mlir
    %y = nn.matmul %x, %w : tensor<8x64x768xf32>, tensor<768x2304xf32> -> tensor<8x64x2304xf32>
    %s = nn.matmul %q, %k transpose_rhs : tensor<8x12x64x64xf32>, tensor<8x12x64x64xf32> -> tensor<8x12x64x64xf32>
    %l = nn.matmul %h, %wte transpose_rhs columns 50257 : tensor<8x1024x768xf32>, tensor<50304x768xf32> -> tensor<8x1024x50304xf32>
    %dh = nn.matmul %dl, %wte contract 50257 : tensor<8x1024x50304xf32>, tensor<50304x768xf32> -> tensor<8x1024x768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       OptionalAttr<I64Attr>:$columns,
                       OptionalAttr<I64Attr>:$contract);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`columns` $columns^)? (`contract` $contract^)?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   "bool":$transpose_lhs, "bool":$transpose_rhs), [{
      build($_builder, $_state, lhs, rhs, transpose_lhs, transpose_rhs,
            /*columns=*/nullptr, /*contract=*/nullptr);
    }]>,
  ];
}

class NN_BroadcastBinaryOp<string mnemonic, string what> : NN_Op<mnemonic, [
    DeclareOpInterfaceMethods<NN_LeadingDimOpInterface>, NN_LinearInOperands,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Elementwise " # what # " with trailing broadcast";
  let description = [{
    Elementwise }] # what # [{ of `lhs` and `rhs`. The shape of `rhs` must be
    a suffix of the shape of `lhs` (numpy broadcasting of a bias or a
    positional embedding over the leading dimensions); the result has the type
    of `lhs`.

    ```mlir
    %y = nn.}] # mnemonic # [{ %x, %b : tensor<64x256xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def NN_AddOp : NN_BroadcastBinaryOp<"add", "addition">;
def NN_MulOp : NN_BroadcastBinaryOp<"mul", "multiplication">;

def NN_ScaleOp : NN_Op<"scale", [SameOperandsAndResultType, NN_LinearInOperands,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Multiplication by a compile-time constant";
  let description = [{
    ```mlir
    %y = nn.scale %x by 1.250000e-01 : tensor<8x12x64x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, F64Attr:$factor);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
  let hasVerifier = 1;
}

class NN_UnaryOp<string mnemonic, string summaryText,
                 list<Trait> traits = []> : NN_Op<mnemonic, !listconcat([
    SameOperandsAndResultType, DeclareOpInterfaceMethods<DerivativeOpInterface>],
    traits)> {
  let summary = summaryText;
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_GeluOp : NN_UnaryOp<"gelu", "GELU, tanh approximation (as GPT-2)",
    [DeclareOpInterfaceMethods<BiasFusionOpInterface>]> {
  let description = [{
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`.

    ```mlir
    %y = nn.gelu %x : tensor<8x64x3072xf32>
    ```
  }];
}
def NN_BiasGeluOp : NN_Op<"bias_gelu", [
    AllTypesMatch<["input", "result"]>, AllElementTypesMatch<["input", "bias"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "GELU (tanh approximation) of a biased input";
  let description = [{
    `nn.gelu` of `input + bias`, `bias` broadcast over the leading dimensions
    as `nn.add` broadcasts it (its shape a suffix of the input's). The sum
    is rounded to the element type, as `nn.add` stores it, before the GELU,
    so the result equals `nn.add` followed by `nn.gelu` bit for bit, in one
    pass that neither writes nor keeps the sum. `zero-fuse-bias-activation`
    forms it.

    ```mlir
    %y = nn.bias_gelu %x, %b : tensor<8x64x3072xf32>, tensor<3072xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$bias);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias attr-dict `:` type($input) `,` type($bias)
  }];
  let hasVerifier = 1;
}
def NN_GeluErfOp : NN_UnaryOp<"gelu_erf", "GELU, exact (erf) form"> {
  let description = [{
    `0.5 * x * (1 + erf(x / sqrt(2)))`: PyTorch's `nn.GELU()` and
    `F.gelu(x)` (`approximate='none'`), as nanoGPT uses it. `nn.gelu` is
    the tanh approximation.

    ```mlir
    %y = nn.gelu_erf %x : tensor<8x64x3072xf32>
    ```
  }];
}
def NN_SiluOp : NN_UnaryOp<"silu", "SiLU (swish), as Llama's feed-forward"> {
  let description = [{
    `x * sigmoid(x)`.

    ```mlir
    %y = nn.silu %x : tensor<8x64x11008xbf16>
    ```
  }];
  let torchOps = ["torch.nn.functional.silu", "nn.SiLU"];
}
def NN_SwigluOp : NN_Op<"swiglu", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "SwiGLU gating, as Llama's feed-forward";
  let description = [{
    `silu(gate) * up`, fused: one pass computing in fp32 and rounding once,
    instead of `nn.silu` followed by `nn.mul`.

    ```mlir
    %y = nn.swiglu %gate, %up : tensor<8x64x11008xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$gate, NN_FloatTensor:$up);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate)";
}
def NN_ReluOp : NN_UnaryOp<"relu", "Rectified linear unit"> {
  let description = [{
    ```mlir
    %y = nn.relu %x : tensor<64x256xf32>
    ```
  }];
  let torchOps = ["torch.relu", "torch.nn.functional.relu", "Tensor.relu",
                  "nn.ReLU"];
}
def NN_TanhOp : NN_UnaryOp<"tanh", "Hyperbolic tangent"> {
  let description = [{
    `tanh(x)`, computed in fp32.

    ```mlir
    %y = nn.tanh %x : tensor<64x256xf32>
    ```
  }];
  let torchOps = ["torch.tanh", "Tensor.tanh", "nn.Tanh"];
}
def NN_ExpOp : NN_UnaryOp<"exp", "Exponential"> {
  let description = [{
    `exp(x)`, computed in fp32.

    ```mlir
    %y = nn.exp %x : tensor<64x256xf32>
    ```
  }];
  let torchOps = ["torch.exp", "Tensor.exp"];
}
def NN_LogOp : NN_UnaryOp<"log", "Natural logarithm"> {
  let description = [{
    `log(x)`, computed in fp32: NaN below 0, -inf at 0.

    ```mlir
    %y = nn.log %x : tensor<64x256xf32>
    ```
  }];
  let torchOps = ["torch.log", "Tensor.log"];
}
def NN_ReciprocalOp : NN_UnaryOp<"reciprocal", "Reciprocal"> {
  let description = [{
    `1 / x`, computed in fp32 (inf at 0). The importer writes a quotient of
    two tensors `a / b` as `a * reciprocal(b)`.

    ```mlir
    %y = nn.reciprocal %x : tensor<64x256xf32>
    ```
  }];
  let torchOps = ["torch.reciprocal", "Tensor.reciprocal"];
}
def NN_SoftplusOp : NN_Op<"softplus", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Softplus, as PyTorch's (beta and threshold)";
  let description = [{
    PyTorch's `F.softplus(x, beta, threshold)` in fp32: `x` where
    `x * beta > threshold`, else `log1p(exp(x * beta)) / beta`. PyTorch's
    defaults are `beta 1.0 threshold 20.0`; beta is positive.

    ```mlir
    %y = nn.softplus %x beta 1.000000e+00 threshold 2.000000e+01 : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, F64Attr:$beta,
                       F64Attr:$threshold);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `beta` $beta `threshold` $threshold attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}
def NN_SoftmaxOp : NN_UnaryOp<"softmax", "Softmax over the last dimension"> {
  let description = [{
    Numerically stable softmax over the innermost dimension, computed in fp32.
    The input has rank >= 1.

    ```mlir
    %p = nn.softmax %x : tensor<8x12x64x64xf32>
    ```
  }];
  let hasVerifier = 1;
}

def NN_LogsumexpOp : NN_Op<"logsumexp", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Log of the sum of exponentials over the last dimension";
  let description = [{
    `log(sum(exp(x)))` over the innermost dimension, [..., N] -> [...]
    (N >= 1), computed stably in fp32 as PyTorch's `torch.logsumexp`: the
    row's maximum m is subtracted before the exponentials and added back,
    `m + log(sum(exp(x - m)))` (m taken as 0 when infinite).

    ```mlir
    %y = nn.logsumexp %x : tensor<8x64x256xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}
def NN_ReduceMaxOp : NN_Op<"reduce_max", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Maximum over the last dimension";
  let description = [{
    The maximum over the innermost dimension, [..., N] -> [...] (N >= 1),
    as PyTorch's `torch.amax(x, -1)`: NaN when the row holds one. Its
    gradient is split evenly among the elements equal to the maximum.

    ```mlir
    %y = nn.reduce_max %x : tensor<8x64x256xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_RopeOp : NN_Op<"rope", [AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>,
    DeclareOpInterfaceMethods<IndexOperandOpInterface, ["getIndexRole"]>]> {
  let summary = "Rotary position embedding (Hugging Face Llama or GPT-J "
                "convention, theta's or transformers' frequencies)";
  let description = [{
    Rotates the `[batch, heads, seq, head_dim]` input by the position of each
    row along `seq` (0, 1, ...): with `h = head_dim / 2` (head_dim even),
    `inv_freq[i] = 1 / theta^(2i / head_dim)` for `i < h` and
    `angle = pos * inv_freq[i]`,

    ```
    y[i]     = x[i] * cos(angle) - x[i + h] * sin(angle)
    y[i + h] = x[i + h] * cos(angle) + x[i] * sin(angle)
    ```

    which is Hugging Face's `x * cos + rotate_half(x) * sin` with
    `emb = cat(freqs, freqs)`. The angle, cosine and sine are fp32 as there;
    16-bit inputs are rotated in fp32 and rounded once.

    `interleaved` pairs neighbours instead, `(x[2i], x[2i + 1])` by the same
    `inv_freq[i]`: GPT-J's convention (`rotate_every_two`, with tables
    built by `repeat_interleave`), which Cohere, GLM and Helium use too.

    `inv_freq`, in place of `theta`, is transformers' own table of inverse
    frequencies, one fp32 value per pair (Llama 3's, YaRN's or Gemma 4's
    proportional rope; a zero leaves its pair unrotated), and `scale`
    (default 1) multiplies the fp32 cosines and sines, as transformers'
    `attention_scaling` does: `cos = emb.cos() * scale`, an fp32 product.
    The table is an array of f32 attributes, which print exactly.

    `positions` [batch, seq] (i32 or i64), when given, are the positions of
    the rows in place of 0, 1, ...: a packed row's, restarting at each
    document as transformers' `position_ids` do. They are read as integers
    >= 0 and need no bound (a rotation has no table).

    `inverse` rotates by the negative angle. The rotation is orthogonal, so
    that is also its adjoint, times `scale`: the derivative of `nn.rope` is
    `nn.rope ... inverse` of the result's gradient with the same positions,
    frequencies and scale (and the other way around), which needs neither
    the input nor the result.

    ```mlir
    %q2 = nn.rope %q theta 1.000000e+04 : tensor<8x32x2048x128xbf16>
    %dq = nn.rope %dq2 theta 1.000000e+04 inverse : tensor<8x32x2048x128xbf16>
    %k2 = nn.rope %k theta 1.000000e+04 interleaved : tensor<8x16x2048x64xf32>
    %y = nn.rope %x inv_freq [1.0 : f32, 0.0125 : f32] scale 1.2 : tensor<1x4x16x4xf32>
    %p = nn.rope %q positions(%pos : tensor<8x2048xi64>) theta 1.000000e+04 : tensor<8x32x2048x128xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, OptionalAttr<F64Attr>:$theta,
                       OptionalAttr<F32ArrayAttr>:$inv_freq,
                       OptionalAttr<F64Attr>:$scale, UnitAttr:$inverse,
                       UnitAttr:$interleaved,
                       Optional<2DTensorOf<[I32, I64]>>:$positions);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`positions` `(` $positions^ `:` type($positions) `)`)?
    (`theta` $theta^)? (`inv_freq` $inv_freq^)? (`scale` $scale^)?
    (`inverse` $inverse^)? (`interleaved` $interleaved^)?
    attr-dict `:` type($input)
  }];
  let extraClassDeclaration = [{
    /// The factor of the cosines and sines: `scale`, or 1.
    double getScaleOrOne() {
      return getScale() ? getScale()->convertToDouble() : 1.0;
    }
    /// The values of `inv_freq` (empty without one).
    ::llvm::SmallVector<float> getInvFreqValues() {
      ::llvm::SmallVector<float> values;
      if (::mlir::ArrayAttr table = getInvFreqAttr())
        for (::mlir::Attribute a : table)
          values.push_back(
              ::llvm::cast<::mlir::FloatAttr>(a).getValue().convertToFloat());
      return values;
    }
  }];
  let hasVerifier = 1;
}

def NN_LayerNormOp : NN_Op<"layer_norm", [NN_NormOpInterface,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + eps) * weight + bias` over the innermost dimension;
    `weight` and `bias` are 1-D of that size. `eps` must be positive.

    ```mlir
    %y = nn.layer_norm %x, %w, %b eps 1.000000e-05 : tensor<8x64x768xf32>, tensor<768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_FloatTensor:$bias, F64Attr:$eps);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` $eps attr-dict `:` type($input) `,`
    type($weight) `,` type($bias)
  }];
}

def NN_RmsNormOp : NN_Op<"rms_norm", [NN_NormOpInterface,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "RMS normalization over the last dimension (Llama)";
  let description = [{
    `weight * round(x * rsqrt(mean(x^2) + eps))` over the innermost
    dimension, as Hugging Face's `LlamaRMSNorm`: the mean, the inverse square
    root and the normalized value are computed in fp32, and for 16-bit
    inputs the normalized value is rounded to the input's element type
    before the multiplication by `weight` (1-D of the innermost size, same
    element type). `eps` must be positive. There is no bias and no mean
    subtraction.

    ```mlir
    %y = nn.rms_norm %x, %w eps 1.000000e-05 : tensor<8x64x4096xbf16>, tensor<4096xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       F64Attr:$eps);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` $eps attr-dict `:` type($input) `,` type($weight)
  }];
}

def NN_AttentionOp : NN_Op<"attention", [NN_Attention, AttrSizedOperandSegments,
    AllTypesMatch<["query", "result"]>, AllTypesMatch<["key", "value"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Scaled dot-product attention (causal for GPT)";
  let description = [{
    `softmax(q k^T * scale + mask) v` for `q` of shape
    `[batch, heads, seq, head_dim]` and `k`, `v` of shape
    `[batch, kv_heads, seq, head_dim]`, where `mask` hides future positions
    when `causal` is set. `scale` defaults to `1/sqrt(head_dim)`. One fused
    op (as flash attention) rather than matmul + mask + softmax + matmul, so
    that the backward recomputes the probabilities instead of keeping a
    `[batch, heads, seq, seq]` activation alive.

    `kv_heads` divides `heads`: grouped-query attention, where query head
    `h` reads key/value head `h / (heads / kv_heads)` (Hugging Face's
    `repeat_kv`); one key/value head is multi-query attention. The type of
    `k` and `v` follows the query's when it differs; with `kv_heads ==
    heads` one type stands for all four.

    `window` (causal only) is a sliding window: query `i` sees key `j` iff
    `j <= i` and `i - j < window` (Hugging Face's sliding-window mask).
    `softcap` caps the scaled logits before the mask, `softcap *
    tanh(logits / softcap)` (Gemma 2's `attn_logit_softcapping`).
    `alibi` holds one slope per query head: after the softcap, query `i`'s
    logit of key `j` gains `slope * (j - i)` (ALiBi, as MPT and BLOOM add
    it: their biases differ from this by a constant per row, which the
    softmax does not see).
    `sinks` [heads] (f32) holds one learned logit per query head that joins
    each row's softmax denominator without a value (gpt-oss's attention
    sinks): `p[i, j] = exp(s[i, j]) / (exp(sink) + sum_j' exp(s[i, j']))`.
    With sinks the tensors are f32 and there is no softcap or ALiBi.
    `segments` [batch, seq] (i32) are the document ids of packed rows, each
    row's non-decreasing (a document is a run of one id): query `i` sees
    key `j` only when both are of one document, on top of every other mask;
    the kernels skip the key blocks a query block's documents cannot see.

    ```mlir
    %o = nn.attention %q, %k, %v causal : tensor<8x12x64x64xf32>
    %s = nn.attention %q, %k, %v sinks(%sk : tensor<4xf32>) causal window 8 : tensor<2x4x32x16xf32>
    %g = nn.attention %q, %k, %v causal : tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>
    %w = nn.attention %q, %k, %v causal window 8 softcap 5.000000e+01 : tensor<2x4x32x16xf32>
    %a = nn.attention %q, %k, %v causal alibi [5.000000e-01, 2.500000e-01] : tensor<2x2x32x16xf32>
    %p = nn.attention %q, %k, %v segments(%ids : tensor<2x32xi32>) causal : tensor<2x4x32x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<DenseF32ArrayAttr>:$alibi,
                       Optional<1DTensorOf<[F32]>>:$sinks,
                       Optional<2DTensorOf<[I32]>>:$segments);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`segments` `(` $segments^ `:` type($segments) `)`)?
    (`causal` $causal^)? (`scale` $scale^)?
    (`window` $window^)? (`softcap` $softcap^)?
    (`alibi` custom<Slopes>($alibi)^)? attr-dict
    `:` custom<AttentionTypes>(type($query), type($key))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The softmax scale: the attribute or 1/sqrt(head_dim).
    double getScaleValue();
  }];
}

def NN_EmbeddingOp : NN_Op<"embedding", [NN_EmbeddingOpInterface,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<IndexOperandOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>,
    DeclareOpInterfaceMethods<PaddingOpInterface>]> {
  let summary = "Row lookup in an embedding table";
  let description = [{
    `result[i..., :] = table[ids[i...], :]` for a `[vocab, dim]` table.
    Out-of-range ids are a runtime error.

    `rows`, when present, is the vocabulary: the table's rows from `rows` on
    are padding (`zero-pad-vocab`), which no id may select, so ids must lie
    in `[0, rows)`.

    `padding_idx`, when present, is a row whose lookups get no gradient, as
    PyTorch's `nn.Embedding(padding_idx=...)`: the lookup itself reads the
    row as any other.

    ```mlir
    %e = nn.embedding %wte[%tokens] : tensor<50257x768xf32>, tensor<8x1024xi32> -> tensor<8x1024x768xf32>
    %p = nn.embedding %wte[%tokens] rows 50257 : tensor<50304x768xf32>, tensor<8x1024xi32> -> tensor<8x1024x768xf32>
    %g = nn.embedding %wte[%tokens] padding_idx 0 : tensor<256000x2048xf32>, tensor<8x1024xi64> -> tensor<8x1024x2048xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$table, NN_IndexTensor:$ids,
                       OptionalAttr<I64Attr>:$rows,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` (`rows` $rows^)? (`padding_idx` $padding_idx^)? attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_ReshapeOp : NN_Op<"reshape", [NN_TensorView, NN_KeepsLeadingRows,
    NN_LinearInOperands,
    DeclareOpInterfaceMethods<NN_LeadingDimOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "Change of shape keeping the element count and order";
  let description = [{
    A view of its input's buffer: no kernel runs.

    ```mlir
    %h = nn.reshape %x : tensor<8x64x768xf32> -> tensor<8x64x12x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_TransposeOp : NN_Op<"transpose", [NN_TensorView,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Permutation of dimensions";
  let description = [{
    `result` dimension `i` is `input` dimension `permutation[i]`.

    ```mlir
    %t = nn.transpose %x [0, 2, 1, 3] : tensor<8x64x12x64xf32> -> tensor<8x12x64x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
}

def NN_SplitOp : NN_Op<"split", [NN_KeepsLeadingRows,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Split into consecutive parts along an axis";
  let description = [{
    The results' types give the parts' sizes along `axis`, which add up to
    the input's; every other dimension is the input's. The parts may differ
    in size (the first `T` rows of a position table and the rest).

    ```mlir
    %q, %k, %v = nn.split %qkv axis 2 : tensor<8x64x2304xf32> -> tensor<8x64x768xf32>, tensor<8x64x768xf32>, tensor<8x64x768xf32>
    %pos, %rest = nn.split %wpe axis 0 : tensor<1024x768xf32> -> tensor<1000x768xf32>, tensor<24x768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat = [{
    $input `axis` $axis attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
}

def NN_ConcatOp : NN_Op<"concat", [
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Concatenation along an axis";
  let description = [{
    ```mlir
    %qkv = nn.concat %q, %k, %v axis 2 : tensor<8x64x768xf32>, tensor<8x64x768xf32>, tensor<8x64x768xf32> -> tensor<8x64x2304xf32>
    ```
  }];
  let arguments = (ins Variadic<NN_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
}

def NN_SoftmaxCrossEntropyOp : NN_Op<"softmax_cross_entropy", [NN_LossKernel,
    DeclareOpInterfaceMethods<NN_LossOpInterface, ["getGradSeeds", "getHeadOperands"]>,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<IndexOperandOpInterface, ["getIgnoredIndex",
        "getIndexRole"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>,
    DeclareOpInterfaceMethods<PaddingOpInterface>]> {
  let summary = "Mean softmax cross-entropy with integer labels";
  let description = [{
    `mean_i( logsumexp(logits[i, :]) - logits[i, labels[i]] )` over every
    position `i` of `labels`, whose shape is the shape of `logits` without its
    last (class) dimension. The result is a scalar fp32 loss.

    `classes`, when present, is the number of classes: the logits' last
    dimension is padded beyond it (`zero-pad-vocab`), the padded entries are
    masked out of the softmax (as if they were -inf) and labels must lie in
    `[0, classes)`. The loss is exactly that of the unpadded logits.

    `ignore_index`, when present, is a label value that marks a position to
    ignore (PyTorch's `ignore_index`, -100 in Hugging Face models): such
    positions contribute nothing, and the mean is over the other positions
    only (0 when every position is ignored, where PyTorch gives NaN). It
    must be representable in the labels' integer type. The mean of a train
    step's loss is over the valid labels of the whole global batch (every
    micro step and rank), not of one micro batch: see `zero-token-mean`.

    ```mlir
    %loss = nn.softmax_cross_entropy %logits, %labels : tensor<64x10xf32>, tensor<64xi64> -> tensor<f32>
    %l = nn.softmax_cross_entropy %logits, %labels classes 50257 : tensor<8x1024x50304xf32>, tensor<8x1024xi32> -> tensor<f32>
    %m = nn.softmax_cross_entropy %logits, %labels ignore_index -100 : tensor<8x1024x50257xf32>, tensor<8x1024xi64> -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$classes,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_ScalarF32:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`classes` $classes^)? (`ignore_index` $ignore_index^)? attr-dict `:` type($logits) `,` type($labels) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of classes: `classes`, or the logits' last dimension.
    int64_t getNumClasses();
  }];
}

def NN_LinearCrossEntropyOp : NN_Op<"linear_cross_entropy", [NN_LossKernel,
    DeclareOpInterfaceMethods<NN_LossOpInterface, ["getGradSeeds", "getHeadOperands"]>,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<IndexOperandOpInterface, ["getIgnoredIndex",
        "getIndexRole"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Output projection and mean softmax cross-entropy, in chunks";
  let description = [{
    `nn.softmax_cross_entropy` of the logits `input x weight^T` (an
    `nn.matmul %input, %weight transpose_rhs`), computed over `chunk` rows
    of the input at a time, so that only a `[chunk, V]` block of logits
    exists at once and the whole `[..., V]` logits never do (`zero-loss-chunk`
    writes it). `input` is `[..., H]`, `weight` the shared `[V, H]` head,
    `labels` the input's shape without `H`; the chunk need not divide the
    rows (the last one is shorter). `ignore_index` is as in
    `nn.softmax_cross_entropy`, and the mean is over the valid labels of all
    rows, not of a chunk.

    `input` and `weight` have one element type. 16-bit operands compute as
    the unchunked 16-bit program does: each chunk's logits are rounded to
    16 bits and the loss is taken from them in fp32, the logits' gradient
    is rounded to 16 bits, and the weight's gradient is summed over the
    chunks in an fp32 accumulator of the weight's size (planned scratch)
    and rounded once, as one 16-bit matmul over all rows sums in fp32.

    ```mlir
    %loss = nn.linear_cross_entropy %h, %w, %labels chunk 256 ignore_index -100 : tensor<4x512x64xf32>, tensor<32000x64xf32>, tensor<4x512xi64> -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_IndexTensor:$labels, I64Attr:$chunk,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_ScalarF32:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels `chunk` $chunk (`ignore_index` $ignore_index^)? attr-dict `:` type($input) `,` type($weight) `,` type($labels) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_TiledMlpOp : NN_Op<"tiled_mlp", [NN_GroupedMatrixProducts,
    DeclareOpInterfaceMethods<NN_ProjectionOpInterface>,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["gate_weight", "up_weight"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Llama's SwiGLU MLP, in tiles of rows";
  let description = [{
    `down(swiglu(gate(x), up(x)))` with bias-free projections written as
    `nn.matmul ... transpose_rhs` (Hugging Face's `LlamaMLP`): `input` is
    `[..., H]`, `gate_weight` and `up_weight` are `[I, H]`, `down_weight`
    is `[H, I]`. The rows of the input are computed in `tiles` tiles of
    `ceil(rows / tiles)` rows (the last one shorter), so that only one
    tile's `[tile, I]` gate and up exist at once and the whole `[..., I]`
    intermediates never do (`zero-tiled-mlp` writes it; ALST's TiledMLP).

    f32 only: the weight gradients of 16-bit operands would need fp32
    accumulators of the weights' size.

    ```mlir
    %y = nn.tiled_mlp %x, %wg, %wu, %wd tiles 4 : tensor<4x512x64xf32>, tensor<172x64xf32>, tensor<64x172xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gate_weight,
                       NN_FloatTensor:$up_weight, NN_FloatTensor:$down_weight,
                       I64Attr:$tiles);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gate_weight `,` $up_weight `,` $down_weight `tiles` $tiles attr-dict `:` type($input) `,` type($gate_weight) `,` type($down_weight)
  }];
  let hasVerifier = 1;
}

def NN_DocumentIdsOp : NN_Op<"document_ids", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<IndexOperandOpInterface, ["getIndexRole"]>]> {
  let summary = "The document ids of packed rows, from their positions";
  let description = [{
    `result[b, 0] = 0` and `result[b, t] = result[b, t - 1] + 1` where
    `positions[b, t] != positions[b, t - 1] + 1`, else `result[b, t - 1]`:
    a document is a maximal run of positions that rise by one, as
    transformers finds the sequences of a packed row
    (`masking_utils.find_packed_sequence_indices`); the ids are the
    `segments` that `nn.attention` masks by. Positions are read as indices
    below the row's length.

    Integer only: it has no derivative.

    ```mlir
    %ids = nn.document_ids %pos : tensor<8x1024xi64>
    ```
  }];
  let arguments = (ins 2DTensorOf<[I32, I64]>:$positions);
  let results = (outs 2DTensorOf<[I32]>:$result);
  let assemblyFormat = "$positions attr-dict `:` type($positions)";
}

def NN_ShiftLabelsOp : NN_Op<"shift_labels", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<IndexOperandOpInterface, ["getIgnoredIndex",
        "getIndexRole"]>]> {
  let summary = "Labels shifted left by one position, the last one a fill";
  let description = [{
    `result[..., t] = labels[..., t + 1]` for every position `t` of the last
    dimension but the last, and `result[..., T - 1] = fill`: the label shift
    of a causal language model's loss inside the model, as Hugging Face's
    `ForCausalLMLoss` writes it (`F.pad(labels, (0, 1), value=-100)[...,
    1:]`), so that position `t`'s logits are scored against token `t + 1`
    and the last position, which predicts nothing, is ignored by a
    cross-entropy whose `ignore_index` is `fill`.

    Integer only: it has no derivative (the labels carry no gradient).
    `fill` must be representable in the labels' integer type.

    ```mlir
    %y = nn.shift_labels %labels fill -100 : tensor<8x1024xi64>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$labels, I64Attr:$fill);
  let results = (outs NN_IndexTensor:$result);
  let assemblyFormat = "$labels `fill` $fill attr-dict `:` type($labels)";
  let hasVerifier = 1;
}

def NN_CastOp : NN_Op<"cast", [NN_TensorView,
    DeclareOpInterfaceMethods<NN_LeadingDimOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Element type conversion between f32, f16 and bf16";
  let description = [{
    Round-to-nearest-even conversion; the shape is unchanged.

    ```mlir
    %h = nn.cast %x : tensor<64x256xf32> to tensor<64x256xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def NN_FillOp : NN_Op<"fill"> {
  let summary = "A tensor filled with one constant";
  let description = [{
    ```mlir
    %one = nn.fill 1.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//
// A transformers 5.x MoE block (MixtralSparseMoeBlock with the default
// `grouped_mm` experts) on T tokens of hidden size D, E experts, top k:
//
//   logits          = nn.matmul x[T, D], gate.weight[E, D] transpose_rhs
//   weights, idx    = nn.moe_router logits top_k k normalize
//   rows, pos, offs = nn.moe_dispatch x[idx] experts E (rows [T*k, D])
//   gu              = nn.grouped_matmul rows, gate_up_proj[E, 2I, D], offs transpose_rhs
//   g, u            = nn.split gu (last axis, I and I); a = nn.swiglu g, u
//   h               = nn.grouped_matmul a, down_proj[E, D, I], offs transpose_rhs
//   y               = nn.moe_combine h[pos], weights  (y [T, D])
//   aux             = nn.moe_aux_loss (the layers' logits concatenated) top_k k
//
// Every shape is static whatever the routing: the pairs are always T*k rows;
// only the values of `pos` and `offs` depend on it, so each buffer is
// planned at its worst case (every token to one expert) by construction.
//===----------------------------------------------------------------------===//

def NN_MoeRouterOp : NN_Op<"moe_router", [
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Top-k expert selection of a mixture-of-experts router";
  let description = [{
    For each row of `logits` [T, E]: the fp32 scores `s = softmax(logits)`
    (or `sigmoid(logits)` with `sigmoid`), the `top_k` experts of largest
    `s + bias` (`bias` [E], a score-correction bias that only selects, as
    DeepSeek-V3's `e_score_correction_bias`), and their weights `s[idx]`,
    divided by their sum (plus `eps`, DeepSeek-V3's 1e-20, when given) with
    `normalize` (transformers' `norm_topk_prob`) and multiplied by `scale`
    (a routed scaling factor).

    `groups G top M` limits the choice to groups of experts, as DeepSeek-V3's
    `n_group` and `topk_group`: with E / G experts a group, a group's score
    is the sum of its 2 largest `s + bias`; only the experts of the M best
    groups (torch.topk's order on the CPU, the lower group first on CUDA)
    can be chosen, every other expert's key being -inf. E / G >= 2,
    M <= G <= 64 and `top_k <= M * E / G`.

    `indices` [T, top_k] holds the experts in decreasing order of score,
    with ties in torch.topk's order on the CPU (its partial selection, not
    the lower index first: equal scores of experts 0..7 give 6, 5 for
    top 2), as i32. `weights` has the element type of `logits`. Every
    result has a row per token, so a divided batch re-infers them.

    ```mlir
    %w, %i = nn.moe_router %logits top_k 2 normalize : tensor<64x8xf32> -> tensor<64x2xf32>, tensor<64x2xi32>
    %w, %i = nn.moe_router %logits bias(%b : tensor<256xf32>) top_k 8 sigmoid normalize eps 1.000000e-20 scale 2.500000e+00 groups 8 top 4 : tensor<64x256xf32> -> tensor<64x8xf32>, tensor<64x8xi32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, Optional<NN_FloatTensor>:$bias,
                       I64Attr:$top_k, UnitAttr:$sigmoid, UnitAttr:$normalize,
                       OptionalAttr<F64Attr>:$norm_eps,
                       OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<I64Attr>:$n_group,
                       OptionalAttr<I64Attr>:$topk_group);
  let results = (outs NN_FloatTensor:$weights, RankedTensorOf<[I32]>:$indices);
  let assemblyFormat = [{
    $logits (`bias` `(` $bias^ `:` type($bias) `)`)? `top_k` $top_k (`sigmoid` $sigmoid^)? (`normalize` $normalize^)? (`eps` $norm_eps^)? (`scale` $scale^)? (`groups` $n_group^ `top` $topk_group)? attr-dict `:` type($logits) `->` type($weights) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def NN_MoeDispatchOp : NN_Op<"moe_dispatch", [
    InferTypeOpAdaptor,
    AllTypesMatch<["indices", "positions"]>,
    DeclareOpInterfaceMethods<IndexOperandOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Token rows sorted by expert (the pairs of a top-k routing)";
  let description = [{
    The T*k (token, expert) pairs of `indices` [T, k] (pair `t*k + j` is
    token t's j-th expert), stably sorted by expert: `rows[positions[t, j]]
    = input[t]`, `offsets[e]` the end of expert e's rows (the cumulative
    counts, torch's `offs` of grouped_mm; E is `experts`, its length).
    Within an expert, rows keep the pairs' order, as transformers'
    `torch.sort` of the flattened indices. Experts must lie in [0, E).
    `experts` is an attribute so that the types follow from the operands
    alone (a divided batch re-infers them).

    ```mlir
    %rows, %pos, %offs = nn.moe_dispatch %x[%idx] experts 8 : tensor<64x32xf32>, tensor<64x2xi32> -> tensor<128x32xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IndexTensor:$indices,
                       I64Attr:$experts);
  let results = (outs NN_FloatTensor:$rows, NN_IndexTensor:$positions,
                      NN_IndexTensor:$offsets);
  let assemblyFormat = [{
    $input `[` $indices `]` `experts` $experts attr-dict `:` type($input) `,` type($indices) `->` type($rows) `,` type($offsets)
  }];
  let hasVerifier = 1;
}

def NN_GroupedMatmulOp : NN_Op<"grouped_matmul", [NN_GroupedMatrixProducts,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "One matrix product per expert over its rows";
  let description = [{
    `result[s] = input[s] weight[e]` for the rows s of expert e, i.e.
    `[offsets[e-1], offsets[e])` (from 0 for expert 0); rows from
    `offsets[E-1]` on are zero. `input` [S, D], `weight` [E, D, F], result
    [S, F]; with `transpose_rhs` the weight is [E, F, D] and each product
    uses `weight[e]^T`: the layout transformers stores (`gate_up_proj`
    [E, 2I, H], `down_proj` [E, H, I], `is_transposed = False`). Offsets are
    non-decreasing and at most S. f32, bf16 or f16 (input and weight of one
    type): 16-bit products sum in fp32 and round each result once, as
    `nn.matmul`.

    ```mlir
    %gu = nn.grouped_matmul %rows, %w, %offs transpose_rhs : tensor<128x32xf32>, tensor<8x64x32xf32>, tensor<8xi32> -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_IndexTensor:$offsets, UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $offsets (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($input) `,` type($weight) `,` type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_MoeCombineOp : NN_Op<"moe_combine", [NN_ExpertCombineOpInterface,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Weighted sum of each token's expert rows (the un-permute)";
  let description = [{
    `result[t] = sum_j weights[t, j] * rows[positions[t, j]]`, summed over
    j in order in fp32: the inverse of `nn.moe_dispatch` weighted by the
    router. `rows` [T*k, D], `positions` and `weights` [T, k], result [T, D].

    ```mlir
    %y = nn.moe_combine %h[%pos], %w : tensor<128x32xf32>, tensor<64x2xi32>, tensor<64x2xf32> -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$rows, NN_IndexTensor:$positions,
                       NN_FloatTensor:$weights);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `[` $positions `]` `,` $weights attr-dict `:` type($rows) `,` type($positions) `,` type($weights) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_MoeAuxLossOp : NN_Op<"moe_aux_loss", [
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Load-balancing loss of a router (transformers' formula)";
  let description = [{
    transformers' `load_balancing_loss_func` without an attention mask over
    the N rows of `logits` [N, E] (one layer's router logits, or the
    layers' concatenated): with `p = softmax(logits)` in fp32, `c[e]` the
    number of rows whose top `top_k` (torch.topk's ties) include e,
    `result = E * sum_e (c[e] / N) * (sum_n p[n, e] / N)`. Only the
    probabilities carry a gradient.

    With `counts` [E] (i64) and `rows` G, the counts are given rather than
    counted and are divided by G: `result = E * sum_e (counts[e] / G) *
    (sum_n p[n, e] / N)`. A batch divided over W ranks of N rows each
    gives each its part of the global loss this way (`zero-moe-aux-counts`):
    with `counts` the global batch's counts (`nn.moe_expert_counts`
    all-reduced) and G = W * N, the mean of the W results is exactly the
    global batch's loss, and the gradients summed over the ranks and
    divided by W are its gradient.

    ```mlir
    %aux = nn.moe_aux_loss %logits top_k 2 : tensor<64x8xf32> -> tensor<f32>
    %aux = nn.moe_aux_loss %logits counts(%c : tensor<8xi64>) rows 128 top_k 2 : tensor<64x8xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits,
                       Optional<1DTensorOf<[I64]>>:$counts,
                       OptionalAttr<I64Attr>:$rows, I64Attr:$top_k);
  let results = (outs NN_ScalarF32:$result);
  let assemblyFormat = [{
    $logits (`counts` `(` $counts^ `:` type($counts) `)`)? (`rows` $rows^)? `top_k` $top_k attr-dict `:` type($logits) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// zero-autodiff's gradients of this loss: the moe_aux_loss_grad users
    /// of its logits with its top_k.
    ::llvm::SmallVector<MoeAuxLossGradOp> getGrads();
  }];
}

def NN_MoeExpertCountsOp : NN_Op<"moe_expert_counts", [
    InferTypeOpAdaptor]> {
  let summary = "Each expert's rows in the top k of a router (i64 counts)";
  let description = [{
    `result[e]` is the number of rows of `logits` [N, E] whose top `top_k`
    fp32 softmax scores (torch.topk's ties) include expert e: the counts
    `nn.moe_aux_loss` computes, as exact integers that ranks can sum.
    `zero-moe-aux-counts` all-reduces them so that every rank's
    load-balancing loss uses the global batch's counts. Not differentiable.

    ```mlir
    %c = nn.moe_expert_counts %logits top_k 2 : tensor<64x8xf32> -> tensor<8xi64>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, I64Attr:$top_k);
  let results = (outs 1DTensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $logits `top_k` $top_k attr-dict `:` type($logits) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops (emitted by derivative rules)
//===----------------------------------------------------------------------===//

def NN_ReduceSumOp : NN_Op<"reduce_sum", [
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Sum over leading dimensions (the adjoint of broadcasting)";
  let description = [{
    Sums `input` over its leading dimensions so that the result has the
    result type's shape, which must be a suffix of the input's shape.
    Accumulates in fp32. Summed to a scalar it is a loss's sum over the
    batch (zero-import's `x.sum()`), whose local batch a rank sums alone.

    ```mlir
    %db = nn.reduce_sum %dy : tensor<8x64x768xf32> -> tensor<768xf32>
    %s = nn.reduce_sum %rows : tensor<8x1xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_ReduceSumGradOp : NN_Op<"reduce_sum_grad", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Backward of `nn.reduce_sum`: the gradient broadcast back";
  let description = [{
    `result_grad` (the shape of the sum, a suffix of the input's) repeated
    over the input's leading dimensions. `input`, the forward's input, gives
    the shape only, so that the result follows the rows of a divided local
    batch as the input does.

    ```mlir
    %dx = nn.reduce_sum_grad %rows, %ds : tensor<8x1xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad attr-dict `:` type($input) `,` type($result_grad)
  }];
  let hasVerifier = 1;
}

class NN_PointwiseGradOp<string mnemonic, string fwd, string firstName,
                         list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(
        [AllTypesMatch<["forward", "result_grad", "result"]>], traits)> {
  let summary = "Backward of `nn." # fwd # "`";
  let description = [{
    Given the forward op's }] # firstName # [{ and the gradient of its result,
    computes the gradient of its input.

    ```mlir
    %dx = nn.}] # mnemonic # [{ %v, %dy : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$forward, NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$forward `,` $result_grad attr-dict `:` type($result)";
}

def NN_GeluGradOp : NN_PointwiseGradOp<"gelu_grad", "gelu", "input",
    [DeclareOpInterfaceMethods<BiasFusionOpInterface>]>;
def NN_BiasGeluGradOp : NN_Op<"bias_gelu_grad", [
    AllTypesMatch<["input", "result_grad", "result"]>,
    AllElementTypesMatch<["input", "bias"]>]> {
  let summary = "Backward of `nn.bias_gelu`";
  let description = [{
    From the forward operands and the gradient of the result, the gradient
    of the biased input `input + bias` (which is also that of `input`): the
    sum is formed as `nn.bias_gelu` forms it, so the result equals
    `nn.gelu_grad` of the stored sum bit for bit.

    ```mlir
    %dx = nn.bias_gelu_grad %x, %b, %dy : tensor<8x64x3072xf32>, tensor<3072xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$bias,
                       NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias `,` $result_grad attr-dict `:` type($input) `,` type($bias)
  }];
  let hasVerifier = 1;
}
def NN_GeluErfGradOp
    : NN_PointwiseGradOp<"gelu_erf_grad", "gelu_erf", "input">;
def NN_SiluGradOp : NN_PointwiseGradOp<"silu_grad", "silu", "input">;
def NN_SwigluGradOp : NN_Op<"swiglu_grad", [
    AllTypesMatch<["gate", "up", "result_grad", "gate_grad", "up_grad"]>]> {
  let summary = "Backward of `nn.swiglu`";
  let description = [{
    From the forward operands and the gradient `dy` of the result:
    `gate_grad = dy * up * silu'(gate)` and `up_grad = dy * silu(gate)`, in
    one pass.

    ```mlir
    %dgate, %dup = nn.swiglu_grad %gate, %up, %dy : tensor<8x64x11008xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$gate, NN_FloatTensor:$up,
                       NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$gate_grad, NN_FloatTensor:$up_grad);
  let assemblyFormat = [{
    $gate `,` $up `,` $result_grad attr-dict `:` type($gate)
  }];
}
def NN_ReluGradOp : NN_PointwiseGradOp<"relu_grad", "relu", "result">;
def NN_TanhGradOp : NN_PointwiseGradOp<"tanh_grad", "tanh", "result">;
def NN_SoftmaxGradOp : NN_PointwiseGradOp<"softmax_grad", "softmax", "result"> {
  let hasVerifier = 1;
}
def NN_ExpGradOp : NN_PointwiseGradOp<"exp_grad", "exp", "result">;
def NN_LogGradOp : NN_PointwiseGradOp<"log_grad", "log", "input">;
def NN_ReciprocalGradOp : NN_PointwiseGradOp<"reciprocal_grad", "reciprocal",
                                           "result">;
def NN_SoftplusGradOp : NN_Op<"softplus_grad", [
    AllTypesMatch<["input", "result_grad", "result"]>]> {
  let summary = "Backward of `nn.softplus`";
  let description = [{
    From the forward input and the gradient of the result, as PyTorch's
    softplus_backward: with `z = exp(x * beta)`, `dy` where
    `x * beta > threshold`, else `dy * z / (z + 1)`.

    ```mlir
    %dx = nn.softplus_grad %x, %dy beta 1.000000e+00 threshold 2.000000e+01 : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$result_grad,
                       F64Attr:$beta, F64Attr:$threshold);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad `beta` $beta `threshold` $threshold attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def NN_LogsumexpGradOp : NN_Op<"logsumexp_grad", [
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["output", "output_grad"]>]> {
  let summary = "Backward of `nn.logsumexp`";
  let description = [{
    From the forward input x [..., N], its result y [...] and the result's
    gradient dy [...], as PyTorch's logsumexp_backward:
    `dx = dy * exp(x - y)` (the softmax of each row times its gradient).

    ```mlir
    %dx = nn.logsumexp_grad %x, %y, %dy : tensor<8x64x256xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$output,
                       NN_FloatTensor:$output_grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $output `,` $output_grad attr-dict `:` type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}
def NN_ReduceMaxGradOp : NN_Op<"reduce_max_grad", [
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["output", "output_grad"]>]> {
  let summary = "Backward of `nn.reduce_max`";
  let description = [{
    From the forward input x [..., N], its maximum y [...] and the result's
    gradient dy [...], as PyTorch's amax backward: each row's gradient is
    divided by the count c of elements equal to the maximum and given to
    each of them, `dx = (dy / c) * (x == y)`.

    ```mlir
    %dx = nn.reduce_max_grad %x, %y, %dy : tensor<8x64x256xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$output,
                       NN_FloatTensor:$output_grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $output `,` $output_grad attr-dict `:` type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}

def NN_LayerNormGradOp : NN_Op<"layer_norm_grad", [
    AllTypesMatch<["input", "result_grad", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad", "bias_grad"]>]> {
  let summary = "Backward of `nn.layer_norm`";
  let description = [{
    Recomputes the mean and inverse standard deviation from `input` and
    returns the gradients of input, weight and bias.

    ```mlir
    %dx, %dw, %db = nn.layer_norm_grad %x, %w, %dy eps 1.000000e-05 : tensor<8x64x768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_FloatTensor:$result_grad, F64Attr:$eps);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $result_grad `eps` $eps attr-dict `:` type($input) `,`
    type($weight)
  }];
  let hasVerifier = 1;
}

def NN_RmsNormGradOp : NN_Op<"rms_norm_grad", [
    AllTypesMatch<["input", "result_grad", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "Backward of `nn.rms_norm`";
  let description = [{
    Recomputes the inverse root mean square of each row from `input` and
    returns the gradients of input and weight; the weight gradient is summed
    over every leading dimension. The rounding of the normalized value is
    treated as the identity, as autograd does.

    ```mlir
    %dx, %dw = nn.rms_norm_grad %x, %w, %dy eps 1.000000e-05 : tensor<8x64x4096xbf16>, tensor<4096xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_FloatTensor:$result_grad, F64Attr:$eps);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $result_grad `eps` $eps attr-dict `:` type($input) `,`
    type($weight)
  }];
  let hasVerifier = 1;
}

def NN_AttentionGradOp : NN_Op<"attention_grad", [AttrSizedOperandSegments,
    AllTypesMatch<["query", "output", "output_grad", "query_grad"]>,
    AllTypesMatch<["key", "value", "key_grad", "value_grad"]>]> {
  let summary = "Backward of `nn.attention`";
  let description = [{
    Recomputes the attention probabilities from `query` and `key` and returns
    the gradients of query, key and value, given the forward output and its
    gradient. With grouped-query attention the key and value gradients have
    the key's shape: each sums the gradients of the query heads that share
    the key/value head. Types, `window`, `softcap`, `alibi`, `sinks` and
    `segments` as for `nn.attention`; the slopes and the segments are
    constants, without a gradient; the sinks' gradient is
    `nn.attention_sinks_grad`'s.

    ```mlir
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %do causal scale 1.250000e-01 : tensor<8x12x64x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, NN_FloatTensor:$output,
                       NN_FloatTensor:$output_grad, UnitAttr:$causal,
                       F64Attr:$scale, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<DenseF32ArrayAttr>:$alibi,
                       Optional<1DTensorOf<[F32]>>:$sinks,
                       Optional<2DTensorOf<[I32]>>:$segments);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
                      NN_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $output_grad
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`segments` `(` $segments^ `:` type($segments) `)`)? (`causal` $causal^)? `scale` $scale (`window` $window^)?
    (`softcap` $softcap^)? (`alibi` custom<Slopes>($alibi)^)? attr-dict `:`
    custom<AttentionTypes>(type($query), type($key))
  }];
  let hasVerifier = 1;
}

def NN_EmbeddingGradOp : NN_Op<"embedding_grad", [
    DeclareOpInterfaceMethods<IndexOperandOpInterface>]> {
  let summary = "Backward of `nn.embedding` (scatter-add into the table's shape)";
  let description = [{
    The row `padding_idx`, when present, stays zero: the positions whose id
    it is add nothing.

    ```mlir
    %dwte = nn.embedding_grad %dy[%tokens] : tensor<8x1024x768xf32>, tensor<8x1024xi32> -> tensor<50257x768xf32>
    %dwte = nn.embedding_grad %dy[%tokens] padding_idx 0 : tensor<8x1024x2048xf32>, tensor<8x1024xi64> -> tensor<256000x2048xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$result_grad, NN_IndexTensor:$ids,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $result_grad `[` $ids `]` (`padding_idx` $padding_idx^)? attr-dict `:` type($result_grad) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_SoftmaxCrossEntropyGradOp : NN_Op<"softmax_cross_entropy_grad", [NN_LossKernel,
    AllTypesMatch<["logits", "result"]>,
    DeclareOpInterfaceMethods<IndexOperandOpInterface, ["getIgnoredIndex",
        "getIndexRole"]>]> {
  let summary = "Backward of `nn.softmax_cross_entropy`";
  let description = [{
    `(softmax(logits) - onehot(labels)) * loss_grad / count`, where `count` is
    the number of label positions. With `classes`, as in the forward op, the
    softmax runs over the first `classes` entries and the gradient of the
    padded ones is exactly zero. With `ignore_index`, as in the forward op,
    `count` is the number of positions whose label is not `ignore_index`
    and the rows of the ignored positions are exactly zero.

    ```mlir
    %dlogits = nn.softmax_cross_entropy_grad %logits, %labels, %dloss : tensor<64x10xf32>, tensor<64xi64>, tensor<f32>
    %dm = nn.softmax_cross_entropy_grad %logits, %labels, %dloss ignore_index -100 : tensor<64x10xf32>, tensor<64xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
                       NN_ScalarF32:$loss_grad, OptionalAttr<I64Attr>:$classes,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $loss_grad (`classes` $classes^)? (`ignore_index` $ignore_index^)? attr-dict `:` type($logits) `,` type($labels) `,` type($loss_grad)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of classes: `classes`, or the logits' last dimension.
    int64_t getNumClasses();
  }];
}

def NN_LinearCrossEntropyGradOp : NN_Op<"linear_cross_entropy_grad", [NN_LossKernel,
    AllTypesMatch<["input", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>,
    DeclareOpInterfaceMethods<IndexOperandOpInterface, ["getIgnoredIndex",
        "getIndexRole"]>]> {
  let summary = "Backward of `nn.linear_cross_entropy`";
  let description = [{
    The gradients of the input and of the weight, chunk by chunk: each
    chunk's logits are recomputed, turned into their gradient in place (as
    `nn.softmax_cross_entropy_grad`, the count being the valid labels of all
    rows), and multiplied into the chunk's rows of `input_grad` and
    accumulated into `weight_grad`.

    ```mlir
    %dh, %dw = nn.linear_cross_entropy_grad %h, %w, %labels, %dloss chunk 256 ignore_index -100 : tensor<4x512x64xf32>, tensor<32000x64xf32>, tensor<4x512xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_IndexTensor:$labels, NN_ScalarF32:$loss_grad,
                       I64Attr:$chunk, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels `,` $loss_grad `chunk` $chunk (`ignore_index` $ignore_index^)? attr-dict `:` type($input) `,` type($weight) `,` type($labels) `,` type($loss_grad)
  }];
  let hasVerifier = 1;
}

def NN_TiledMlpGradOp : NN_Op<"tiled_mlp_grad", [
    AllTypesMatch<["input", "result_grad", "input_grad"]>,
    AllTypesMatch<["gate_weight", "up_weight", "gate_weight_grad",
                   "up_weight_grad"]>,
    AllTypesMatch<["down_weight", "down_weight_grad"]>]> {
  let summary = "Backward of `nn.tiled_mlp`";
  let description = [{
    The gradients of the input and of the three weights, tile by tile: each
    tile's gate and up are recomputed from the input (the forward keeps
    none of them, as ALST's TiledMLP), the tile's gradients computed, its
    rows of `input_grad` written and its weight gradients accumulated over
    the tiles.

    ```mlir
    %dx, %dwg, %dwu, %dwd = nn.tiled_mlp_grad %x, %wg, %wu, %wd, %dy tiles 4 : tensor<4x512x64xf32>, tensor<172x64xf32>, tensor<64x172xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gate_weight,
                       NN_FloatTensor:$up_weight, NN_FloatTensor:$down_weight,
                       NN_FloatTensor:$result_grad, I64Attr:$tiles);
  let results = (outs NN_FloatTensor:$input_grad,
                      NN_FloatTensor:$gate_weight_grad,
                      NN_FloatTensor:$up_weight_grad,
                      NN_FloatTensor:$down_weight_grad);
  let assemblyFormat = [{
    $input `,` $gate_weight `,` $up_weight `,` $down_weight `,` $result_grad `tiles` $tiles attr-dict `:` type($input) `,` type($gate_weight) `,` type($down_weight)
  }];
  let hasVerifier = 1;
}

def NN_MoeRouterGradOp : NN_Op<"moe_router_grad", [
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "Backward of `nn.moe_router` (the logits' gradient)";
  let description = [{
    The gradient of the router's logits from its `weights`' gradient, the
    scores recomputed from `logits` and the selection read from `indices`
    (the bias only selected, so it gets none; neither do the groups, which
    only select). `eps` as the forward's.

    ```mlir
    %dl = nn.moe_router_grad %logits, %idx, %dw normalize : tensor<64x8xf32>, tensor<64x2xi32>, tensor<64x2xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$indices,
                       NN_FloatTensor:$weights_grad, UnitAttr:$sigmoid,
                       UnitAttr:$normalize, OptionalAttr<F64Attr>:$norm_eps,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $indices `,` $weights_grad (`sigmoid` $sigmoid^)? (`normalize` $normalize^)? (`eps` $norm_eps^)? (`scale` $scale^)? attr-dict `:` type($logits) `,` type($indices) `,` type($weights_grad)
  }];
  let hasVerifier = 1;
}

def NN_MoeDispatchGradOp : NN_Op<"moe_dispatch_grad", [InferTypeOpAdaptor]> {
  let summary = "Backward of `nn.moe_dispatch` (each token's rows summed)";
  let description = [{
    `result[t] = sum_j rows_grad[positions[t, j]]`, over j in order in fp32.

    ```mlir
    %dx = nn.moe_dispatch_grad %drows[%pos] : tensor<128x32xf32>, tensor<64x2xi32> -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$rows_grad, NN_IndexTensor:$positions);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $rows_grad `[` $positions `]` attr-dict `:` type($rows_grad) `,` type($positions) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_GroupedMatmulWeightGradOp : NN_Op<"grouped_matmul_weight_grad"> {
  let summary = "Backward of `nn.grouped_matmul` for its weight";
  let description = [{
    `result[e] = input_e^T result_grad_e` over expert e's rows (with
    `transpose_rhs`, `result_grad_e^T input_e`, the [E, F, D] layout); an
    expert without rows gets zeros. The input's gradient is the grouped
    product of the result's gradient with the weight transposed. 16-bit
    gradients sum over all of an expert's rows in fp32 and round once.

    ```mlir
    %dw = nn.grouped_matmul_weight_grad %rows, %dgu, %offs transpose_rhs : tensor<128x32xf32>, tensor<128x64xf32>, tensor<8xi32> -> tensor<8x64x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$result_grad,
                       NN_IndexTensor:$offsets, UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad `,` $offsets (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($input) `,` type($result_grad) `,` type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_MoeCombineGradOp : NN_Op<"moe_combine_grad", [
    AllTypesMatch<["rows", "rows_grad"]>,
    AllTypesMatch<["weights", "weights_grad"]>]> {
  let summary = "Backward of `nn.moe_combine`";
  let description = [{
    `rows_grad[positions[t, j]] = weights[t, j] * result_grad[t]` and
    `weights_grad[t, j] = dot(result_grad[t], rows[positions[t, j]])` in
    fp32.

    ```mlir
    %dh, %dw = nn.moe_combine_grad %h[%pos], %w, %dy : tensor<128x32xf32>, tensor<64x2xi32>, tensor<64x2xf32>, tensor<64x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$rows, NN_IndexTensor:$positions,
                       NN_FloatTensor:$weights, NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$rows_grad,
                      NN_FloatTensor:$weights_grad);
  let assemblyFormat = [{
    $rows `[` $positions `]` `,` $weights `,` $result_grad attr-dict `:` type($rows) `,` type($positions) `,` type($weights) `,` type($result_grad)
  }];
  let hasVerifier = 1;
}

def NN_MoeAuxLossGradOp : NN_Op<"moe_aux_loss_grad", [
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "Backward of `nn.moe_aux_loss`";
  let description = [{
    `dp[n, e] = loss_grad * E * c[e] / N^2` through the softmax (the counts
    recomputed, as the forward); with `counts` and `rows` G,
    `loss_grad * E * counts[e] / (G * N)`.

    ```mlir
    %dl = nn.moe_aux_loss_grad %logits, %daux top_k 2 : tensor<64x8xf32>, tensor<f32>
    %dl = nn.moe_aux_loss_grad %logits, %daux counts(%c : tensor<8xi64>) rows 128 top_k 2 : tensor<64x8xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_ScalarF32:$loss_grad,
                       Optional<1DTensorOf<[I64]>>:$counts,
                       OptionalAttr<I64Attr>:$rows, I64Attr:$top_k);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $loss_grad (`counts` `(` $counts^ `:` type($counts) `)`)? (`rows` $rows^)? `top_k` $top_k attr-dict `:` type($logits) `,` type($loss_grad)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// gpt-oss
//===----------------------------------------------------------------------===//

def NN_ClampedSwigluOp : NN_Op<"clamped_swiglu", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "SwiGLU over clamped inputs, as gpt-oss's experts";
  let description = [{
    With `g = min(gate, limit)` and `u = clamp(up, -limit, limit)`:
    `(u + 1) * g * sigmoid(alpha * g)` (transformers' `GptOssExperts`
    `_apply_gate`, after its gate and up columns are taken apart), in fp32
    and rounded once.

    ```mlir
    %y = nn.clamped_swiglu %gate, %up alpha 1.702000e+00 limit 7.000000e+00 : tensor<128x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$gate, NN_FloatTensor:$up,
                       F64Attr:$alpha, F64Attr:$limit);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $gate `,` $up `alpha` $alpha `limit` $limit attr-dict `:` type($gate)
  }];
  let hasVerifier = 1;
}

def NN_ClampedSwigluGradOp : NN_Op<"clamped_swiglu_grad", [
    AllTypesMatch<["gate", "up", "result_grad", "gate_grad", "up_grad"]>]> {
  let summary = "Backward of `nn.clamped_swiglu`";
  let description = [{
    The gradients of gate and up from the forward operands and the result's
    gradient; as torch's clamp, zero where an input lies outside its limits
    (the limits themselves pass the gradient).

    ```mlir
    %dg, %du = nn.clamped_swiglu_grad %gate, %up, %dy alpha 1.702000e+00 limit 7.000000e+00 : tensor<128x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$gate, NN_FloatTensor:$up,
                       NN_FloatTensor:$result_grad, F64Attr:$alpha,
                       F64Attr:$limit);
  let results = (outs NN_FloatTensor:$gate_grad, NN_FloatTensor:$up_grad);
  let assemblyFormat = [{
    $gate `,` $up `,` $result_grad `alpha` $alpha `limit` $limit attr-dict `:` type($gate)
  }];
}

def NN_AttentionSinksGradOp : NN_Op<"attention_sinks_grad", [
    AllTypesMatch<["query", "output", "output_grad"]>,
    AllTypesMatch<["sinks", "result"]>]> {
  let summary = "The sinks' gradient of `nn.attention`";
  let description = [{
    `result[h] = -sum_{b, i} p_sink[b, h, i] * dot(output_grad[b, h, i],
    output[b, h, i])`, where `p_sink` is the sink's probability in query
    row i (recomputed from `query`, `key` and `sinks`); types, `causal`,
    `scale`, `window` and `segments` as for `nn.attention_grad`.

    ```mlir
    %ds = nn.attention_sinks_grad %q, %k, %sk, %o, %do causal scale 2.500000e-01 : tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       1DTensorOf<[F32]>:$sinks, NN_FloatTensor:$output,
                       NN_FloatTensor:$output_grad, UnitAttr:$causal,
                       F64Attr:$scale, OptionalAttr<I64Attr>:$window,
                       Optional<2DTensorOf<[I32]>>:$segments);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $sinks `,` $output `,` $output_grad
    (`segments` `(` $segments^ `:` type($segments) `)`)? (`causal` $causal^)? `scale` $scale (`window` $window^)? attr-dict `:`
    type($query) `,` type($key) `,` type($sinks)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Apertus
//===----------------------------------------------------------------------===//

def NN_XieluOp : NN_Op<"xielu", [AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["alpha_p", "alpha_n"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "xIELU, as Apertus's activation";
  let description = [{
    transformers' `XIELUActivation` (its Python path) in fp32, with the
    effective coefficients as [1] operands of the input's element type
    (`alpha_p = softplus(a_p)`, `alpha_n = beta + softplus(a_n)`, built by
    the importer from its parameters):
    `x > 0 ? (alpha_p * x) * x + beta * x
           : (expm1(min(x, eps)) - x) * alpha_n + beta * x`.
    NaN propagates through `min`, as torch's.

    ```mlir
    %y = nn.xielu %x, %ap, %an beta 5.000000e-01 eps -9.9999999747524271E-7 : tensor<8x64x256xf32>, tensor<1xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$alpha_p,
                       NN_FloatTensor:$alpha_n, F64Attr:$beta, F64Attr:$eps);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $alpha_p `,` $alpha_n `beta` $beta `eps` $eps attr-dict `:`
    type($input) `,` type($alpha_p)
  }];
  let hasVerifier = 1;
}

def NN_XieluGradOp : NN_Op<"xielu_grad", [
    AllTypesMatch<["input", "result_grad", "input_grad", "alpha_p_part",
                   "alpha_n_part"]>,
    AllTypesMatch<["alpha_p", "alpha_n"]>]> {
  let summary = "Backward of `nn.xielu`";
  let description = [{
    The input's gradient as autograd computes it (at `x == eps`, `min`'s
    backward gives each side half; for `eps < x <= 0` it is
    `dy * (beta - alpha_n)`), and the per-element terms whose sums are the
    coefficients' gradients: `alpha_p_part = x > 0 ? dy * x * x : 0` and
    `alpha_n_part = x > 0 ? 0 : dy * (expm1(min(x, eps)) - x)`.

    ```mlir
    %dx, %pp, %pn = nn.xielu_grad %x, %ap, %an, %dy beta 5.000000e-01 eps -9.9999999747524271E-7 : tensor<8x64x256xf32>, tensor<1xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$alpha_p,
                       NN_FloatTensor:$alpha_n, NN_FloatTensor:$result_grad,
                       F64Attr:$beta, F64Attr:$eps);
  let results = (outs NN_FloatTensor:$input_grad,
                      NN_FloatTensor:$alpha_p_part,
                      NN_FloatTensor:$alpha_n_part);
  let assemblyFormat = [{
    $input `,` $alpha_p `,` $alpha_n `,` $result_grad `beta` $beta `eps` $eps
    attr-dict `:` type($input) `,` type($alpha_p)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reinforcement learning: the ops of a policy-gradient loss (GRPO as TRL's
// GRPOTrainer writes it, DAPO, Dr. GRPO) over a causal LM's logits:
//
//   logps    = nn.gather logits[ids] - nn.logsumexp logits   (per token)
//   ratio    = nn.exp (logps - nn.stop_gradient logps)
//   clipped  = nn.clamp ratio min 0.8 max 1.2
//   per_tok  = -(nn.minimum ratio * adv, clipped * adv)
//
// Boolean tensors are float masks: `nn.where` selects where its condition
// is nonzero.
//===----------------------------------------------------------------------===//

def NN_ClampOp : NN_Op<"clamp", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Clamp to [min, max], as torch.clamp with number bounds";
  let description = [{
    `min(max(x, min), max)` in fp32 with either bound left out (at least one
    given); NaN propagates, and with `min > max` every element is `max`, as
    torch's. The bounds are converted to fp32 as torch converts a Python
    number for a float32 tensor. The gradient passes where
    `min <= x <= max` (both inclusive, as torch.clamp's backward).

    ```mlir
    %y = nn.clamp %x min 8.000000e-01 max 1.200000e+00 : tensor<8x64xf32>
    %z = nn.clamp %x min 1.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`min` $min^)? (`max` $max^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

class NN_SameShapeBinaryOp<string mnemonic, string what> : NN_Op<mnemonic, [
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Elementwise " # what # " of two tensors of one type";
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def NN_MinimumOp : NN_SameShapeBinaryOp<"minimum", "minimum"> {
  let description = [{
    torch.minimum of two tensors of the same type (no broadcasting: the
    importer expands an operand first): NaN where either is NaN. Its
    gradient goes to the smaller operand, half to each at a tie, as
    autograd's.

    ```mlir
    %y = nn.minimum %a, %b : tensor<8x64xf32>
    ```
  }];
}
def NN_MaximumOp : NN_SameShapeBinaryOp<"maximum", "maximum"> {
  let description = [{
    torch.maximum of two tensors of the same type, as `nn.minimum`: NaN
    where either is NaN, the gradient to the larger operand, half to each
    at a tie.

    ```mlir
    %y = nn.maximum %a, %b : tensor<8x64xf32>
    ```
  }];
}

def NN_WhereOp : NN_Op<"where", [
    AllTypesMatch<["condition", "true_value", "false_value", "result"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Select by a mask, as torch.where";
  let description = [{
    `condition != 0 ? true_value : false_value` elementwise. The condition
    is a float mask (1 and 0, a boolean tensor as the step holds one) of
    the values' type; it gets no gradient (NaN counts as true, as
    `bool(nan)`). The gradient of each value is the result's where it was
    selected and 0 elsewhere.

    ```mlir
    %y = nn.where %mask, %a, %b : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$condition, NN_FloatTensor:$true_value,
                       NN_FloatTensor:$false_value);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` type($result)
  }];
}

def NN_StopGradientOp : NN_Op<"stop_gradient", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface>,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "Identity without a derivative, as torch's detach()";
  let description = [{
    The input's values, through which no gradient flows: `zero-autodiff`
    gives its input none. A view of its input's buffer: no kernel runs.

    ```mlir
    %old = nn.stop_gradient %logps : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_GatherOp : NN_Op<"gather", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<IndexOperandOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Elements along the last dimension, as torch.gather(x, -1, i)";
  let description = [{
    `x` [..., N] and `indices` [..., K] with the same leading dimensions:
    `result[..., j] = x[..., indices[..., j]]` ([..., K], x's element type),
    as `torch.gather(x, -1, indices)` and `torch.take_along_dim(x, indices,
    -1)`. `indices` may also be [...] (x's rank minus one), one element per
    row, the result then [...]: `x.gather(-1, i.unsqueeze(-1)).squeeze(-1)`,
    TRL's selective log-softmax. Indices lie in `[0, N)`; others are a
    runtime error. The gradient adds each result's gradient into its
    element (`nn.gather_grad`, a scatter-add in index order).

    ```mlir
    %y = nn.gather %logits[%ids] : tensor<8x64x256xf32>, tensor<8x64xi64> -> tensor<8x64xf32>
    %z = nn.gather %x[%idx] : tensor<8x16xf32>, tensor<8x3xi32> -> tensor<8x3xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IndexTensor:$indices);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` attr-dict `:` type($input) `,` type($indices) `->` type($result)
  }];
}

def NN_ClampGradOp : NN_Op<"clamp_grad", [
    AllTypesMatch<["input", "result_grad", "result"]>]> {
  let summary = "Backward of `nn.clamp`";
  let description = [{
    `min <= x <= max ? dy : 0` from the forward input (a bound left out
    always holds; NaN inputs get 0).

    ```mlir
    %dx = nn.clamp_grad %x, %dy min 8.000000e-01 max 1.200000e+00 : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$result_grad,
                       OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad (`min` $min^)? (`max` $max^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

class NN_SameShapeBinaryGradOp<string mnemonic, string fwd, string rule>
    : NN_Op<mnemonic, [AllTypesMatch<["lhs", "rhs", "result_grad", "lhs_grad",
                                      "rhs_grad"]>]> {
  let summary = "Backward of `nn." # fwd # "`";
  let description = [{
    From both operands and the result's gradient dy, as autograd's
    }] # rule # [{

    ```mlir
    %da, %db = nn.}] # mnemonic # [{ %a, %b, %dy : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$lhs_grad, NN_FloatTensor:$rhs_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $result_grad attr-dict `:` type($lhs)
  }];
}
def NN_MinimumGradOp : NN_SameShapeBinaryGradOp<"minimum_grad", "minimum", [{
    `da = a == b ? dy / 2 : (a > b ? 0 : dy)` and
    `db = a == b ? dy / 2 : (a < b ? 0 : dy)` (a NaN operand: both get dy).
  }]>;
def NN_MaximumGradOp : NN_SameShapeBinaryGradOp<"maximum_grad", "maximum", [{
    `da = a == b ? dy / 2 : (a < b ? 0 : dy)` and
    `db = a == b ? dy / 2 : (a > b ? 0 : dy)` (a NaN operand: both get dy).
  }]>;

def NN_WhereGradOp : NN_Op<"where_grad", [
    AllTypesMatch<["condition", "result_grad", "true_grad", "false_grad"]>]> {
  let summary = "Backward of `nn.where`";
  let description = [{
    `dt = condition != 0 ? dy : 0` and `df = condition != 0 ? 0 : dy`.

    ```mlir
    %dt, %df = nn.where_grad %mask, %dy : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$condition,
                       NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$true_grad, NN_FloatTensor:$false_grad);
  let assemblyFormat = [{
    $condition `,` $result_grad attr-dict `:` type($condition)
  }];
}

def NN_GatherGradOp : NN_Op<"gather_grad", [NN_KeepsLeadingRows,
    DeclareOpInterfaceMethods<IndexOperandOpInterface>]> {
  let summary = "Backward of `nn.gather`: a scatter-add";
  let description = [{
    `dx` [..., N] (the result's type) zero but for `dx[..., i[..., j]] +=
    dy[..., j]`, added in the order of j (fp32 sums, deterministic), from
    the indices and the gradient of the gather's result.

    ```mlir
    %dx = nn.gather_grad %ids, %dy : tensor<8x64xi64>, tensor<8x64xf32> -> tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$indices, NN_FloatTensor:$result_grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $result_grad attr-dict `:` type($indices) `,` type($result_grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // ZERO_DIALECT_NN_IR_NNOPS
