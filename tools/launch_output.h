/*
 * zen launch's rank-tagged output: each rank's stdout and stderr go through a pipe to the
 * launcher, which writes every line to its own stdout or stderr behind "[rank N] " (like
 * mpirun --tag-output or torchrun's "[defaultN]:"), whole lines only, so that ranks never
 * interleave inside a line.
 */
#ifndef ZEN_TOOLS_LAUNCH_OUTPUT_H
#define ZEN_TOOLS_LAUNCH_OUTPUT_H

/* Create the pipes of n ranks. 0, or -1 with errno set (then nothing is tagged). */
int zen_launch_out_open(int n);

/* In rank r's child, before exec: its stdout and stderr become its pipes; every other pipe
 * end is closed. */
void zen_launch_out_child(int r);

/* In the launcher after rank r was forked: close the child's ends. */
void zen_launch_out_forked(int r);

/* Relay what the ranks wrote, waiting at most timeout_ms for something to arrive. */
void zen_launch_out_pump(int timeout_ms);

/* After the ranks exited: relay what is left until every pipe is closed, or until nothing has
 * come for quiet_ms (a rank's own child may keep a pipe open); then free everything. */
void zen_launch_out_close(int quiet_ms);

#endif
