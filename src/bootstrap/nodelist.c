#include "bootstrap/nodelist.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NUM_DIGITS_MAX 9 /* numbers up to 999999999: no overflow in long arithmetic */

/* One item of a hostlist: literal text with bracket groups [gs[i], ge[i]) in between. */
typedef struct {
    const char *start, *end;
    int ngroups;
    const char *gs[ZEN_NODELIST_GROUPS], *ge[ZEN_NODELIST_GROUPS];
    long gcount[ZEN_NODELIST_GROUPS];
    long count; /* product of gcount */
} item;

static zen_status fail(char *why, size_t cap, const char *fmt, ...)
{
    if (why && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return ZEN_EINVAL;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Characters of a host name outside brackets (RFC 1123 letters, digits, '-', plus '.' and '_'). */
static int is_host_char(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '.' || c == '_';
}

/* c as text for a message: itself when printable, else \xNN (the input may be any bytes). */
static const char *shown(char c, char buf[8])
{
    unsigned char u = (unsigned char)c;
    if (u >= 0x20 && u < 0x7f)
        snprintf(buf, 8, "'%c'", c);
    else
        snprintf(buf, 8, "\\x%02x", u);
    return buf;
}

/* A decimal number at *p (before end) into *v, its digit count into *width; *p moves past it. */
static int parse_num(const char **p, const char *end, long *v, int *width)
{
    const char *s = *p;
    long x = 0;
    int n = 0;
    while (s < end && is_digit(*s)) {
        if (++n > NUM_DIGITS_MAX)
            return -1;
        x = x * 10 + (*s++ - '0');
    }
    if (n == 0)
        return -1;
    *p = s;
    *v = x;
    *width = n;
    return 0;
}

/*
 * Walk the elements (N or N-M) of a group's text [p, end). Counts its values into *count; when
 * want >= 0, also formats value number want into val. pos0: the list's start, for messages.
 */
static zen_status group_walk(const char *p, const char *end, const char *pos0, long want, char *val,
                             size_t val_cap, long *count, char *why, size_t why_cap)
{
    long n = 0;
    for (;;) {
        const char *at = p;
        long lo, hi;
        int w, w2;
        if (parse_num(&p, end, &lo, &w) != 0)
            return fail(why, why_cap,
                        "at character %td: expected a number of 1 to %d digits in brackets",
                        at - pos0 + 1, NUM_DIGITS_MAX);
        hi = lo;
        if (p < end && *p == '-') {
            p++;
            if (parse_num(&p, end, &hi, &w2) != 0)
                return fail(why, why_cap, "at character %td: range without an upper number",
                            p - pos0 + 1);
            if (hi < lo)
                return fail(why, why_cap, "at character %td: range %ld-%ld runs backwards",
                            at - pos0 + 1, lo, hi);
        }
        if (want >= n && want <= n + (hi - lo))
            snprintf(val, val_cap, "%0*ld", w, lo + (want - n));
        n += hi - lo + 1;
        if (n > ZEN_NODELIST_COUNT_MAX)
            return fail(why, why_cap, "more than %ld hosts", ZEN_NODELIST_COUNT_MAX);
        if (p == end)
            break;
        if (*p != ',')
            return fail(why, why_cap, "at character %td: %s in brackets (digits, '-' and ',' only)",
                        p - pos0 + 1, shown(*p, (char[8]){ 0 }));
        p++;
    }
    *count = n;
    return ZEN_OK;
}

/* Parse the item [p, end) of a list starting at pos0 into *it. */
static zen_status item_parse(const char *p, const char *end, const char *pos0, item *it, char *why,
                             size_t why_cap)
{
    memset(it, 0, sizeof *it);
    it->start = p;
    it->end = end;
    it->count = 1;
    if (p == end)
        return fail(why, why_cap, "at character %td: empty host name", p - pos0 + 1);
    while (p < end) {
        if (*p == ']')
            return fail(why, why_cap, "at character %td: ']' without '['", p - pos0 + 1);
        if (*p != '[') {
            if (!is_host_char(*p))
                return fail(why, why_cap, "at character %td: %s is not a host name character",
                            p - pos0 + 1, shown(*p, (char[8]){ 0 }));
            p++;
            continue;
        }
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (!close)
            return fail(why, why_cap, "at character %td: '[' without ']'", p - pos0 + 1);
        if (it->ngroups == ZEN_NODELIST_GROUPS)
            return fail(why, why_cap, "at character %td: more than %d bracket groups in a name",
                        p - pos0 + 1, ZEN_NODELIST_GROUPS);
        int g = it->ngroups++;
        it->gs[g] = p + 1;
        it->ge[g] = close;
        zen_status st = group_walk(p + 1, close, pos0, -1, NULL, 0, &it->gcount[g], why, why_cap);
        if (st != ZEN_OK)
            return st;
        if (it->count > ZEN_NODELIST_COUNT_MAX / it->gcount[g])
            return fail(why, why_cap, "more than %ld hosts", ZEN_NODELIST_COUNT_MAX);
        it->count *= it->gcount[g];
        p = close + 1;
    }
    return ZEN_OK;
}

/* Host number idx (< it->count) of a parsed item: the last group varies fastest. */
static zen_status item_host(const item *it, long idx, const char *pos0, char *out, size_t cap,
                            char *why, size_t why_cap)
{
    long pick[ZEN_NODELIST_GROUPS];
    for (int g = it->ngroups - 1; g >= 0; g--) {
        pick[g] = idx % it->gcount[g];
        idx /= it->gcount[g];
    }
    size_t limit = cap - 1 < ZEN_NODELIST_HOST_MAX ? cap - 1 : ZEN_NODELIST_HOST_MAX;
    size_t len = 0;
    const char *p = it->start;
    for (int g = 0; g <= it->ngroups; g++) {
        const char *lit_end = g < it->ngroups ? it->gs[g] - 1 : it->end;
        char piece[NUM_DIGITS_MAX + 2] = "";
        size_t n = (size_t)(lit_end - p);
        if (g < it->ngroups)
            group_walk(it->gs[g], it->ge[g], pos0, pick[g], piece, sizeof piece, &(long){ 0 }, NULL,
                       0); /* checked by item_parse */
        size_t m = strlen(piece);
        if (len + n + m > limit)
            return fail(why, why_cap, "host name at character %td is longer than %zu characters",
                        it->start - pos0 + 1, limit);
        memcpy(out + len, p, n);
        memcpy(out + len + n, piece, m);
        len += n + m;
        if (g < it->ngroups)
            p = it->ge[g] + 1;
    }
    out[len] = '\0';
    return ZEN_OK;
}

/* zen__nodelist_host once the arguments are checked; out may be left partly written. */
static zen_status nodelist_walk(const char *list, long index, char *out, size_t cap, long *count,
                                char *why, size_t why_cap)
{
    if (!list || !*list)
        return fail(why, why_cap, "the host list is empty");
    long total = 0;
    const char *p = list;
    for (;;) {
        const char *e = p;
        int depth = 0;
        while (*e && (*e != ',' || depth > 0)) {
            depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
            e++;
        }
        item it;
        zen_status st = item_parse(p, e, list, &it, why, why_cap);
        if (st != ZEN_OK)
            return st;
        if (total > ZEN_NODELIST_COUNT_MAX - it.count)
            return fail(why, why_cap, "more than %ld hosts", ZEN_NODELIST_COUNT_MAX);
        if (index >= total && index < total + it.count &&
            (st = item_host(&it, index - total, list, out, cap, why, why_cap)) != ZEN_OK)
            return st;
        total += it.count;
        if (!*e)
            break;
        p = e + 1;
    }
    *count = total;
    return ZEN_OK;
}

zen_status zen__nodelist_host(const char *list, long index, char *out, size_t cap, long *count,
                              char *why, size_t why_cap)
{
    if (why && why_cap)
        why[0] = '\0';
    if (count)
        *count = 0;
    if (!out || cap == 0 || !count)
        return fail(why, why_cap, "no room for the host name");
    out[0] = '\0';
    zen_status st = nodelist_walk(list, index, out, cap, count, why, why_cap);
    if (st != ZEN_OK) {
        out[0] = '\0';
        *count = 0;
    }
    return st;
}

zen_status zen__slurm_tasks_on_node(const char *tpn, long node, long *tasks, char *why,
                                    size_t why_cap)
{
    if (why && why_cap)
        why[0] = '\0';
    if (!tasks)
        return fail(why, why_cap, "no result");
    *tasks = 0;
    if (!tpn || !*tpn)
        return fail(why, why_cap, "the tasks-per-node list is empty");
    const char *p = tpn, *end = tpn + strlen(tpn);
    long first = 0; /* number of the first node of the current element */
    int found = 0;
    for (;;) {
        long n, reps = 1;
        int w;
        if (parse_num(&p, end, &n, &w) != 0)
            return fail(why, why_cap, "at character %td: expected a task count", p - tpn + 1);
        if (*p == '(') {
            if (p[1] != 'x')
                return fail(why, why_cap, "at character %td: expected '(x'", p - tpn + 1);
            p += 2;
            if (parse_num(&p, end, &reps, &w) != 0 || *p != ')')
                return fail(why, why_cap, "at character %td: expected a repeat count and ')'",
                            p - tpn + 1);
            p++;
        }
        if (!found && node >= first && node < first + reps) {
            *tasks = n;
            found = 1;
        }
        first += reps;
        if (first > ZEN_NODELIST_COUNT_MAX)
            return fail(why, why_cap, "more than %ld nodes", ZEN_NODELIST_COUNT_MAX);
        if (!*p)
            break;
        if (*p != ',')
            return fail(why, why_cap, "at character %td: %s (expected ',')", p - tpn + 1,
                        shown(*p, (char[8]){ 0 }));
        p++;
    }
    if (!found)
        return fail(why, why_cap, "node %ld is not in the list (%ld nodes)", node, first);
    return ZEN_OK;
}

int zen__slurm_port(long job_id, long step_id)
{
    if (job_id < 0)
        job_id = -job_id;
    if (step_id < 0)
        step_id = -step_id;
    return 20000 + (int)(job_id % 1000) * 10 + (int)(step_id % 10);
}
