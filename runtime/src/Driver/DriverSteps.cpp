//===- DriverSteps.cpp - The driver's step loop ---------------------------===//
//
// Part of the zero-mlir project.
//
// The training steps of Driver::run: each runs the compiled micro steps on
// this rank's slices of the global batch and the compiled boundary, then
// every rank agrees on its record (loss, times, peak, a stop request) and
// on whether the run goes on. Evaluations and the test hooks that kill or
// stall a rank run between steps.
//
//===----------------------------------------------------------------------===//

#include "Collectives/Flight.h"
#include "Collectives/Groups.h"
#include "Device/Device.h"
#include "Device/Memory.h"
#include "Driver/Driver.h"
#include "Driver/Interrupt.h"
#include "Driver/Trace.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <unistd.h>

using namespace zrt;

void Driver::noteProgress(int64_t step) {
  std::string note = "during step " + std::to_string(step) + "; ";
  if (lastCheckpoint.empty())
    note += "no checkpoint saved";
  else if (opts.save.empty() || lastCheckpoint == opts.resume)
    note += "resumed from '" + lastCheckpoint + "'";
  else
    note += "last checkpoint '" + lastCheckpoint + "' (--resume " + opts.save +
            " continues from it)";
  setInterruptNote(note + "\n");
}

Driver::BatchRows Driver::batchRows() const {
  const Manifest &m = manifest;
  int64_t local =
      m.inputs.empty() || m.inputs[0].shape.empty() ? 0 : m.inputs[0].shape[0];
  // The ranks of a sequence-parallel group read the same rows.
  int64_t dataParallel = ctx.world / m.sequenceParallel;
  return {local, local * dataParallel,
          local * dataParallel * m.accumulationSteps,
          ctx.rank / m.sequenceParallel * local};
}

