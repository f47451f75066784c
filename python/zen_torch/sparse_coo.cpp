// zen_torch._C.sparse_allreduce_coo: the element-sparse allreduce a top-k DDP comm hook
// (zen_torch.hooks) sends its selected gradient entries through; rows_allreduce_into: the row-sparse
// one of the embedding rows hook (exact: the dense gradient's all-zero rows are left out).
//
// Why a binding of its own rather than dist.all_reduce of a sparse COO tensor: the hook has the
// selection as (indices, values) over a flat bucket of numel elements, wants the reduced sum back
// in the same form (to scatter into the bucket and, for global top-k, to tell which of its own
// entries were dropped), and must return a future DDP can chain on before the sum exists. Going
// through a COO tensor would coalesce (sort) the selection on the caller's thread and copy the
// result into a sparse tensor nobody needs.
//
// sparse_allreduce_into is the same reduction with the result scattered into a dense tensor (the
// DDP bucket) on the worker, its future's value that tensor: the hook chains nothing in Python.
//
// Execution: like every collective of a zen group, on the group's worker thread in issue order
// (worker.hpp), so the hook's allreduces interleave with DDP's dense ones identically on every
// rank. Element sparsity: rows = numel, width = 1; the wire format and scheme choice are
// zen_sparse_allreduce's (include/zen/sparse.h). The future completes with [indices int64,
// values float32] of the reduced sum (sorted by index; an entry whose sum cancels to exactly zero
// may be absent), or with an error naming this rank and zen's reason.
#include <cstring>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>
#include <vector>

#include "bindings.hpp"

namespace zt = zen_torch;

