// zen_torch._C: the "zen" torch.distributed backend, a c10d::ProcessGroup over libzen's public C
// API (include/zen/). Glue only: tensors become (pointer, count, dtype), results become Work
// objects; every algorithm lives in libzen.
//
// Execution is synchronous: a collective runs to completion inside the call (CPU tensors, the
// calling thread), so its Work is already complete when returned; a failure is stored in the Work
// and raised by wait(). send/recv use zen's nonblocking requests, completed by wait(). Arguments
// zen cannot serve (a dtype, a reduce op, a non-CPU tensor) raise RuntimeError at the call.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <pybind11/chrono.h>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/extension.h>
#include <vector>

#include <zen/comm.h>
#include <zen/sparse.h>
#include <zen/store.h>

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

zen_status store_get(void *ctx, const char *key, void *value, size_t capacity, size_t *bytes,
                     double timeout_s)
{
    auto *store = static_cast<c10d::Store *>(ctx);
    try {
        // saturating: a double too large for int64 (inf) is undefined when cast
        double ms = timeout_s < 1e15 ? timeout_s * 1000 : 1e18;
        store->wait({ key }, std::chrono::milliseconds(static_cast<int64_t>(ms) + 1));
    } catch (const std::exception &) {
        return ZEN_ETIMEDOUT; // c10d's wait throws only when the key did not appear in time
    }
    try {
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

// ---- type and op mapping ----

const char *dtype_text(at::ScalarType t)
{
    return c10::toString(t);
}

bool zen_dtype_of(at::ScalarType t, zen_dtype *out)
{
    switch (t) {
    case at::kFloat:
        *out = ZEN_F32;
        return true;
    case at::kDouble:
        *out = ZEN_F64;
        return true;
    case at::kBFloat16:
        *out = ZEN_BF16;
        return true;
    case at::kInt:
        *out = ZEN_I32;
        return true;
    case at::kLong:
        *out = ZEN_I64;
        return true;
    default:
        return false;
    }
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

// A dense CPU tensor zen can read or write in place; raises naming the op otherwise.
zen_dtype check_dense(const char *what, const at::Tensor &t)
{
    TORCH_CHECK(t.device().is_cpu(), "zen backend: ", what, " needs CPU tensors, got ",
                t.device().str());
    TORCH_CHECK(t.layout() == c10::kStrided, "zen backend: ", what,
                " needs dense tensors (sparse tensors: all_reduce with SUM only)");
    zen_dtype d;
    TORCH_CHECK(zen_dtype_of(t.scalar_type(), &d), "zen backend: ", what, " of dtype ",
                dtype_text(t.scalar_type()),
                " is not supported (zen has float32, float64, bfloat16, int32, int64)");
    return d;
}

void check_one(const char *what, const std::vector<at::Tensor> &ts)
{
    TORCH_CHECK(ts.size() == 1, "zen backend: ", what,
                " takes exactly one tensor per process, got ", ts.size());
}

// ---- the communicator, shared by the group and its outstanding Works ----

struct Comm {
    zen_comm *comm = nullptr;
    std::mutex lock; // zen: one thread uses a communicator at a time
    zen_sparse_scheme sparse_scheme = ZEN_SPARSE_AUTO;
    zen_sparse_stats last_sparse{};

    ~Comm()
    {
        zen_comm_destroy(comm);
    }
};

std::exception_ptr zen_error(const std::shared_ptr<Comm> &c, const char *what, zen_status st)
{
    std::string msg = std::string("zen backend: ") + what + " failed: " + zen_strerror(st);
    const char *detail = zen_comm_last_error(c->comm);
    if (detail && *detail)
        msg += std::string(" (") + detail + ")";
    return std::make_exception_ptr(std::runtime_error(msg));
}

// A Work that is complete when made: a collective that already ran; failures surface in wait().
class DoneWork : public c10d::Work
{
  public:
    DoneWork(c10d::OpType type, std::vector<at::Tensor> outputs, std::exception_ptr error)
        : Work(-1, type), outputs_(std::move(outputs))
    {
        future_ =
            c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
        if (error)
            future_->setError(error);
        else
            future_->markCompleted(c10::IValue(outputs_));
        finish(error);
    }

    bool wait(std::chrono::milliseconds) override
    {
        if (exception_)
            std::rethrow_exception(exception_);
        return true;
    }

    std::vector<at::Tensor> result() override
    {
        return outputs_;
    }

    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        return future_;
    }

  private:
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// send/recv in flight: a zen request, completed by wait() or observed by isCompleted().
class RequestWork : public c10d::Work
{
  public:
    RequestWork(c10d::OpType type, std::shared_ptr<Comm> comm, zen_request *req, at::Tensor buf,
                int peer)
        : Work(-1, type), comm_(std::move(comm)), req_(req), buf_(std::move(buf)), peer_(peer)
    {
    }

    ~RequestWork() override
    {
        std::lock_guard<std::mutex> g(comm_->lock);
        zen_request_free(req_);
    }

    bool isCompleted() override
    {
        if (!completed_) {
            std::lock_guard<std::mutex> g(comm_->lock);
            int done = 0;
            zen_status st = zen_request_test(req_, &done);
            if (done || st < 0)
                complete(st);
        }
        return completed_;
    }

    bool wait(std::chrono::milliseconds timeout) override
    {
        if (!completed_) {
            std::lock_guard<std::mutex> g(comm_->lock);
            double t = timeout == kNoTimeout ? -1.0 : timeout.count() / 1000.0;
            zen_status st = zen_request_wait(req_, t, nullptr);
            TORCH_CHECK(st != ZEN_ETIMEDOUT || timeout == kNoTimeout,
                        "zen backend: ", opType_ == c10d::OpType::SEND ? "send to" : "recv from",
                        " rank ", peer_, " did not complete within ", timeout.count(), " ms");
            complete(st);
        }
        if (exception_)
            std::rethrow_exception(exception_);
        return true;
    }

    std::vector<at::Tensor> result() override
    {
        return { buf_ };
    }

    int sourceRank() const override
    {
        return peer_;
    }

  private:
    void complete(zen_status st)
    {
        finish(st < 0 ? zen_error(comm_, opType_ == c10d::OpType::SEND ? "send" : "recv", st)
                      : nullptr);
    }

    std::shared_ptr<Comm> comm_;
    zen_request *req_;
    at::Tensor buf_;
    int peer_;
};

// A contiguous view of t: t itself, or a copy that finish() writes back.
struct Contig {
    at::Tensor orig, data;

    explicit Contig(const at::Tensor &t) : orig(t), data(t.is_contiguous() ? t : t.contiguous())
    {
    }

    void *ptr()
    {
        return data.data_ptr();
    }

    void finish()
    {
        if (!data.is_same(orig))
            orig.copy_(data);
    }
};

class ProcessGroupZen : public c10d::ProcessGroup
{
  public:
    ProcessGroupZen(std::shared_ptr<Comm> comm, int rank, int size)
        : ProcessGroup(rank, size), c_(std::move(comm))
    {
    }

    const std::string getBackendName() const override
    {
        return "zen";
    }

    void set_sparse_scheme(const std::string &name)
    {
        zen_sparse_scheme s;
        TORCH_CHECK(zen_sparse_scheme_parse(name.c_str(), &s) == ZEN_OK,
                    "zen backend: unknown sparse scheme '", name,
                    "' (auto, balanced, hierarchical, allgather, block, ps, dense)");
        c_->sparse_scheme = s;
    }

    std::string last_sparse_scheme() const
    {
        return zen_sparse_scheme_name(c_->last_sparse.scheme);
    }

    std::string transport() const
    {
        return zen_transport_name(zen_comm_transport(c_->comm));
    }

    // The benchmark baseline for the shim's overhead: one in-place zen_allreduce (SUM) on this
    // group's communicator, timed around the C call alone, in the same process and on the same
    // buffer as the dist.all_reduce it is compared with. Returns seconds; raises on failure.
    double time_raw_allreduce(at::Tensor &t)
    {
        zen_dtype d = check_dense("allreduce", t);
        TORCH_CHECK(t.is_contiguous(), "zen backend: the raw allreduce needs a contiguous tensor");
        pybind11::gil_scoped_release nogil;
        std::lock_guard<std::mutex> g(c_->lock);
        auto t0 = std::chrono::steady_clock::now();
        zen_status st =
            zen_allreduce(c_->comm, t.data_ptr(), t.data_ptr(), (size_t)t.numel(), d, ZEN_SUM);
        std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
        if (st != ZEN_OK)
            std::rethrow_exception(zen_error(c_, "raw allreduce", st));
        return dt.count();
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts,
                                             const c10d::AllreduceOptions &o) override
    {
        check_one("allreduce", ts);
        if (ts[0].is_sparse())
            return sparse_allreduce(ts[0], o);
        zen_dtype d = check_dense("allreduce", ts[0]);
        zen_op op = zen_op_of("allreduce", o.reduceOp);
        return run(c10d::OpType::ALLREDUCE, "allreduce", ts, [&](Contig &x) {
            return zen_allreduce(c_->comm, x.ptr(), x.ptr(), (size_t)x.data.numel(), d, op);
        });
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts,
                                             const c10d::BroadcastOptions &o) override
    {
        check_one("broadcast", ts);
        zen_dtype d = check_dense("broadcast", ts[0]);
        return run(c10d::OpType::BROADCAST, "broadcast", ts, [&](Contig &x) {
            return zen_broadcast(c_->comm, x.ptr(), (size_t)x.data.numel(), d, (int)o.rootRank);
        });
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                          const c10d::ReduceOptions &o) override
    {
        check_one("reduce", ts);
        zen_dtype d = check_dense("reduce", ts[0]);
        zen_op op = zen_op_of("reduce", o.reduceOp);
        return run(c10d::OpType::REDUCE, "reduce", ts, [&](Contig &x) {
            return zen_reduce(c_->comm, x.ptr(), x.ptr(), (size_t)x.data.numel(), d, op,
                              (int)o.rootRank);
        });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs,
                                             std::vector<at::Tensor> &ins,
                                             const c10d::AllgatherOptions &) override
    {
        check_one("allgather", ins);
        TORCH_CHECK(outs.size() == 1 && (int)outs[0].size() == getSize(),
                    "zen backend: allgather needs one output list of world-size tensors");
        at::Tensor flat = gather_buffer("allgather", ins[0], outs[0]);
        auto w = _allgather_base(flat, ins[0], c10d::AllgatherOptions());
        if (!w->exception())
            unflatten(flat, outs[0]);
        return done(c10d::OpType::ALLGATHER, outs[0], w->exception());
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::AllgatherOptions &) override
    {
        zen_dtype d = check_dense("allgather", in);
        TORCH_CHECK(out.numel() == in.numel() * getSize() && out.scalar_type() == in.scalar_type(),
                    "zen backend: allgather output must hold world size x input elements of the "
                    "input's dtype");
        Contig x(in), y(out);
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = zen_allgather(c_->comm, x.ptr(), y.ptr(), (size_t)in.numel(), d);
        }
        y.finish();
        return done(c10d::OpType::_ALLGATHER_BASE, { out }, err("allgather", st));
    }

    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs,
                                          std::vector<at::Tensor> &ins,
                                          const c10d::GatherOptions &o) override
    {
        check_one("gather", ins);
        zen_dtype d = check_dense("gather", ins[0]);
        bool root = getRank() == o.rootRank;
        TORCH_CHECK(!root || (outs.size() == 1 && (int)outs[0].size() == getSize()),
                    "zen backend: gather needs world-size output tensors on the root");
        at::Tensor flat = root ? gather_buffer("gather", ins[0], outs[0]) : at::Tensor();
        Contig x(ins[0]);
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = zen_gather(c_->comm, x.ptr(), root ? flat.data_ptr() : nullptr,
                            (size_t)ins[0].numel(), d, (int)o.rootRank);
        }
        if (root && st == ZEN_OK)
            unflatten(flat, outs[0]);
        return done(c10d::OpType::GATHER, root ? outs[0] : std::vector<at::Tensor>(),
                    err("gather", st));
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                  std::vector<std::vector<at::Tensor>> &ins,
                                                  const c10d::ReduceScatterOptions &o) override
    {
        check_one("reduce_scatter", outs);
        TORCH_CHECK(ins.size() == 1 && (int)ins[0].size() == getSize(),
                    "zen backend: reduce_scatter needs one input list of world-size tensors");
        for (const auto &t : ins[0])
            TORCH_CHECK(t.numel() == outs[0].numel() && t.scalar_type() == outs[0].scalar_type(),
                        "zen backend: reduce_scatter inputs must match the output's size and "
                        "dtype");
        at::Tensor flat = at::cat(flatten_all(ins[0]));
        return _reduce_scatter_base(outs[0], flat, o);
    }

    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                         const c10d::ReduceScatterOptions &o) override
    {
        zen_dtype d = check_dense("reduce_scatter", in);
        check_dense("reduce_scatter", out);
        zen_op op = zen_op_of("reduce_scatter", o.reduceOp);
        TORCH_CHECK(in.numel() == out.numel() * getSize() && out.scalar_type() == in.scalar_type(),
                    "zen backend: reduce_scatter input must hold world size x output elements of "
                    "the output's dtype");
        Contig x(in), y(out);
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = zen_reduce_scatter(c_->comm, x.ptr(), y.ptr(), (size_t)out.numel(), d, op);
        }
        y.finish();
        return done(c10d::OpType::REDUCE_SCATTER, { out }, err("reduce_scatter", st));
    }

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                                 std::vector<int64_t> &out_splits,
                                                 std::vector<int64_t> &in_splits,
                                                 const c10d::AllToAllOptions &) override
    {
        zen_dtype d = check_dense("alltoall", in);
        check_dense("alltoall", out);
        TORCH_CHECK(in.scalar_type() == out.scalar_type(),
                    "zen backend: alltoall input and output dtypes differ");
        std::vector<size_t> sc, sd, rc, rd;
        TORCH_CHECK(splits(in, in_splits, &sc, &sd) && splits(out, out_splits, &rc, &rd),
                    "zen backend: alltoall split sizes must be world-size long and cover dim 0");
        Contig x(in), y(out);
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = zen_alltoallv(c_->comm, x.ptr(), sc.data(), sd.data(), y.ptr(), rc.data(),
                               rd.data(), d);
        }
        y.finish();
        return done(c10d::OpType::ALLTOALL_BASE, { out }, err("alltoall", st));
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                            std::vector<at::Tensor> &ins,
                                            const c10d::AllToAllOptions &o) override
    {
        TORCH_CHECK((int)outs.size() == getSize() && (int)ins.size() == getSize(),
                    "zen backend: alltoall needs world-size input and output lists");
        at::Tensor in = at::cat(flatten_all(ins));
        at::Tensor out = at::empty({ 0 }, in.options());
        std::vector<int64_t> in_splits, out_splits;
        int64_t total = 0;
        for (int r = 0; r < getSize(); r++) {
            in_splits.push_back(ins[r].numel());
            out_splits.push_back(outs[r].numel());
            total += outs[r].numel();
        }
        out.resize_({ total });
        auto w = alltoall_base(out, in, out_splits, in_splits, o);
        if (!w->exception())
            unflatten(out, outs);
        return done(c10d::OpType::ALLTOALL, outs, w->exception());
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = zen_barrier(c_->comm);
        }
        return done(c10d::OpType::BARRIER, {}, err("barrier", st));
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override
    {
        return p2p(c10d::OpType::SEND, ts, dst, tag);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override
    {
        return p2p(c10d::OpType::RECV, ts, src, tag);
    }

  private:
    std::shared_ptr<Comm> c_;

    std::exception_ptr err(const char *what, zen_status st)
    {
        return st == ZEN_OK ? nullptr : zen_error(c_, what, st);
    }

    c10::intrusive_ptr<c10d::Work> done(c10d::OpType type, std::vector<at::Tensor> outs,
                                        std::exception_ptr e)
    {
        return c10::make_intrusive<DoneWork>(type, std::move(outs), e);
    }

    // One in-place collective on ts[0] under the communicator lock.
    template <typename F>
    c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char *what,
                                       std::vector<at::Tensor> &ts, F call)
    {
        Contig x(ts[0]);
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = call(x);
        }
        x.finish();
        return done(type, ts, err(what, st));
    }

    // Sparse COO all_reduce (SUM): rows = dim 0, the dense dims flattened into the row width.
    c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor &t, const c10d::AllreduceOptions &o)
    {
        TORCH_CHECK(o.reduceOp.op_ == c10d::ReduceOp::SUM,
                    "zen backend: sparse allreduce with "
                    "ReduceOp.",
                    op_text(o.reduceOp), " is not supported (SUM only)");
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
        zen_sparse_tensor in = {};
        in.rows = (uint64_t)t.size(0);
        in.width = (uint32_t)width;
        in.nnz = (size_t)idx.numel();
        in.index_type = ZEN_INDEX_I64;
        in.indices = idx.data_ptr();
        in.value_type = t.scalar_type() == at::kFloat ? ZEN_F32 : ZEN_BF16;
        in.values = val.data_ptr();
        zen_sparse_options so = ZEN_SPARSE_OPTIONS_INIT;
        so.scheme = c_->sparse_scheme;
        // DDP all_reduces the same sparse parameters every step: a key lets AUTO keep a measured
        // sparsity profile for them (zen tells tensors of one key apart by rows and width).
        so.key = "zen_torch";
        zen_sparse_result res = {};
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = zen_sparse_allreduce(c_->comm, &in, &res, &so, &c_->last_sparse);
        }
        if (st != ZEN_OK) {
            zen_sparse_result_free(&res);
            return done(c10d::OpType::ALLREDUCE, { t }, err("sparse allreduce", st));
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
        at::Tensor out = at::_sparse_coo_tensor_unsafe(ri, rv, t.sizes())._coalesced_(true);
        t.copy_(out); // in place, as gloo does: the caller's tensor now holds the sum
        return done(c10d::OpType::ALLREDUCE, { out }, nullptr);
    }

    c10::intrusive_ptr<c10d::Work> p2p(c10d::OpType type, std::vector<at::Tensor> &ts, int peer,
                                       int tag)
    {
        const char *what = type == c10d::OpType::SEND ? "send" : "recv";
        check_one(what, ts);
        check_dense(what, ts[0]);
        TORCH_CHECK(ts[0].is_contiguous(), "zen backend: ", what, " needs a contiguous tensor");
        TORCH_CHECK(tag >= 0, "zen backend: ", what, " tag must be >= 0, got ", tag);
        size_t bytes = (size_t)ts[0].nbytes();
        zen_request *req = nullptr;
        zen_status st;
        {
            std::lock_guard<std::mutex> g(c_->lock);
            st = type == c10d::OpType::SEND
                     ? zen_isend(c_->comm, ts[0].data_ptr(), bytes, peer, tag, &req)
                     : zen_irecv(c_->comm, ts[0].data_ptr(), bytes, peer, tag, &req);
        }
        if (st != ZEN_OK)
            std::rethrow_exception(zen_error(c_, what, st));
        return c10::make_intrusive<RequestWork>(type, c_, req, ts[0], peer);
    }

    // A contiguous buffer for world-size tensors like `in`, checked against `outs`.
    at::Tensor gather_buffer(const char *what, const at::Tensor &in,
                             const std::vector<at::Tensor> &outs)
    {
        for (const auto &t : outs)
            TORCH_CHECK(t.numel() == in.numel() && t.scalar_type() == in.scalar_type(),
                        "zen backend: ", what, " outputs must match the input's size and dtype");
        return at::empty({ (int64_t)getSize() * in.numel() }, in.options());
    }

    static std::vector<at::Tensor> flatten_all(const std::vector<at::Tensor> &ts)
    {
        std::vector<at::Tensor> flat;
        for (const auto &t : ts)
            flat.push_back(t.reshape({ -1 }));
        return flat;
    }

    static void unflatten(const at::Tensor &flat, std::vector<at::Tensor> &outs)
    {
        int64_t off = 0;
        for (auto &t : outs) {
            t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
            off += t.numel();
        }
    }

    // Element counts and displacements per rank along dim 0; empty splits mean equal parts.
    bool splits(const at::Tensor &t, const std::vector<int64_t> &s, std::vector<size_t> *counts,
                std::vector<size_t> *displs)
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
            counts->push_back((size_t)(p * per_row));
            displs->push_back(off);
            off += (size_t)(p * per_row);
            sum += p;
        }
        return sum == rows;
    }
};

