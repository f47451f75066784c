/*
 * libFuzzer target for Slurm's compressed lists (src/bootstrap/nodelist.c), which every rank of
 * an srun step parses from SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE. Also linked into
 * fuzz_nodelist_replay (replay.c).
 *
 * Input: one control byte (which host and node number to ask for), then the list (up to the first
 * NUL). Invariants (a violation traps): a refused list says why and names no host; an accepted
 * one has 1 to ZEN_NODELIST_COUNT_MAX hosts, each a non-empty name of host-name characters that
 * fits the cap, and an index past the end gives an empty name; a list without brackets names its
 * comma-separated items as they are.
 */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/nodelist.h"
#include "fuzz_require.h"

static int host_chars_only(const char *s)
{
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._", *s))
            return 0;
    return 1;
}

static void check_host(const char *list, long index, size_t cap)
{
    char host[ZEN_NODELIST_HOST_MAX + 1];
    char why[160];
    long count = -1;
    zen_status st = zen__nodelist_host(list, index, host, cap, &count, why, sizeof why);
    if (st != ZEN_OK) {
        REQUIRE(why[0] != '\0' && host[0] == '\0' && count == 0);
        return;
    }
    REQUIRE(count >= 1 && count <= ZEN_NODELIST_COUNT_MAX);
    if (index >= count) {
        REQUIRE(host[0] == '\0');
        return;
    }
    REQUIRE(host[0] != '\0' && strlen(host) < cap && host_chars_only(host));
    if (!strchr(list, '[')) { /* plain names: host index is item index */
        const char *p = list;
        for (long i = 0; i < index; i++)
            p = strchr(p, ',') + 1;
        size_t n = strcspn(p, ",");
        REQUIRE(n == strlen(host) && memcmp(p, host, n) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *list = malloc(size);
    if (!list)
        return 0;
    memcpy(list, data + 1, size - 1);
    list[size - 1] = '\0';
    long index = data[0] & 0x0f;
    check_host(list, 0, ZEN_NODELIST_HOST_MAX + 1);
    check_host(list, index, ZEN_NODELIST_HOST_MAX + 1);
    check_host(list, index, (size_t)(data[0] >> 4) + 1); /* small caps: too long is an error */
    long tasks = -1;
    char why[160];
    if (zen__slurm_tasks_on_node(list, index, &tasks, why, sizeof why) == ZEN_OK)
        REQUIRE(tasks >= 0);
    else
        REQUIRE(why[0] != '\0');
    free(list);
    return 0;
}
