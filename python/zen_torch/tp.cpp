// zen_torch._C's tensor-parallel handles: a zen_tp_group over a communicator of its own, and its
// zen_tp_linear layers, whose weight and gradient buffers torch sees as tensors (no copy).
// zen_torch/tp.py builds the nn.Modules and the autograd Function on top.
//
// Why a communicator of its own: the zen process group's communicator belongs to the group's
// worker thread (worker.hpp), which may be running an asynchronous collective (a DDP bucket, a
// top-k hook) while a layer's forward or backward needs the tp allreduce. A split child of that
// communicator shares its transport and must not be used concurrently with it (comm.h), and
// posting every tp collective to the worker would put a thread hand-off on the critical path of
// each layer call and queue it behind the asynchronous traffic. So the TPGroup makes a second
// communicator over the same ranks, through the torch Store (its own key prefix), used only by
// the thread that runs forward and backward.
//
// Aliasing: TPLinear.weight()/weight_grad()/bias()/bias_grad() return tensors over the layer's
// own buffers (torch::from_blob). Each such tensor keeps the layer alive (the deleter holds a
// reference), and the layer keeps its group and communicator alive, so a Parameter that outlives
// its Module still points at valid memory.
#include <cstring>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/extension.h>
#include <vector>

#include <zen/comm.h>
#include <zen/store.h>
#include <zen/tp.h>

#include "bindings.hpp"

namespace
{

namespace py = pybind11;

// ---- the group ----

class Group
{
  public:
    Group(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size, double timeout_s,
          const zen_tp_options &opts)
    {
        zen_store zs = zen_torch::store_of(store.get());
        zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
        o.rank = rank;
        o.world_size = size;
        o.timeout_s = timeout_s;
        zen_status st;
        {
            py::gil_scoped_release nogil; // the store may be served by this process's thread
            st = zen_comm_create_with_store(&o, &zs, &comm_);
        }
        TORCH_CHECK(st == ZEN_OK, "zen_torch.tp: creating the tp communicator (rank ", rank, " of ",
                    size, ") failed: ", zen_strerror(st), "; the zen log above says why");
        st = zen_tp_group_create(comm_, &opts, &g_);
        if (st != ZEN_OK) {
            std::string why = zen_comm_last_error(comm_);
            zen_comm_destroy(comm_);
            TORCH_CHECK(false, "zen_torch.tp: TPGroup: ", zen_strerror(st), " (", why, ")");
        }
    }

    ~Group()
    {
        zen_tp_group_destroy(g_);
        zen_comm_destroy(comm_);
    }

    Group(const Group &) = delete;
    Group &operator=(const Group &) = delete;

    zen_tp_group *g() const
    {
        return g_;
    }

    zen_comm *comm() const
    {
        return comm_;
    }

    int rank() const
    {
        return zen_comm_rank(comm_);
    }

    int size() const
    {
        return zen_comm_size(comm_);
    }

    // Raises "zen_torch.tp: rank R: WHAT: <strerror> (<last error>)" unless st is ZEN_OK.
    void check(zen_status st, const char *what) const
    {
        TORCH_CHECK(st == ZEN_OK, "zen_torch.tp: rank ", rank(), ": ", what, ": ", zen_strerror(st),
                    " (", zen_comm_last_error(comm_), ")");
    }

    void set_emulation(const std::vector<std::pair<int, double>> &slow, const std::string &mode,
                       int rotate)
    {
        TORCH_CHECK(mode == "spin" || mode == "sleep", "zen_torch.tp: straggler mode '", mode,
                    "' (spin or sleep)");
        TORCH_CHECK(slow.size() <= ZEN_TP_MAX_SLOW, "zen_torch.tp: more than ", ZEN_TP_MAX_SLOW,
                    " emulated stragglers");
        zen_tp_emulation e;
        zen_tp_emulation_init(&e);
        e.mode = mode == "spin" ? ZEN_TP_SLOW_SPIN : ZEN_TP_SLOW_SLEEP;
        e.rotate = rotate;
        for (const auto &s : slow)
            e.slow[e.nslow++] = { s.first, s.second };
        check(zen_tp_group_set_emulation(g_, e.nslow ? &e : nullptr), "set_straggler");
    }

    void step()
    {
        zen_status st;
        {
            py::gil_scoped_release nogil;
            st = zen_tp_group_step(g_);
        }
        check(st, "step");
    }

