/*
 * The typed getters of the tunables table: each reads the variable, warns once about a value the
 * table rejects (then the default is used) and parses what the checks passed (tunables_check.c);
 * and the public listing of the table (zen info).
 */
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/tunables.h"
#include "common/tunables_table.h"

static const char *value_of(const zen_param_row *row)
{
    char warning[400];
    const char *v = zen__param_value(row, warning, sizeof warning);
    if (warning[0])
        ZEN_WARN("init", "%s", warning);
    return v;
}

static const zen_param_row *row_of_kind(const char *name, zen_param_kind kind, int strict_ok)
{
    const zen_param_row *row = zen__param_row(name);
    int kind_ok = row && (row->kind == kind || (kind == PK_STRING && row->kind >= PK_CHOICE));
    if (kind_ok && (strict_ok || !(row->flags & PF_STRICT)))
        return row;
    ZEN_ERROR("init", "bug: ZEN_%s read with the wrong getter or not in the tunables table", name);
    return NULL;
}

long zen__param_long(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_LONG, 0);
    long v = 0;
    if (row && zen__param_parse_long(value_of(row), &v) != 0)
        v = (long)row->lo; /* an unparsable default: a bug the tests catch */
    return v;
}

double zen__param_double(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_DOUBLE, 0);
    double v = 0;
    if (row && zen__param_parse_double(value_of(row), &v) != 0)
        v = row->lo;
    return v;
}

double zen__param_timeout(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_TIMEOUT, 0);
    double s = 300;
    if (row && zen__param_parse_timeout(value_of(row), &s) != 0)
        s = 300;
    return s;
}

int zen__param_u64(const char *name, uint64_t *out)
{
    const zen_param_row *row = row_of_kind(name, PK_U64, 0);
    return row && zen__param_parse_u64(value_of(row), out) == 0;
}

const char *zen__param_str(const char *name)
{
    const zen_param_row *row = row_of_kind(name, PK_STRING, 0);
    return row ? zen__param_canonical(row, value_of(row)) : "";
}

size_t zen_param_count(void)
{
    return zen__param_rows();
}

zen_status zen__param_info_at(size_t index, zen_param_info *info)
{
    const zen_param_row *row = zen__param_row_at(index);
    if (!row || !info)
        return ZEN_EINVAL;
    const char *env = getenv(row->name);
    static _Thread_local char why[160];
    const char *bad = (env && *env) ? zen__param_problem(row, env, why, sizeof why) : NULL;
    int secret = (row->flags & PF_SECRET) != 0;
    info->name = row->name;
    info->default_value = row->default_value;
    info->value = (env && *env && !bad) ? env : row->default_value;
    info->source = !bad                       ? ((env && *env) ? "env" : "default")
                   : (row->flags & PF_STRICT) ? "refused"
                                              : "ignored";
    if (env && *env && secret)
        info->value = "(hidden)"; /* `zen info` output gets pasted into bug reports */
    info->description = row->description;
    info->problem = bad;
    info->raw_value = bad ? (secret ? "(hidden)" : env) : NULL;
    return ZEN_OK;
}
