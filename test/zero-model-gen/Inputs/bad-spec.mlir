// Specs the model_gen dialect refuses (record-spec.test).
module attributes {model_gen.spec = #model_gen.spec<llama, seq = 8, options = {heads_ = 4 : i64}>} {}
// -----
module attributes {model_gen.spec = #model_gen.spec<llama, seq = 8, options = {seq = 4 : i64}>} {}
// -----
module attributes {model_gen.spec = #model_gen.spec<llama, seq = 8, options = {batch = 1.0 : f64}>} {}
// -----
module attributes {model_gen.spec = #model_gen.spec<llama, seq = 8, options = {freeze = []}>} {}
// -----
module attributes {model_gen.spec = #model_gen.spec<llama, options = {}>} {}
// -----
module attributes {model_gen.spec = #model_gen.spec<mlp, seq = 8, options = {}>} {}
// -----
func.func @f() attributes {model_gen.spec = #model_gen.spec<mlp, options = {}>} {
  return
}
