/* calrt_ext.h: optional extensions of the CalRT Runtime ABI.
 *
 * An extension is a struct that a runtime may offer beside its function table; a runtime
 * over real hardware usually offers none of them, and a caller must work without them.
 * CalrtApi.extension points to the first extension (or is NULL); each extension starts with
 * CalrtExtensionBase, whose `next` links the chain (the PJRT C API's extension chain is the
 * model). A caller walks the chain, picks the types it knows and skips the others; an
 * extension whose struct_size is smaller than the caller needs is treated as absent.
 *
 * Extensions here:
 *   CALRT_EXT_CLOCK  the device clock of a simulated device: which mode it runs in, and a
 *                    way for the host to spend time on it (host work in virtual time).
 *   CALRT_EXT_TRACE  a bounded recording of what the device did, on the device clock:
 *                    DMA on the PCIe link, compute per chip, D2D reductions.
 *   CALRT_EXT_FAULT  deterministic fault injection: a seeded, declarative fault plan, and
 *                    how often each fault kind was injected at each site (coverage).
 *   CALRT_EXT_DIAG   what the device can say about itself after something went wrong: a
 *                    hang report (chiplets, CSRs, KV slot map, ping/pong ownership, last
 *                    submissions) and a hash of its whole state (determinism checks).
 *   CALRT_EXT_PROBE  the activations of a job's last token at each layer boundary, so that a
 *                    numeric defect can be traced to the first layer and op it touches.
 * The same rules as calrt.h hold: args structs carry struct_size, every call returns a
 * CalrtError* (NULL on success) that the caller destroys with the table's Error_Destroy.
 */
#ifndef CALRT_EXT_H_
#define CALRT_EXT_H_

#include "abi/calrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum CalrtExtensionType {
  CALRT_EXT_CLOCK = 1,
  CALRT_EXT_TRACE = 2,
  CALRT_EXT_FAULT = 3,
  CALRT_EXT_DIAG = 4,
  CALRT_EXT_PROBE = 5,
} CalrtExtensionType;

typedef struct CalrtExtensionBase {
  size_t struct_size; /* of the whole extension struct, base included */
  CalrtExtensionType type;
  const struct CalrtExtensionBase* next; /* NULL at the end of the chain */
} CalrtExtensionBase;

/* ---------------------------------------------------------------------------------------
 * CALRT_EXT_CLOCK
 * ------------------------------------------------------------------------------------- */
typedef enum CalrtClockMode {
  /* Device time moves only while the host waits (Job_Wait, Clock_HostSpend, and the
   * phases that take time: configure, reset). Deterministic; the default. */
  CALRT_CLOCK_VIRTUAL = 1,
  /* Device time follows the host's monotonic clock (1 device ns per host ns); waits block
   * in wall time. For demos and for measuring how a waiter wakes. */
  CALRT_CLOCK_PACED = 2,
} CalrtClockMode;

/* Reports the clock mode and the device time. Errors: INVALID_HANDLE. */
typedef struct Calrt_Clock_Get_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  CalrtClockMode mode;     /* out */
  uint64_t device_time_ns; /* out */
} Calrt_Clock_Get_Args;
#define CALRT_CLOCK_GET_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Clock_Get_Args, device_time_ns)
typedef CalrtError* Calrt_Clock_Get(Calrt_Clock_Get_Args* args);

/* The host spent duration_ns on work of its own (converting logits, sampling, preparing
 * the next input). In VIRTUAL mode the device clock advances by exactly duration_ns, with
 * every device event in that span happening, as if the host had been busy while the device
 * ran; in PACED mode the time has passed already and the call only catches the device up.
 * This is how a benchmark on a virtual clock sees host work overlap device work.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (duration_ns is CALRT_TIMEOUT_INFINITE). */
typedef struct Calrt_Clock_HostSpend_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  uint64_t duration_ns;
} Calrt_Clock_HostSpend_Args;
#define CALRT_CLOCK_HOST_SPEND_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Clock_HostSpend_Args, duration_ns)
typedef CalrtError* Calrt_Clock_HostSpend(Calrt_Clock_HostSpend_Args* args);

typedef struct CalrtClockExtension {
  CalrtExtensionBase base; /* type CALRT_EXT_CLOCK */
  Calrt_Clock_Get* Clock_Get;
  Calrt_Clock_HostSpend* Clock_HostSpend;
} CalrtClockExtension;
#define CALRT_CLOCK_EXTENSION_STRUCT_SIZE CALRT_STRUCT_SIZE(CalrtClockExtension, Clock_HostSpend)

/* ---------------------------------------------------------------------------------------
 * CALRT_EXT_TRACE
 * ------------------------------------------------------------------------------------- */
typedef enum CalrtTraceTrack {
  CALRT_TRACK_CHIP = 1,     /* one per chip: `chip` says which */
  CALRT_TRACK_PCIE_H2D = 2, /* host to device DMA */
  CALRT_TRACK_PCIE_D2H = 3, /* device to host DMA */
  CALRT_TRACK_D2D = 4,      /* the chip-to-chip link */
  CALRT_TRACK_QUEUE = 5,    /* a job from submission until its input DMA starts */
} CalrtTraceTrack;

