/* Checked size arithmetic for counts that come from users or from the wire. */
#ifndef ZEN_COMMON_CHECKED_H
#define ZEN_COMMON_CHECKED_H

#include <stdbool.h>
#include <stddef.h>

/* true on overflow; *out holds the product or sum otherwise. */
static inline bool zen_mul_overflow(size_t a, size_t b, size_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

static inline bool zen_add_overflow(size_t a, size_t b, size_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

#endif
