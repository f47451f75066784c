// zen_torch.all_gather_v / reduce_scatter_v: per-rank row counts along dim 0 in one zen call each
// (zen_allgatherv, zen_reduce_scatterv), what a resized tensor-parallel layer needs; NCCL and
// torch only offer these as lists of tensors. They run on the zen group's worker like every
// other collective of the group (so they are ordered with its asynchronous work) and return
// when done.
#include <chrono>
#include <numeric>
#include <torch/extension.h>
#include <vector>

#include <zen/comm.h>

#include "dtypes.hpp"
#include "tp.hpp"

namespace zt = zen_torch;

namespace
{

namespace py = pybind11;

// Row counts valid for this group and tensor; returns the elements per row (dims 1..).
int64_t check_sizes(const char *what, const c10::intrusive_ptr<c10d::ProcessGroup> &pg,
                    const at::Tensor &t, const std::vector<int64_t> &sizes)
{
    TORCH_CHECK((int)sizes.size() == pg->getSize(), "zen_torch.", what, ": ", sizes.size(),
                " sizes for a group of ", pg->getSize());
    for (int64_t s : sizes)
        TORCH_CHECK(s >= 0, "zen_torch.", what, ": negative size ", s);
    TORCH_CHECK(t.dim() >= 1 && t.device().is_cpu() && t.layout() == c10::kStrided, "zen_torch.",
                what, " needs a dense CPU tensor with at least one dimension");
    int64_t row = 1;
    for (int64_t d = 1; d < t.dim(); d++)
        row *= t.size(d);
    return row;
}

void run_on_worker(const std::shared_ptr<zt::Comm> &c, const char *what, c10d::OpType type,
                   std::vector<at::Tensor> keep, std::function<zen_status()> fn)
{
    auto w = c10::make_intrusive<zt::ZenWork>(type, what, c->rank(), c->timeout_s(),
                                              std::vector<at::Tensor>(), std::move(keep));
    zt::Comm *cp = c.get();
    zt::issue(*cp, w, [cp, fn, what]() -> std::exception_ptr {
        zen_status st = fn();
        return st == ZEN_OK ? nullptr : cp->error(what, st);
    });
    py::gil_scoped_release nogil;
    w->wait(kNoTimeout);
}

// tensor: (sizes[rank], ...) -> (sum(sizes), ...), rank order.
at::Tensor all_gather_v(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, const at::Tensor &t,
                        const std::vector<int64_t> &sizes)
{
    auto c = zt::comm_of(pg);
    int64_t row = check_sizes("all_gather_v", pg, t, sizes);
    int rank = pg->getRank(), n = pg->getSize();
    TORCH_CHECK(t.size(0) == sizes[(size_t)rank], "zen_torch.all_gather_v: rank ", rank, " has ",
                t.size(0), " rows, sizes[", rank, "] is ", sizes[(size_t)rank]);
    int64_t total = std::accumulate(sizes.begin(), sizes.end(), (int64_t)0);
    std::vector<int64_t> shape = t.sizes().vec();
    shape[0] = total;
    zt::Wire wr = zt::wire_of(t, row);
    at::Tensor x = zt::to_wire(t, wr);
    at::Tensor y = at::empty({ (int64_t)wr.count((size_t)(total * row)) }, x.options());
    std::vector<size_t> counts((size_t)n), displs((size_t)n);
    size_t off = 0;
    for (int r = 0; r < n; r++) {
        counts[(size_t)r] = wr.count((size_t)(sizes[(size_t)r] * row));
        displs[(size_t)r] = off;
        off += counts[(size_t)r];
    }
    run_on_worker(c, "all_gather_v", c10d::OpType::ALLGATHER, { x, y }, [=, cp = c.get()] {
        return zen_allgatherv(cp->comm(), x.data_ptr(), counts[(size_t)rank], y.data_ptr(),
                              counts.data(), displs.data(), wr.d);
    });
    return zt::wire_as_torch(y, wr).view(shape);
}

// tensor: (sum(sizes), ...) -> (sizes[rank], ...): the sum over ranks of rows
// [sum(sizes[:rank]), +sizes[rank]).
at::Tensor reduce_scatter_v(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, const at::Tensor &t,
                            const std::vector<int64_t> &sizes)
{
    auto c = zt::comm_of(pg);
    int64_t row = check_sizes("reduce_scatter_v", pg, t, sizes);
    int rank = pg->getRank();
    int64_t total = std::accumulate(sizes.begin(), sizes.end(), (int64_t)0);
    TORCH_CHECK(t.size(0) == total, "zen_torch.reduce_scatter_v: ", t.size(0),
                " rows, the sizes add up to ", total);
    zt::Reduced r;
    TORCH_CHECK(zt::reduced_of(t.scalar_type(), &r), "zen_torch.reduce_scatter_v: dtype ",
                c10::toString(t.scalar_type()), " cannot be reduced");
    std::vector<int64_t> shape = t.sizes().vec();
    shape[0] = sizes[(size_t)rank];
    at::Tensor x = zt::to_compute(t, r);
    at::Tensor y = at::empty({ sizes[(size_t)rank] * row }, x.options());
    std::vector<size_t> counts;
    for (int64_t s : sizes)
        counts.push_back((size_t)(s * row));
    run_on_worker(c, "reduce_scatter_v", c10d::OpType::REDUCE_SCATTER, { x, y }, [=, cp = c.get()] {
        return zen_reduce_scatterv(cp->comm(), x.data_ptr(), y.data_ptr(), counts.data(), r.d,
                                   ZEN_SUM);
    });
    at::Tensor out = at::empty(shape, t.options());
    zt::from_compute(out, y.view(shape));
    return out;
}

} // namespace

void zen_torch_register_vcoll(py::module &m)
{
    m.def("all_gather_v", &all_gather_v, "rows sizes[r] from every rank r, concatenated");
    m.def("reduce_scatter_v", &reduce_scatter_v, "rank r: the sum of every rank's block r");
}
