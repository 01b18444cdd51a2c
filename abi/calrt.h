/* calrt.h: the CalRT Runtime ABI.
 *
 * A runtime implementation (the simulator, or a vendor shim over real PCIe hardware) is a
 * shared library that exports one symbol, CalrtGetApi(), returning a versioned table of
 * function pointers. Everything else in this header is data that crosses that boundary.
 *
 * Versioning rules (the PJRT C API is the model):
 *   - CALRT_ABI_MAJOR changes when an entry is removed, reordered or changes meaning.
 *   - CALRT_ABI_MINOR changes when an entry or a struct field is added. New table entries
 *     and new struct fields are only ever appended at the end.
 *   - Every args struct starts with `struct_size` and `extension`. The caller sets
 *     struct_size to the size it was compiled with (the CALRT_*_STRUCT_SIZE macros). A
 *     runtime accepts a struct_size larger than it knows (a newer caller: the extra fields
 *     are ignored) and rejects a smaller one with CALRT_STRUCT_TOO_SMALL, never a crash.
 *   - A table entry that is NULL, or lies beyond the table's struct_size, is not
 *     implemented. The C++ wrapper (calrt.hpp) answers CALRT_UNIMPLEMENTED for it.
 *
 * Errors: every call that can fail returns a CalrtError*, NULL on success. The caller owns
 * a returned error and releases it with Error_Destroy. Each error has a code, and each code
 * belongs to exactly one fault class (request, model, device), encoded in its high byte.
 * Codes may be added in any release; a caller treats a code it does not know by its class.
 * Messages name the object and the value that was wrong.
 *
 * Time: every call that can wait takes `timeout_ns`. CALRT_TIMEOUT_DEFAULT (0) means the
 * runtime's bounded default (documented by the runtime; the simulator uses 30 s of device
 * time); CALRT_TIMEOUT_INFINITE must be asked for explicitly. Deadlines are measured on a
 * monotonic clock; for the simulator in its deterministic mode that is the device's virtual
 * clock, so a wait on a hung job returns at once in wall time with virtual time advanced.
 *
 * Threads: all calls are safe to make from several threads. Calls on one device are
 * serialised by the runtime; none of them blocks longer than its own deadline.
 *
 * Out fields are marked `out`. Strings returned in out fields are owned by the object named
 * in the field's comment and stay valid until that object is destroyed.
 */
#ifndef CALRT_H_
#define CALRT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CALRT_ABI_MAJOR 0
#define CALRT_ABI_MINOR 9
#define CALRT_ABI_PATCH 0

#define CALRT_MAX_RANK 8
#define CALRT_MAX_CHIPS 8

#define CALRT_TIMEOUT_DEFAULT ((uint64_t)0)
#define CALRT_TIMEOUT_INFINITE UINT64_MAX

#if defined(_WIN32)
#define CALRT_EXPORT __declspec(dllexport)
#else
#define CALRT_EXPORT __attribute__((visibility("default")))
#endif

/* The size of an args struct up to and including its last field; what a caller compiled
 * against this header puts in struct_size. */
#define CALRT_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* ---------------------------------------------------------------------------------------
 * Opaque handles. Each is created by one call and released by one Destroy/Free call. A
 * handle that was released, or never issued, is rejected with CALRT_INVALID_HANDLE; a
 * runtime must not crash on it.
 * ------------------------------------------------------------------------------------- */
typedef struct CalrtError CalrtError;
typedef struct CalrtDevice CalrtDevice;
typedef struct CalrtCalbin CalrtCalbin;
typedef struct CalrtBuffer CalrtBuffer;
typedef struct CalrtJob CalrtJob;
typedef struct CalrtKv CalrtKv;

/* ---------------------------------------------------------------------------------------
 * Status codes and fault classes.
 * ------------------------------------------------------------------------------------- */
typedef enum CalrtFaultClass {
  CALRT_FAULT_NONE = 0,
  /* The request was wrong; fail it and keep serving others. */
  CALRT_FAULT_REQUEST = 1,
  /* The calbin or its configuration is wrong; unload and reload the model. */
  CALRT_FAULT_MODEL = 2,
  /* The device is unhealthy; reset it and replay from the last good state. */
  CALRT_FAULT_DEVICE = 3,
} CalrtFaultClass;