    void canonical_grads(bool canonical)
    {
        check(zen_tp_group_canonical_grads(g_, canonical ? 1 : 0), "canonical_grads");
    }

    py::dict stats() const
    {
        zen_tp_stats s;
        check(zen_tp_group_stats(g_, &s), "stats");
        py::dict d;
        d["balance"] = std::string(zen_tp_balance_name(s.balance));
        d["steps"] = s.steps;
        d["decisions"] = s.decisions;
        d["stragglers"] = s.nstragglers;
        py::list who;
        for (int r = 0; r < size() && r < 64; r++)
            if ((s.straggler_mask >> r) & 1)
                who.append(r);
        d["straggler_ranks"] = who;
        d["keep_fraction"] = s.keep_fraction;
        d["min_keep_fraction"] = s.min_keep_fraction;
        d["migrated_cols"] = s.migrated_cols;
        d["ms_wait"] = s.ms_wait;
        d["ms_compute"] = s.ms_compute;
        d["slow_factor"] = s.slow_factor;
        d["t_norm_ms"] = s.t_norm_ms;
        d["last_arrival_rank"] = s.last_arrival_rank;
        d["arrival_spread_ms"] = s.arrival_spread_ms;
        // the plan per rank (identical on all ranks)
        std::vector<zen_tp_rank_plan> plan((size_t)size());
        check(zen_tp_group_plan(g_, plan.data(), size()), "plan");
        double fastest = 0;
        for (const auto &p : plan)
            if (p.t_ms > 0 && (fastest == 0 || p.t_ms < fastest))
                fastest = p.t_ms;
        py::list ms, speed, local, pruned, migrated, helped;
        for (const auto &p : plan) {
            ms.append(p.t_ms);
            speed.append(p.t_ms > 0 ? fastest / p.t_ms : 1.0);
            local.append(p.local);
            pruned.append(p.pruned);
            migrated.append(p.migrated);
            helped.append(p.helped);
        }
        d["rank_gemm_ms"] = ms;
        d["rank_speed"] = speed;
        d["rank_local"] = local;
        d["rank_pruned"] = pruned;
        d["rank_migrated"] = migrated;
        d["rank_helped"] = helped;
        return d;
    }

    // t (contiguous float32) from tp rank root on every rank, in place.
    void broadcast_(at::Tensor &t, int root)
    {
        TORCH_CHECK(t.is_contiguous() && t.scalar_type() == at::kFloat,
                    "zen_torch.tp: broadcast_ needs a contiguous float32 tensor");
        zen_status st;
        {
            py::gil_scoped_release nogil;
            st = zen_broadcast(comm_, t.data_ptr(), (size_t)t.numel(), ZEN_F32, root);
        }
        check(st, "broadcast");
    }

    // out[rows][size*c] from every rank's t[rows][c] (rank order along the last dimension): one
    // zen_allgather of rows*c floats per rank, then a local transpose of the rank blocks.
    at::Tensor allgather_lastdim(const at::Tensor &t)
    {
        TORCH_CHECK(t.dim() == 2 && t.is_contiguous() && t.scalar_type() == at::kFloat,
                    "zen_torch.tp: allgather_lastdim needs a contiguous 2-d float32 tensor");
        int n = size();
        at::Tensor buf = at::empty({ n, t.size(0), t.size(1) }, t.options());
        zen_status st;
        {
            py::gil_scoped_release nogil;
            st = zen_allgather(comm_, t.data_ptr(), buf.data_ptr(), (size_t)t.numel(), ZEN_F32);
        }
        check(st, "all_gather of the output shards");
        return buf.permute({ 1, 0, 2 }).reshape({ t.size(0), n * t.size(1) });
    }

  private:
    zen_comm *comm_ = nullptr;
    zen_tp_group *g_ = nullptr;
};

// ---- a layer ----

class Linear : public std::enable_shared_from_this<Linear>
{
  public:
    Linear(std::shared_ptr<Group> grp, bool column, int in, int out, bool bias)
        : grp_(std::move(grp)), column_(column)
    {
        grp_->check(zen_tp_linear_create(grp_->g(), column ? ZEN_TP_COLUMN : ZEN_TP_ROW, in, out,
                                         bias ? 1 : 0, &l_),
                    "creating a tp layer");
        grp_->check(zen_tp_linear_weight(l_, &w_), "weight");
        grp_->check(zen_tp_linear_bias(l_, &b_), "bias");
        ycols_ = column ? out / grp_->size() : out;
    }

