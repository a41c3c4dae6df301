/*===- fake_session.c - a step library without a step, for zero_mlir ------===*
 *
 * Part of the zero-mlir project.
 *
 * Implements zero_rt/session.h over nothing, so that test/Python checks what
 * zero_mlir passes and returns without compiling or running a step. Its
 * records echo the arrays it was given (name, dtype, shape, sum of the
 * values); an argument --bad, an array count other than the inputs' and an
 * array named "lost" give its three kinds of error.
 *
 *===----------------------------------------------------------------------===*/

#include "zero_rt/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FAKE_API_VERSION
#define FAKE_API_VERSION ZRT_SESSION_API_VERSION
#endif

const zrt_program zero_program = {0};

struct zrt_session {
  char error[256];
  char text[4096];
  char argv[1024];
  int64_t steps;
  int32_t parameter;
  int32_t rank;
  float values[6];
  char received[4096];
  char dtype[8];
  int64_t shape[8];
};

int32_t zrt_session_api_version(void) { return FAKE_API_VERSION; }

static zrt_status fail(zrt_session *s, zrt_status status, const char *what) {
  snprintf(s->error, sizeof s->error, "%s", what);
  return status;
}

static zrt_status ok(zrt_session *s) {
  s->error[0] = 0;
  return ZRT_OK;
}

zrt_status zrt_session_open(const zrt_program *program, int32_t argc,
                            const char *const *argv, zrt_session **out) {
  zrt_session *s = calloc(1, sizeof *s);
  *out = s;
  if (!s)
    return ZRT_FAILED;
  if (program != &zero_program)
    return fail(s, ZRT_FAILED, "not this library's program");
  size_t used = 0;
  for (int32_t i = 0; i < argc; ++i) {
    if (!strcmp(argv[i], "--bad"))
      return fail(s, ZRT_INVALID_INPUT, "unknown option --bad");
    used += snprintf(s->argv + used, sizeof s->argv - used, "%s\"%s\"",
                     i ? "," : "", argv[i]);
  }
  return ok(s);
}

const char *zrt_session_error(const zrt_session *s) { return s->error; }

int32_t zrt_session_num_inputs(const zrt_session *s) { return 2; }

zrt_status zrt_session_input(const zrt_session *s, int32_t index, int32_t local,
                             zrt_input_info *out) {
  if (index < 0 || index > 1)
    return ZRT_INVALID_INPUT;
  out->name = index ? "labels" : "input_ids";
  out->dtype = "<i8";
  out->ndim = 2;
  out->shape[0] = local ? 2 : 4;
  out->shape[1] = 8;
  return ZRT_OK;
}

static double sum(const zrt_array *a) {
  int64_t n = 1;
  for (int32_t d = 0; d < a->ndim; ++d)
    n *= a->shape[d];
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!strcmp(a->dtype, "<i8"))
      total += ((const int64_t *)a->data)[i];
    else if (!strcmp(a->dtype, "<i4"))
      total += ((const int32_t *)a->data)[i];
    else if (!strcmp(a->dtype, "<f4"))
      total += ((const float *)a->data)[i];
    else if (!strcmp(a->dtype, "<u2"))
      total += ((const uint16_t *)a->data)[i];
  }
  return total;
}

static zrt_status run(zrt_session *s, const zrt_array *arrays, int32_t count,
                      int32_t local, const char **record, const char *kind) {
  if (count != 2)
    return fail(s, ZRT_INVALID_INPUT, "expected 2 arrays (input_ids, labels)");
  for (int32_t i = 0; i < count; ++i)
    if (!strcmp(arrays[i].name, "lost"))
      return fail(s, ZRT_BROKEN, "a rank failed partway");
  size_t used =
      snprintf(s->text, sizeof s->text,
               "{\"kind\":\"%s\",\"local\":%d,\"arrays\":[", kind, local);
  for (int32_t i = 0; i < count; ++i) {
    const zrt_array *a = &arrays[i];
    used += snprintf(s->text + used, sizeof s->text - used,
                     "%s{\"name\":\"%s\",\"dtype\":\"%s\",\"shape\":[",
                     i ? "," : "", a->name, a->dtype);
    for (int32_t d = 0; d < a->ndim; ++d)
      used += snprintf(s->text + used, sizeof s->text - used, "%s%lld",
                       d ? "," : "", (long long)a->shape[d]);
    used += snprintf(s->text + used, sizeof s->text - used, "],\"sum\":%g}",
                     sum(a));
  }
  snprintf(s->text + used, sizeof s->text - used, "]}");
  *record = s->text;
  return ok(s);
}

zrt_status zrt_session_step(zrt_session *s, const zrt_array *arrays,
                            int32_t count, int32_t local, const char **record) {
  zrt_status status = run(s, arrays, count, local, record, "step");
  if (status == ZRT_OK)
    ++s->steps;
  return status;
}