typedef enum CalrtCode {
  CALRT_OK = 0,

  /* Request class (0x1xx). */
  CALRT_INVALID_ARGUMENT = 0x101, /* a field has a value the call cannot accept */
  CALRT_INVALID_HANDLE = 0x102,   /* a handle was released or never issued */
  CALRT_NOT_FOUND = 0x103,        /* no model/tensor/CSR with that exact name or index */
  CALRT_OUT_OF_RANGE = 0x104,     /* sequence length or position beyond the capacity */
  CALRT_KV_EXHAUSTED = 0x105,     /* the KV reservation has no room for the request */
  CALRT_BUSY = 0x106,             /* the buffer is mapped, or owned by an in-flight job */
  CALRT_WRONG_STATE = 0x107,      /* the call is not allowed in the object's state */
  CALRT_CANCELLED = 0x108,        /* the job was cancelled before it completed */
  CALRT_STRUCT_TOO_SMALL = 0x109, /* struct_size is smaller than this ABI version's */
  CALRT_UNIMPLEMENTED = 0x10A,    /* the runtime does not provide this call */
  /* the host wrote a buffer that an in-flight job owned (through a mapping kept past
   * Buffer_Unmap); the job's result cannot be trusted. Runtimes that can detect it (the
   * simulator) fail the job with this code. */
  CALRT_BUFFER_REUSE = 0x10B,
  /* The caller may not make this call on a device it shares with others: a device-wide
   * operation (reset, parallel mode, fault plan) from a client without the control role of
   * the process that owns the device (a service daemon). A runtime that serves one process
   * never returns it. */
  CALRT_PERMISSION_DENIED = 0x10C,
  /* The job was ended by a device-wide operation of another client of a shared device (a
   * reset), not by anything its own process did. Job_Status reports it for a job left
   * CANCELLED that way; the job's results are not valid. */
  CALRT_PREEMPTED = 0x10D,

  /* Model class (0x2xx). */
  CALRT_CALBIN_INVALID = 0x201,       /* the calbin is missing, malformed or fails a hash */
  CALRT_CALBIN_MISMATCH = 0x202,      /* the calbin does not fit this device or runtime */
  CALRT_NOT_CONFIGURED = 0x203,       /* configure() has not succeeded for this calbin */
  CALRT_OUT_OF_DEVICE_MEMORY = 0x204, /* the per-chip capacity inequality does not hold */

  /* Device class (0x3xx): the device needs a reset. */
  CALRT_DMA_ERROR = 0x301,
  CALRT_DEVICE_HUNG = 0x302, /* a phase or job exceeded its deadline on the device */
  CALRT_DEVICE_LOST = 0x303, /* the device is gone (surprise removal, link down) */
  CALRT_FIRMWARE_CRASH = 0x304,
  CALRT_ECC_UNCORRECTABLE = 0x305,
  CALRT_D2D_LINK_DOWN = 0x306,
  CALRT_INTERNAL = 0x307, /* a runtime invariant broke; a bug in the runtime */
} CalrtCode;

#define CALRT_CODE_FAULT_CLASS(code) ((CalrtFaultClass)(((uint32_t)(code)) >> 8))

/* ---------------------------------------------------------------------------------------
 * Enumerations shared by several calls. Each ends with a sentinel so that wrappers can
 * range-check what a runtime returns.
 * ------------------------------------------------------------------------------------- */
typedef enum CalrtDeviceKind {
  CALRT_DEVICE_PCIE = 1, /* a physical card; index selects it */
  CALRT_DEVICE_SIM = 2,  /* a simulated device */
  CALRT_DEVICE_KIND_COUNT_,
} CalrtDeviceKind;

typedef enum CalrtDeviceState {
  CALRT_DEVICE_OPEN = 1,       /* created, no calbin configured */
  CALRT_DEVICE_CONFIGURED = 2, /* at least one calbin configured, idle */
  CALRT_DEVICE_RUNNING = 3,    /* at least one job in flight */
  /* A device-class fault happened: calls that observe, release or reset are allowed, calls
   * that give the device new work return WRONG_STATE until a reset's self-test passes. The
   * call-by-state table is simdev/device/STATE_MACHINE.md. */
  CALRT_DEVICE_FAULTED = 4,
  CALRT_DEVICE_RESETTING = 5,
  /* gone for good: only Status, ChipStatus, Job_Status, the release calls (Destroy, Free,
   * Unmap) and diagnostics are allowed; every other call returns DEVICE_LOST. */
  CALRT_DEVICE_LOST_STATE = 6,
  CALRT_DEVICE_STATE_COUNT_,
} CalrtDeviceState;

typedef enum CalrtChipHealth {
  CALRT_CHIP_OK = 1,
  CALRT_CHIP_DEGRADED = 2, /* e.g. correctable ECC errors or thermal throttling */
  CALRT_CHIP_HUNG = 3,
  CALRT_CHIP_FAILED = 4,
  CALRT_CHIP_HEALTH_COUNT_,
} CalrtChipHealth;

typedef enum CalrtModelType {
  CALRT_MODEL_PREFILL = 1,
  CALRT_MODEL_DECODE = 2,
  CALRT_MODEL_KV_UPDATE = 3,
  CALRT_MODEL_TYPE_COUNT_,
} CalrtModelType;

typedef enum CalrtDirection {
  CALRT_INPUT = 1,
  CALRT_OUTPUT = 2,
  CALRT_DIRECTION_COUNT_,
} CalrtDirection;

typedef enum CalrtDtype {
  CALRT_DTYPE_INT8 = 1,
  CALRT_DTYPE_INT32 = 2,
  CALRT_DTYPE_BF16 = 3,
  CALRT_DTYPE_F16 = 4,
  CALRT_DTYPE_F32 = 5,
  CALRT_DTYPE_INT4 = 6,
  CALRT_DTYPE_COUNT_,
} CalrtDtype;

typedef enum CalrtTensorRole {
  CALRT_ROLE_OTHER = 0,
  CALRT_ROLE_TOKEN = 1,
  CALRT_ROLE_POSITION = 2,
  CALRT_ROLE_LOGITS = 3,
  /* ABI 0.9: a decode that ranks on the device gives, per row, its K best token ids
   * (int32, best first; equal logits in increasing id order) and their logits (same order)
   * instead of the full LOGITS row. */
  CALRT_ROLE_TOP_IDS = 4,
  CALRT_ROLE_TOP_LOGITS = 5,
  CALRT_ROLE_COUNT_,
} CalrtTensorRole;

/* Physical layout of a tensor in its buffer. ROW_MAJOR is C order. TILED splits the last
 * dimension into tiles of tile_d0 elements and makes the tile index the outermost
 * dimension: logical [R, C] is stored as [ceil(C / d0)][R][d0], zero-padded. A reader must
 * take d0 from the tensor descriptor, never assume it. */
