/*===- session.h - zero-mlir runtime: the compiled step as a library ------===*
 *
 * Part of the zero-mlir project.
 *
 * A session is one rank of a training run that its host drives step by
 * step: `zero-compile --emit shared` links the compiled step and the runtime
 * into one shared object that exports these calls and `zero_program`. The
 * executable's driver (zrt_train_main) runs on the same session.
 *
 * Every call returns a zrt_status. On an error the session keeps a message
 * naming what was wrong (zrt_session_error); nothing in a session aborts or
 * exits the process. ZRT_INVALID_INPUT is found before any collective or
 * state change, on every rank alike, and leaves the session as it was:
 * the next correct call is the call the bad one would have been. After
 * ZRT_BROKEN (a failure partway through a collective call) only
 * zrt_session_close is left.
 *
 * Calls marked "collective" are made by every rank of the world in the same
 * order, as MPI's are.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_SESSION_H
#define ZERO_RT_SESSION_H

#include "zero_rt/program.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of these calls and structs.
 * 2: zrt_session_report and zrt_session_broadcast. */
#define ZRT_SESSION_API_VERSION 2

typedef enum zrt_status {
  ZRT_OK = 0,
  /* Arrays or arguments that do not fit the program (Python: ValueError). */
  ZRT_INVALID_INPUT = 1,
  /* A call that failed and changed nothing: a file that cannot be read or
   * written, a checkpoint of another program (Python: RuntimeError). */
  ZRT_FAILED = 2,
  /* A failure partway through: the session's state is lost (RuntimeError). */
  ZRT_BROKEN = 3,
} zrt_status;

typedef struct zrt_session zrt_session;

/* A host array: row-major and contiguous. `dtype` is NumPy's type string
 * ("<i8", "<i4", "<f4", "<f2", "<u2" for bf16 bits, ...). */
typedef struct zrt_array {
  const char *name;
  const void *data;
  const char *dtype;
  int32_t ndim;
  const int64_t *shape;
} zrt_array;

/* An input of the step as the host passes it: its name, NumPy dtype and the
 * shape of a global batch (every rank's rows of every micro step of one
 * optimizer step), or of one rank's share of it when `local`. */
typedef struct zrt_input_info {
  const char *name;
  const char *dtype;
  int32_t ndim;
  int64_t shape[8];
} zrt_input_info;

/* A tensor streamed out of the session, valid until the next call. */
typedef struct zrt_tensor {
  const char *name;
  const float *data;
  int32_t ndim;
  int64_t shape[8];
} zrt_tensor;

/* The runtime's ZRT_SESSION_API_VERSION, for a host to check. */
int32_t zrt_session_api_version(void);

/* Opens rank `this process` of a run of `program` (collective). `argv`
 * holds the executable's options that set a run up (--seed, --init-from,
 * --resume, --threads, --device, --quiet, ...; none that reads data or
 * trains). Initializes MPI if the host has not, and otherwise uses
 * MPI_COMM_WORLD. `*out` is set even on an error (null only when out of
 * memory), so that zrt_session_error can say why; close it either way.
 * Arenas of the plan that do not fit in some rank's memory are ZRT_FAILED
 * on every rank, and so is a second session while one is open: a process
 * holds one session at a time (close one, then open the next). */
zrt_status zrt_session_open(const zrt_program *program, int32_t argc,
                            const char *const *argv, zrt_session **out);

/* The last error's message on this rank ("" after a success). */
const char *zrt_session_error(const zrt_session *session);

/* The step's inputs. */
int32_t zrt_session_num_inputs(const zrt_session *session);
zrt_status zrt_session_input(const zrt_session *session, int32_t index,
                             int32_t local, zrt_input_info *out);

/* One optimizer step (collective) on `arrays`, one per input by name: the
 * global batch, of which each rank takes its rows as the executable reads a
 * file's, or with `local` this rank's own rows. `*record` is the step's
 * --log-json line (JSON), valid until the next call. */
zrt_status zrt_session_step(zrt_session *session, const zrt_array *arrays,
                            int32_t count, int32_t local,
                            const char **record);

