//===- Decoders.cpp - GPT-2 and Llama training steps ----------------------===//
//
// Part of the zero-mlir project.
//
// The decoder-only models: what GPT-2 and Llama share (Decoder), then each
// model's parameters and step.
//
//===----------------------------------------------------------------------===//

#include "ModelGenDetail.h"

using namespace mlir;
using namespace mlir::zero;

namespace mlir::zero::modelgen {

/// What GPT-2 and Llama share: the token embedding, the heads layout,
/// causal attention, residual blocks and the output projection. Sizes:
/// batch B, sequence T, head dimension D.
class Decoder {
public:
  Decoder(StepBuilder &s, int64_t B, int64_t T, int64_t D)
      : s(s), B(B), T(T), D(D) {}

  Value embed(StringRef table, Value tokens, StringRef hint) {
    Value w = s.getParam(table);
    return nn::EmbeddingOp::create(s.b, s.fresh(hint), w, tokens,
                                   /*rows=*/nullptr, /*padding_idx=*/nullptr);
  }

  /// [B, T, n * D] -> [B, n, T, D].
  Value toHeads(Value x, int64_t n) {
    Value r =
        nn::ReshapeOp::create(s.b, s.fresh("heads"), s.tensor({B, T, n, D}), x);
    return nn::TransposeOp::create(s.b, s.fresh("bhtd"), r, kSwapTH);
  }

  /// Causal attention of [B, n, T, D] heads, back to [B, T, n * D].
  Value attend(Value q, Value k, Value v) {
    Value att = nn::AttentionOp::create(
        s.b, s.fresh("att"), q.getType(), q, k, v, /*causal=*/true,
        /*scale=*/nullptr, /*window=*/nullptr, /*softcap=*/nullptr,
        /*alibi=*/nullptr, /*sinks=*/Value(), /*segments=*/Value());
    Value back = nn::TransposeOp::create(s.b, s.fresh("bthd"), att, kSwapTH);
    auto heads = cast<RankedTensorType>(back.getType()).getShape();
    return nn::ReshapeOp::create(s.b, s.fresh("merged"),
                                 s.tensor({B, T, heads[2] * D}), back);
  }

  /// x + block(norm(x)): a pre-norm residual block.
  Value residual(Value x, llvm::function_ref<Value(Value)> norm,
                 llvm::function_ref<Value(Value)> block) {
    Value y = block(norm(x));
    return s.add(x, y, "res");
  }

  /// The final norm, the output projection by `head` [V, C] (%logits) and
  /// the loss against `targets`.
  Value lmLoss(Value x, llvm::function_ref<Value(Value)> norm, StringRef head,
               Value targets) {
    Value xf = norm(x);
    Value w = s.getParam(head);
    Value logits = s.matmul(xf, w, /*transposeW=*/true, s.named("logits"));
    return s.loss(logits, targets);
  }

private:
  static constexpr int64_t kSwapTH[] = {0, 2, 1, 3};
  StepBuilder &s;
  int64_t B, T, D;
};

void gpt2Params(StepBuilder &s, int64_t T, int64_t C, int64_t V, int64_t L) {
  double projStd = 0.02 / std::sqrt(2.0 * static_cast<double>(L));
  auto normal = zero::InitKind::normal, zeros = zero::InitKind::zeros,
       ones = zero::InitKind::ones;
  // Hugging Face GPT2LMHeadModel's state-dict names; the Conv1D weights are
  // [in, out] as there, so exported files load into it unchanged.
  s.param("transformer.wte.weight", {V, C}, normal, 0.02);
  s.param("transformer.wpe.weight", {T, C}, normal, 0.01);
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    s.param(p + "ln_1.weight", {C}, ones);
    s.param(p + "ln_1.bias", {C}, zeros);
    s.param(p + "attn.c_attn.weight", {C, 3 * C}, normal, 0.02);
    s.param(p + "attn.c_attn.bias", {3 * C}, zeros);
    s.param(p + "attn.c_proj.weight", {C, C}, normal, projStd);
    s.param(p + "attn.c_proj.bias", {C}, zeros);
    s.param(p + "ln_2.weight", {C}, ones);
    s.param(p + "ln_2.bias", {C}, zeros);
    s.param(p + "mlp.c_fc.weight", {C, 4 * C}, normal, 0.02);
    s.param(p + "mlp.c_fc.bias", {4 * C}, zeros);
    s.param(p + "mlp.c_proj.weight", {4 * C, C}, normal, projStd);
    s.param(p + "mlp.c_proj.bias", {C}, zeros);
  }
  s.param("transformer.ln_f.weight", {C}, ones);
  s.param("transformer.ln_f.bias", {C}, zeros);
  if (s.g.untied)
    s.param("lm_head.weight", {V, C}, normal, 0.02);
}

