/*
 * zen.h - version, status codes, logging and data types of the zen library.
 *
 * zen is a C11 library for distributed deep-learning communication: dense collectives, ZEN-style
 * sparse allreduce (include/zen/sparse.h; its cost model without communication in
 * include/zen/simulate.h) and straggler-tolerant tensor parallelism (include/zen/tp.h), over
 * in-process, TCP and MPI transports (include/zen/comm.h).
 *
 * Conventions used by every public header:
 *  - Every fallible call returns zen_status; 0 is success, negative values are errors.
 *  - Handles are opaque; objects are made by *_create and released by *_destroy. A destroy
 *    function accepts NULL and does nothing. *_free releases only what the library put into a
 *    caller-owned struct (zen_sparse_result_free, zen_trace_free).
 *  - Options structs start with a size field and are initialised by *_options_init(&o) (or the
 *    *_OPTIONS_INIT designated initialisers), so fields can be added without breaking callers.
 *    The *_COUNT enumerators name what this header knows and may grow in a minor version, so
 *    no public struct is sized by one (the exception, ZEN_PHASE_COUNT, is fixed and says so);
 *    tests/test_abi.c records every public struct's size.
 *  - Public functions carry ZEN_API; libzen.so exports exactly these (include/zen/export.h).
 *  - Counts are size_t element counts; byte counts say "bytes".
 *  - Unless a function says otherwise, a communicator is used by one thread at a time.
 *  - The functions of this header touch no communicator: every one of them may be called from
 *    any thread at any time. Strings they return are static (never freed by the caller).
 */
#ifndef ZEN_ZEN_H
#define ZEN_ZEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <zen/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZEN_VERSION_MAJOR  0
#define ZEN_VERSION_MINOR  1
#define ZEN_VERSION_PATCH  0
#define ZEN_VERSION_STRING "0.1.0"

/* Runtime version as MAJOR*10000 + MINOR*100 + PATCH, to compare with the header's macros.
 * Thread safe. */
ZEN_API int zen_version(void);

/*
 * Status codes. Values are explicit and never reused; a retired value becomes ZEN_OBSOLETE_n.
 * After ZEN_EPEER, ZEN_EPROTO, ZEN_ETIMEDOUT or ZEN_EABORTED a communicator is poisoned: only
 * zen_comm_abort and zen_comm_destroy remain valid on it. So is it after a dense collective
 * returns ZEN_EMISMATCH (ranks disagreed on its arguments, comm.h).
 */
typedef enum zen_status {
    ZEN_OK = 0,
    ZEN_EINVAL = -1,       /* invalid argument; the call had no effect */
    ZEN_ENOMEM = -2,       /* allocation failed */
    ZEN_ESYS = -3,         /* an operating-system call failed (errno in the last error) */
    ZEN_ETIMEDOUT = -4,    /* a blocking wait passed its deadline; the message names the peer */
    ZEN_EPEER = -5,        /* a peer closed its connection or died */
    ZEN_EPROTO = -6,       /* bad bytes on the wire: magic, version, length or a count mismatch */
    ZEN_EABORTED = -7,     /* the communicator was aborted */
    ZEN_EUNSUPPORTED = -8, /* the operation, dtype or transport is not available in this build */
    ZEN_EBUSY = -9,        /* a resource (port, file) is in use */
    ZEN_EIO = -10,         /* reading or writing a file failed */
    ZEN_ECORRUPT = -11,    /* a file failed its checksum or format check */
    ZEN_EMISMATCH = -12,   /* ranks disagree (shapes, configuration, checkpoint config) */
    ZEN_EINTERNAL = -13,   /* a bug in zen: please report it with the last error text */
    ZEN_EINPROGRESS = 1,   /* a nonblocking operation has not finished yet (not an error) */
} zen_status;

/* Static English description of a status ("invalid argument"). Never NULL. Thread safe. */
ZEN_API const char *zen_strerror(int status);

/* Static symbolic name of a status ("ZEN_EINVAL"). Never NULL. Thread safe. */
ZEN_API const char *zen_status_name(int status);

/* Data types. bf16 is stored as bfloat16 and reduced in f32 (round to nearest even). */
typedef enum zen_dtype {
    ZEN_F32 = 0,
    ZEN_F64 = 1,
    ZEN_I32 = 2,
    ZEN_I64 = 3,
    ZEN_BF16 = 4,
    ZEN_DTYPE_COUNT = 5
} zen_dtype;

/* Bytes per element of a dtype, 0 for an invalid dtype. Thread safe. */
ZEN_API size_t zen_dtype_size(zen_dtype dtype);

/* Static name of a dtype ("f32"), "?" for an invalid one. Never NULL. Thread safe. */
ZEN_API const char *zen_dtype_name(zen_dtype dtype);

/* Reduction operators. AVG is SUM followed by division by the rank count (integer: truncating). */
typedef enum zen_op {
    ZEN_SUM = 0,
    ZEN_PROD = 1,
    ZEN_MIN = 2,
    ZEN_MAX = 3,
    ZEN_AVG = 4,
    ZEN_OP_COUNT = 5
} zen_op;

/* Static name of an op ("sum"), "?" for an invalid one. Never NULL. Thread safe. */
ZEN_API const char *zen_op_name(zen_op op);

