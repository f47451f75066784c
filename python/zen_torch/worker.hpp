// The execution side of the zen backend: one worker thread per process group that runs the
// group's operations in the order they were issued, and the Work objects they complete.
//
// Why a thread per group: a zen communicator is used by one thread at a time (include/zen/comm.h),
// and torch expects `async_op=True` to return before the operation ran (DDP issues each bucket's
// all_reduce from an autograd hook and keeps computing the backward pass). The worker is the one
// thread that ever touches the group's communicator, so issue order is execution order on every
// rank and zen's ordering contract holds.
//
// Callbacks and collectives issued from them: a future completed by the worker runs the callbacks
// chained on it on the worker, and torch's users (PowerSGD's DDP hook, any hook that chains
// `then()`) issue a collective from such a callback and wait() on its future. Queued behind the
// running task, that collective would wait for the very thread that waits for it. So an operation
// posted from the worker thread runs inline, at once, before the worker takes the next queued
// task (Comm::post). Why inline rather than callbacks on another thread (gloo has several
// workers and tags each collective with its issue number, so its order is free; zen matches
// collectives by order alone): the callback runs at a fixed point in the worker's sequence, right
// after the operation it is chained on, so what it issues lands at the same place on every rank,
// whether the callback ran on the worker (chained before completion) or on the caller's thread
// (chained after, then() runs it at once, before the caller issues anything else). A separate
// callback thread would race the caller's next issue (DDP's next bucket) and the ranks would
// disagree on the order. NCCL gives the same sequence: its futures are marked complete once the
// kernels are enqueued, so callbacks run at once in the issuing thread. Limits: a callback must
// not wait for an operation another thread issued after the one it is chained on (still queued,
// it runs once the callback returns), nor for an isend/irecv of the same group (polled by the
// worker between tasks).
//
// Lifetime rules (what torch asks of a backend, and what this file guarantees):
//  - a Work holds references to every tensor its operation reads or writes (and to staging copies)
//    until it completes, so a caller that drops its tensors early does not free memory the worker
//    is using;
//  - the caller must not read or write those tensors before wait() returns or the future completes
//    (torch's rule for every asynchronous backend); the worker writes them, the caller's thread
//    never does after issue;
//  - Works and tasks never own the communicator: the process group does, and its destructor
//    drains the queue and joins the worker, so no task can outlive the communicator.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include <zen/comm.h>
#include <zen/sparse.h>

namespace zen_torch
{

// A Work completed by the group's worker. Its future completes first (running the callbacks that
// were chained on it, e.g. a DDP comm hook), then the Work itself, so wait() returning means the
// chained callbacks have run as well (gloo's order).
class ZenWork : public c10d::Work
{
  public:
    ZenWork(c10d::OpType type, std::string what, int rank, double group_timeout_s,
            std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep);

    // Worker side: the operation started (wait()'s deadline counts from here) / finished.
    void started();
    void complete(std::exception_ptr error);

    // kNoTimeout: block until complete, at most the group's timeout after the worker started the
    // operation (plus a grace second, so zen's own timeout error, which names the missing peer,
    // is what the caller sees). Otherwise at most `timeout`. Raises the operation's error.
    bool wait(std::chrono::milliseconds timeout) override;
    std::vector<at::Tensor> result() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    int sourceRank() const override;

    void set_source_rank(int r)
    {
        source_rank_ = r;
    }

    // Waits without raising (sync mode: the call returns once the Work is complete).
    void wait_quietly();

  private:
    std::string what_;
    int zen_rank_;
    double group_timeout_s_;
    int source_rank_ = -1;
    std::atomic<int64_t> started_ns_{ 0 };
    std::vector<at::Tensor> outputs_;
    std::vector<at::Tensor> keep_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A nonblocking send or receive the worker posted and polls until it completes or its deadline.
struct PendingP2P {
    zen_request *req;
    c10::intrusive_ptr<ZenWork> work;
    std::chrono::steady_clock::time_point deadline;
    std::string what; // "recv from rank 1"
};

// The group's communicator and the thread that uses it.
class Comm
{
  public:
    Comm(zen_comm *comm, bool sync);
    ~Comm();
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;

    zen_comm *comm() const
    {
        return comm_;
    }

    bool sync() const
    {
        return sync_;
    }

    int rank() const
    {
        return rank_;
    }

    double timeout_s() const
    {
        return timeout_s_;
    }

    // Queue a task (FIFO). Runs on the worker thread; must not throw. Called on the worker thread
    // itself (from a callback a task ran), the task runs inline before post returns.
    void post(std::function<void()> task);
    // Worker thread only: keep polling a posted nonblocking request.
    void add_pending(PendingP2P p);

    // "zen backend: rank R: WHAT failed: <strerror> (<zen's last error>)". Worker thread only
    // (the last error belongs to the communicator's thread).
    std::exception_ptr error(const std::string &what, zen_status st) const;

    std::atomic<int> sparse_scheme;
    zen_sparse_stats last_sparse{}; // written by the worker before it completes the Work

  private:
    void loop();
    bool poll_pending();
    void cancel_pending();

    zen_comm *comm_;
    bool sync_;
    int rank_;
    double timeout_s_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> queue_;
    bool stop_ = false;
    std::vector<PendingP2P> pending_; // worker thread only
    std::thread thread_;
};

// Run fn on the group's worker and complete w with its result (nullptr: success). An exception
// thrown by fn (a torch op failing) becomes the Work's error. In sync mode the call returns only
// once w is complete.
void issue(Comm &c, const c10::intrusive_ptr<ZenWork> &w, std::function<std::exception_ptr()> fn);

// zen_torch.monitored_barrier, run on the worker (monitored.cpp). Every rank sends rank 0 a
// token; rank 0 waits at most timeout_s for all of them, then sends every rank the verdict: the
// list of ranks whose token did not arrive. Returns an error naming all late ranks on every rank
// (a late rank reads the verdict when it arrives), or an error naming rank 0 when it never answers.
std::exception_ptr monitored_barrier(Comm &c, double timeout_s, uint64_t seq, int tag_token,
                                     int tag_verdict);

} // namespace zen_torch