typedef enum CalrtTraceKind {
  CALRT_TRACE_QUEUED = 1,  /* submitted, waiting for the link (QUEUE track) */
  CALRT_TRACE_H2D = 2,     /* input DMA (PCIE_H2D track) */
  CALRT_TRACE_COMPUTE = 3, /* one barrier-delimited segment of the op list (CHIP track) */
  CALRT_TRACE_D2D = 4,     /* the tensor-parallel reduction closing a segment (D2D track) */
  CALRT_TRACE_D2H = 5,     /* output DMA (PCIE_D2H track) */
} CalrtTraceKind;

/* One span on the device clock. Events come out in the order the device finished the
 * pipeline stages they belong to (a compute stage's spans together, when it ends). */
typedef struct CalrtTraceEvent {
  CalrtTraceTrack track;
  CalrtTraceKind kind;
  uint32_t chip;       /* CHIP track: the chip; otherwise 0 */
  int32_t layer;       /* COMPUTE/D2D: the layer the segment belongs to; -1 for none */
  uint64_t job_serial; /* the job, numbered from 1 per device in submission order */
  uint64_t begin_ns;   /* device clock */
  uint64_t end_ns;     /* device clock */
  uint64_t bytes;      /* moved by the span (DMA, D2D, DRAM traffic of a segment) */
  uint64_t flops;      /* COMPUTE: operations of the segment on this chip */
  const char* label;   /* static storage of the runtime: e.g. "attention", "moe" */
} CalrtTraceEvent;

/* Starts (enable = 1) or stops (0) recording. Starting clears what was recorded before.
 * capacity_events bounds the recording (0: the runtime's default); events past it are
 * dropped and counted, never allocated.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (capacity above the runtime's limit). */
typedef struct Calrt_Trace_Enable_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  uint32_t enable;
  uint64_t capacity_events;
} Calrt_Trace_Enable_Args;
#define CALRT_TRACE_ENABLE_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Trace_Enable_Args, capacity_events)
typedef CalrtError* Calrt_Trace_Enable(Calrt_Trace_Enable_Args* args);

/* Moves up to `capacity` recorded events, oldest first, into `events` (an array of
 * `capacity` elements of event_struct_size bytes each, the caller's sizeof(CalrtTraceEvent)).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (events NULL with capacity > 0),
 *   STRUCT_TOO_SMALL (event_struct_size). */
typedef struct Calrt_Trace_Read_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  CalrtTraceEvent* events;
  size_t event_struct_size;
  size_t capacity;
  size_t count;     /* out: events written */
  uint64_t dropped; /* out: events lost to the capacity bound since recording started */
} Calrt_Trace_Read_Args;
#define CALRT_TRACE_READ_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Trace_Read_Args, dropped)
typedef CalrtError* Calrt_Trace_Read(Calrt_Trace_Read_Args* args);

typedef struct CalrtTraceExtension {
  CalrtExtensionBase base; /* type CALRT_EXT_TRACE */
  Calrt_Trace_Enable* Trace_Enable;
  Calrt_Trace_Read* Trace_Read;
} CalrtTraceExtension;
#define CALRT_TRACE_EXTENSION_STRUCT_SIZE CALRT_STRUCT_SIZE(CalrtTraceExtension, Trace_Read)

/* ---------------------------------------------------------------------------------------
 * CALRT_EXT_FAULT
 * ------------------------------------------------------------------------------------- */

/* Replaces the device's fault plan. `plan` is YAML text of `plan_size` bytes in the schema
 * of simdev/device/FAULTS.md (a seed and a list of faults, each with a kind, a trigger and
 * its parameters); an empty plan injects nothing. Counters of earlier hits are kept.
 * The plan's own random stream is derived from its seed alone, so the same plan on the
 * same call sequence injects the same faults at the same places.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (plan NULL with plan_size > 0, or a plan that
 *   does not parse: the message names the field and the value). */
typedef struct Calrt_Fault_SetPlan_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  const char* plan;
  size_t plan_size;
} Calrt_Fault_SetPlan_Args;
#define CALRT_FAULT_SET_PLAN_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Fault_SetPlan_Args, plan_size)
typedef CalrtError* Calrt_Fault_SetPlan(Calrt_Fault_SetPlan_Args* args);

/* How many times one fault kind was injected at one site since the device was created. */
typedef struct CalrtFaultHit {
  const char* kind; /* static storage: "dma_h2d", "job_hang", ... */
  const char* site; /* static storage: "configure", "prefill", "decode", "kv_update", "kv" */
  uint64_t count;
} CalrtFaultHit;

/* Fills `hits` (an array of `capacity` elements of hit_struct_size bytes each, the caller's
 * sizeof(CalrtFaultHit)) with one entry per (kind, site) pair at which the kind can be
 * injected, zero counts included, in a fixed order. `count` is the number of pairs; when
 * it exceeds capacity only the first `capacity` are written (call again with more room).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (hits NULL with capacity > 0),
 *   STRUCT_TOO_SMALL (hit_struct_size). */