/* bf16 conversions (round to nearest even; NaN stays NaN). Pure functions, thread safe. */
ZEN_API uint16_t zen_f32_to_bf16(float value);
ZEN_API float zen_bf16_to_f32(uint16_t value);

/* Log levels, chosen at run time with ZEN_LOG_LEVEL=error|warn|info|debug|trace (default warn). */
typedef enum zen_log_level {
    ZEN_LOG_ERROR = 0,
    ZEN_LOG_WARN = 1,
    ZEN_LOG_INFO = 2,
    ZEN_LOG_DEBUG = 3,
    ZEN_LOG_TRACE = 4
} zen_log_level;

/*
 * A log sink receives every message that passes the level and subsystem filters
 * (ZEN_LOG_SUBSYS=init,bootstrap,transport,coll,sparse,tp,train; default all). The line has no
 * trailing newline and already carries the host:pid:rank prefix; it is only valid during the call
 * (copy it to keep it). May be called from any thread, but one message at a time: the library
 * holds its log lock around the call, so a sink must not call zen_log or zen_log_set_sink.
 */
typedef void (*zen_log_sink)(zen_log_level level, const char *subsys, const char *line, void *user);

/*
 * Install a sink (NULL restores the default, stderr). user is passed to every call of sink; the
 * library neither copies nor frees it, so it must stay valid until another sink is installed.
 * Thread safe; install it before starting ranks so that no early message goes to stderr.
 */
ZEN_API void zen_log_set_sink(zen_log_sink sink, void *user);

/*
 * Log a message from an application thread (the rank prefix is that of the calling thread).
 * The line is cut at 1 KiB; a level outside ZEN_LOG_ERROR..ZEN_LOG_TRACE is ignored. Thread safe.
 */
ZEN_API void zen_log(zen_log_level level, const char *subsys, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/*
 * Tunables: every ZEN_* environment variable the library reads, with its default and a one-line
 * description. zen_param_get fills info for entry index < zen_param_count() (ZEN_EINVAL for a
 * larger index or a NULL info) with the value in effect at the time of the call. name, source,
 * description and default_value are static; value is either default_value or points into the
 * process environment (getenv), valid until that variable is next changed. Thread safe as long as
 * no thread changes the environment meanwhile.
 */
typedef struct zen_param_info {
    const char *name;          /* environment variable, e.g. "ZEN_TIMEOUT_S" */
    const char *value;         /* value in effect */
    const char *default_value; /* built-in default */
    const char *source; /* "env", "default", or "ignored" (env value malformed or out of range) */
    const char *description;
    const char *problem;   /* why the env value was ignored (static text), else NULL */
    const char *raw_value; /* the ignored environment value, else NULL */
} zen_param_info;

ZEN_API size_t zen_param_count(void);
ZEN_API zen_status zen_param_get(size_t index, zen_param_info *info);

/* Transport kinds (how the ranks of a communicator reach each other; zen_comm_options.transport).
 * Named here rather than in comm.h because the bootstrap layer, below the communicator, picks
 * among them too. */
typedef enum zen_transport_kind {
    ZEN_TRANSPORT_AUTO = 0, /* inproc when a world is given, else mpi when started by mpirun (and
                               built with MPI), else ZEN_TRANSPORT (auto|tcp|shm|mpi, default
                               auto): shm among the ranks of a host, tcp across hosts */
    ZEN_TRANSPORT_INPROC = 1,
    ZEN_TRANSPORT_TCP = 2,
    ZEN_TRANSPORT_MPI = 3,
    ZEN_TRANSPORT_SHM = 4,  /* one process per rank, all on one host, shared memory ("shm") */
    ZEN_TRANSPORT_MIXED = 5 /* shm inside each host, tcp between hosts ("shm+tcp"); as an option
                               it means the same as AUTO for processes */
} zen_transport_kind;

/* Static name of a transport kind ("inproc"); never NULL. Thread safe. */
ZEN_API const char *zen_transport_name(zen_transport_kind kind);

/*
 * Files a user names: a corpus, a checkpoint, a trace, a metrics file. Opening a FIFO waits for
 * its other end, forever when there is none, and a device can be read without end; these open
 * without waiting and look at what they opened before using it. Both are thread safe.
 *
 * zen_file_open_input opens path for reading when it is a regular file (a symlink to one is fine)
 * of at most max_bytes (UINT64_MAX: no limit), storing its size in *size (may be NULL). A FIFO, a
 * device, a directory or a socket is refused at once, never read. zen_file_open_output creates or
 * truncates path for writing (mode 0666 less the umask); a FIFO is taken only while a process
 * reads it (`/dev/stdout` piped to a program), else refused at once.
 * On success *out is the stream (close it with fclose). On failure *out is NULL, why (why_size
 * bytes; may be NULL) holds a sentence naming path, errno is set, and the status is ZEN_EINVAL
 * (not a regular file, larger than max_bytes, or a FIFO nobody reads: errno EINVAL, EFBIG or
 * ENXIO) or ZEN_EIO (open failed: its errno, e.g. ENOENT).
 */
ZEN_API zen_status zen_file_open_input(const char *path, uint64_t max_bytes, FILE **out,
                                       uint64_t *size, char *why, size_t why_size);
ZEN_API zen_status zen_file_open_output(const char *path, FILE **out, char *why, size_t why_size);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_ZEN_H */
