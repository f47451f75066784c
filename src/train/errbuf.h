/*
 * The train module's file readers and writers (checkpoint.c, data.c) have no communicator to
 * record a failure on: they write a one-line reason into a caller's (err, errlen) buffer.
 */
#ifndef ZEN_TRAIN_ERRBUF_H
#define ZEN_TRAIN_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Format into err (truncating to errlen); does nothing when err is NULL or errlen is 0. */
static inline void zen_train_set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static inline void zen_train_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#endif
