"""Writes a scheduled stage-0 module with N parameters of 2^48 elements each
(the most a tensor may have), for the int64-overflow tests of the memory plan
and the report.

usage: many_params.py N [accumulation_steps]
With accumulation_steps, the step also all-reduces the whole layout once per
micro step (in no boundary phase), which the report multiplies by the steps.
"""
import sys

n = int(sys.argv[1])
acc = int(sys.argv[2]) if len(sys.argv) > 2 else 0
side = 1 << 24  # 2^24 x 2^24 = 2^48 elements
numel = n * side * side
names = ", ".join(f"@p{i}" for i in range(n))
offsets = ", ".join(str(i * side * side) for i in range(n))
for i in range(n):
    print(f"zero.param @p{i} : tensor<{side}x{side}xf32> init zeros")
print(f"zero.partition @flat stage 0 world_size 1 alignment 1 numel {numel} "
      f"padded {numel} params [{names}] offsets [{offsets}]")
schedule = f"stage = 0, world_size = 1, global_batch = {max(acc, 1)}"
if acc:
    schedule += f", accumulation_steps = {acc}"
print("zero.train_step @train() optimizer #zero.optimizer<kind = adam, "
      "lr = 1.0e-3> precision #zero.precision<kind = fp32> schedule "
      "#zero.schedule<" + schedule + "> {")
if acc:
    print(f"  zero.all_reduce sum group @flat in grads [0, {numel})")
print("  %l = nn.fill 0.0 : tensor<f32>")
print("  zero.return %l : tensor<f32>")
print("}")
