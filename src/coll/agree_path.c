/*
 * Which way a collective's argument descriptor travels (coll_algos.h): the shared slots of a pure
 * shm communicator (slots.c: one post and one wait per rank), else the butterfly of agree.c
 * (log2 p exchanges of 16 bytes). Apart from both, because slots.c reports a disagreement
 * through agree.c.
 */
#include "coll/coll_algos.h"

zen_status zen__coll_agree(zen_comm *comm, zen_coll *cc)
{
    if (cc->agree.word == 0)
        return ZEN_OK;
    if (zen__coll_slot_max(comm) > 0)
        return zen__coll_slots_exchange(comm, cc);
    return zen__coll_agree_butterfly(comm, cc);
}
