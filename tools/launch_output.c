#include "launch_output.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    LINE_CAP = 16384 /* a longer line is written in pieces, each tagged */
};

typedef struct stream {
    int rd, wr; /* pipe ends; -1 when closed */
    int rank;
    FILE *to; /* the launcher's stdout or stderr */
    size_t have;
    char line[LINE_CAP];
} stream;

static stream *streams; /* 2 per rank: stdout, stderr */
static int nstreams;

int zen_launch_out_open(int n)
{
    streams = calloc((size_t)n * 2, sizeof *streams);
    if (!streams)
        return -1;
    nstreams = 2 * n;
    for (int i = 0; i < nstreams; i++) {
        stream *s = &streams[i];
        s->rd = s->wr = -1;
        s->rank = i / 2;
        s->to = i % 2 ? stderr : stdout;
    }
    for (int i = 0; i < nstreams; i++) {
        int fd[2];
        if (pipe(fd) != 0) {
            zen_launch_out_close(0);
            return -1;
        }
        streams[i].rd = fd[0];
        streams[i].wr = fd[1];
    }
    return 0;
}

void zen_launch_out_child(int r)
{
    for (int i = 0; i < nstreams; i++) {
        stream *s = &streams[i];
        if (s->rank == r)
            dup2(s->wr, i % 2 ? STDERR_FILENO : STDOUT_FILENO);
        close(s->rd);
        close(s->wr);
    }
}

void zen_launch_out_forked(int r)
{
    for (int i = 2 * r; i < 2 * r + 2 && i < nstreams; i++) {
        close(streams[i].wr);
        streams[i].wr = -1;
    }
}

static void emit(stream *s, const char *text, size_t len)
{
    fprintf(s->to, "[rank %d] %.*s\n", s->rank, (int)len, text);
}

/* Write the complete lines of s's buffer; keep the rest. */
static void flush_lines(stream *s, int all)
{
    size_t start = 0;
    for (size_t k = 0; k < s->have; k++)
        if (s->line[k] == '\n') {
            emit(s, s->line + start, k - start);
            start = k + 1;
        }
    if (all || (start == 0 && s->have == LINE_CAP)) { /* the end, or a line too long */
        if (s->have > start)
            emit(s, s->line + start, s->have - start);
        start = s->have;
    }
    memmove(s->line, s->line + start, s->have - start);
    s->have -= start;
}

/* Read what s has; 1 when something came, 0 at end of stream (s closed). */
static int take(stream *s)
{
    ssize_t got = read(s->rd, s->line + s->have, LINE_CAP - s->have);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (got <= 0) {
        flush_lines(s, 1);
        close(s->rd);
        s->rd = -1;
        return 0;
    }
    s->have += (size_t)got;
    flush_lines(s, 0);
    return 1;
}

/* One poll over the open pipes; the number of pipes still open. */
static int pump_once(int timeout_ms, int *any)
{
    struct pollfd pf[2 * 1024];
    int map[2 * 1024], n = 0;
    for (int i = 0; i < nstreams && n < (int)(sizeof pf / sizeof pf[0]); i++)
        if (streams[i].rd >= 0) {
            pf[n] = (struct pollfd){ .fd = streams[i].rd, .events = POLLIN };
            map[n++] = i;
        }
    *any = 0;
    if (n == 0) {
        if (timeout_ms > 0)
            poll(NULL, 0, timeout_ms);
        return 0;
    }
    if (poll(pf, (nfds_t)n, timeout_ms) <= 0)
        return n;
    for (int k = 0; k < n; k++)
        if (pf[k].revents) {
            take(&streams[map[k]]);
            *any = 1;
        }
    fflush(stdout);
    fflush(stderr);
    return n;
}

void zen_launch_out_pump(int timeout_ms)
{
    int any = 0;
    pump_once(timeout_ms, &any);
}

void zen_launch_out_close(int quiet_ms)
{
    int any = 0;
    while (streams && pump_once(quiet_ms, &any) > 0 && any)
        ;
    for (int i = 0; i < nstreams; i++) {
        stream *s = &streams[i];
        if (s->rd >= 0) {
            flush_lines(s, 1);
            close(s->rd);
        }
        if (s->wr >= 0)
            close(s->wr);
    }
    fflush(stdout);
    fflush(stderr);
    free(streams);
    streams = NULL;
    nstreams = 0;
}
