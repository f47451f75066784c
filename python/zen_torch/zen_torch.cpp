// zen_torch._C: the "zen" torch.distributed backend, a c10d::ProcessGroup over libzen's public C
// API (include/zen/). Glue only: tensors become (pointer, count, dtype), results become Work
// objects; every algorithm lives in libzen.
//
// Execution is asynchronous: each call checks its arguments and prepares its buffers on the
// caller's thread (raising RuntimeError there for what zen cannot serve: a dtype, a reduce op, a
// non-CPU tensor), then queues the zen call on the group's worker thread and returns a Work that
// the worker completes (worker.hpp: threading and tensor lifetime). ZEN_TORCH_SYNC=1 makes every
// collective complete inside its call, for comparison. dtypes.hpp: how torch dtypes travel.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <pybind11/chrono.h>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/extension.h>
#include <tuple>
#include <vector>

#include <zen/comm.h>
#include <zen/sparse.h>
#include <zen/store.h>

#include "bindings.hpp"
#include "dtypes.hpp"
#include "worker.hpp"

namespace zt = zen_torch;

namespace
{

// ---- c10d::Store as a zen_store: the rendezvous goes through the store torch hands us ----

zen_status store_set(void *ctx, const char *key, const void *value, size_t bytes)
{
    try {
        const auto *p = static_cast<const uint8_t *>(value);
        static_cast<c10d::Store *>(ctx)->set(key, std::vector<uint8_t>(p, p + bytes));
        return ZEN_OK;
    } catch (const std::exception &) {
        return ZEN_EIO;
    }
}

// Waits by polling check() against zen's own deadline (1 ms, doubling up to 100 ms; torch's own
// store barrier polls every 10 ms) rather than c10d's wait(keys, timeout): check answers at once
// and leaves nothing pending on the server, while a wait that times out on the client can still
// be answered later, and zen waits in short slices (it republishes its key every 0.5 s).
zen_status store_get(void *ctx, const char *key, void *value, size_t capacity, size_t *bytes,
                     double timeout_s)
{
    using clock = std::chrono::steady_clock;
    auto *store = static_cast<c10d::Store *>(ctx);
    // saturating at ~30 years: a double too large for int64 (inf) is undefined when cast, and
    // steady_clock counts nanoseconds in an int64
    double us = timeout_s < 1e9 ? timeout_s * 1e6 : 1e15;
    auto deadline = clock::now() + std::chrono::microseconds(static_cast<int64_t>(us));
    auto pause = std::chrono::microseconds(1000);
    try {
        while (!store->check({ key })) {
            auto now = clock::now();
            if (now >= deadline)
                return ZEN_ETIMEDOUT;
            std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
            pause = std::min(pause * 2, std::chrono::microseconds(100000));
        }
        std::vector<uint8_t> v = store->get(key);
        *bytes = v.size();
        if (v.size() > capacity)
            return ZEN_EPROTO;
        std::memcpy(value, v.data(), v.size());
        return ZEN_OK;
    } catch (const std::exception &) {
        return ZEN_EIO;
    }
}

// ---- argument checks (raised at the call, on the caller's thread: nothing is queued) ----

const char *dtype_text(at::ScalarType t)
{
    return c10::toString(t);
}

const char *op_text(const c10d::ReduceOp &op)
{
    static const char *names[] = { "SUM",  "AVG", "PRODUCT", "MIN",        "MAX",
                                   "BAND", "BOR", "BXOR",    "PREMUL_SUM", "UNUSED" };
    unsigned i = static_cast<unsigned>(op.op_);
    return i < sizeof names / sizeof names[0] ? names[i] : "?";
}

zen_op zen_op_of(const char *what, const c10d::ReduceOp &op)
{
    switch (op.op_) {
    case c10d::ReduceOp::SUM:
        return ZEN_SUM;
    case c10d::ReduceOp::AVG:
        return ZEN_AVG;
    case c10d::ReduceOp::PRODUCT:
        return ZEN_PROD;
    case c10d::ReduceOp::MIN:
        return ZEN_MIN;
    case c10d::ReduceOp::MAX:
        return ZEN_MAX;
    default:
        TORCH_CHECK(false, "zen backend: ", what, " with ReduceOp.", op_text(op),
                    " is not supported (zen reduces with SUM, AVG, PRODUCT, MIN, MAX)");
    }
}

// A dense CPU tensor; raises naming the op otherwise.
void check_cpu_dense(const char *what, const at::Tensor &t)
{
    TORCH_CHECK(t.device().is_cpu(), "zen backend: ", what, " needs CPU tensors, got ",
                t.device().str());
    TORCH_CHECK(t.layout() == c10::kStrided, "zen backend: ", what,
                " needs dense tensors (sparse tensors: all_reduce with SUM only)");
}

// A tensor a data-moving op can carry (any dtype but complex/quantized-free checks: bytes).
zt::Wire check_moved(const char *what, const at::Tensor &t, int64_t unit)
{
    check_cpu_dense(what, t);
    return zt::wire_of(t, unit);
}

// A tensor a reducing op can reduce.
zt::Reduced check_reduced(const char *what, const at::Tensor &t)
{
    check_cpu_dense(what, t);
    zt::Reduced r;
    TORCH_CHECK(zt::reduced_of(t.scalar_type(), &r), "zen backend: ", what, " of dtype ",
                dtype_text(t.scalar_type()),
                " is not supported (zen reduces float32, float64, bfloat16, float16, int64, "
                "int32, int16, int8, uint8 and bool)");
    return r;
}

void check_one(const char *what, const std::vector<at::Tensor> &ts)
{
    TORCH_CHECK(ts.size() == 1, "zen backend: ", what,
                " takes exactly one tensor per process, got ", ts.size());
}

std::vector<at::Tensor> flatten_all(const std::vector<at::Tensor> &ts)
{
    std::vector<at::Tensor> flat;
    for (const auto &t : ts)
        flat.push_back(t.reshape({ -1 }));
    return flat;
}

// Copy consecutive pieces of flat into outs (worker thread).
void unflatten(const at::Tensor &flat, std::vector<at::Tensor> &outs)
{
    int64_t off = 0;
    for (auto &t : outs) {
        t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
        off += t.numel();
    }
}

// zen_torch.monitored_barrier's two tags: the top of zen's tag range, which torch users do not
// reach (torch's own tags are small); documented in docs/pytorch.md.
constexpr int kTagToken = ZEN_TAG_MAX;
constexpr int kTagVerdict = ZEN_TAG_MAX - 1;

// The worker's half of a sparse all_reduce: zen_sparse_allreduce of the packed input, the result
// turned back into a coalesced COO tensor written into t.
std::exception_ptr sparse_reduce_into(zt::Comm &c, at::Tensor &t, const at::Tensor &idx,
                                      const at::Tensor &val, int64_t width)
{
    zen_sparse_tensor in = {};
    in.rows = (uint64_t)t.size(0);
    in.width = (uint32_t)width;
    in.nnz = (size_t)idx.numel();
    in.index_type = ZEN_INDEX_I64;
    in.indices = idx.data_ptr();
    in.value_type = t.scalar_type() == at::kFloat ? ZEN_F32 : ZEN_BF16;
    in.values = val.data_ptr();
    zen_sparse_options so = ZEN_SPARSE_OPTIONS_INIT;
    so.scheme = (zen_sparse_scheme)c.sparse_scheme.load();
    // DDP all_reduces the same sparse parameters every step: a key lets AUTO keep a measured
    // sparsity profile for them (zen tells tensors of one key apart by rows and width).
    so.key = "zen_torch";
    zen_sparse_result res = {};
    zen_status st = zen_sparse_allreduce(c.comm(), &in, &res, &so, &c.last_sparse);
    if (st != ZEN_OK) {
        zen_sparse_result_free(&res);
        return c.error("sparse allreduce", st);
    }
    std::vector<int64_t> vshape = { (int64_t)res.nnz };
    for (int64_t dim = 1; dim < t.dim(); dim++)
        vshape.push_back(t.size(dim));
    // zen's result indices are u32 (rows < 2^32): widen each to torch's int64. Reading them
    // as int32 turned every row >= 2^31 negative.
    at::Tensor ri = at::empty({ 1, (int64_t)res.nnz }, at::kLong);
    int64_t *rip = ri.data_ptr<int64_t>();
    for (size_t i = 0; i < res.nnz; i++)
        rip[i] = (int64_t)res.indices[i];
    at::Tensor rv =
        torch::from_blob(res.values, vshape, at::kFloat).to(t.scalar_type(), false, true);
    zen_sparse_result_free(&res);
    t.copy_(at::_sparse_coo_tensor_unsafe(ri, rv, t.sizes())._coalesced_(true));
    return nullptr;
}

// Benchmarks only (bench/torch_overlap.py): when on, every dense all_reduce records when it was
// issued (caller's thread), when the worker entered and left zen_allreduce, and its bytes, in
// CLOCK_MONOTONIC seconds (Python's time.perf_counter), so a DDP step's timeline shows queueing
// (issued -> started) apart from the wire (started -> ended). Off: one relaxed atomic load.
struct OpTrace {
    std::atomic<bool> on{ false };
    std::mutex m;
    std::vector<std::tuple<double, double, double, int64_t>> rows;