// ZEN_TORCH_SPARSE_SCHEME, read through zen's tunables table (the public zen_param_get) like
// every ZEN_* variable: `zen info` lists it, and a name the table rejects is ignored with a
// warning (the default, auto, is used).
std::string sparse_scheme_from_env()
{
    for (size_t i = 0; i < zen_param_count(); i++) {
        zen_param_info p;
        if (zen_param_get(i, &p) != ZEN_OK || std::strcmp(p.name, "ZEN_TORCH_SPARSE_SCHEME") != 0)
            continue;
        if (p.problem)
            TORCH_WARN("zen backend: ignoring ZEN_TORCH_SPARSE_SCHEME='", p.raw_value, "' (",
                       p.problem, "); using '", p.value, "'");
        return p.value;
    }
    return "auto";
}

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store> &store,
                                              int rank, int size,
                                              const std::chrono::duration<float> &timeout)
{
    zen_store zs = { store.get(), store_set, store_get };
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.rank = rank;
    o.world_size = size;
    o.timeout_s = timeout.count();
    auto comm = std::make_shared<Comm>();
    zen_status st;
    {
        pybind11::gil_scoped_release nogil; // the store may be served by this process's thread
        st = zen_comm_create_with_store(&o, &zs, &comm->comm);
    }
    TORCH_CHECK(st == ZEN_OK, "zen backend: creating the communicator (rank ", rank, " of ", size,
                ") failed: ", zen_strerror(st), "; the zen log above says why");
    auto pg = c10::make_intrusive<ProcessGroupZen>(comm, rank, size);
    pg->set_sparse_scheme(sparse_scheme_from_env());
    return pg;
}

ProcessGroupZen *as_zen(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    auto *z = dynamic_cast<ProcessGroupZen *>(pg.get());
    TORCH_CHECK(z, "zen backend: not a zen process group");
    return z;
}

} // namespace

PYBIND11_MODULE(_C, m)
{
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
        "_time_raw_allreduce",
        [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg, at::Tensor &t) {
            return as_zen(pg)->time_raw_allreduce(t);
        },
        "benchmarks only: seconds of one in-place zen_allreduce (SUM) called directly from C");
    m.def("zen_version", &zen_version);
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
