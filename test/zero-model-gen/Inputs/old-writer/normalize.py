"""The canonical form of a zero-model-gen output, for comparing the values it
writes with those of the old hand-written text writer. Three spellings differ
between that writer and MLIR's printer, and only they are made canonical:
  - a float literal becomes the double it parses to (the old writer wrote %e
    with 7 digits; MLIR writes 6 digits when they round-trip exactly and
    17 otherwise);
  - #zero.optimizer and #zero.lr_schedule parameters get their defaults filled
    in and are sorted by name (the printer elides defaults and orders by
    declaration; the old writer wrote the schedule's keys in the order the
    command line gave them, so no canonical printer can reproduce it);
  - the nested schedule gets its `#zero.lr_schedule` prefix (the printer drops
    it where the parameter's type is known).
One attribute came after that writer and is dropped: the train step's
`input_names` (the inputs' names in the manifest), exactly as zero-model-gen
names its inputs (`input_ids`, `labels` of a decoder; `inputs`, `labels` of
an MLP).
Everything else must match byte for byte."""
import re

OPT_DEFAULTS = {"beta1": "0.9", "beta2": "0.999", "eps": "1e-08",
                "weight_decay": "0.0", "bias_correction": "true"}
SCHED_DEFAULTS = {
    "warmup_min_lr": "0.0", "warmup_max_lr": "0.001", "warmup_num_steps": "1000",
    "warmup_type": "log", "total_num_steps": "0", "warmup_min_ratio": "0.0",
    "cos_min_ratio": "0.0001", "cycle_min_lr": "0.0", "cycle_max_lr": "0.0",
    "decay_lr_rate": "0.0", "cycle_first_step_size": "2000",
    "cycle_second_step_size": "0", "decay_step_size": "0",
    "cycle_momentum": "true", "cycle_min_mom": "0.8", "cycle_max_mom": "0.9",
    "decay_mom_rate": "0.0", "lr_range_test_min_lr": "0.001",
    "lr_range_test_step_size": "2000", "lr_range_test_step_rate": "1.0",
    "lr_range_test_staircase": "false"}
FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d+(?:[eE][+-]?\d+)?")


def _floats(s):
    return FLOAT.sub(lambda m: repr(float(m.group(0))), s)


def _split_top(body):
    depth, cur, items = 0, "", []
    for ch in body:
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        items.append(cur)
    return items


def _params(body, defaults):
    values = dict(defaults)
    for item in _split_top(body):
        key, value = (s.strip() for s in item.split("=", 1))
        if value.startswith("#zero.lr_schedule<") or value.startswith("<"):
            inner = value[value.index("<") + 1:-1]
            value = "#zero.lr_schedule<" + _params(inner, SCHED_DEFAULTS) + ">"
        elif re.fullmatch(r"-?\d+", value) and "." in defaults.get(key, ""):
            value = repr(float(value))
        values[key] = value
    return ", ".join("%s = %s" % kv for kv in sorted(values.items()))


def _optimizer(line):
    start = line.find("#zero.optimizer<")
    if start < 0:
        return line
    end, depth = start + len("#zero.optimizer"), 0
    while True:
        depth += (line[end] == "<") - (line[end] == ">")
        if depth == 0 and line[end] == ">":
            break
        end += 1
    body = line[start + len("#zero.optimizer<"):end]
    return (line[:start] + "#zero.optimizer<" + _params(body, OPT_DEFAULTS) +
            ">" + line[end + 1:])


INPUT_NAMES = re.compile(r' attributes \{input_names = '
                         r'\["(?:input_ids|inputs)", "labels"\]\}(?= \{$)')


def canonical(text):
    return "".join(_optimizer(_floats(INPUT_NAMES.sub("", line)))
                   if line.startswith("  zero.train_step @train(") else
                   _optimizer(_floats(line))
                   for line in text.splitlines(keepends=True))
