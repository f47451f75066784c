/* One table for status codes: names and messages cannot drift apart from the enum. */
#include <zen/zen.h>

#define ZEN_STATUS_TABLE(X)                                         \
    X(ZEN_OK, "success")                                            \
    X(ZEN_EINVAL, "invalid argument")                               \
    X(ZEN_ENOMEM, "out of memory")                                  \
    X(ZEN_ESYS, "system call failed")                               \
    X(ZEN_ETIMEDOUT, "timed out waiting for a peer")                \
    X(ZEN_EPEER, "peer closed the connection or died")              \
    X(ZEN_EPROTO, "protocol error: unexpected bytes on the wire")   \
    X(ZEN_EABORTED, "communicator aborted")                         \
    X(ZEN_EUNSUPPORTED, "not supported by this build or transport") \
    X(ZEN_EBUSY, "resource busy")                                   \
    X(ZEN_EIO, "file input/output error")                           \
    X(ZEN_ECORRUPT, "data failed its integrity check")              \
    X(ZEN_EMISMATCH, "ranks or files disagree")                     \
    X(ZEN_EINTERNAL, "internal error in zen")                       \
    X(ZEN_EINPROGRESS, "operation in progress")

const char *zen_strerror(int status)
{
    switch (status) {
#define ZEN_STATUS_MSG(code, msg) \
    case code:                    \
        return msg;
        ZEN_STATUS_TABLE(ZEN_STATUS_MSG)
#undef ZEN_STATUS_MSG
    default:
        return "unknown status";
    }
}

const char *zen_status_name(int status)
{
    switch (status) {
#define ZEN_STATUS_NAME(code, msg) \
    case code:                     \
        return #code;
        ZEN_STATUS_TABLE(ZEN_STATUS_NAME)
#undef ZEN_STATUS_NAME
    default:
        return "ZEN_UNKNOWN";
    }
}

int zen_version(void)
{
    return ZEN_VERSION_MAJOR * 10000 + ZEN_VERSION_MINOR * 100 + ZEN_VERSION_PATCH;
}