OwningOpRef<ModuleOp> genGPT2(MLIRContext *ctx, Gen &g) {
  int64_t B = g.batch, T = g.seq, C = g.hidden, H = g.heads, V = g.vocab,
          L = g.layers;
  if (B <= 0 || T <= 0 || C <= 0 || H <= 0 || V <= 0 || L <= 0) {
    emitError(UnknownLoc::get(ctx)) << "gpt2 sizes must be positive";
    return nullptr;
  }
  if (C % H != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--hidden " << C << " is not divisible by --heads " << H;
    return nullptr;
  }
  StepBuilder s(ctx, g);
  gpt2Params(s, T, C, V, L);
  Type lt = s.labelElementType("i32");
  Value tokens = s.input("tokens", "input_ids", s.tensor({B, T}, lt));
  Value targets = s.input("targets", "labels", s.tensor({B, T}, lt));
  Decoder d(s, B, T, C / H);
  auto layerNorm = [&](const std::string &name) {
    return [&s, name](Value x) -> Value {
      Value w = s.getParam(name + ".weight");
      Value bias = s.getParam(name + ".bias");
      return nn::LayerNormOp::create(s.b, s.fresh("ln"), x, w, bias,
                                     s.f64(1e-5));
    };
  };
  Value tok = d.embed("transformer.wte.weight", tokens, "tok");
  Value wpe = s.getParam("transformer.wpe.weight");
  Value x = s.add(tok, wpe, "x");
  RankedTensorType xt = s.tensor({B, T, C});
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    x = d.residual(x, layerNorm(p + "ln_1"), [&](Value h) {
      Value qkv = s.affine(h, p + "attn.c_attn", "lin");
      auto split = nn::SplitOp::create(s.b, s.namedResults({"q", "k", "v"}),
                                       TypeRange{xt, xt, xt}, qkv, 2);
      SmallVector<Value, 3> heads4;
      for (Value t : split.getResults())
        heads4.push_back(d.toHeads(t, H));
      Value merged = d.attend(heads4[0], heads4[1], heads4[2]);
      return s.affine(merged, p + "attn.c_proj", "lin");
    });
    x = d.residual(x, layerNorm(p + "ln_2"), [&](Value h) {
      Value fc = s.affine(h, p + "mlp.c_fc", "lin");
      Value g = nn::GeluOp::create(s.b, s.fresh("gelu"), fc);
      return s.affine(g, p + "mlp.c_proj", "lin");
    });
  }
  Value loss =
      d.lmLoss(x, layerNorm("transformer.ln_f"),
               g.untied ? "lm_head.weight" : "transformer.wte.weight", targets);
  return s.finish(
      loss, optimizerAttr(ctx, g, zero::OptimizerKind::adamw, 6e-4, 0.95, 0.1),
      precisionAttr(ctx, g));
}

/// A Llama's sizes: the preset's, overridden by the flags.
struct LlamaShape {
  int64_t B, T, C, H, KV, F, V, L;
  double theta, eps;
  bool tied;
};