namespace
{

struct CooArgs {
    at::Tensor idx, val;
    int64_t numel;
    zen_sparse_scheme scheme;
    bool average;
    int64_t global_k;
};

// The worker's half: zen_sparse_allreduce of (idx, val) over [0, numel) into *res (the caller
// frees it), its rows ascending unless any_order. Throws the error the future gets.
void run_coo(zt::Comm &c, const CooArgs &a, zen_sparse_result *res, bool any_order)
{
    zen_sparse_tensor in = {};
    in.rows = (uint64_t)a.numel;
    in.width = 1;
    in.nnz = (size_t)a.idx.numel();
    in.index_type = ZEN_INDEX_I64;
    in.indices = a.idx.data_ptr();
    in.value_type = ZEN_F32;
    in.values = a.val.data_ptr();
    zen_sparse_options so = ZEN_SPARSE_OPTIONS_INIT;
    so.scheme = a.scheme;
    so.average = a.average;
    // A hook reduces the same buckets every step: the key lets AUTO keep a measured sparsity
    // profile per bucket size (zen tells tensors of one key apart by rows and width).
    so.key = "zen_torch.topk";
    // > 0: every rank receives at most global_k entries, the largest of the sum (BALANCED, PS
    // or AUTO); the hook puts its own dropped contributions back into its residual.
    so.global_topk = (size_t)a.global_k;
    so.any_order = any_order;
    zen_status st = zen_sparse_allreduce(c.comm(), &in, res, &so, &c.last_sparse);
    if (st != ZEN_OK) {
        zen_sparse_result_free(res);
        std::rethrow_exception(c.error("sparse allreduce (top-k hook)", st));
    }
}

// sparse_allreduce_coo's result: the [indices, values] list, indices widened to torch's int64.
c10::IValue reduce_coo(zt::Comm &c, const CooArgs &a)
{
    zen_sparse_result res = {};
    run_coo(c, a, &res, false);
    at::Tensor ri = at::empty({ (int64_t)res.nnz }, at::kLong);
    int64_t *rip = ri.data_ptr<int64_t>();
    for (size_t i = 0; i < res.nnz; i++)
        rip[i] = (int64_t)res.indices[i];
    at::Tensor rv = at::empty({ (int64_t)res.nnz }, at::kFloat);
    if (res.nnz)
        std::memcpy(rv.data_ptr<float>(), res.values, res.nnz * sizeof(float));
    zen_sparse_result_free(&res);
    return c10::IValue(std::vector<at::Tensor>{ ri, rv });
}

// sparse_allreduce_into's result: the sum written densely into out (zero where the sum has no
// entry). With a residual (global top-k), this rank's own sent value goes back into it at every
// index the result lacks: both index lists are ascending, so one merge walk finds them. Without
// one the scatter needs no order, so the result comes in any order (no k-way merge in zen).
void reduce_into(zt::Comm &c, const CooArgs &a, const at::Tensor &out, const at::Tensor &residual)
{
    zen_sparse_result res = {};
    run_coo(c, a, &res, !residual.defined());
    float *o = out.data_ptr<float>();
    std::memset(o, 0, (size_t)a.numel * sizeof(float));
    for (size_t i = 0; i < res.nnz; i++)
        o[res.indices[i]] = res.values[i];
    if (residual.defined()) {
        const int64_t *own = a.idx.data_ptr<int64_t>();
        const float *ownv = a.val.data_ptr<float>();
        float *r = residual.data_ptr<float>();
        size_t j = 0;
        for (int64_t i = 0; i < a.idx.numel(); i++) {
            while (j < res.nnz && (int64_t)res.indices[j] < own[i])
                j++;
            if (j == res.nnz || (int64_t)res.indices[j] != own[i])
                r[own[i]] += ownv[i];
        }
    }
    zen_sparse_result_free(&res);
}

CooArgs check_coo(const at::Tensor &indices, const at::Tensor &values, int64_t numel,
                  const std::string &scheme, bool average, int64_t global_k)
{
    const char *w = "zen backend: sparse_allreduce_coo";
    TORCH_CHECK(indices.device().is_cpu() && values.device().is_cpu(), w, " needs CPU tensors");
    TORCH_CHECK(indices.dim() == 1 && values.dim() == 1 && indices.numel() == values.numel(), w,
                " needs 1-D indices and values of the same length, got ", indices.sizes(), " and ",
                values.sizes());
    TORCH_CHECK(indices.scalar_type() == at::kLong, w, " needs int64 indices, got ",
                indices.scalar_type());
    TORCH_CHECK(values.scalar_type() == at::kFloat, w, " needs float32 values, got ",
                values.scalar_type());
    TORCH_CHECK(numel > 0 && numel < ((int64_t)1 << 32), w, ": numel must be in [1, 2^32), got ",
                numel);
    TORCH_CHECK(global_k >= 0, w, ": global_k must be >= 0 (0: union), got ", global_k);
    CooArgs a;
    a.scheme = zt::scheme_of(scheme);
    a.idx = indices.contiguous();
    a.val = values.contiguous();
    a.numel = numel;
    a.average = average;
    a.global_k = global_k;
    return a;
}

// Queue fn (the worker's half, returning the future's value) on the group's worker in issue
// order; returns the future, of type `type`, as a torch.futures.Future.
template <class Fn>
pybind11::object post_coo(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, c10::TypePtr type,
                          Fn fn)
{
    std::shared_ptr<zt::Comm> comm = zt::comm_of(pg);
    zt::Comm *c = comm.get(); // the group outlives its queued tasks (its destructor drains them)
    auto fut = c10::make_intrusive<c10::ivalue::Future>(type);
    {
        // The worker runs callbacks chained on fut, which take the GIL; in sync mode this thread
        // waits for it.
        pybind11::gil_scoped_release nogil;
        c->post([c, fn, fut] {
            try {
                fut->markCompleted(fn(*c));
            } catch (...) {
                if (!fut->completed())
                    fut->setError(std::current_exception());
            }
        });
        if (c->sync())
            fut->wait();
    }
    return torch::jit::toPyObject(c10::IValue(fut));
}

pybind11::object sparse_allreduce_coo(const at::Tensor &indices, const at::Tensor &values,
                                      int64_t numel,
                                      const c10::intrusive_ptr<c10d::ProcessGroup> &pg,
                                      const std::string &scheme, bool average, int64_t global_k)
{
    CooArgs a = check_coo(indices, values, numel, scheme, average, global_k);
    return post_coo(pg, c10::ListType::create(c10::TensorType::get()),
                    [a](zt::Comm &c) { return reduce_coo(c, a); });
}

void check_dense(const at::Tensor &t, int64_t numel, const char *what)
{
    TORCH_CHECK(t.device().is_cpu() && t.dim() == 1 && t.is_contiguous() &&
                    t.scalar_type() == at::kFloat && t.numel() == numel,
                "zen backend: sparse_allreduce_into: ", what,
                " must be a 1-D contiguous CPU float32 tensor of numel elements");
}

// The top-k hook's transport: as sparse_allreduce_coo, but the sum lands densely in out (the DDP
// bucket) on the worker, and the future's value is out itself, so DDP needs no Python callback
// to take it. indices must be ascending (the order topk_compress_bucket returns) when a residual
// is given.
pybind11::object sparse_allreduce_into(const at::Tensor &indices, const at::Tensor &values,
                                       at::Tensor out,
                                       const c10::intrusive_ptr<c10d::ProcessGroup> &pg,
                                       const std::string &scheme, bool average, int64_t global_k,
                                       c10::optional<at::Tensor> residual)
{
    CooArgs a = check_coo(indices, values, out.numel(), scheme, average, global_k);
    check_dense(out, a.numel, "out");
    at::Tensor r = residual.has_value() ? *residual : at::Tensor();
    if (r.defined()) {
        check_dense(r, a.numel, "residual");
        const int64_t *ip = a.idx.data_ptr<int64_t>();
        for (int64_t i = 1; i < a.idx.numel(); i++)
            TORCH_CHECK(ip[i - 1] < ip[i], "zen backend: sparse_allreduce_into: indices must be "
                                           "strictly ascending when a residual is given");
    }
    // DDP (torch 1.13) takes a Python hook's result only as a Python object: made here, under
    // the GIL, so the worker completes the future without taking it.
    c10::IValue done = torch::jit::toIValue(pybind11::cast(out), c10::PyObjectType::get());
    return post_coo(pg, c10::PyObjectType::get(), [a, out, r, done](zt::Comm &c) {
        reduce_into(c, a, out, r);
        return done;
    });
}

// rows_allreduce_into: a dense float32 bucket viewed as rows of `width` elements; the rows that
// hold any non-zero (NaN and inf included) go through zen_sparse_allreduce_dense, which writes the
// sum over all the rows back into the bucket; the last numel % width elements (a partial row),
// through a dense zen_allreduce. Exact: a row left out is zero on that rank. Everything, the scan
// included, runs on the worker, so the training thread only queues it.
struct RowsArgs {
    at::Tensor out;
    int64_t width;
    zen_sparse_scheme scheme;
    bool average;
};

void reduce_rows(zt::Comm &c, const RowsArgs &a)
{
    float *o = a.out.data_ptr<float>();
    const uint64_t w = (uint64_t)a.width;
    const uint64_t rows = (uint64_t)a.out.numel() / w;
    const size_t tail = (size_t)((uint64_t)a.out.numel() % w);
    std::vector<uint32_t> idx; // the rows holding a non-zero: a dense row ends its scan early
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = o + r * w;
        uint64_t j = 0;
        while (j < w && row[j] == 0.0f)
            j++;
        if (j < w)
            idx.push_back((uint32_t)r);
    }
    std::vector<float> val(idx.size() * w); // their values, packed
    for (size_t i = 0; i < idx.size(); i++)
        std::memcpy(&val[i * w], o + (uint64_t)idx[i] * w, w * sizeof(float));
    zen_sparse_tensor in = {};
    in.rows = rows;
    in.width = (uint32_t)w;
    in.nnz = idx.size();
    in.index_type = ZEN_INDEX_U32;
    in.indices = idx.data();
    in.value_type = ZEN_F32;
    in.values = val.data();
    zen_sparse_options so = ZEN_SPARSE_OPTIONS_INIT;
    so.scheme = a.scheme;
    so.average = a.average;
    so.key = "zen_torch.rows"; // AUTO keeps a profile per (rows, width) of this key
    zen_status st =
        rows ? zen_sparse_allreduce_dense(c.comm(), &in, o, &so, &c.last_sparse) : ZEN_OK;
    if (st != ZEN_OK)
        std::rethrow_exception(c.error("sparse allreduce (rows hook)", st));
    if (tail == 0)
        return;
    float *t = o + rows * w;
    st = zen_allreduce(c.comm(), t, t, tail, ZEN_F32, ZEN_SUM);
    if (st != ZEN_OK)
        std::rethrow_exception(c.error("allreduce (rows hook, last partial row)", st));
    if (a.average) {
        const float ranks = (float)zen_comm_size(c.comm());
        for (size_t i = 0; i < tail; i++)
            t[i] /= ranks;
    }
}

