/*
 * The delay line of zen_netswitch (bench/netswitch.c), kept free of I/O so that its arithmetic
 * can be unit-tested (tests/test_netswitch.c).
 *
 * Model: every emulated host has one line into the switch. A packet the switch reads from host
 * s at time `now` leaves s's line at
 *     depart = max(now, free[s]) + len * 8 / rate     (earliest departure time)
 * (rate 0: depart = now) and is handed to its destination at release = depart + delay. free[s] =
 * depart only for packets that are admitted, so a dropped packet costs its line no time. Since
 * depart never decreases on one line and delay is constant, each source's packets are released in
 * the order they were read: one FIFO per source is a correct priority queue, and the next event of
 * the switch is the minimum over the FIFO heads.
 *
 * A line refuses a packet (the caller drops and counts it) when its FIFO holds max_pkts packets or
 * max_bytes bytes, or when the packet would wait more than max_wait_ns in the line before
 * departing (a switch buffer of that many microseconds at the line rate; 0 = no time bound).
 */
#ifndef ZEN_BENCH_NETSWITCH_LINE_H
#define ZEN_BENCH_NETSWITCH_LINE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ns_pkt {
    int64_t release_ns; /* when it is due at its destination */
    unsigned char *buf; /* owned by the caller; the line only carries the pointer */
    uint32_t len;
    int dst; /* destination host index */
} ns_pkt;

typedef struct ns_model {
    int64_t delay_ns;    /* one-way delay added to every packet */
    uint64_t rate_bps;   /* line rate in bit/s; 0 = no pacing */
    int64_t max_wait_ns; /* longest time a packet may queue before departing; 0 = unbounded */
    uint32_t max_pkts;   /* FIFO capacity in packets (>= 1) */
    uint64_t max_bytes;  /* FIFO capacity in bytes */
} ns_model;

typedef struct ns_line {
    ns_pkt *ring;
    uint32_t cap, head, count;
    uint64_t bytes;
    int64_t free_ns; /* when the last admitted packet finished departing */
} ns_line;

typedef enum ns_admit {
    NS_ADMIT_OK = 0,
    NS_ADMIT_FULL,    /* max_pkts or max_bytes reached */
    NS_ADMIT_BACKLOG, /* would wait longer than max_wait_ns */
} ns_admit;

/* 0, or -1 when the ring cannot be allocated. */
int ns_line_init(ns_line *l, const ns_model *m);
void ns_line_free(ns_line *l);

/* Serialization time of len bytes at rate_bps, rounded up to whole nanoseconds (0 when unpaced). */
int64_t ns_tx_ns(uint64_t rate_bps, uint32_t len);

/*
 * Admit pkt (its buf, len and dst set by the caller) read at `now`: on NS_ADMIT_OK it is queued
 * with its release time filled in; otherwise the line is unchanged.
 */
ns_admit ns_line_push(ns_line *l, const ns_model *m, int64_t now, ns_pkt pkt);

/* The oldest queued packet, or NULL. */
const ns_pkt *ns_line_head(const ns_line *l);
/* Remove the head (the line must not be empty). */
void ns_line_pop(ns_line *l);

/* Earliest head release time over n lines, or -1 when all are empty. */
int64_t ns_lines_next(const ns_line *lines, int n);

/*
 * Destination host of an IPv4 packet: host i owns address subnet + i + 1 within subnet/24
 * (subnet in host byte order, low byte 0). -1 when it is not IPv4, too short, outside the subnet,
 * or addresses no host 0..n-1 (network and broadcast addresses included).
 */
int ns_route(const unsigned char *pkt, size_t len, uint32_t subnet, int n);

#endif