typedef enum CalrtLayout {
  CALRT_LAYOUT_ROW_MAJOR = 1,
  CALRT_LAYOUT_TILED = 2,
  CALRT_LAYOUT_COUNT_,
} CalrtLayout;

typedef enum CalrtJobState {
  CALRT_JOB_SUBMITTED = 1, /* queued, not started on the device */
  CALRT_JOB_RUNNING = 2,
  CALRT_JOB_COMPLETED = 3, /* outputs are valid */
  CALRT_JOB_FAILED = 4,    /* Job_Status tells the code and message */
  CALRT_JOB_CANCELLED = 5,
  /* the device's job watchdog ended it: it ran past the device's job deadline (a hung or
   * pathologically slow job). Its code is DEVICE_HUNG and the device is FAULTED. */
  CALRT_JOB_TIMED_OUT = 6,
  CALRT_JOB_STATE_COUNT_,
} CalrtJobState;

/* Whether a job in `state` has ended (COMPLETED, FAILED, CANCELLED or TIMED_OUT): its state
 * and status never change again. Takes the raw value, so that a state read off a wire or a
 * struct can be asked about before it is trusted; a value outside the enumeration is not
 * final. */
static inline int calrt_job_state_final(uint32_t state) {
  return state == CALRT_JOB_COMPLETED || state == CALRT_JOB_FAILED ||
         state == CALRT_JOB_CANCELLED || state == CALRT_JOB_TIMED_OUT;
}

typedef enum CalrtWaitResult {
  CALRT_WAIT_READY = 1,     /* the job reached a final state (completed, failed, cancelled) */
  CALRT_WAIT_NOT_READY = 2, /* the timeout passed and the job is still in flight; retry */
  CALRT_WAIT_RESULT_COUNT_,
} CalrtWaitResult;

typedef enum CalrtResetLevel {
  CALRT_RESET_JOB_ABORT = 1, /* cancel in-flight jobs only */
  CALRT_RESET_CORES = 2,     /* reset the compute cores, keep DRAM contents */
  CALRT_RESET_CHIP = 3,      /* reset every chip; configured calbins must be reconfigured */
  CALRT_RESET_FULL = 4,      /* full device reset, as after power-on */
  CALRT_RESET_LEVEL_COUNT_,
} CalrtResetLevel;

/* ---------------------------------------------------------------------------------------
 * Errors.
 * ------------------------------------------------------------------------------------- */

/* Releases an error. error may be NULL. */
typedef struct Calrt_Error_Destroy_Args {
  size_t struct_size;
  void* extension;
  CalrtError* error;
} Calrt_Error_Destroy_Args;
#define CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Error_Destroy_Args, error)
typedef void Calrt_Error_Destroy(Calrt_Error_Destroy_Args* args);

/* Returns the error's message. Never fails. */
typedef struct Calrt_Error_Message_Args {
  size_t struct_size;
  void* extension;
  const CalrtError* error;
  const char* message; /* out: owned by the error, valid until Error_Destroy */
  size_t message_size; /* out: bytes, without the terminating NUL */
} Calrt_Error_Message_Args;
#define CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Error_Message_Args, message_size)
typedef void Calrt_Error_Message(Calrt_Error_Message_Args* args);

/* Returns the error's code; its fault class is CALRT_CODE_FAULT_CLASS(code). Never fails. */
typedef struct Calrt_Error_GetCode_Args {
  size_t struct_size;
  void* extension;
  const CalrtError* error;
  CalrtCode code; /* out */
} Calrt_Error_GetCode_Args;
#define CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Error_GetCode_Args, code)
typedef void Calrt_Error_GetCode(Calrt_Error_GetCode_Args* args);

/* ---------------------------------------------------------------------------------------
 * Device: CreateVDevice, Status, Reset, parallel mode.
 * ------------------------------------------------------------------------------------- */

/* Opens a device.
 * Pre: kind is a CalrtDeviceKind the runtime serves; config is NULL (defaults) or a
 *   runtime-specific option string `key=value;key=value` (the simulator accepts `seed`,
 *   `dram_mib`, `config` = a device config file, and documents the rest).
 * Post: *device is open (CALRT_DEVICE_OPEN) and owned by the caller (Device_Destroy).
 * Errors: INVALID_ARGUMENT (unknown kind, bad option; names the key and value),
 *   NOT_FOUND (no card at index), DEVICE_HUNG (open exceeded timeout_ns),
 *   DEVICE_LOST. */
typedef struct Calrt_Device_Create_Args {
  size_t struct_size;
  void* extension;
  CalrtDeviceKind kind;
  uint32_t index;
  const char* config; /* borrowed for the duration of the call; may be NULL */
  uint64_t timeout_ns;
  CalrtDevice* device; /* out */
} Calrt_Device_Create_Args;
#define CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Device_Create_Args, device)
typedef CalrtError* Calrt_Device_Create(Calrt_Device_Create_Args* args);

/* Closes a device. In-flight jobs are cancelled; every calbin, buffer, job and KV handle
 * of the device becomes invalid. Bounded: never waits for a hung job.
 * Errors: INVALID_HANDLE. */
typedef struct Calrt_Device_Destroy_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
} Calrt_Device_Destroy_Args;
#define CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Device_Destroy_Args, device)
typedef CalrtError* Calrt_Device_Destroy(Calrt_Device_Destroy_Args* args);

/* Reports the device's state, versions and counters. Allowed in every state, including
 * FAULTED and LOST. Errors: INVALID_HANDLE. */
