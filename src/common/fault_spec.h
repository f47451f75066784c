/*
 * The grammar of ZEN_FAULT (see transport/faulty.h for what each field does). It lives in common
 * so that the tunables table can check a value with the very parser the faulty transport uses.
 */
#ifndef ZEN_COMMON_FAULT_SPEC_H
#define ZEN_COMMON_FAULT_SPEC_H

#include <stddef.h>

typedef enum zen_fault_action {
    ZEN_FAULT_DELAY,
    ZEN_FAULT_DROP,
    ZEN_FAULT_TRUNCATE,
    ZEN_FAULT_CORRUPT,
    ZEN_FAULT_GARBAGE,
    ZEN_FAULT_KILL
} zen_fault_action;

typedef struct zen_fault_config {
    int rank;
    long after;
    long count;
    int peer; /* -1: any */
    long ms;
    zen_fault_action action;
} zen_fault_config;

/* Parse "rank=R,after=K,action=A[,count=C][,ms=M][,peer=P]". 0 on success; -1 when malformed,
 * with the reason in why. */
int zen__fault_spec_parse(const char *spec, zen_fault_config *cfg, char *why, size_t why_size);

#endif