/// The sizes of the Llama to generate, or none (with an error) where they do
/// not make one.
std::optional<LlamaShape> getLlamaShape(MLIRContext *ctx,
                                        const ModelGenOptions &o) {
  const LlamaPreset &pr = *findLlamaPreset(o.preset);
  int64_t B = pick(o.batch, pr.batch), T = pick(o.seq, pr.seq);
  int64_t C = pick(o.hidden, pr.hidden), H = pick(o.heads, pr.heads);
  int64_t KV = pick(o.kvHeads, pr.kvHeads), F = pick(o.ffn, pr.ffn);
  int64_t V = pick(o.vocab, pr.vocab), L = pick(o.layers, pr.layers);
  double theta = pick(o.ropeTheta, pr.ropeTheta);
  double eps = pick(o.normEps, pr.normEps);
  bool isTied = pick(o.tied, pr.tied);
  struct {
    const char *flag;
    int64_t value;
  } dims[] = {{"--batch", B}, {"--seq", T},       {"--hidden", C},
              {"--heads", H}, {"--kv-heads", KV}, {"--ffn", F},
              {"--vocab", V}, {"--layers", L}};
  for (const auto &d : dims)
    if (d.value <= 0) {
      emitError(UnknownLoc::get(ctx))
          << d.flag << " must be positive, got " << d.value;
      return std::nullopt;
    }
  if (C % H != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--hidden " << C << " is not divisible by --heads " << H;
    return std::nullopt;
  }
  if (H % KV != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--kv-heads " << KV << " does not divide --heads " << H;
    return std::nullopt;
  }
  int64_t D = C / H;
  if (D % 2 != 0) {
    emitError(UnknownLoc::get(ctx))
        << "the head dimension --hidden / --heads = " << C << " / " << H
        << " = " << D << " is odd; rope rotates pairs";
    return std::nullopt;
  }
  if (!(theta > 0 && std::isfinite(theta))) {
    emitError(UnknownLoc::get(ctx))
        << "--rope-theta must be positive, got " << theta;
    return std::nullopt;
  }
  if (!(eps > 0 && std::isfinite(eps))) {
    emitError(UnknownLoc::get(ctx))
        << "--norm-eps must be positive, got " << eps;
    return std::nullopt;
  }
  return LlamaShape{B, T, C, H, KV, F, V, L, theta, eps, isTied};
}

/// A Llama's weights in the order of Hugging Face's state dict;
/// initializer_range 0.02. A projection's weight is [out, in]; with LoRA on
/// it, PEFT's base layer and adapters in PEFT's state-dict order.
void llamaParams(StepBuilder &s, const LlamaShape &m) {
  auto normal = zero::InitKind::normal, ones = zero::InitKind::ones;
  int64_t C = m.C, F = m.F, kvDim = m.C / m.H * m.KV;
  s.param("model.embed_tokens.weight", {m.V, C}, normal, 0.02);
  auto proj = [&](const std::string &module, int64_t out, int64_t in) {
    if (!s.g.loraSpec || !s.g.loraSpec->isTarget(module)) {
      s.param(module + ".weight", {out, in}, normal, 0.02);
      return;
    }
    int64_t r = s.g.loraSpec->r;
    s.param(module + ".base_layer.weight", {out, in}, normal, 0.02);
    s.param(module + ".lora_A.default.weight", {r, in}, normal, 1.0 / r);
    s.param(module + ".lora_B.default.weight", {out, r}, zero::InitKind::zeros);
  };
  for (int64_t l = 0; l < m.L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    proj(p + "self_attn.q_proj", C, C);
    proj(p + "self_attn.k_proj", kvDim, C);
    proj(p + "self_attn.v_proj", kvDim, C);
    proj(p + "self_attn.o_proj", C, C);
    proj(p + "mlp.gate_proj", F, C);
    proj(p + "mlp.up_proj", F, C);
    proj(p + "mlp.down_proj", C, F);
    s.param(p + "input_layernorm.weight", {C}, ones);
    s.param(p + "post_attention_layernorm.weight", {C}, ones);
  }
  s.param("model.norm.weight", {C}, ones);
  if (!m.tied)
    s.param("lm_head.weight", {m.V, C}, normal, 0.02);
}