typedef struct Calrt_Device_Status_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  CalrtDeviceState state;       /* out */
  const char* runtime_version;  /* out: owned by the device */
  const char* firmware_version; /* out: owned by the device */
  const char* driver_version;   /* out: owned by the device */
  const char* device_name;      /* out: owned by the device */
  uint32_t abi_major;           /* out: the ABI the runtime implements */
  uint32_t abi_minor;           /* out */
  uint32_t abi_patch;           /* out */
  uint32_t chip_count;          /* out */
  uint32_t parallel_mode;       /* out: 1 when parallel mode is on */
  uint64_t error_count;         /* out: device-class faults since open */
  uint64_t reset_count;         /* out */
  uint64_t device_time_ns;      /* out: the device clock (virtual for the simulator) */
  CalrtCode last_error;         /* out: code of the last device-class fault, or CALRT_OK */
} Calrt_Device_Status_Args;
#define CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Device_Status_Args, last_error)
typedef CalrtError* Calrt_Device_Status(Calrt_Device_Status_Args* args);

/* Reports one chip's health and memory. Allowed in every state.
 * Errors: INVALID_HANDLE, OUT_OF_RANGE (chip >= chip_count). */
typedef struct Calrt_Device_ChipStatus_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  uint32_t chip;
  CalrtChipHealth health;    /* out */
  uint64_t dram_total_bytes; /* out: physical usable memory of the chip */
  uint64_t dram_used_bytes;  /* out: configured calbins plus allocated KV */
  uint64_t ecc_corrected;    /* out */
  uint64_t ecc_uncorrected;  /* out */
  uint64_t busy_time_ns;     /* out: device time the chip spent executing ops */
} Calrt_Device_ChipStatus_Args;
#define CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Device_ChipStatus_Args, busy_time_ns)
typedef CalrtError* Calrt_Device_ChipStatus(Calrt_Device_ChipStatus_Args* args);

/* Resets the device at the given level. Jobs in flight are cancelled. From CHIP upwards
 * configured calbins lose their configuration and KV contents (Calbin_Configure again).
 * Post: state is OPEN or CONFIGURED when the self-test after the reset passes.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (level), DEVICE_HUNG (timeout), DEVICE_LOST. */
typedef struct Calrt_Device_Reset_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  CalrtResetLevel level;
  uint64_t timeout_ns;
  CalrtDeviceState state; /* out: the state after the reset */
} Calrt_Device_Reset_Args;
#define CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Device_Reset_Args, state)
typedef CalrtError* Calrt_Device_Reset(Calrt_Device_Reset_Args* args);

/* Turns parallel mode on or off. In sync mode (the default) a model has at most one job in
 * flight. In parallel mode it has up to two, each using the fixed ping (slot 0) or pong
 * (slot 1) I/O addresses of the calbin; buffers are created for a slot.
 * Pre: no job in flight on the device. Errors: INVALID_HANDLE, WRONG_STATE. */
typedef struct Calrt_Device_SetParallelMode_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  uint32_t enable;
} Calrt_Device_SetParallelMode_Args;
#define CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Device_SetParallelMode_Args, enable)
typedef CalrtError* Calrt_Device_SetParallelMode(Calrt_Device_SetParallelMode_Args* args);

/* ---------------------------------------------------------------------------------------
 * Calbin: CreateCalbin, info, configure.
 * ------------------------------------------------------------------------------------- */

/* Loads a calbin (a directory with manifest.json) and verifies every file's size and
 * SHA-256. Nothing is placed in device memory until Calbin_Configure.
 * Post: *calbin is owned by the caller (Calbin_Destroy).
 * Errors: INVALID_HANDLE, WRONG_STATE (device faulted), CALBIN_INVALID (names the file,
 *   field and value), CALBIN_MISMATCH (needs more chips than the device has, or another
 *   runtime ABI), DEVICE_HUNG (timeout). */
typedef struct Calrt_Calbin_Create_Args {
  size_t struct_size;
  void* extension;
  CalrtDevice* device;
  const char* path; /* borrowed for the duration of the call */
  uint64_t timeout_ns;
  CalrtCalbin* calbin; /* out */
} Calrt_Calbin_Create_Args;
#define CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Calbin_Create_Args, calbin)
typedef CalrtError* Calrt_Calbin_Create(Calrt_Calbin_Create_Args* args);

/* Unloads a calbin: releases its device memory, its buffers, jobs and KV handles.
 * Errors: INVALID_HANDLE. */
typedef struct Calrt_Calbin_Destroy_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
} Calrt_Calbin_Destroy_Args;
#define CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Calbin_Destroy_Args, calbin)
typedef CalrtError* Calrt_Calbin_Destroy(Calrt_Calbin_Destroy_Args* args);

/* The calbin's version and LLM info. Errors: INVALID_HANDLE. */
typedef struct Calrt_Calbin_GetInfo_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  const char* calbin_version; /* out: owned by the calbin */
  const char* architecture;   /* out: owned by the calbin */
  const char* runtime_abi;    /* out: owned by the calbin, e.g. "0.8.0" */
  uint32_t model_count;       /* out */
  uint32_t chip_count;        /* out: chips the calbin is partitioned over */
  uint32_t vocab;             /* out */
  uint32_t context;           /* out: tokens of KV per sequence the calbin is built for */
  uint32_t batch;             /* out: rows of a decode submission (Kv_Apply tells how) */
  uint32_t layers;            /* out */
  uint32_t hidden;            /* out */
  uint32_t q_heads;           /* out */
  uint32_t kv_heads;          /* out */
  uint32_t head_dim;          /* out */
  uint32_t prefill_chunk;     /* out: tokens per prefill submission */
  CalrtDtype kv_dtype;        /* out: the K-cache's; the V-cache's is the manifest's v_dtype */
  uint32_t configured;        /* out: 1 after a successful Calbin_Configure */
} Calrt_Calbin_GetInfo_Args;
#define CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Calbin_GetInfo_Args, configured)
typedef CalrtError* Calrt_Calbin_GetInfo(Calrt_Calbin_GetInfo_Args* args);

