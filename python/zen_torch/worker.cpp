// The group's worker thread and the Work objects it completes (worker.hpp says why and the rules).
#include "worker.hpp"

#include <Python.h>
#include <algorithm>
#include <stdexcept>
#include <sys/prctl.h>

namespace zen_torch
{

using Clock = std::chrono::steady_clock;

namespace
{

int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
}

} // namespace

ZenWork::ZenWork(c10d::OpType type, std::string what, int rank, double group_timeout_s,
                 std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep)
    : Work(rank, type), what_(std::move(what)), zen_rank_(rank), group_timeout_s_(group_timeout_s),
      outputs_(std::move(outputs)), keep_(std::move(keep))
{
    future_ =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

void ZenWork::started()
{
    started_ns_.store(now_ns());
}

void ZenWork::complete(std::exception_ptr error)
{
    keep_.clear(); // staging buffers and inputs: nobody reads them any more
    try {
        if (error)
            future_->setError(error);
        else
            future_->markCompleted(c10::IValue(outputs_));
    } catch (...) {
        // a callback chained on the future failed in a way the future did not catch: the Work
        // still completes (with that error) so nobody waits forever
        if (!error)
            error = std::current_exception();
    }
    finish(error);
}

bool ZenWork::wait(std::chrono::milliseconds timeout)
{
    std::unique_lock<std::mutex> g(mutex_);
    if (timeout != kNoTimeout) {
        TORCH_CHECK(cv_.wait_for(g, timeout, [&] { return completed_; }), "zen backend: rank ",
                    zen_rank_, ": ", what_, " did not complete within ", timeout.count(), " ms");
    }
    // The group's timeout counts from when the worker started this operation: until then it is
    // queued behind earlier ones, each of which zen bounds by that same timeout.
    auto limit = std::chrono::nanoseconds(static_cast<int64_t>((group_timeout_s_ + 1.0) * 1e9));
    while (!completed_) {
        int64_t s = started_ns_.load();
        auto now = Clock::now();
        auto next = now + std::chrono::milliseconds(100);
        if (s != 0) {
            auto deadline = Clock::time_point(std::chrono::nanoseconds(s)) + limit;
            TORCH_CHECK(now < deadline, "zen backend: rank ", zen_rank_, ": ", what_,
                        " did not complete within the group's timeout of ", group_timeout_s_, " s");
            next = std::min(next, deadline);
        }
        cv_.wait_until(g, next);
    }
    if (exception_)
        std::rethrow_exception(exception_);
    return true;
}

void ZenWork::wait_quietly()
{
    std::unique_lock<std::mutex> g(mutex_);
    cv_.wait(g, [&] { return completed_; });
}

std::vector<at::Tensor> ZenWork::result()
{
    return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> ZenWork::getFuture()
{
    return future_;
}

int ZenWork::sourceRank() const
{
    return source_rank_;
}

Comm::Comm(zen_comm *comm, bool sync)
    : sparse_scheme(ZEN_SPARSE_AUTO), comm_(comm), sync_(sync), rank_(zen_comm_rank(comm)),
      timeout_s_(zen_comm_timeout(comm)), thread_([this] { loop(); })
{
}

Comm::~Comm()
{
    {
        std::lock_guard<std::mutex> g(m_);
        stop_ = true;
    }
    cv_.notify_all();
    // The worker may need the GIL to finish what is queued (a Python callback chained on a
    // future, the last reference to a tensor that has a Python object): let it go while joining.
    if (Py_IsInitialized() && PyGILState_Check()) {
        PyThreadState *s = PyEval_SaveThread();
        thread_.join();
        PyEval_RestoreThread(s);
    } else {
        thread_.join();
    }
    zen_comm_destroy(comm_);
}

void Comm::post(std::function<void()> task)
{
    // From the worker (a callback chained on one of this group's futures): run it now, ahead of
    // the queue (worker.hpp says why this keeps the order the same on every rank).
    if (std::this_thread::get_id() == thread_.get_id()) {
        task();
        return;
    }
    {
        std::lock_guard<std::mutex> g(m_);
        queue_.push_back(std::move(task));
    }
    cv_.notify_one();
}

void Comm::add_pending(PendingP2P p)
{
    pending_.push_back(std::move(p));
}

std::exception_ptr Comm::error(const std::string &what, zen_status st) const
{
    std::string msg =
        "zen backend: rank " + std::to_string(rank_) + ": " + what + " failed: " + zen_strerror(st);
    const char *detail = zen_comm_last_error(comm_);
    if (detail && *detail)
        msg += std::string(" (") + detail + ")";
    return std::make_exception_ptr(std::runtime_error(msg));
}

// Tasks in issue order; between them (and while idle with requests in flight) the posted
// nonblocking sends and receives are tested, backing off from 10 us to 1 ms while none moves.
void Comm::loop()
{
    (void)prctl(PR_SET_NAME, "zen-worker"); // top -H, bench/torch_overlap.py's CPU by thread
    // Woken at every hand-off of a collective (an issued bucket, each received chunk): ask for a
    // short slice so it does not wait behind the training thread's (src/common/thread_sched.c).
    (void)zen_comm_thread_hint();
    auto backoff = std::chrono::microseconds(10);
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock<std::mutex> g(m_);
            auto ready = [&] { return stop_ || !queue_.empty(); };
            if (pending_.empty())
                cv_.wait(g, ready);
            else
                cv_.wait_for(g, backoff, ready);
            if (!queue_.empty()) {
                task = std::move(queue_.front());
                queue_.pop_front();
            } else if (stop_) {
                break;
            }
        }
        if (task) {
            task();
            task = nullptr; // its tensors are released here, on this thread
            backoff = std::chrono::microseconds(10);
        }
        if (!pending_.empty()) {
            if (poll_pending())
                backoff = std::chrono::microseconds(10);
            else
                backoff = std::min(backoff * 2, std::chrono::microseconds(1000));
        }
    }
    cancel_pending();
}