Driver::Evaluation Driver::evaluate() {
  const Manifest &m = manifest;
  BatchRows rows = batchRows();
  double start = ctx.tracing ? ctx.nowUs() : 0.0;
  // The training step's loss of this step was read already; the next step
  // starts from zero again.
  ctx.lossSum = 0.0;
  ctx.lossCount = 0;
  ctx.evaluating = true;
  // The valid labels of the held-out batches, counted as a step's are (in
  // the slot of micro batch 0, which the step has finished with).
  int64_t labels = 0;
  int32_t micro0 = ctx.micro;
  if (program->count_labels)
    ctx.microLabels.assign(m.accumulationSteps, 0);
  for (int64_t batch = 0; batch < evalBatches; ++batch)
    for (int32_t micro = 0; micro < m.accumulationSteps; ++micro) {
      evalData->load(ctx, batch * rows.perStep + micro * rows.perMicro +
                              rows.rankFirst);
      if (program->count_labels) {
        ctx.micro = 0;
        program->count_labels(&ctx);
        labels += ctx.microLabels[0];
        ctx.micro = micro0;
      }
      program->eval_step(&ctx);
    }
  ctx.evaluating = false;
  {
    WaitScope watched(ctx.waitState, "the evaluation's device work");
    device::finishStep(ctx);
  }
  // The same arithmetic as the training loss, so that a batch evaluated
  // before a step gives that step's loss bit for bit.
  double local = ctx.lossCount ? ctx.lossSum / ctx.lossCount : 0.0, sum = 0.0;
  int64_t tokens = -1;
  {
    WaitScope watched(ctx.waitState, "the evaluation loss all-reduce");
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (ctx.countsLabels)
      MPI_Allreduce(&labels, &tokens, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  }
  if (ctx.tracing)
    ctx.trace.push_back({"eval", start, ctx.nowUs() - start});
  return {sum / ctx.world, tokens};
}

bool Driver::evaluateOnly() {
  Evaluation e = evaluate();
  stepLog->evaluation(progress.step, e.loss, e.tokens);
  return true;
}

bool Driver::train() {
  watchdog.start(ctx, opts.collectiveTimeoutS);
  bool ok = opts.steps > progress.step ? trainSteps() : evaluateOnly();
  // Every rank leaves trainSteps at the same step (its decisions are
  // collective), so the ring can be wound down collectively.
  watchdog.stop();
  return ok;
}

bool Driver::trainSteps() {
  ctx.tracing = !opts.trace.empty();
  ctx.traceStart = std::chrono::steady_clock::now();
  setKernelTracing(ctx.tracing);
  if (ctx.tracing)
    startMemoryTracing(zrt_scratch_bytes_in_use());
  for (int64_t step = progress.step + 1; step <= opts.steps; ++step) {
    // Test hooks: a rank that dies or stops making progress.
    if (step == opts.injectKillStep && ctx.rank == opts.injectKillRank) {
      std::fflush(stdout);
      stepLog->flush();
      std::raise(SIGKILL);
    }
    if (step == opts.injectHangStep && ctx.rank == opts.injectHangRank)
      for (;;)
        ::pause();
    watchdog.beginStep(step);
    // Without the watchdog's thread, a requested flight record is written
    // here, between steps.
    if (!watchdog.running() && takeFlightRequest())
      ctx.flight.dump("SIGUSR1");
    if (ctx.rank == 0)
      noteProgress(step);
    bool last = step == opts.steps;
    bool evaluating =
        evalData &&
        (last || (opts.evalEvery > 0 && step % opts.evalEvery == 0));
    std::optional<StepRecord> trained = trainOne(step, evaluating);
    if (!trained)
      return false;
    const StepRecord &record = *trained;
    if (std::isnan(record.loss) || std::isinf(record.loss)) {
      if (ctx.rank == 0)
        error("the loss is " +
              std::string(std::isnan(record.loss) ? "NaN" : "inf") +
              " at step " + std::to_string(step) +
              " (learning rate too high, or fp16 without loss scaling?)");
      return false;
    }
    stepLog->print(record);
    // Every rank has the same verdict: the stats are all-reduced and the
    // scalers identical.
    if (ctx.overflowAtMinScale && !continueAtMinScale(step, record.scale))
      return false;
    bool saving = !opts.save.empty() &&
                  ((opts.saveEvery > 0 && step % opts.saveEvery == 0) || last);
    if (saving && !save(progress))
      return false;
    killAfter(step);
    if (stopAgreed && !last) {
      if (!opts.save.empty() && !saving && !save(progress))
        return false;
      if (ctx.rank == 0) {
        std::string where = opts.save.empty()
                                ? "no checkpoint written (no --save)"
                                : "checkpoint '" + lastCheckpoint +
                                      "' written (--resume " + opts.save +
                                      " continues from it)";
        // After the step's line.
        std::fflush(stdout);
        std::fprintf(stderr,
                     "zrt: stopped on request (SIGUSR2) after step %lld of "
                     "%lld; %s\n",
                     (long long)step, (long long)opts.steps, where.c_str());
        std::fflush(stderr);
      }
      stopped = true;
      return true;
    }
  }
  return true;
}

std::optional<StepRecord> Driver::trainOne(int64_t step, bool evaluating) {
  float scale = zrt_loss_scaler_scale(&ctx.scaler);
  resetCommCounters();
  StepTimes times = runStep(step);
  // Before an evaluation's gathers.
  const std::array<LinkBytes, kNumCommKinds> &comm = commCounters();
  for (int k = 0; k < kNumCommKinds; ++k)
    commVaried[size_t(k)] |=
        commMeasured && !(comm[size_t(k)] == stepComm[size_t(k)]);
  stepComm = comm;
  commMeasured = true;
  // The count is all-reduced: every rank stops here together.
  if (ctx.noLabels) {
    std::string why = noLabelsMessage(step);
    if (ctx.rank == 0)
      error(why);
    lastMessage = why;
    return std::nullopt;
  }
  progress.step = step;
  progress.dataPosition += batchRows().perStep;
  StepRecord record = agree(step, scale, times, evaluating);
  record.comm = stepComm;
  stepLog->write(record);
  return record;
}

void Driver::killAfter(int64_t step) {
  bool mine = false, any = false;
  for (auto [s, rank] : opts.killAfterStep)
    if (s == step && rank < ctx.world) {
      any = true;
      mine |= rank == ctx.rank;
    }
  if (!any)
    return;
  // The step's checkpoint is complete (save agreed on it); every rank
  // reaches this point before the killed ones die, so none is still
  // writing.
  MPI_Barrier(MPI_COMM_WORLD);
  if (!mine)
    return;
  std::fprintf(stderr,
               "zrt: test hook: ZRT_TEST_KILL_AT_STEP: rank %d kills itself "
               "after step %lld\n",
               ctx.rank, (long long)step);
  std::fflush(stderr);
  std::fflush(stdout);
  stepLog->flush();
  std::raise(SIGKILL);
}

Driver::StepTimes Driver::runStep(int64_t step) {
  const Manifest &m = manifest;
  BatchRows rows = batchRows();
  // What the driver writes into the step arena before each micro step.
  std::vector<std::pair<int64_t, int64_t>> inputBytes;
  for (const InputInfo &in : m.inputs)
    inputBytes.push_back({in.offset, in.numel() * in.elementBytes()});
  ctx.stepIndex = step;
  ctx.lossSum = 0.0;
  ctx.lossCount = 0;
  ctx.skipped = ctx.overflow = ctx.noLabels = false;
  ctx.moeExchanged = false;
  ctx.moeMaxExpertRows = ctx.moeDroppedRows = 0;
  auto start = std::chrono::steady_clock::now();
  double stepStart = ctx.nowUs();
  device::beginStep(ctx);
  // A mean over the valid labels of the global batch, or a loss divided by
  // a sum of the inputs over it: every micro batch's labels and sums are
  // counted before the first one trains (its first micro step all-reduces
  // them, before the backward).
  if (program->count_labels) {
    ctx.microLabels.assign(m.accumulationSteps, 0);
    for (int32_t micro = 0; micro < m.accumulationSteps; ++micro) {
      ctx.micro = micro;
      data->load(ctx, progress.dataPosition + micro * rows.perMicro +
                          rows.rankFirst);
      program->count_labels(&ctx);
    }
  }
  for (int32_t micro = 0; micro < m.accumulationSteps; ++micro) {
    ctx.micro = micro;
    double microStart = ctx.tracing ? ctx.nowUs() : 0.0;
    traceMicroStep(inputBytes);
    data->load(ctx,
               progress.dataPosition + micro * rows.perMicro + rows.rankFirst);
    program->micro_step(&ctx);
    if (ctx.tracing)
      ctx.trace.push_back({"micro step " + std::to_string(micro), microStart,
                           ctx.nowUs() - microStart});
  }
  auto microEnd = std::chrono::steady_clock::now();
  double boundaryStart = ctx.tracing ? ctx.nowUs() : 0.0;
  program->boundary(&ctx);
  if (ctx.tracing)
    ctx.trace.push_back(
        {"boundary", boundaryStart, ctx.nowUs() - boundaryStart});
  if (ctx.drainSlots() > 0 && !warnedSlots) {
    warnedSlots = true;
    if (ctx.rank == 0)
      std::fprintf(stderr, "zrt: warning: the program left collectives "
                           "unwaited at the end of a step; completed "
                           "them\n");
  }
  {
    // A GPU backend has only enqueued the step so far.
    WaitScope watched(ctx.waitState, "the step's device work");
    device::finishStep(ctx);
  }
  auto end = std::chrono::steady_clock::now();
  if (ctx.tracing)
    ctx.trace.push_back(
        {"step " + std::to_string(step), stepStart, ctx.nowUs() - stepStart});
  // wall_clock_breakdown: the host's clock, which on a GPU backend sees the
  // micro steps enqueued and the boundary wait for the step's end.
  using Ms = std::chrono::duration<double, std::milli>;
  return {Ms(end - start).count(), Ms(microEnd - start).count(),
          Ms(end - microEnd).count()};
}

StepRecord Driver::agree(int64_t step, float scale, const StepTimes &local,
                         bool evaluating) {
  const Manifest &m = manifest;
  StepRecord r;
  r.step = step;
  r.scale = scale;
  // Global values: the mean of the ranks' losses, the slowest rank's
  // times, the largest peak, and whether any rank was asked to stop.
  double mine[5] = {ctx.lossCount ? ctx.lossSum / ctx.lossCount : 0.0, local.ms,
                    local.microMs, local.boundaryMs,
                    stopRequested() ? 1.0 : 0.0};
  double all[5];
  // The MoE figures of the training step, before an evaluation's
  // exchanges; every rank runs the same exchanges, so all agree on whether
  // there are any.
  r.moe = ctx.moeExchanged;
  if (r.moe) {
    WaitScope watched(ctx.waitState, "the step's MoE figures all-reduce");
    r.moeMaxExpertRows = ctx.moeMaxExpertRows;
    r.moeDroppedRows = ctx.moeDroppedRows;
    MPI_Allreduce(MPI_IN_PLACE, &r.moeMaxExpertRows, 1, MPI_INT64_T, MPI_MAX,
                  MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &r.moeDroppedRows, 1, MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  r.evaluated = evaluating;
  if (evaluating) {
    Evaluation e = evaluate();
    r.evalLoss = e.loss;
    r.evalTokens = e.tokens;
  }
  r.peakBytes = zrt_memory_peak_bytes();
  {
    WaitScope watched(ctx.waitState, "the step's loss/time/peak all-reduce");
    MPI_Allreduce(mine, all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(mine + 1, all + 1, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &r.peakBytes, 1, MPI_INT64_T, MPI_MAX,
                  MPI_COMM_WORLD);
  }
  maxPeak = std::max(maxPeak, r.peakBytes);
  r.loss = all[0] / ctx.world;
  r.ms = all[1];
  r.microMs = all[2];
  r.boundaryMs = all[3];
  stopAgreed = all[4] > 0.0;
  r.gradNorm = std::sqrt(double(ctx.stats[1]));
  r.rate = double(batchRows().perStep * data->itemsPerRow()) / (r.ms / 1000.0);
  r.unit = data->unit();
  r.nextScale = zrt_loss_scaler_scale(&ctx.scaler);
  r.dynamicScale = ctx.scaler.dynamic;
  r.skipped = ctx.skipped;
  // The count the loss divides by: the valid labels of the global batch,
  // or every label of it without ignore_index.
  r.tokens = ctx.countsLabels ? ctx.stepLabels
                              : batchRows().perStep * data->labelsPerRow();
  r.overflow = ctx.overflow;
  r.adamSteps = ctx.optimizerSteps;
  // The learning rate this step applied, or would have (a skipped step
  // does not advance the schedule, as in DeepSpeed's engine).
  bool scheduled = m.schedule.kind != ZRT_LR_CONSTANT;
  r.beta1 = m.hyperParam(optimizers::HyperParam::beta1);
  r.beta2 = m.hyperParam(optimizers::HyperParam::beta2);
  r.lr = zrt_lr_at(scheduled ? &m.schedule : nullptr, m.lr, &r.beta1, &r.beta2,
                   ctx.skipped ? ctx.optimizerSteps + 1 : ctx.optimizerSteps);
  return r;
}

std::string Driver::noLabelsMessage(int64_t step) const {
  const Manifest &m = manifest;
  BatchRows rows = batchRows();
  std::string ignored;
  for (const InputInfo &in : m.inputs)
    if (in.ignoredIndex && ignored.empty())
      ignored = " " + std::to_string(*in.ignoredIndex);
  return "step " + std::to_string(step) +
         ": every label of the global batch is ignore_index" + ignored +
         ", so its loss, the mean over its valid labels, is 0/0: " +
         data->describeRows(progress.dataPosition, rows.perStep) + " (" +
         std::to_string(ctx.world) + " rank(s) x " +
         std::to_string(m.accumulationSteps) + " micro step(s) x " +
         std::to_string(rows.local) +
         " rows); give each global batch at least one label to learn";
}

bool Driver::continueAtMinScale(int64_t step, float scale) {
  if (opts.stopAtMinLossScale) {
    char msg[320];
    std::snprintf(msg, sizeof(msg),
                  "step %lld: Current loss scale already at minimum - "
                  "cannot decrease scale anymore. Exiting run. (loss "
                  "scale %g = min_loss_scale and the gradients "
                  "overflowed again; --on-min-loss-scale=continue skips "
                  "such steps instead)",
                  (long long)step, double(scale));
    if (ctx.rank == 0)
      error(msg);
    return false;
  }
  if (!warnedMinScale && ctx.rank == 0) {
    std::fprintf(stderr,
                 "zrt: warning: step %lld: gradient overflow with the "
                 "loss scale already at its minimum %g; skipping the "
                 "step and continuing (--on-min-loss-scale=continue)\n",
                 (long long)step, double(scale));
    std::fflush(stderr);
  }
  warnedMinScale = true;
  return true;
}