/* Describes model number model_index (0 <= model_index < model_count).
 * Errors: INVALID_HANDLE, OUT_OF_RANGE. */
typedef struct Calrt_Calbin_GetModel_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  uint32_t model_index;
  const char* name;      /* out: owned by the calbin */
  CalrtModelType type;   /* out */
  uint32_t input_count;  /* out */
  uint32_t output_count; /* out */
  uint32_t csr_count;    /* out */
} Calrt_Calbin_GetModel_Args;
#define CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Calbin_GetModel_Args, csr_count)
typedef CalrtError* Calrt_Calbin_GetModel(Calrt_Calbin_GetModel_Args* args);

/* Describes one input or output tensor of a model, found by the model's exact name.
 * Errors: INVALID_HANDLE, NOT_FOUND (model name, compared exactly), OUT_OF_RANGE (index). */
typedef struct Calrt_Calbin_GetTensor_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  const char* model_name; /* borrowed for the duration of the call */
  CalrtDirection direction;
  uint32_t index;
  const char* name;             /* out: owned by the calbin */
  CalrtTensorRole role;         /* out */
  CalrtDtype dtype;             /* out */
  uint32_t rank;                /* out */
  int64_t dims[CALRT_MAX_RANK]; /* out: logical shape, outermost first */
  CalrtLayout layout;           /* out */
  uint32_t tile_d0;             /* out: tile size for CALRT_LAYOUT_TILED, else 0 */
  uint64_t size_bytes;          /* out: bytes in the buffer, padding included */
  uint64_t device_address;      /* out: ping-slot address on each chip in chip_mask */
  uint32_t chip_mask;           /* out */
} Calrt_Calbin_GetTensor_Args;
#define CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Calbin_GetTensor_Args, chip_mask)
typedef CalrtError* Calrt_Calbin_GetTensor(Calrt_Calbin_GetTensor_Args* args);

/* Describes one control/status register of a model (e.g. cur_seq_len).
 * Errors: INVALID_HANDLE, NOT_FOUND (model name), OUT_OF_RANGE (index). */
typedef struct Calrt_Calbin_GetCsr_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  const char* model_name; /* borrowed for the duration of the call */
  uint32_t index;
  const char* name; /* out: owned by the calbin */
  uint64_t address; /* out */
} Calrt_Calbin_GetCsr_Args;
#define CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Calbin_GetCsr_Args, address)
typedef CalrtError* Calrt_Calbin_GetCsr(Calrt_Calbin_GetCsr_Args* args);

/* Places the calbin on the device: loads every param block on the chips of its chip mask
 * and reserves workspace, I/O, command buffers, guard and the KV reservation.
 * Pre: device OPEN or CONFIGURED; calbin not yet configured.
 * Post: the calbin is configured; memory_used_bytes[chip] tells what it took per chip.
 * Errors: INVALID_HANDLE, WRONG_STATE (already configured, device faulted),
 *   OUT_OF_DEVICE_MEMORY (names the chip and the inequality's terms),
 *   CALBIN_INVALID (a param block fails its check), DEVICE_HUNG (timeout), DMA_ERROR. */
typedef struct Calrt_Calbin_Configure_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  uint64_t timeout_ns;
  uint64_t configure_time_ns;                  /* out: device time configure took */
  uint32_t chip_count;                         /* out */
  uint64_t memory_used_bytes[CALRT_MAX_CHIPS]; /* out: per chip, this calbin only */
} Calrt_Calbin_Configure_Args;
#define CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Calbin_Configure_Args, memory_used_bytes)
typedef CalrtError* Calrt_Calbin_Configure(Calrt_Calbin_Configure_Args* args);

/* ---------------------------------------------------------------------------------------
 * Buffers: InputBuf/OutputBuf by exact model name, MapBuf/UnMapBuf, CSRs.
 * A buffer holds every input (or every output) tensor of one model, laid out as the
 * calbin says. An input buffer also holds the model's CSRs and the applied KV handle.
 * ------------------------------------------------------------------------------------- */

/* Creates the input or output buffer of a model, found by its exact name.
 * slot: 0 (ping) or 1 (pong); must be 0 unless parallel mode is on.
 * Pre: the calbin is configured. Post: *buffer is owned by the caller (Buffer_Destroy);
 *   tensor bytes are zero and CSRs are 0.
 * Errors: INVALID_HANDLE, NOT_FOUND (no model with exactly that name; the message lists
 *   the models), NOT_CONFIGURED, INVALID_ARGUMENT (direction, slot). */
typedef struct Calrt_Buffer_Create_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  const char* model_name; /* borrowed for the duration of the call */
  CalrtDirection direction;
  uint32_t slot;
  CalrtBuffer* buffer; /* out */
} Calrt_Buffer_Create_Args;
#define CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Buffer_Create_Args, buffer)
typedef CalrtError* Calrt_Buffer_Create(Calrt_Buffer_Create_Args* args);

/* Releases a buffer. Errors: INVALID_HANDLE, BUSY (owned by an in-flight job). */
typedef struct Calrt_Buffer_Destroy_Args {
  size_t struct_size;
  void* extension;
  CalrtBuffer* buffer;
} Calrt_Buffer_Destroy_Args;
#define CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Buffer_Destroy_Args, buffer)
typedef CalrtError* Calrt_Buffer_Destroy(Calrt_Buffer_Destroy_Args* args);

