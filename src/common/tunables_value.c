/*
 * The validators of the tunables table's free-form (STRING) rows. Leaves: the table (tunables.c)
 * points at them, and they read no tunable, so the table and its checks do not call each other.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

#include "common/fault_spec.h"
#include "common/tunables_table.h"

/* Longest secret accepted in ZEN_JOB_SECRET: the limit of ZEN_JOB_SECRET_FILE
 * (ZEN_AUTH_SECRET_MAX in bootstrap/auth.h). */
#define SECRET_MAX 4096

/* A host name or dotted IPv4 address: letters, digits, '.', '-', '_', at most 253 long. */
const char *zen__param_check_host(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    size_t len = strlen(v);
    if (len > 253)
        return "longer than a host name can be (253)";
    if (*v == '-' || *v == '.')
        return "not a host name or IPv4 address (starts with '-' or '.')";
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            return "not a host name or IPv4 address";
    struct in_addr a;
    int dotted = strspn(v, "0123456789.") == len;
    if (dotted && inet_pton(AF_INET, v, &a) != 1)
        return "not an IPv4 address";
    return NULL;
}

/* Printable, no blank, shorter than ZEN_HOST_ID_MAX (128, bootstrap/hosts.h). */
const char *zen__param_check_host_id(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    if (strlen(v) >= 128)
        return "longer than 127 characters";
    for (const char *p = v; *p; p++)
        if (!isgraph((unsigned char)*p))
            return "has a blank or a control character";
    return NULL;
}

/* A path: its file is checked where it is opened (type, size); here only its length. */
const char *zen__param_check_path(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    return strlen(v) >= 4096 ? "longer than a path can be (4095)" : NULL;
}

const char *zen__param_check_secret(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    return strlen(v) > SECRET_MAX ? "longer than 4096 bytes" : NULL;
}

const char *zen__param_check_fault(const char *v, char *why, size_t n)
{
    zen_fault_config cfg;
    return zen__fault_spec_parse(v, &cfg, why, n) == 0 ? NULL : why;
}

const char *zen__param_check_word(const char *v, char *why, size_t n)
{
    (void)why;
    (void)n;
    if (strlen(v) > 31)
        return "longer than 31 characters";
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("+_-", *p))
            return "not a name (letters, digits, '+', '_', '-')";
    return NULL;
}