// The embedding rows hook's transport: the bucket's mean (sum unless average) over the group,
// row-sparse, written into out by the worker; returns a torch.futures.Future of out.
pybind11::object rows_allreduce_into(at::Tensor out, int64_t width,
                                     const c10::intrusive_ptr<c10d::ProcessGroup> &pg,
                                     const std::string &scheme, bool average)
{
    const char *w = "zen backend: rows_allreduce_into";
    TORCH_CHECK(out.device().is_cpu() && out.dim() == 1 && out.is_contiguous() &&
                    out.scalar_type() == at::kFloat,
                w, ": out must be a 1-D contiguous CPU float32 tensor");
    TORCH_CHECK(width > 0 && width <= ((int64_t)1 << 24), w, ": width must be in [1, 2^24], got ",
                width);
    TORCH_CHECK(out.numel() / width < ((int64_t)1 << 32), w, ": ", out.numel() / width,
                " rows of width ", width, " (2^32 at most)");
    RowsArgs a{ out, width, zt::scheme_of(scheme), average };
    c10::IValue done = torch::jit::toIValue(pybind11::cast(out), c10::PyObjectType::get());
    return post_coo(pg, c10::PyObjectType::get(), [a, done](zt::Comm &c) {
        reduce_rows(c, a);
        return done;
    });
}

} // namespace