/* Maps one tensor of the buffer into host memory. Inputs are written through the mapping,
 * outputs read. A tensor can be mapped once at a time.
 * Post: data points at size_bytes bytes, valid until Buffer_Unmap or Buffer_Destroy.
 * Errors: INVALID_HANDLE, OUT_OF_RANGE (tensor_index), BUSY (already mapped, or the buffer
 *   is owned by an in-flight job: the message names the job), DEVICE_HUNG (timeout). */
typedef struct Calrt_Buffer_Map_Args {
  size_t struct_size;
  void* extension;
  CalrtBuffer* buffer;
  uint32_t tensor_index;
  uint64_t timeout_ns;
  void* data;          /* out: owned by the buffer, valid until unmapped */
  uint64_t size_bytes; /* out */
} Calrt_Buffer_Map_Args;
#define CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Buffer_Map_Args, size_bytes)
typedef CalrtError* Calrt_Buffer_Map(Calrt_Buffer_Map_Args* args);

/* Unmaps a tensor. Errors: INVALID_HANDLE, OUT_OF_RANGE, WRONG_STATE (not mapped). */
typedef struct Calrt_Buffer_Unmap_Args {
  size_t struct_size;
  void* extension;
  CalrtBuffer* buffer;
  uint32_t tensor_index;
} Calrt_Buffer_Unmap_Args;
#define CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Buffer_Unmap_Args, tensor_index)
typedef CalrtError* Calrt_Buffer_Unmap(Calrt_Buffer_Unmap_Args* args);

/* Sets a CSR of an input buffer. csr_index is the CSR's position in its model's list
 * (0 <= csr_index < csr_count, as passed to Calbin_GetCsr). The device reads the value at
 * submission; it is never corrected: a wrong value gives wrong results or an error.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (an output buffer), OUT_OF_RANGE (csr_index),
 *   BUSY (owned by an in-flight job). */
typedef struct Calrt_Buffer_SetCsr_Args {
  size_t struct_size;
  void* extension;
  CalrtBuffer* buffer;
  uint32_t csr_index;
  uint64_t value;
} Calrt_Buffer_SetCsr_Args;
#define CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Buffer_SetCsr_Args, value)
typedef CalrtError* Calrt_Buffer_SetCsr(Calrt_Buffer_SetCsr_Args* args);

/* Reads a CSR of an input buffer. Errors: as Buffer_SetCsr, without BUSY. */
typedef struct Calrt_Buffer_GetCsr_Args {
  size_t struct_size;
  void* extension;
  CalrtBuffer* buffer;
  uint32_t csr_index;
  uint64_t value; /* out */
} Calrt_Buffer_GetCsr_Args;
#define CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Buffer_GetCsr_Args, value)
typedef CalrtError* Calrt_Buffer_GetCsr(Calrt_Buffer_GetCsr_Args* args);

/* ---------------------------------------------------------------------------------------
 * Jobs: submit, Wait(timeout), status, cancel.
 * ------------------------------------------------------------------------------------- */

/* Submits one execution of a model. From submission until the job reaches a final state
 * both buffers are owned by the job: mapping them, setting CSRs or destroying them fails
 * with BUSY.
 * Pre: calbin configured; input is an input buffer and output an output buffer of exactly
 *   this model; no tensor of either is mapped; for prefill/decode a KV handle is applied
 *   to the input buffer; in sync mode no other job of the calbin is in flight, in parallel
 *   mode at most one other and on the other slot.
 * Post: *job is owned by the caller (Job_Destroy).
 * Errors (at submission): INVALID_HANDLE, NOT_FOUND, NOT_CONFIGURED, INVALID_ARGUMENT
 *   (buffer of another model or direction), BUSY (a buffer is mapped or owned by another
 *   job; or the in-flight limit of the mode is reached), WRONG_STATE (device faulted, no KV
 *   applied). Errors found while the job runs (a CSR out of range, a DMA error) make the
 *   job FAILED; Job_Status reports them; a host write to a buffer the job owns, through a
 *   mapping kept past unmap, is BUFFER_REUSE where the runtime can detect it. */
typedef struct Calrt_Job_Submit_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  const char* model_name; /* borrowed for the duration of the call */
  CalrtBuffer* input;
  CalrtBuffer* output;
  CalrtJob* job; /* out */
} Calrt_Job_Submit_Args;
#define CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Job_Submit_Args, job)
typedef CalrtError* Calrt_Job_Submit(Calrt_Job_Submit_Args* args);

/* Waits until the job reaches a final state or timeout_ns passes, whichever is first.
 * Never spins; never waits longer than the timeout.
 * Post: result READY with state COMPLETED, FAILED or CANCELLED; or NOT_READY with the job
 *   still SUBMITTED or RUNNING (retryable: wait again, or cancel).
 * With CALRT_TIMEOUT_INFINITE the call returns only when the job is final, or when the
 * runtime can tell it never will be (the simulator: no device event is left), which is
 * reported as NOT_READY so that the caller can cancel.
 * Errors: INVALID_HANDLE; DEVICE_HUNG when the device declares the job hung (its watchdog
 *   fired: the job is then TIMED_OUT), DEVICE_LOST, and the other device-class codes: the
 *   job is then FAILED. */