bool Comm::poll_pending()
{
    bool moved = false;
    auto now = Clock::now();
    for (size_t i = 0; i < pending_.size();) {
        PendingP2P &p = pending_[i];
        int done = 0;
        zen_status st = zen_request_test(p.req, &done);
        std::exception_ptr e;
        if (done || st < 0) {
            e = st < 0 ? error(p.what, st) : nullptr;
        } else if (now >= p.deadline) {
            e = std::make_exception_ptr(
                std::runtime_error("zen backend: rank " + std::to_string(rank_) + ": " + p.what +
                                   " did not complete within the group's timeout of " +
                                   std::to_string(timeout_s_) + " s"));
        } else {
            i++;
            continue;
        }
        // Out of the list before completing it: its callbacks may post (inline) a new one.
        PendingP2P fin = std::move(p);
        if (i + 1 < pending_.size())
            pending_[i] = std::move(pending_.back());
        pending_.pop_back();
        zen_request_destroy(fin.req);
        fin.work->complete(e);
        moved = true;
    }
    return moved;
}

void Comm::cancel_pending()
{
    // A callback of a cancelled one may post another (inline): cancel until none is left.
    while (!pending_.empty()) {
        std::vector<PendingP2P> ps = std::move(pending_);
        pending_.clear();
        for (PendingP2P &p : ps) {
            zen_request_destroy(p.req);
            p.work->complete(std::make_exception_ptr(
                std::runtime_error("zen backend: rank " + std::to_string(rank_) + ": " + p.what +
                                   " was cancelled: its process group was destroyed")));
        }
    }
}

void issue(Comm &c, const c10::intrusive_ptr<ZenWork> &w, std::function<std::exception_ptr()> fn)
{
    c.post([w, fn = std::move(fn)] {
        w->started();
        std::exception_ptr e;
        try {
            e = fn();
        } catch (...) {
            e = std::current_exception();
        }
        w->complete(e);
    });
    if (c.sync())
        w->wait_quietly();
}

} // namespace zen_torch