void zen_torch_register_sparse_coo(pybind11::module &m)
{
    m.def("sparse_allreduce_coo", &sparse_allreduce_coo, pybind11::arg("indices"),
          pybind11::arg("values"), pybind11::arg("numel"), pybind11::arg("group"),
          pybind11::arg("scheme") = "auto", pybind11::arg("average") = true,
          pybind11::arg("global_k") = 0,
          "element-sparse allreduce of (indices int64, values float32) over [0, numel) on a zen "
          "group's worker; returns a torch.futures.Future of [indices, values] of the sum "
          "(the mean when average)");
    m.def("sparse_allreduce_into", &sparse_allreduce_into, pybind11::arg("indices"),
          pybind11::arg("values"), pybind11::arg("out"), pybind11::arg("group"),
          pybind11::arg("scheme") = "auto", pybind11::arg("average") = true,
          pybind11::arg("global_k") = 0, pybind11::arg("residual") = pybind11::none(),
          "element-sparse allreduce of (indices int64, values float32) over [0, out.numel()) on "
          "a zen group's worker, the sum (mean when average) written densely into out there; "
          "with global_k and a residual, this rank's values at indices the result lacks are "
          "added back into the residual; returns a torch.futures.Future of out");
    m.def(
        "rows_allreduce_into", &rows_allreduce_into, pybind11::arg("out"), pybind11::arg("width"),
        pybind11::arg("group"), pybind11::arg("scheme") = "auto", pybind11::arg("average") = true,
        "allreduce of a dense float32 bucket on a zen group's worker, sending only its rows of "
        "width elements that hold a non-zero (zen's sparse allreduce; the last partial row "
        "dense); the sum (mean when average) lands in out; returns a torch.futures.Future of out");
}