typedef struct Calrt_Fault_GetHits_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  CalrtFaultHit* hits;
  size_t hit_struct_size;
  size_t capacity;
  size_t count; /* out */
} Calrt_Fault_GetHits_Args;
#define CALRT_FAULT_GET_HITS_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Fault_GetHits_Args, count)
typedef CalrtError* Calrt_Fault_GetHits(Calrt_Fault_GetHits_Args* args);

typedef struct CalrtFaultExtension {
  CalrtExtensionBase base; /* type CALRT_EXT_FAULT */
  Calrt_Fault_SetPlan* Fault_SetPlan;
  Calrt_Fault_GetHits* Fault_GetHits;
} CalrtFaultExtension;
#define CALRT_FAULT_EXTENSION_STRUCT_SIZE CALRT_STRUCT_SIZE(CalrtFaultExtension, Fault_GetHits)

/* ---------------------------------------------------------------------------------------
 * CALRT_EXT_DIAG
 * ------------------------------------------------------------------------------------- */

/* Writes the device's hang report, a JSON object (UTF-8, not NUL-terminated), into
 * `buffer`: the device state and what it needs to recover, each chiplet's activity and
 * current op, the CSR values and ping/pong ownership of every buffer, the KV slot map, the
 * last submissions, and the faults injected so far. Collect it before resetting: a reset
 * clears what it describes. `size` is the report's length; when it exceeds `capacity`
 * nothing is written (call again with a buffer of `size` bytes). Allowed in every device
 * state, LOST included.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (buffer NULL with capacity > 0). */
typedef struct Calrt_Diag_Report_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  char* buffer;
  size_t capacity;
  size_t size; /* out */
} Calrt_Diag_Report_Args;
#define CALRT_DIAG_REPORT_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Diag_Report_Args, size)
typedef CalrtError* Calrt_Diag_Report(Calrt_Diag_Report_Args* args);

/* A 64-bit hash of the device's whole state: clock, state machine, counters, every live
 * object and its contents (buffers, CSRs, jobs, KV slots), fault counters. Two runs with the
 * same calbin, config, seed and call sequence end with the same hash.
 * Errors: INVALID_HANDLE. */
typedef struct Calrt_Diag_StateHash_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  uint64_t hash; /* out */
} Calrt_Diag_StateHash_Args;
#define CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Diag_StateHash_Args, hash)
typedef CalrtError* Calrt_Diag_StateHash(Calrt_Diag_StateHash_Args* args);

typedef struct CalrtDiagExtension {
  CalrtExtensionBase base; /* type CALRT_EXT_DIAG */
  Calrt_Diag_Report* Diag_Report;
  Calrt_Diag_StateHash* Diag_StateHash;
} CalrtDiagExtension;
#define CALRT_DIAG_EXTENSION_STRUCT_SIZE CALRT_STRUCT_SIZE(CalrtDiagExtension, Diag_StateHash)

/* ---------------------------------------------------------------------------------------
 * CALRT_EXT_PROBE
 * ------------------------------------------------------------------------------------- */

/* Reads one probe point of a completed job of a functional calbin (calbin/MODEL.md): the
 * residual stream of the job's last token, `hidden` FP32 values, at
 *   point 0        the embedding row,
 *   point 2l + 1   after layer l's attention (o_proj all-reduced and added),
 *   point 2l + 2   after layer l's MLP (down_proj all-reduced and added),
 * so `points` = 2 * layers + 1. `count` is the number of values of a point (hidden); when it
 * exceeds `capacity` nothing is written. A runtime over hardware usually cannot offer this;
 * callers treat the extension's absence as "probes unavailable".
 * Errors: INVALID_HANDLE, WRONG_STATE (the job has not completed, or its calbin is
 * timing-only or its model has no functional semantics), INVALID_ARGUMENT (point >= points,
 * values NULL with capacity > 0). */
typedef struct Calrt_Probe_Read_Args {
  size_t struct_size;
  void* extension;
  CalrtJob* job;
  uint32_t point;
  float* values;
  size_t capacity; /* floats */
  size_t count;    /* out */
  uint32_t points; /* out */
} Calrt_Probe_Read_Args;
#define CALRT_PROBE_READ_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Probe_Read_Args, points)
typedef CalrtError* Calrt_Probe_Read(Calrt_Probe_Read_Args* args);

typedef struct CalrtProbeExtension {
  CalrtExtensionBase base; /* type CALRT_EXT_PROBE */
  Calrt_Probe_Read* Probe_Read;
} CalrtProbeExtension;
#define CALRT_PROBE_EXTENSION_STRUCT_SIZE CALRT_STRUCT_SIZE(CalrtProbeExtension, Probe_Read)

#ifdef __cplusplus
}
#endif

#endif /* CALRT_EXT_H_ */
