// Relations the cost model keeps on schedules built by zero-pipeline, and the
// trace and memory picture zero-report writes with it.

// Weak scaling at stage 3 (4 samples per rank): the same model on more ranks
// communicates more (more ring steps, (n-1)/n of the volume), so the
// predicted step grows with the world size.
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 16 --batch 8 --dtype bf16 | zero-opt --zero-pipeline="stage=3 world-size=2" | zero-opt --zero-report=out=%t.w2.json -o /dev/null
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 16 --batch 16 --dtype bf16 | zero-opt --zero-pipeline="stage=3 world-size=4" -o %t.w4.mlir
// RUN: zero-opt %t.w4.mlir --zero-report="out=%t.w4.json trace=%t.trace.json memory-svg=%t.svg" -o /dev/null
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 16 --batch 32 --dtype bf16 | zero-opt --zero-pipeline="stage=3 world-size=8" | zero-opt --zero-report=out=%t.w8.json -o /dev/null
// RUN: %python -c "import json, sys; r = [json.load(open(f)) for f in sys.argv[1:]]; t = [x['predicted_step_ms'] for x in r]; e = [x['exposed_comm_ms'] for x in r]; assert [x['world_size'] for x in r] == [2, 4, 8]; assert t[0] < t[1] < t[2], t; assert e[0] < e[1] < e[2], e" %t.w2.json %t.w4.json %t.w8.json

// Overlap: with overlap-comm the bucket reductions of the backward are
// asynchronous and hide behind the remaining backward, so less communication
// is exposed and the step is shorter than with synchronous reductions.
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 16 --batch 16 --dtype bf16 | zero-opt --zero-pipeline="stage=2 world-size=4 reduce-bucket-size=20000" | zero-opt --zero-report=out=%t.sync.json -o /dev/null
// RUN: zero-model-gen gpt2 --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 16 --batch 16 --dtype bf16 | zero-opt --zero-pipeline="stage=2 world-size=4 reduce-bucket-size=20000 overlap-comm=true" | zero-opt --zero-report=out=%t.async.json -o /dev/null
// RUN: %python -c "import json, sys; s, a = [json.load(open(f)) for f in sys.argv[1:]]; assert s['comm']['collectives'] == a['comm']['collectives']; assert a['exposed_comm_ms'] < s['exposed_comm_ms'], (a['exposed_comm_ms'], s['exposed_comm_ms']); assert a['predicted_step_ms'] < s['predicted_step_ms']" %t.sync.json %t.async.json

// Presets: the same schedule of a model big enough to be compute-bound is
// far slower on this 2-core machine than on an H100; an H200 (faster HBM)
// predicts yet another time.
// RUN: zero-model-gen gpt2 --layers 2 --hidden 512 --heads 8 --vocab 4096 --seq 128 --batch 16 --dtype bf16 | zero-opt --zero-pipeline="stage=3 world-size=4" -o %t.big.mlir
// RUN: zero-opt %t.big.mlir --zero-report="out=%t.h100.json" -o /dev/null
// RUN: zero-opt %t.big.mlir --zero-report="hardware=h200-sxm out=%t.h200.json" -o /dev/null
// RUN: zero-opt %t.big.mlir --zero-report="hardware=cpu out=%t.cpu.json" -o /dev/null
// RUN: %python -c "import json, sys; g, h, c = [json.load(open(f)) for f in sys.argv[1:]]; assert (g['hardware'], h['hardware'], c['hardware']) == ('h100-sxm', 'h200-sxm', 'cpu'); assert c['predicted_step_ms'] > 10 * g['predicted_step_ms'], (g['predicted_step_ms'], c['predicted_step_ms']); assert h['predicted_step_ms'] != g['predicted_step_ms']" %t.h100.json %t.h200.json %t.cpu.json

// The trace is valid JSON (Perfetto's Chrome-trace format): one process per
// rank, a compute and a communication thread each, complete events with
// non-negative times, collectives on the communication thread, and the
// same timeline on every rank.
// RUN: %python -m json.tool %t.trace.json > /dev/null
// RUN: %python -c "import json, sys; t = json.load(open(sys.argv[1])); ev = t['traceEvents']; m = [e for e in ev if e['ph'] == 'M']; x = [e for e in ev if e['ph'] == 'X']; assert sorted(e['args']['name'] for e in m if e['name'] == 'process_name') == ['rank 0', 'rank 1', 'rank 2', 'rank 3']; assert sorted((e['pid'], e['tid'], e['args']['name']) for e in m if e['name'] == 'thread_name') == [(p, i, n) for p in range(4) for i, n in enumerate(['compute', 'communication'])]; assert all(e['ts'] >= 0 and e['dur'] >= 0 and e['pid'] in range(4) for e in x); assert all(e['tid'] == 1 for e in x if e['cat'] == 'comm'); assert any(e['name'].startswith('zero.prefetch') for e in x); per = [[(e['name'], e['ts']) for e in x if e['pid'] == p] for p in range(4)]; assert all(q == per[0] for q in per); assert t['otherData']['world_size'] == 4 and t['otherData']['ranks_shown'] == 4" %t.trace.json

// The memory picture: a well-formed SVG with the legend, the peak and the
// backward marker.
// RUN: %python -c "import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])" %t.svg
// RUN: FileCheck %s --check-prefix=SVG < %t.svg
// SVG: <svg xmlns="http://www.w3.org/2000/svg"
// SVG: Memory per rank: @train (ZeRO stage 3, 4 ranks)
// SVG: bytes per rank ({{KiB|MiB}})
// SVG: >backward</text>
// SVG: >peak {{[0-9.]+ [KM]iB}} (persistent {{[0-9.]+ [KM]iB}} + arena {{[0-9.]+ [KM]iB}})</text>
// SVG: >params</text>
// SVG: >grads</text>
// SVG: >master_params</text>
// SVG: >adam_m</text>
// SVG: >adam_v</text>
// SVG: >activations</text>
// SVG: >gradients</text>
// SVG: >gather_buffers</text>
// SVG: </svg>

// Many ranks: the trace shows the first 64 and says so.
// RUN: zero-model-gen mlp --sizes 16,32,4 --batch 128 --dtype bf16 | zero-opt --zero-pipeline="stage=2 world-size=128" | zero-opt --zero-report="out=%t.w128.json trace=%t.w128.trace.json" -o /dev/null
// RUN: %python -c "import json, sys; t = json.load(open(sys.argv[1])); names = [e['args']['name'] for e in t['traceEvents'] if e['name'] == 'process_name']; assert len(names) == 64, len(names); assert names[0] == 'rank 0 (first 64 of 128 ranks shown; all alike)', names[0]; assert t['otherData']['world_size'] == 128 and t['otherData']['ranks_shown'] == 64" %t.w128.trace.json
