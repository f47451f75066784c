// zen_torch.monitored_barrier over zen's point-to-point messages (worker.hpp has the contract).
//
// Bytes on the wire: 8 (the call's sequence number) from each rank to rank 0, then 4 x (1 + late)
// from rank 0 to each rank. The sequence number lets rank 0 skip a token that a rank, late for an
// earlier barrier that already failed, sent after rank 0 stopped waiting for it.
#include <stdexcept>
#include <thread>

#include "worker.hpp"

namespace zen_torch
{

namespace
{

using Clock = std::chrono::steady_clock;

std::exception_ptr failure(const Comm &c, const std::string &text)
{
    return std::make_exception_ptr(std::runtime_error(
        "zen backend: rank " + std::to_string(c.rank()) + ": monitored_barrier failed: " + text));
}

std::string late_text(const std::vector<int32_t> &late, double timeout_s)
{
    std::string s = late.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < late.size(); i++)
        s += (i ? ", " : "") + std::to_string(late[i]);
    return s + " did not reach the barrier within " + std::to_string(timeout_s) +
           " s (rank 0 waited for them)";
}

// Rank 0: every rank's token for this call, or the list of those that did not come in time.
zen_status collect(Comm &c, double timeout_s, uint64_t seq, int tag, std::vector<int32_t> *late)
{
    int n = zen_comm_size(c.comm());
    std::vector<uint64_t> token(n, 0);
    std::vector<zen_request *> req(n, nullptr);
    zen_status st = ZEN_OK;
    for (int r = 1; r < n && st == ZEN_OK; r++)
        st = zen_irecv(c.comm(), &token[r], sizeof token[r], r, tag, &req[r]);
    auto deadline = Clock::now() + std::chrono::microseconds((int64_t)(timeout_s * 1e6));
    int waiting = n - 1;
    while (st == ZEN_OK && waiting > 0 && Clock::now() < deadline) {
        for (int r = 1; r < n && st == ZEN_OK; r++) {
            int done = 0;
            if (!req[r] || (st = zen_request_test(req[r], &done)) != ZEN_OK || !done)
                continue;
            zen_request_destroy(req[r]);
            req[r] = nullptr;
            if (token[r] == seq)
                waiting--;
            else // a stale token from an earlier, failed barrier: wait for this one's
                st = zen_irecv(c.comm(), &token[r], sizeof token[r], r, tag, &req[r]);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    for (int r = 1; r < n; r++) {
        if (req[r])
            late->push_back(r);
        zen_request_destroy(req[r]); // cancels the receive of a late rank's token
    }
    return st;
}

std::exception_ptr root_side(Comm &c, double timeout_s, uint64_t seq, int tag_token,
                             int tag_verdict)
{
    std::vector<int32_t> late;
    zen_status st = collect(c, timeout_s, seq, tag_token, &late);
    if (st != ZEN_OK)
        return c.error("monitored_barrier", st);
    std::vector<int32_t> verdict(1, (int32_t)late.size());
    verdict.insert(verdict.end(), late.begin(), late.end());
    int n = zen_comm_size(c.comm());
    std::vector<zen_request *> sends(n, nullptr);
    for (int r = 1; r < n && st == ZEN_OK; r++)
        st = zen_isend(c.comm(), verdict.data(), verdict.size() * 4, r, tag_verdict, &sends[r]);
    for (int r = 1; r < n; r++) {
        if (sends[r] && st == ZEN_OK)
            st = zen_request_wait(sends[r], -1.0, nullptr);
        zen_request_destroy(sends[r]);
    }
    if (st != ZEN_OK)
        return c.error("monitored_barrier", st);
    return late.empty() ? nullptr : failure(c, late_text(late, timeout_s));
}

// Other ranks: token to rank 0, then its verdict. Rank 0 answers at most timeout_s after it
// arrived; this rank waits twice that (rank 0 may itself be the late one) and then names it.
std::exception_ptr other_side(Comm &c, double timeout_s, uint64_t seq, int tag_token,
                              int tag_verdict)
{
    int n = zen_comm_size(c.comm());
    std::vector<int32_t> verdict(1 + n, 0);
    zen_request *send = nullptr, *recv = nullptr;
    zen_status st = zen_isend(c.comm(), &seq, sizeof seq, 0, tag_token, &send);
    if (st == ZEN_OK)
        st = zen_irecv(c.comm(), verdict.data(), verdict.size() * 4, 0, tag_verdict, &recv);
    if (st == ZEN_OK)
        st = zen_request_wait(recv, 2 * timeout_s + 1, nullptr);
    if (st == ZEN_OK)
        st = zen_request_wait(send, -1.0, nullptr);
    zen_request_destroy(recv);
    zen_request_destroy(send);
    if (st == ZEN_ETIMEDOUT)
        return failure(c, "rank 0 did not answer within " + std::to_string(2 * timeout_s + 1) +
                              " s (rank 0 is late or gone)");
    if (st != ZEN_OK)
        return c.error("monitored_barrier", st);
    int count = verdict[0];
    if (count == 0)
        return nullptr;
    if (count < 0 || count >= n)
        return failure(c, "a malformed verdict from rank 0");
    return failure(c,
                   late_text(std::vector<int32_t>(verdict.begin() + 1, verdict.begin() + 1 + count),
                             timeout_s));
}

} // namespace

std::exception_ptr monitored_barrier(Comm &c, double timeout_s, uint64_t seq, int tag_token,
                                     int tag_verdict)
{
    if (zen_comm_size(c.comm()) == 1)
        return nullptr;
    return c.rank() == 0 ? root_side(c, timeout_s, seq, tag_token, tag_verdict)
                         : other_side(c, timeout_s, seq, tag_token, tag_verdict);
}

} // namespace zen_torch