typedef struct Calrt_Job_Wait_Args {
  size_t struct_size;
  void* extension;
  CalrtJob* job;
  uint64_t timeout_ns;
  CalrtWaitResult result; /* out */
  CalrtJobState state;    /* out */
} Calrt_Job_Wait_Args;
#define CALRT_JOB_WAIT_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Job_Wait_Args, state)
typedef CalrtError* Calrt_Job_Wait(Calrt_Job_Wait_Args* args);

/* Reports a job's state, its failure and its device-clock timestamps. Never blocks.
 * Errors: INVALID_HANDLE. */
typedef struct Calrt_Job_Status_Args {
  size_t struct_size;
  void* extension;
  CalrtJob* job;
  CalrtJobState state;     /* out */
  CalrtCode code;          /* out: why the job failed or was cancelled; CALRT_OK otherwise */
  const char* message;     /* out: owned by the job; empty unless code != CALRT_OK */
  uint64_t submit_time_ns; /* out: device clock */
  uint64_t start_time_ns;  /* out: 0 until started (its input DMA began) */
  uint64_t end_time_ns;    /* out: 0 until final (its output DMA ended) */
  /* Profiling, 0 when not reached yet or when the runtime cannot tell: the end of the
   * input DMA, the start and the end of the computation (between input DMA end and compute
   * start the job waits for the chips). start <= h2d_end <= compute_start <= compute_end
   * <= end.
   * Appended after the first version: a runtime fills them only when struct_size covers
   * them and still accepts a struct_size that ends at end_time_ns. */
  uint64_t h2d_end_time_ns;       /* out */
  uint64_t compute_end_time_ns;   /* out */
  uint64_t compute_start_time_ns; /* out */
} Calrt_Job_Status_Args;
#define CALRT_JOB_STATUS_ARGS_STRUCT_SIZE \
  CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, compute_start_time_ns)
typedef CalrtError* Calrt_Job_Status(Calrt_Job_Status_Args* args);

/* Cancels a job that is not final yet; it becomes CANCELLED and releases its buffers.
 * Cancelling a final job is a no-op. A cancelled prefill/decode leaves the KV positions
 * it would have written undefined. Errors: INVALID_HANDLE. */
typedef struct Calrt_Job_Cancel_Args {
  size_t struct_size;
  void* extension;
  CalrtJob* job;
} Calrt_Job_Cancel_Args;
#define CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Job_Cancel_Args, job)
typedef CalrtError* Calrt_Job_Cancel(Calrt_Job_Cancel_Args* args);

/* Releases a job handle; a job still in flight is cancelled first. Errors: INVALID_HANDLE. */
typedef struct Calrt_Job_Destroy_Args {
  size_t struct_size;
  void* extension;
  CalrtJob* job;
} Calrt_Job_Destroy_Args;
#define CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Job_Destroy_Args, job)
typedef CalrtError* Calrt_Job_Destroy(Calrt_Job_Destroy_Args* args);

/* ---------------------------------------------------------------------------------------
 * KV cache: allocate / apply / free / clear and capacity.
 * A KV handle owns capacity_tokens positions of the calbin's KV reservation on every chip.
 * ------------------------------------------------------------------------------------- */

/* Allocates KV room for one sequence of up to capacity_tokens positions.
 * Pre: calbin configured. Post: *kv owned by the caller (Kv_Free); contents undefined
 *   until written, fill level 0.
 * Errors: INVALID_HANDLE, NOT_CONFIGURED, INVALID_ARGUMENT (0 tokens),
 *   OUT_OF_RANGE (capacity_tokens > context), KV_EXHAUSTED (the reservation has no
 *   contiguous room: the message says how many tokens are free). */
typedef struct Calrt_Kv_Allocate_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  uint32_t capacity_tokens;
  CalrtKv* kv; /* out */
} Calrt_Kv_Allocate_Args;
#define CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Kv_Allocate_Args, kv)
typedef CalrtError* Calrt_Kv_Allocate(Calrt_Kv_Allocate_Args* args);

/* Binds a KV handle to an input buffer: jobs submitted with that buffer read and extend
 * this KV. Rebinding replaces the previous handle.
 *
 * Batch (ABI 0.8). A calbin whose Calbin_GetInfo reports batch B > 1 has a decode model
 * whose tokens and positions are [B, 1] and whose logits are [B, vocab]. Each row is a
 * sequence of its own, with its own KV handle, applied to the decode input buffer with
 * `row`. A submission computes rows 0 .. cur_seq_len - 1 (so cur_seq_len is the count of
 * live rows, 1..B); the logits of the other rows are zero. Row r decodes its token at
 * positions[r]: it reads KV positions [0, positions[r]) of its handle and writes position
 * positions[r], so past_kv_cur_seq_len is not read for such a model. A row's result does
 * not depend on the other rows. The same handle may not serve two live rows. Prefill and
 * kv_update models carry one sequence ([1, chunk]) and take row 0 only; so does every model
 * of a calbin with batch 1, whose decode keeps the ABI 0.7 meaning (cur_seq_len = 1,
 * past_kv_cur_seq_len = the KV positions before the token).
 *
 * Errors: INVALID_HANDLE (either, incl. a freed KV), INVALID_ARGUMENT (output buffer,
 *   another calbin, row >= the rows of the buffer's model), BUSY (buffer owned by an
 *   in-flight job). */
typedef struct Calrt_Kv_Apply_Args {
  size_t struct_size;
  void* extension;
  CalrtKv* kv;
  CalrtBuffer* input;
  /* Appended in ABI 0.8. A struct_size that ends at `input` (an ABI 0.7 caller) means 0. */
  uint32_t row;
} Calrt_Kv_Apply_Args;
#define CALRT_KV_APPLY_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Kv_Apply_Args, row)
/* What an ABI 0.7 caller put in struct_size; a runtime accepts it as row 0. */
#define CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7 CALRT_STRUCT_SIZE(Calrt_Kv_Apply_Args, input)
typedef CalrtError* Calrt_Kv_Apply(Calrt_Kv_Apply_Args* args);

