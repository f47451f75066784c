/*
 * The cost model's network for a transport: its own figures (transport/registry.h traits), the
 * ZEN_NET_* overrides and the oversubscription of one host. Here, above model/, because binding
 * the pure model to a concrete transport reads the transport table through coll.
 */
#ifndef ZEN_SPARSE_PLAN_NET_MODEL_H
#define ZEN_SPARSE_PLAN_NET_MODEL_H

#include "sparse/model/cost.h"

/* Network model from ZEN_NET_GBPS / ZEN_NET_LAT_US, else the defaults of the transport; the
 * compute constants from zen_sparse_cpu_model_default (inproc: no transport CPU, its copies are the
 * bandwidth). */
void zen__net_model_for(zen_transport_kind kind, zen_net_model *net);

/*
 * Same, for nranks ranks: inproc ranks are threads sharing this host's cores, so with more ranks
 * than online cores each rank gets cores/nranks of the bandwidth, the latency grows by
 * nranks/cores (unless ZEN_NET_* set them), and the messages of a step are issued one after
 * another (overhead_s = latency_s), and each rank gets cores/nranks of a core for its compute
 * (unless ZEN_SPARSE_CPU_SHARE sets it). Other transports: as zen__net_model_for.
 */
void zen__net_model_for_ranks(zen_transport_kind kind, int nranks, zen_net_model *net);

#endif