zrt_status zrt_session_evaluate(zrt_session *s, const zrt_array *arrays,
                                int32_t count, int32_t local,
                                const char **record) {
  return run(s, arrays, count, local, record, "evaluate");
}

zrt_status zrt_session_parameters_begin(zrt_session *s, int64_t bucket_bytes,
                                        int32_t rank) {
  if (bucket_bytes <= 0)
    return fail(s, ZRT_INVALID_INPUT, "bucket_bytes must be positive");
  s->parameter = 0;
  s->rank = rank;
  return ok(s);
}

/* Two tensors: w [2, 3] = 0..5 and b [3] = 0.5, 1.5, 2.5; this is rank 0. */
zrt_status zrt_session_parameters_next(zrt_session *s, zrt_tensor *out) {
  memset(out, 0, sizeof *out);
  int32_t k = s->parameter++;
  if (k > 1)
    return ok(s);
  out->name = k ? "b" : "w";
  out->ndim = k ? 1 : 2;
  out->shape[0] = k ? 3 : 2;
  out->shape[1] = 3;
  for (int i = 0; i < 6; ++i)
    s->values[i] = k ? i + 0.5f : (float)i;
  out->data = s->rank == -1 || s->rank == 0 ? s->values : NULL;
  return ok(s);
}

static zrt_status path(zrt_session *s, const char *dir, const char *what) {
  if (!strcmp(dir, "/nonexistent"))
    return fail(s, ZRT_FAILED, "cannot read /nonexistent");
  snprintf(s->text, sizeof s->text, "%s %s", what, dir);
  return ok(s);
}

zrt_status zrt_session_save(zrt_session *s, const char *dir) {
  return path(s, dir, "save");
}
zrt_status zrt_session_load(zrt_session *s, const char *dir) {
  return path(s, dir, "load");
}
zrt_status zrt_session_export_hf(zrt_session *s, const char *dir) {
  return path(s, dir, "export_hf");
}
zrt_status zrt_session_offload(zrt_session *s) { return ok(s); }
zrt_status zrt_session_reload(zrt_session *s) { return ok(s); }

const char *zrt_session_manifest(const zrt_session *s) {
  static char text[2048];
  snprintf(text, sizeof text,
           "{\"argv\":[%s],\"plan\":{\"persistent_bytes\":64,"
           "\"arena_bytes\":32,\"peak_bytes\":96}}",
           s->argv);
  return text;
}

zrt_status zrt_session_report(const zrt_session *s, const char **json) {
  *json = "{\"stage\": 3, \"world_size\": 1, \"persistent_bytes\": 64, "
          "\"step_arena_bytes\": 32, \"peak_bytes\": 96}\n";
  return ZRT_OK;
}

/* World size 1: the root's array, copied, with the header checks of the
 * runtime's (a known dtype, at most 8 dims and 4096 bytes here). */
zrt_status zrt_session_broadcast(zrt_session *s, int32_t root,
                                 const zrt_array *array, zrt_array *out) {
  memset(out, 0, sizeof *out);
  if (root != 0)
    return fail(s, ZRT_INVALID_INPUT, "rank outside the world");
  if (!array)
    return fail(s, ZRT_INVALID_INPUT, "broadcast: the root has no array");
  int64_t n = strlen(array->dtype) > 2 ? atoi(array->dtype + 2) : 0;
  if (n <= 0 || array->ndim > 8)
    return fail(s, ZRT_INVALID_INPUT, "broadcast: a bad array");
  for (int32_t d = 0; d < array->ndim; ++d)
    n *= array->shape[d];
  if (n > (int64_t)sizeof s->received)
    return fail(s, ZRT_INVALID_INPUT, "broadcast: too large for the fake");
  memcpy(s->received, array->data, n);
  snprintf(s->dtype, sizeof s->dtype, "%s", array->dtype);
  memcpy(s->shape, array->shape, array->ndim * sizeof(int64_t));
  out->data = s->received;
  out->dtype = s->dtype;
  out->ndim = array->ndim;
  out->shape = s->shape;
  return ok(s);
}

int64_t zrt_session_offloaded_bytes(const zrt_session *s) { return 0; }
int64_t zrt_session_stream_peak_bytes(const zrt_session *s) { return 0; }
int32_t zrt_session_rank(const zrt_session *s) { return 0; }
int32_t zrt_session_world_size(const zrt_session *s) { return 1; }
int64_t zrt_session_steps(const zrt_session *s) { return s->steps; }
int64_t zrt_session_peak_bytes(const zrt_session *s) { return 4096; }

void zrt_session_close(zrt_session *s) {
  printf("fake: closed\n");
  fflush(stdout);
  free(s);
}