/// nn.Linear without bias, x @ W^T; with LoRA on it (PEFT's lora.Linear,
/// dropout 0): W x + (alpha / r) B (A x).
Value llamaLinear(StepBuilder &s, Value x, const std::string &name) {
  auto matmulT = [&](Value in, const std::string &weight) {
    Value w = s.getParam(weight);
    return s.matmul(in, w, /*transposeW=*/true, s.fresh("mm"));
  };
  if (!s.g.loraSpec || !s.g.loraSpec->isTarget(name))
    return matmulT(x, name + ".weight");
  Value y = matmulT(x, name + ".base_layer.weight");
  Value ax = matmulT(x, name + ".lora_A.default.weight");
  Value bax = matmulT(ax, name + ".lora_B.default.weight");
  Value scaled = nn::ScaleOp::create(
      s.b, s.fresh("lora"), bax, s.f64(s.g.loraSpec->alpha / s.g.loraSpec->r));
  return s.add(y, scaled, "mm");
}

/// Hugging Face's LlamaForCausalLM, with its state-dict names and [out, in]
/// projection weights, so that exported files load into it unchanged.
OwningOpRef<ModuleOp> genLlama(MLIRContext *ctx, Gen &g) {
  std::optional<LlamaShape> shape = getLlamaShape(ctx, g.o);
  if (!shape)
    return nullptr;
  const LlamaShape &m = *shape;
  StepBuilder s(ctx, g);
  llamaParams(s, m);
  Type lt = s.labelElementType("i32");
  Value tokens = s.input("tokens", "input_ids", s.tensor({m.B, m.T}, lt));
  Value targets = s.input("targets", "labels", s.tensor({m.B, m.T}, lt));
  Decoder d(s, m.B, m.T, m.C / m.H);
  auto rmsNorm = [&](const std::string &name) {
    return [&s, &m, name](Value x) -> Value {
      Value w = s.getParam(name + ".weight");
      return nn::RmsNormOp::create(s.b, s.fresh("norm"), x, w, s.f64(m.eps));
    };
  };
  auto rope = [&](Value x) -> Value {
    return nn::RopeOp::create(s.b, s.fresh("rope"), x, s.f64(m.theta),
                              /*inv_freq=*/nullptr, /*scale=*/nullptr,
                              /*inverse=*/false, /*interleaved=*/false,
                              /*positions=*/Value());
  };
  Value x = d.embed("model.embed_tokens.weight", tokens, "x");
  for (int64_t l = 0; l < m.L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    x = d.residual(x, rmsNorm(p + "input_layernorm"), [&](Value h) {
      Value q = llamaLinear(s, h, p + "self_attn.q_proj");
      Value k = llamaLinear(s, h, p + "self_attn.k_proj");
      Value v = llamaLinear(s, h, p + "self_attn.v_proj");
      Value qr = rope(d.toHeads(q, m.H));
      Value kr = rope(d.toHeads(k, m.KV));
      Value merged = d.attend(qr, kr, d.toHeads(v, m.KV));
      return llamaLinear(s, merged, p + "self_attn.o_proj");
    });
    x = d.residual(x, rmsNorm(p + "post_attention_layernorm"), [&](Value h) {
      Value gate = llamaLinear(s, h, p + "mlp.gate_proj");
      Value up = llamaLinear(s, h, p + "mlp.up_proj");
      Value act = nn::SwigluOp::create(s.b, s.fresh("swiglu"), gate, up);
      return llamaLinear(s, act, p + "mlp.down_proj");
    });
  }
  Value loss = d.lmLoss(x, rmsNorm("model.norm"),
                        m.tied ? "model.embed_tokens.weight" : "lm_head.weight",
                        targets);
  // The Llama 2 paper's AdamW: beta2 0.95, eps 1e-5, weight decay 0.1.
  return s.finish(
      loss,
      optimizerAttr(ctx, g, zero::OptimizerKind::adamw, 3e-4, 0.95, 0.1, 1e-5),
      precisionAttr(ctx, g));
}

} // namespace mlir::zero::modelgen