    ~Linear()
    {
        zen_tp_linear_destroy(l_);
    }

    Linear(const Linear &) = delete;
    Linear &operator=(const Linear &) = delete;

    // Tensors over the layer's buffers; each keeps the layer (and so its group) alive.
    at::Tensor alias(float *p, std::vector<int64_t> shape)
    {
        TORCH_CHECK(p, "zen_torch.tp: the layer has no such buffer");
        auto self = shared_from_this();
        return torch::from_blob(
            p, shape, [self](void *) {}, at::TensorOptions().dtype(at::kFloat));
    }

    at::Tensor weight()
    {
        return alias(w_.data, { w_.rows, w_.cols });
    }

    at::Tensor weight_grad()
    {
        return alias(w_.grad, { w_.rows, w_.cols });
    }

    at::Tensor bias()
    {
        return alias(b_.data, { (int64_t)b_.count });
    }

    at::Tensor bias_grad()
    {
        return alias(b_.grad, { (int64_t)b_.count });
    }

    // x: [rows][K] contiguous float32 (K = in for COLUMN, in/tp for ROW); returns [rows][ycols].
    at::Tensor forward(const at::Tensor &x, bool training)
    {
        check_input(x, w_.cols, "forward input");
        int rows = (int)x.size(0);
        at::Tensor y = at::empty({ rows, ycols_ }, x.options());
        zen_status st;
        {
            py::gil_scoped_release nogil;
            st = zen_tp_linear_forward(l_, x.data_ptr<float>(), rows, y.data_ptr<float>(),
                                       training ? 1 : 0);
        }
        grp_->check(st, column_ ? "column forward" : "row forward");
        return y;
    }

    // dx [rows][K] (None when not needed; the collectives still run). dW, db accumulate into the
    // layer's gradient buffers.
    c10::optional<at::Tensor> backward(const at::Tensor &x, const at::Tensor &dy, bool need_dx)
    {
        check_input(x, w_.cols, "backward input");
        check_input(dy, ycols_, "output gradient");
        TORCH_CHECK(dy.size(0) == x.size(0), "zen_torch.tp: output gradient rows ", dy.size(0),
                    " != input rows ", x.size(0));
        int rows = (int)x.size(0);
        c10::optional<at::Tensor> dx;
        if (need_dx)
            dx = at::empty({ rows, w_.cols }, x.options());
        float *dxp = need_dx ? dx->data_ptr<float>() : nullptr;
        zen_status st;
        {
            py::gil_scoped_release nogil;
            st = zen_tp_linear_backward(l_, x.data_ptr<float>(), dy.data_ptr<float>(), rows, dxp);
        }
        grp_->check(st, column_ ? "column backward" : "row backward");
        return dx;
    }

    at::Tensor export_weight() const
    {
        at::Tensor t = at::empty({ w_.rows, w_.cols }, at::kFloat);
        grp_->check(zen_tp_linear_export_weight(l_, t.data_ptr<float>()), "export_weight");
        return t;
    }

    void import_weight(const at::Tensor &t)
    {
        at::Tensor c = t.detach().to(at::kFloat).contiguous();
        TORCH_CHECK(c.numel() == (int64_t)w_.count, "zen_torch.tp: import_weight of ", c.numel(),
                    " values into a ", w_.rows, " x ", w_.cols, " shard");
        grp_->check(zen_tp_linear_import_weight(l_, c.data_ptr<float>()), "import_weight");
    }

    // A weight-shaped companion (optimizer moment) that follows every column permutation; the
    // layer keeps a reference to the tensor while it is attached.
    void attach_state(const at::Tensor &t)
    {
        TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous() && t.device().is_cpu() &&
                        t.numel() == (int64_t)w_.count,
                    "zen_torch.tp: optimizer state must be a contiguous float32 CPU tensor shaped "
                    "like the weight shard");
        grp_->check(zen_tp_linear_attach_state(l_, t.data_ptr<float>()), "attach_state");
        companions_.push_back(t);
    }