/* The forward only (the program's eval_step), no state change
 * (collective): `*record` is JSON with the loss and, for a mean over valid
 * labels, their count. */
zrt_status zrt_session_evaluate(zrt_session *session, const zrt_array *arrays,
                                int32_t count, int32_t local,
                                const char **record);

/* The full fp32 parameters as --export-hf writes them (Hugging Face names
 * for an imported model, LoRA merged; the checkpoint's names otherwise),
 * gathered about `bucket_bytes` at a time (collective: every rank calls
 * next until it returns a tensor with a null name). `rank` -1 delivers
 * every tensor to every rank, else to that rank only (the others get names
 * and shapes with null data). */
zrt_status zrt_session_parameters_begin(zrt_session *session,
                                        int64_t bucket_bytes, int32_t rank);
zrt_status zrt_session_parameters_next(zrt_session *session, zrt_tensor *out);
/* The most bytes of gathered tensors this rank's streams held at once:
 * at most bucket_bytes, or a larger group's (one tensor, or a LoRA layer's
 * base and adapters) where one exceeds it. The gathers go through host
 * memory: the device holds the plan alone. */
int64_t zrt_session_stream_peak_bytes(const zrt_session *session);

/* Checkpoints (collective): the executable's --save/--resume format, with
 * its resharding. */
zrt_status zrt_session_save(zrt_session *session, const char *dir);
zrt_status zrt_session_load(zrt_session *session, const char *dir);
/* --export-hf's directory (collective). */
zrt_status zrt_session_export_hf(zrt_session *session, const char *dir);

/* Moves the arenas and optimizer states to host memory and back
 * (collective): the device's memory is freed (the CPU backend's arenas go
 * back to the system). A step after reload is bitwise the step without the
 * pair; between them only close is allowed. A reload whose arenas do not
 * fit in some rank's memory is ZRT_FAILED on every rank, and the session
 * stays offloaded, its state held, for another reload. */
zrt_status zrt_session_offload(zrt_session *session);
zrt_status zrt_session_reload(zrt_session *session);
/* The bytes held in host memory while offloaded (0 otherwise). */
int64_t zrt_session_offloaded_bytes(const zrt_session *session);

/* The manifest (JSON), the plan the compiler wrote into it included. */
const char *zrt_session_manifest(const zrt_session *session);
/* `*json` is the report (`zero-opt --zero-report`'s JSON: memory,
 * communication and predicted time per rank) of the schedule this library
 * was compiled from, which `zero-compile --emit shared` links into it,
 * priced on the compile's hardware preset; valid while the session is.
 * ZRT_FAILED where the program carries none (an executable's). */
zrt_status zrt_session_report(const zrt_session *session, const char **json);

/* Sends rank `root`'s array to every rank (collective), over
 * MPI_COMM_WORLD: `array` is read on `root` only (the others may pass
 * null; its name is ignored), and `*out` is on every rank, root included,
 * a copy of it (dtype, shape and data; out->name is null), valid until the
 * next call. `dtype` is a NumPy type string of a bool, integer, float or
 * complex ("|b1", "<i8", "<f4", "<u2", "<c8", ...). A root outside the
 * world is ZRT_INVALID_INPUT on every rank before any collective; so is an
 * array the root cannot send (null, or a dtype or shape that is not one),
 * which the root finds and tells the others first. Allowed while
 * offloaded. */
zrt_status zrt_session_broadcast(zrt_session *session, int32_t root,
                                 const zrt_array *array, zrt_array *out);
/* This process's rank and the world's size. */
int32_t zrt_session_rank(const zrt_session *session);
int32_t zrt_session_world_size(const zrt_session *session);
/* The optimizer steps taken (a resumed checkpoint's included). */
int64_t zrt_session_steps(const zrt_session *session);
/* The largest peak of device memory measured over every rank so far. */
int64_t zrt_session_peak_bytes(const zrt_session *session);

/* Frees everything (collective). MPI is finalized at the process's exit
 * when the first session initialized it, so that a host can open another. */
void zrt_session_close(zrt_session *session);

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_SESSION_H */