/* Returns the KV room to the reservation. Buffers it was applied to lose it.
 * Errors: INVALID_HANDLE (incl. double free), BUSY (an in-flight job uses it). */
typedef struct Calrt_Kv_Free_Args {
  size_t struct_size;
  void* extension;
  CalrtKv* kv;
} Calrt_Kv_Free_Args;
#define CALRT_KV_FREE_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Kv_Free_Args, kv)
typedef CalrtError* Calrt_Kv_Free(Calrt_Kv_Free_Args* args);

/* Zeroes the KV contents and sets the fill level to 0, keeping the allocation.
 * Errors: INVALID_HANDLE, BUSY (an in-flight job uses it). */
typedef struct Calrt_Kv_Clear_Args {
  size_t struct_size;
  void* extension;
  CalrtKv* kv;
} Calrt_Kv_Clear_Args;
#define CALRT_KV_CLEAR_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Kv_Clear_Args, kv)
typedef CalrtError* Calrt_Kv_Clear(Calrt_Kv_Clear_Args* args);

/* Reports one KV handle: capacity and fill level (one past the highest position written).
 * Errors: INVALID_HANDLE. */
typedef struct Calrt_Kv_Info_Args {
  size_t struct_size;
  void* extension;
  CalrtKv* kv;
  uint32_t capacity_tokens; /* out */
  uint32_t filled_tokens;   /* out */
} Calrt_Kv_Info_Args;
#define CALRT_KV_INFO_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Kv_Info_Args, filled_tokens)
typedef CalrtError* Calrt_Kv_Info(Calrt_Kv_Info_Args* args);

/* Reports the KV reservation of a configured calbin.
 * Errors: INVALID_HANDLE, NOT_CONFIGURED. */
typedef struct Calrt_Kv_Capacity_Args {
  size_t struct_size;
  void* extension;
  CalrtCalbin* calbin;
  uint64_t total_tokens;             /* out: positions the reservation holds */
  uint64_t free_tokens;              /* out */
  uint64_t largest_free_tokens;      /* out: the largest single allocation that would fit */
  uint64_t bytes_per_token_per_chip; /* out */
  uint32_t live_handles;             /* out */
} Calrt_Kv_Capacity_Args;
#define CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE CALRT_STRUCT_SIZE(Calrt_Kv_Capacity_Args, live_handles)
typedef CalrtError* Calrt_Kv_Capacity(Calrt_Kv_Capacity_Args* args);

/* ---------------------------------------------------------------------------------------
 * The function table.
 * ------------------------------------------------------------------------------------- */
typedef struct CalrtApi {
  size_t struct_size; /* CALRT_API_STRUCT_SIZE of the runtime that filled it */
  void* extension;
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t abi_patch;

  Calrt_Error_Destroy* Error_Destroy;
  Calrt_Error_Message* Error_Message;
  Calrt_Error_GetCode* Error_GetCode;

  Calrt_Device_Create* Device_Create;
  Calrt_Device_Destroy* Device_Destroy;
  Calrt_Device_Status* Device_Status;
  Calrt_Device_ChipStatus* Device_ChipStatus;
  Calrt_Device_Reset* Device_Reset;
  Calrt_Device_SetParallelMode* Device_SetParallelMode;

  Calrt_Calbin_Create* Calbin_Create;
  Calrt_Calbin_Destroy* Calbin_Destroy;
  Calrt_Calbin_GetInfo* Calbin_GetInfo;
  Calrt_Calbin_GetModel* Calbin_GetModel;
  Calrt_Calbin_GetTensor* Calbin_GetTensor;
  Calrt_Calbin_GetCsr* Calbin_GetCsr;
  Calrt_Calbin_Configure* Calbin_Configure;

  Calrt_Buffer_Create* Buffer_Create;
  Calrt_Buffer_Destroy* Buffer_Destroy;
  Calrt_Buffer_Map* Buffer_Map;
  Calrt_Buffer_Unmap* Buffer_Unmap;
  Calrt_Buffer_SetCsr* Buffer_SetCsr;
  Calrt_Buffer_GetCsr* Buffer_GetCsr;

  Calrt_Job_Submit* Job_Submit;
  Calrt_Job_Wait* Job_Wait;
  Calrt_Job_Status* Job_Status;
  Calrt_Job_Cancel* Job_Cancel;
  Calrt_Job_Destroy* Job_Destroy;

  Calrt_Kv_Allocate* Kv_Allocate;
  Calrt_Kv_Apply* Kv_Apply;
  Calrt_Kv_Free* Kv_Free;
  Calrt_Kv_Clear* Kv_Clear;
  Calrt_Kv_Info* Kv_Info;
  Calrt_Kv_Capacity* Kv_Capacity;
} CalrtApi;
#define CALRT_API_STRUCT_SIZE CALRT_STRUCT_SIZE(CalrtApi, Kv_Capacity)

/* The one exported entry point. Returns the table for ABI major version abi_major, or NULL
 * when the runtime does not implement that major version. The table is static: it lives as
 * long as the library stays loaded. */
typedef const CalrtApi* CalrtGetApiFn(uint32_t abi_major);
#define CALRT_GET_API_SYMBOL "CalrtGetApi"
CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major);

#ifdef __cplusplus
}
#endif

#endif /* CALRT_H_ */