    void detach_state(const at::Tensor &t)
    {
        grp_->check(zen_tp_linear_detach_state(l_, t.data_ptr<float>()), "detach_state");
        for (auto it = companions_.begin(); it != companions_.end(); ++it) {
            if (it->data_ptr() == t.data_ptr()) {
                companions_.erase(it);
                break;
            }
        }
    }

    // (perm, computed): perm[p] = canonical column at physical column p (int64 tensor of K).
    py::tuple layout() const
    {
        std::vector<int> perm((size_t)w_.cols);
        int computed = 0;
        grp_->check(zen_tp_linear_layout(l_, perm.data(), &computed), "layout");
        at::Tensor t = at::empty({ w_.cols }, at::kLong);
        int64_t *tp = t.data_ptr<int64_t>();
        for (int p = 0; p < w_.cols; p++)
            tp[p] = perm[(size_t)p];
        return py::make_tuple(t, computed);
    }

    int64_t ycols() const
    {
        return ycols_;
    }

  private:
    void check_input(const at::Tensor &t, int64_t cols, const char *what) const
    {
        TORCH_CHECK(t.dim() == 2 && t.size(1) == cols && t.is_contiguous() &&
                        t.scalar_type() == at::kFloat && t.device().is_cpu(),
                    "zen_torch.tp: ", what, " must be a contiguous float32 CPU [rows][", cols,
                    "] tensor, got ", t.sizes(), " ", c10::toString(t.scalar_type()));
    }

    std::shared_ptr<Group> grp_;
    bool column_;
    zen_tp_linear *l_ = nullptr;
    zen_tp_param w_{}, b_{};
    int64_t ycols_ = 0;
    std::vector<at::Tensor> companions_;
};

zen_tp_options options_of(const std::string &balance, const std::string &priority, int period,
                          double delta, double rho_max)
{
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    const char *names[] = { "none", "resize", "migrate", "semi" };
    int b = -1;
    for (int i = 0; i < 4; i++)
        if (balance == names[i])
            b = i;
    TORCH_CHECK(b >= 0, "zen_torch.tp: balance '", balance, "' (none, resize, migrate or semi)");
    o.balance = (zen_tp_balance)b;
    if (priority == "score")
        o.priority = ZEN_TP_PRIORITY_SCORE;
    else if (priority == "random")
        o.priority = ZEN_TP_PRIORITY_RANDOM;
    else if (priority == "prefix")
        o.priority = ZEN_TP_PRIORITY_PREFIX;
    else
        TORCH_CHECK(priority.empty(), "zen_torch.tp: priority '", priority,
                    "' (score, random or prefix)");
    o.period = period;   // 0: unset (ZEN_TP_PERIOD or 10)
    o.delta = delta;     // < 0: unset
    o.rho_max = rho_max; // < 0: unset
    return o;
}

} // namespace

void zen_torch_register_tp(py::module &m)
{
    zen_torch_register_vcoll(m);
    py::class_<Group, std::shared_ptr<Group>>(m, "TPGroup")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                         double timeout_s, const std::string &balance, const std::string &priority,
                         int period, double delta, double rho_max) {
            return std::make_shared<Group>(store, rank, size, timeout_s,
                                           options_of(balance, priority, period, delta, rho_max));
        }))
        .def("rank", &Group::rank)
        .def("size", &Group::size)
        .def("set_emulation", &Group::set_emulation)
        .def("step", &Group::step)
        .def("canonical_grads", &Group::canonical_grads)
        .def("stats", &Group::stats)
        .def("broadcast_", &Group::broadcast_)
        .def("allgather_lastdim", &Group::allgather_lastdim);
    py::class_<Linear, std::shared_ptr<Linear>>(m, "TPLinear")
        .def(py::init([](std::shared_ptr<Group> g, bool column, int in, int out, bool bias) {
            return std::make_shared<Linear>(std::move(g), column, in, out, bias);
        }))
        .def("weight", &Linear::weight)
        .def("weight_grad", &Linear::weight_grad)
        .def("bias", &Linear::bias)
        .def("bias_grad", &Linear::bias_grad)
        .def("forward", &Linear::forward)
        .def("backward", &Linear::backward)
        .def("export_weight", &Linear::export_weight)
        .def("import_weight", &Linear::import_weight)
        .def("attach_state", &Linear::attach_state)
        .def("detach_state", &Linear::detach_state)
        .def("layout", &Linear::layout)
        .def("ycols", &Linear::ycols);
}