    static double now()
    {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }

    void add(double issued, double started, int64_t bytes)
    {
        double ended = now();
        std::lock_guard<std::mutex> g(m);
        rows.emplace_back(issued, started, ended, bytes);
    }
};

OpTrace op_trace;

class ProcessGroupZen : public c10d::ProcessGroup
{
  public:
    ProcessGroupZen(std::shared_ptr<zt::Comm> comm, int rank, int size, std::string transport)
        : ProcessGroup(rank, size), c_(std::move(comm)), transport_(std::move(transport))
    {
    }

    const std::string getBackendName() const override
    {
        return "zen";
    }

    void set_sparse_scheme(const std::string &name)
    {
        c_->sparse_scheme.store((int)zt::scheme_of(name));
    }

    // Read after the sparse all_reduce's wait(): the worker wrote it before completing it.
    std::string last_sparse_scheme() const
    {
        return zen_sparse_scheme_name(c_->last_sparse.scheme);
    }

    std::string transport() const
    {
        return transport_;
    }

    bool sync() const
    {
        return c_->sync();
    }

    std::shared_ptr<zt::Comm> comm() const
    {
        return c_;
    }

    // The benchmark baseline for the shim's overhead: one in-place zen_allreduce (SUM) on this
    // group's communicator, timed around the C call alone on the worker, on the same buffer as
    // the dist.all_reduce it is compared with. Returns seconds; raises on failure.
    double time_raw_allreduce(at::Tensor &t)
    {
        zt::Reduced r = check_reduced("allreduce", t);
        TORCH_CHECK(t.is_contiguous() && r.compute == t.scalar_type(),
                    "zen backend: the raw allreduce needs a contiguous tensor of a zen dtype");
        auto seconds = std::make_shared<double>(0);
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::ALLREDUCE, "raw allreduce", { t }, {});
        zt::issue(*c, w, [c, t, d = r.d, seconds]() -> std::exception_ptr {
            auto t0 = std::chrono::steady_clock::now();
            zen_status st =
                zen_allreduce(c->comm(), t.data_ptr(), t.data_ptr(), (size_t)t.numel(), d, ZEN_SUM);
            *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return st == ZEN_OK ? nullptr : c->error("raw allreduce", st);
        });
        w->wait(kNoTimeout);
        return *seconds;
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts,
                                             const c10d::AllreduceOptions &o) override
    {
        check_one("allreduce", ts);
        if (ts[0].is_sparse())
            return sparse_allreduce(ts[0], o);
        zt::Reduced r = check_reduced("allreduce", ts[0]);
        zen_op op = zen_op_of("allreduce", o.reduceOp);
        at::Tensor t = ts[0], x = zt::to_compute(t, r);
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::ALLREDUCE, "allreduce", ts, { x });
        double issued = op_trace.on.load(std::memory_order_relaxed) ? OpTrace::now() : 0.0;
        zt::issue(*c, w, [c, t, x, d = r.d, op, issued]() mutable -> std::exception_ptr {
            double started = issued > 0 ? OpTrace::now() : 0.0;
            zen_status st =
                zen_allreduce(c->comm(), x.data_ptr(), x.data_ptr(), (size_t)x.numel(), d, op);
            if (issued > 0)
                op_trace.add(issued, started, (int64_t)(x.numel() * x.element_size()));
            if (st != ZEN_OK)
                return c->error("allreduce", st);
            zt::from_compute(t, x);
            return nullptr;
        });
        return w;
    }

    // Several tensors of one dtype in one zen_allreduce: packed into one buffer (in the compute
    // dtype) at the call, unpacked into each tensor by the worker.
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &ts,
                        const c10d::AllreduceCoalescedOptions &o) override
    {
        TORCH_CHECK(!ts.empty(), "zen backend: allreduce_coalesced needs at least one tensor");
        zt::Reduced r = check_reduced("allreduce_coalesced", ts[0]);
        for (const auto &t : ts) {
            check_reduced("allreduce_coalesced", t);
            TORCH_CHECK(t.scalar_type() == ts[0].scalar_type(),
                        "zen backend: allreduce_coalesced needs tensors of one dtype, got ",
                        dtype_text(ts[0].scalar_type()), " and ", dtype_text(t.scalar_type()));
        }
        zen_op op = zen_op_of("allreduce_coalesced", o.reduceOp);
        at::Tensor flat = at::cat(flatten_all(ts)).to(r.compute);
        std::vector<at::Tensor> outs = ts;
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", ts, { flat });
        zt::issue(*c, w, [c, outs, flat, d = r.d, op]() mutable -> std::exception_ptr {
            zen_status st = zen_allreduce(c->comm(), flat.data_ptr(), flat.data_ptr(),
                                          (size_t)flat.numel(), d, op);
            if (st != ZEN_OK)
                return c->error("allreduce_coalesced", st);
            unflatten(flat, outs);
            return nullptr;
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts,
                                             const c10d::BroadcastOptions &o) override
    {
        check_one("broadcast", ts);
        zt::Wire wr = check_moved("broadcast", ts[0], ts[0].numel());
        at::Tensor t = ts[0], x = zt::to_wire(t, wr);
        zt::Comm *c = c_.get();
        int root = (int)o.rootRank;
        auto w = work(c10d::OpType::BROADCAST, "broadcast", ts, { x });
        zt::issue(*c, w, [c, t, x, wr, root]() mutable -> std::exception_ptr {
            zen_status st = zen_broadcast(c->comm(), x.data_ptr(), (size_t)x.numel(), wr.d, root);
            if (st != ZEN_OK)
                return c->error("broadcast", st);
            zt::from_wire(t, x, wr);
            return nullptr;
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                          const c10d::ReduceOptions &o) override
    {
        check_one("reduce", ts);
        zt::Reduced r = check_reduced("reduce", ts[0]);
        zen_op op = zen_op_of("reduce", o.reduceOp);
        at::Tensor t = ts[0], x = zt::to_compute(t, r);
        zt::Comm *c = c_.get();
        int root = (int)o.rootRank;
        auto w = work(c10d::OpType::REDUCE, "reduce", ts, { x });
        zt::issue(*c, w, [c, t, x, d = r.d, op, root]() mutable -> std::exception_ptr {
            zen_status st =
                zen_reduce(c->comm(), x.data_ptr(), x.data_ptr(), (size_t)x.numel(), d, op, root);
            if (st != ZEN_OK)
                return c->error("reduce", st);
            zt::from_compute(t, x);
            return nullptr;
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs,
                                             std::vector<at::Tensor> &ins,
                                             const c10d::AllgatherOptions &) override
    {
        check_one("allgather", ins);
        TORCH_CHECK(outs.size() == 1 && (int)outs[0].size() == getSize(),
                    "zen backend: allgather needs one output list of world-size tensors");
        check_like("allgather", ins[0], outs[0]);
        zt::Wire wr = check_moved("allgather", ins[0], ins[0].numel());
        at::Tensor x = zt::to_wire(ins[0], wr);
        at::Tensor y = at::empty({ (int64_t)getSize() * x.numel() }, x.options());
        std::vector<at::Tensor> o = outs[0];
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::ALLGATHER, "allgather", o, { x, y });
        zt::issue(*c, w, [c, o, x, y, wr]() mutable -> std::exception_ptr {
            zen_status st =
                zen_allgather(c->comm(), x.data_ptr(), y.data_ptr(), (size_t)x.numel(), wr.d);
            if (st != ZEN_OK)
                return c->error("allgather", st);
            unflatten(zt::wire_as_torch(y, wr), o);
            return nullptr;
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::AllgatherOptions &) override
    {
        zt::Wire wr = check_moved("allgather", in, in.numel());
        check_cpu_dense("allgather", out);
        TORCH_CHECK(out.numel() == in.numel() * getSize() && out.scalar_type() == in.scalar_type(),
                    "zen backend: allgather output must hold world size x input elements of the "
                    "input's dtype");
        at::Tensor x = zt::to_wire(in, wr), y = zt::to_wire(out, wr), o = out;
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::_ALLGATHER_BASE, "allgather", { out }, { x, y });
        zt::issue(*c, w, [c, o, x, y, wr]() mutable -> std::exception_ptr {
            zen_status st =
                zen_allgather(c->comm(), x.data_ptr(), y.data_ptr(), (size_t)x.numel(), wr.d);
            if (st != ZEN_OK)
                return c->error("allgather", st);
            zt::from_wire(o, y, wr);
            return nullptr;
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs,
                                          std::vector<at::Tensor> &ins,
                                          const c10d::GatherOptions &o) override
    {
        check_one("gather", ins);
        zt::Wire wr = check_moved("gather", ins[0], ins[0].numel());
        int root = (int)o.rootRank;
        bool is_root = getRank() == root;
        TORCH_CHECK(!is_root || (outs.size() == 1 && (int)outs[0].size() == getSize()),
                    "zen backend: gather needs world-size output tensors on the root");
        std::vector<at::Tensor> res = is_root ? outs[0] : std::vector<at::Tensor>();
        if (is_root)
            check_like("gather", ins[0], res);
        at::Tensor x = zt::to_wire(ins[0], wr);
        at::Tensor y =
            is_root ? at::empty({ (int64_t)getSize() * x.numel() }, x.options()) : at::Tensor();
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::GATHER, "gather", res, { x });
        zt::issue(*c, w, [c, res, x, y, wr, root, is_root]() mutable -> std::exception_ptr {
            zen_status st = zen_gather(c->comm(), x.data_ptr(), is_root ? y.data_ptr() : nullptr,
                                       (size_t)x.numel(), wr.d, root);
            if (st != ZEN_OK)
                return c->error("gather", st);
            if (is_root)
                unflatten(zt::wire_as_torch(y, wr), res);
            return nullptr;
        });
        return w;
    }

    // scatter: zen_scatter from the root's concatenated inputs ((n-1) x count bytes from the
    // root, nothing between other ranks); zen's argument agreement covers root and count.
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outs,
                                           std::vector<std::vector<at::Tensor>> &ins,
                                           const c10d::ScatterOptions &o) override
    {
        check_one("scatter", outs);
        int n = getSize(), root = (int)o.rootRank;
        TORCH_CHECK(root >= 0 && root < n, "zen backend: scatter root ", root,
                    " is not a rank of this group (0..", n - 1, ")");
        bool is_root = getRank() == root;
        TORCH_CHECK(!is_root || (ins.size() == 1 && (int)ins[0].size() == n),
                    "zen backend: scatter needs world-size input tensors on the root");
        zt::Wire wr = check_moved("scatter", outs[0], outs[0].numel());
        at::Tensor out = outs[0], y = zt::to_wire(out, wr), x;
        if (is_root) {
            check_like("scatter", out, ins[0]);
            x = zt::to_wire(at::cat(flatten_all(ins[0])), wr);
        }
        size_t k = (size_t)y.numel();
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::SCATTER, "scatter", outs, { x, y });
        zt::issue(*c, w, [c, out, x, y, wr, k, root]() mutable -> std::exception_ptr {
            zen_status st = zen_scatter(c->comm(), x.defined() ? x.data_ptr() : nullptr,
                                        y.data_ptr(), k, wr.d, root);
            if (st != ZEN_OK)
                return c->error("scatter", st);
            zt::from_wire(out, y, wr);
            return nullptr;
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                  std::vector<std::vector<at::Tensor>> &ins,
                                                  const c10d::ReduceScatterOptions &o) override
    {
        check_one("reduce_scatter", outs);
        TORCH_CHECK(ins.size() == 1 && (int)ins[0].size() == getSize(),
                    "zen backend: reduce_scatter needs one input list of world-size tensors");
        check_like("reduce_scatter", outs[0], ins[0]);
        at::Tensor flat = at::cat(flatten_all(ins[0]));
        return reduce_scatter_flat(c10d::OpType::REDUCE_SCATTER, outs[0], flat, o);
    }

    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                         const c10d::ReduceScatterOptions &o) override
    {
        TORCH_CHECK(in.numel() == out.numel() * getSize() && out.scalar_type() == in.scalar_type(),
                    "zen backend: reduce_scatter input must hold world size x output elements of "
                    "the output's dtype");
        return reduce_scatter_flat(c10d::OpType::_REDUCE_SCATTER_BASE, out, in, o);
    }

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                                 std::vector<int64_t> &out_splits,
                                                 std::vector<int64_t> &in_splits,
                                                 const c10d::AllToAllOptions &) override
    {
        check_cpu_dense("alltoall", out);
        TORCH_CHECK(in.scalar_type() == out.scalar_type(),
                    "zen backend: alltoall input and output dtypes differ");
        int64_t rows = in.dim() ? in.size(0) : 1;
        zt::Wire wr = check_moved("alltoall", in, rows ? in.numel() / rows : 1);
        std::vector<size_t> sc, sd, rc, rd;
        TORCH_CHECK(splits(in, in_splits, wr, &sc, &sd) && splits(out, out_splits, wr, &rc, &rd),
                    "zen backend: alltoall split sizes must be world-size long and cover dim 0");
        return alltoallv({ out }, zt::to_wire(in, wr), zt::to_wire(out, wr), wr, sc, sd, rc, rd,
                         c10d::OpType::ALLTOALL_BASE);
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                            std::vector<at::Tensor> &ins,
                                            const c10d::AllToAllOptions &) override
    {
        int n = getSize();
        TORCH_CHECK((int)outs.size() == n && (int)ins.size() == n,
                    "zen backend: alltoall needs world-size input and output lists");
        for (int r = 0; r < n; r++) {
            check_cpu_dense("alltoall", ins[r]);
            check_cpu_dense("alltoall", outs[r]);
            TORCH_CHECK(ins[r].scalar_type() == ins[0].scalar_type() &&
                            outs[r].scalar_type() == ins[0].scalar_type(),
                        "zen backend: alltoall tensors must share one dtype");
        }
        zt::Wire wr = check_moved("alltoall", ins[0], 1);
        at::Tensor x = zt::to_wire(at::cat(flatten_all(ins)), wr);
        std::vector<size_t> sc, sd, rc, rd;
        size_t soff = 0, roff = 0;
        for (int r = 0; r < n; r++) {
            sc.push_back(wr.count((size_t)ins[r].numel()));
            sd.push_back(soff);
            soff += sc.back();
            rc.push_back(wr.count((size_t)outs[r].numel()));
            rd.push_back(roff);
            roff += rc.back();
        }
        at::Tensor y = at::empty({ (int64_t)roff }, x.options());
        return alltoallv(outs, x, y, wr, sc, sd, rc, rd, c10d::OpType::ALLTOALL);
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        zt::Comm *c = c_.get();
        auto w = work(c10d::OpType::BARRIER, "barrier", {}, {});
        zt::issue(*c, w, [c]() -> std::exception_ptr {
            zen_status st = zen_barrier(c->comm());
            return st == ZEN_OK ? nullptr : c->error("barrier", st);
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override
    {
        return p2p(c10d::OpType::SEND, ts, dst, tag);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override
    {
        return p2p(c10d::OpType::RECV, ts, src, tag);
    }

    // zen_torch.monitored_barrier: blocks the caller; raises on every rank naming every rank
    // that did not arrive within timeout_s (<= 0: the group's timeout).
    void monitored_barrier(double timeout_s)
    {
        if (timeout_s <= 0)
            timeout_s = c_->timeout_s();
        zt::Comm *c = c_.get();
        uint64_t seq = ++barrier_seq_;
        auto w = work(c10d::OpType::BARRIER, "monitored_barrier", {}, {});
        zt::issue(*c, w, [c, timeout_s, seq]() -> std::exception_ptr {
            return zt::monitored_barrier(*c, timeout_s, seq, kTagToken, kTagVerdict);
        });
        w->wait(kNoTimeout);
    }

  private:
    std::shared_ptr<zt::Comm> c_;
    std::string transport_;
    uint64_t barrier_seq_ = 0; // caller side: issue order is the same on every rank

    c10::intrusive_ptr<zt::ZenWork> work(c10d::OpType type, const char *what,
                                         std::vector<at::Tensor> outs, std::vector<at::Tensor> keep)
    {
        return c10::make_intrusive<zt::ZenWork>(type, what, getRank(), c_->timeout_s(),
                                                std::move(outs), std::move(keep));
    }

    // ts: world-size tensors that must each match ref's size and dtype.
    static void check_like(const char *what, const at::Tensor &ref,
                           const std::vector<at::Tensor> &ts)
    {
        for (const auto &t : ts) {
            check_cpu_dense(what, t);
            TORCH_CHECK(t.numel() == ref.numel() && t.scalar_type() == ref.scalar_type(),
                        "zen backend: ", what, " tensors must match in size and dtype");
        }
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(c10d::OpType type, at::Tensor &out,
                                                       const at::Tensor &in,
                                                       const c10d::ReduceScatterOptions &o)
    {
        zt::Reduced r = check_reduced("reduce_scatter", in);
        check_reduced("reduce_scatter", out);
        zen_op op = zen_op_of("reduce_scatter", o.reduceOp);
        at::Tensor t = out, x = zt::to_compute(in, r), y = zt::to_compute(out, r);
        zt::Comm *c = c_.get();
        auto w = work(type, "reduce_scatter", { out }, { x, y });
        zt::issue(*c, w, [c, t, x, y, d = r.d, op]() mutable -> std::exception_ptr {
            zen_status st =
                zen_reduce_scatter(c->comm(), x.data_ptr(), y.data_ptr(), (size_t)y.numel(), d, op);
            if (st != ZEN_OK)
                return c->error("reduce_scatter", st);
            zt::from_compute(t, y);
            return nullptr;
        });
        return w;
    }

    // x, y: wire buffers; the worker copies y back into outs (one tensor: out itself).
    c10::intrusive_ptr<c10d::Work> alltoallv(std::vector<at::Tensor> outs, at::Tensor x,
                                             at::Tensor y, zt::Wire wr, std::vector<size_t> sc,
                                             std::vector<size_t> sd, std::vector<size_t> rc,
                                             std::vector<size_t> rd, c10d::OpType type)
    {
        zt::Comm *c = c_.get();
        bool base = type == c10d::OpType::ALLTOALL_BASE;
        auto w = work(type, "alltoall", outs, { x, y });
        zt::issue(*c, w, [=]() mutable -> std::exception_ptr {
            zen_status st = zen_alltoallv(c->comm(), x.data_ptr(), sc.data(), sd.data(),
                                          y.data_ptr(), rc.data(), rd.data(), wr.d);
            if (st != ZEN_OK)
                return c->error("alltoall", st);
            if (base)
                zt::from_wire(outs[0], y, wr);
            else
                unflatten(zt::wire_as_torch(y, wr), outs);
            return nullptr;
        });
        return w;
    }

    c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor &t, const c10d::AllreduceOptions &o);

    c10::intrusive_ptr<c10d::Work> p2p(c10d::OpType type, std::vector<at::Tensor> &ts, int peer,
                                       int tag)
    {
        bool is_send = type == c10d::OpType::SEND;
        const char *what = is_send ? "send" : "recv";
        check_one(what, ts);
        check_cpu_dense(what, ts[0]);
        TORCH_CHECK(ts[0].is_contiguous(), "zen backend: ", what, " needs a contiguous tensor");
        TORCH_CHECK(tag >= 0 && tag < kTagVerdict, "zen backend: ", what, " tag must be in [0, ",
                    kTagVerdict, "), got ", tag);
        std::string text =
            std::string(is_send ? "send to" : "recv from") + " rank " + std::to_string(peer);
        at::Tensor buf = ts[0];
        auto w = c10::make_intrusive<zt::ZenWork>(type, text, getRank(), c_->timeout_s(), ts,
                                                  std::vector<at::Tensor>());
        w->set_source_rank(peer);
        zt::Comm *c = c_.get();
        // Posted by the worker (the communicator's only thread), then polled by it between
        // operations until done: a receive that waits does not hold up later collectives.
        c->post([c, w, buf, peer, tag, is_send, text] {
            w->started();
            zen_request *req = nullptr;
            size_t bytes = (size_t)buf.nbytes();
            zen_status st = is_send ? zen_isend(c->comm(), buf.data_ptr(), bytes, peer, tag, &req)
                                    : zen_irecv(c->comm(), buf.data_ptr(), bytes, peer, tag, &req);
            if (st != ZEN_OK) {
                w->complete(c->error(text, st));
                return;
            }
            auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds((int64_t)(c->timeout_s() * 1000));
            c->add_pending({ req, w, deadline, text });
        });
        return w;
    }

    // Element counts and displacements (in wire elements) per rank along dim 0; empty splits
    // mean equal parts.
    bool splits(const at::Tensor &t, const std::vector<int64_t> &s, const zt::Wire &wr,
                std::vector<size_t> *counts, std::vector<size_t> *displs)
    {
        int n = getSize();
        int64_t rows = t.dim() ? t.size(0) : 1, per_row = rows ? t.numel() / rows : 0;
        std::vector<int64_t> parts = s;
        if (parts.empty()) {
            if (rows % n)
                return false;
            parts.assign((size_t)n, rows / n);
        }
        if ((int)parts.size() != n)
            return false;
        size_t off = 0;
        int64_t sum = 0;
        for (int64_t p : parts) {
            if (p < 0)
                return false;
            counts->push_back(wr.count((size_t)(p * per_row)));
            displs->push_back(off);
            off += counts->back();
            sum += p;
        }
        return sum == rows;
    }
};

// Sparse COO all_reduce (SUM): rows = dim 0, the dense dims flattened into the row width. The
// caller's thread packs indices and values; the worker reduces and writes the coalesced sum back
// into t (in place, as gloo does), which is also the Work's result and the future's value.
c10::intrusive_ptr<c10d::Work> ProcessGroupZen::sparse_allreduce(at::Tensor &t,
                                                                 const c10d::AllreduceOptions &o)
{
    TORCH_CHECK(o.reduceOp.op_ == c10d::ReduceOp::SUM, "zen backend: sparse allreduce with ",
                "ReduceOp.", op_text(o.reduceOp), " is not supported (SUM only)");
    TORCH_CHECK(t.device().is_cpu() && t.sparse_dim() == 1,
                "zen backend: sparse allreduce needs a CPU COO tensor with one sparse dim");
    TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16,
                "zen backend: sparse allreduce of dtype ", dtype_text(t.scalar_type()),
                " is not supported (float32 or bfloat16 values)");
    at::Tensor idx = t._indices().reshape({ -1 }).to(at::kLong).contiguous();
    at::Tensor val = t._values().contiguous();
    int64_t width = 1;
    for (int64_t dim = 1; dim < t.dim(); dim++)
        width *= t.size(dim);
    TORCH_CHECK(width <= (int64_t)UINT32_MAX, "zen backend: sparse rows too wide");
    zt::Comm *c = c_.get();
    auto w = work(c10d::OpType::ALLREDUCE, "sparse allreduce", { t }, { idx, val });
    at::Tensor target = t;
    zt::issue(*c, w, [c, target, idx, val, width]() mutable -> std::exception_ptr {
        return sparse_reduce_into(*c, target, idx, val, width);
    });
    return w;
}

// A ZEN_TORCH_* tunable, read through zen's tunables table (the public zen_param_get) like every
// ZEN_* variable: `zen info` lists it, and a value the table rejects is ignored with a warning
// (its default is used).
std::string param_from_env(const char *name, const char *fallback)
{
    for (size_t i = 0; i < zen_param_count(); i++) {
        zen_param_info p;
        if (zen_param_get(i, &p) != ZEN_OK || std::strcmp(p.name, name) != 0)
            continue;
        if (p.problem)
            TORCH_WARN("zen backend: ignoring ", name, "='", p.raw_value, "' (", p.problem,
                       "); using '", p.value, "'");
        return p.value;
    }
    return fallback;
}

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store> &store,
                                              int rank, int size,
                                              const std::chrono::duration<float> &timeout)
{
    zen_store zs = zt::store_of(store.get());
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.rank = rank;
    o.world_size = size;
    o.timeout_s = timeout.count();
    zen_comm *comm = nullptr;
    zen_status st;
    {
        pybind11::gil_scoped_release nogil; // the store may be served by this process's thread
        st = zen_comm_create_with_store(&o, &zs, &comm);
    }
    TORCH_CHECK(st == ZEN_OK, "zen backend: creating the communicator (rank ", rank, " of ", size,
                ") failed: ", zen_strerror(st), "; the zen log above says why");
    std::string transport = zen_transport_name(zen_comm_transport(comm));
    bool sync = param_from_env("ZEN_TORCH_SYNC", "0") == "1";
    auto pg = c10::make_intrusive<ProcessGroupZen>(std::make_shared<zt::Comm>(comm, sync), rank,
                                                   size, transport);
    pg->set_sparse_scheme(param_from_env("ZEN_TORCH_SPARSE_SCHEME", "auto"));
    return pg;
}

ProcessGroupZen *as_zen(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    auto *z = dynamic_cast<ProcessGroupZen *>(pg.get());
    TORCH_CHECK(z, "zen backend: not a zen process group");
    return z;
}

} // namespace

zen_sparse_scheme zen_torch::scheme_of(const std::string &name)
{
    zen_sparse_scheme s;
    TORCH_CHECK(zen_sparse_scheme_parse(name.c_str(), &s) == ZEN_OK,
                "zen backend: unknown sparse scheme '", name,
                "' (auto, balanced, hierarchical, allgather, block, ps, dense)");
    return s;
}

zen_store zen_torch::store_of(c10d::Store *store)
{
    return zen_store{ store, store_set, store_get };
}

std::shared_ptr<zt::Comm> zen_torch::comm_of(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    return as_zen(pg)->comm();
}

PYBIND11_MODULE(_C, m)
{
    zen_torch_register_sparse_coo(m);
    m.doc() = "zen torch.distributed backend (C++ glue over libzen)";
    m.def(
        "version",
        [] {
            int v = zen_version();
            return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                   std::to_string(v % 100);
        },
        "the loaded libzen's version, MAJOR.MINOR.PATCH");
    m.def("create_process_group", &create, "the creator registered as backend 'zen'");
    zen_torch_register_compress(m);
    m.def(
        "set_sparse_scheme",
        [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg, const std::string &name) {
            as_zen(pg)->set_sparse_scheme(name);
        },
        "choose the sparse all_reduce scheme of a zen group (auto, balanced, ...)");
    m.def(
        "last_sparse_scheme",
        [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg) {
            return as_zen(pg)->last_sparse_scheme();
        },
        "the scheme the last sparse all_reduce of a zen group used");
    m.def(
        "transport",
        [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg) { return as_zen(pg)->transport(); },
        "how the ranks of a zen group reach each other (shm, tcp, shm+tcp, ...)");
    m.def(
        "is_sync",
        [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg) { return as_zen(pg)->sync(); },
        "whether a zen group completes each collective inside its call (ZEN_TORCH_SYNC=1)");
    m.def(
        "monitored_barrier",
        [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg, double timeout_s) {
            pybind11::gil_scoped_release nogil;
            as_zen(pg)->monitored_barrier(timeout_s);
        },
        "barrier that raises on every rank naming every rank late by more than timeout_s");
    m.def(
        "_time_raw_allreduce",
        [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg, at::Tensor &t) {
            pybind11::gil_scoped_release nogil;
            return as_zen(pg)->time_raw_allreduce(t);
        },
        "benchmarks only: seconds of one in-place zen_allreduce (SUM) called directly from C");
    m.def(
        "_op_trace",
        [](bool on) {
            std::lock_guard<std::mutex> g(op_trace.m);
            auto rows = std::move(op_trace.rows);
            op_trace.rows.clear();
            op_trace.on.store(on);
            return rows;
        },
        "benchmarks only: turn the all_reduce trace on or off and take what it recorded: "
        "(issued, started, ended, bytes) per dense all_reduce, time.perf_counter seconds");
    m.def("zen_version", &zen_version);
    zen_torch_register_tp(m);
    m.def(
        "launch_env",
        [] {
            zen_launch_env e = {};
            e.size = sizeof e;
            zen_status st = zen_comm_env_launch(&e);
            TORCH_CHECK(st == ZEN_OK, "zen: malformed launcher environment (", zen_strerror(st),
                        "; the variable is named on stderr)");
            pybind11::dict d;
            d["rank"] = e.rank;
            d["world_size"] = e.world_size;
            d["local_rank"] = e.local_rank;
            d["local_size"] = e.local_size;
            d["master_addr"] = std::string(e.master_addr);
            d["master_port"] = e.master_port;
            d["slurm_step"] = e.slurm_step != 0;
            d["rank_var"] = std::string(e.rank_var);
            return d;
        },
        "the rendezvous facts libzen reads from the launcher's environment (zen_comm_env_launch)");
}
