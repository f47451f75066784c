// zen_torch._C.topk_select: libzen's top-k selection (include/zen/compress.h) on a torch tensor,
// for DGC-style gradient compression from Python; zen_torch._C.topk_compress_bucket: the DDP comm
// hook's whole local step on one bucket (zen_torch.hooks) in one call, zen_topk_compress_buffers
// on the hook's tensors (this file is only the tensor <-> pointer glue).
//
// The tensors are read in place (no copy): 1-D, contiguous, on the CPU. The work runs without the
// GIL, so other Python threads (DDP's autograd engine) keep going; the tensors are kept alive by
// the caller's references for the duration of the call.
#include <cstdint>
#include <string>
#include <torch/extension.h>
#include <tuple>
#include <vector>

#include <zen/compress.h>

#include "bindings.hpp"

namespace
{

std::tuple<torch::Tensor, torch::Tensor> topk_select(const torch::Tensor &x, int64_t k, bool exact,
                                                     int threads)
{
    TORCH_CHECK(x.device().is_cpu(), "zen_torch.topk_select: the tensor must be on the CPU, got ",
                x.device());
    TORCH_CHECK(x.dim() == 1, "zen_torch.topk_select: the tensor must be 1-D (flatten it), got ",
                x.dim(), " dimensions");
    TORCH_CHECK(x.is_contiguous(), "zen_torch.topk_select: the tensor must be contiguous");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kBFloat16,
                "zen_torch.topk_select: float32 or bfloat16 only, got ", x.scalar_type());
    TORCH_CHECK(k >= 0, "zen_torch.topk_select: k must be >= 0, got ", k);
    TORCH_CHECK(x.numel() < (int64_t(1) << 32),
                "zen_torch.topk_select: at most 2^32 - 1 elements (uint32 indices)");
    size_t n = static_cast<size_t>(x.numel()), kk = static_cast<size_t>(k);
    size_t want = zen_topk_capacity(kk);
    size_t cap = want < n ? want : n;
    auto idx32 = torch::empty({ static_cast<int64_t>(cap) }, torch::kInt32);
    auto values = torch::empty({ static_cast<int64_t>(cap) }, torch::kFloat32);
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    o.mode = exact ? ZEN_TOPK_EXACT : ZEN_TOPK_APPROX;
    o.threads = threads;
    size_t count = 0;
    zen_status st;
    {
        pybind11::gil_scoped_release nogil;
        st = zen_topk_select(x.data_ptr(), x.scalar_type() == torch::kFloat32 ? ZEN_F32 : ZEN_BF16,
                             n, kk, &o, reinterpret_cast<uint32_t *>(idx32.data_ptr<int32_t>()),
                             values.data_ptr<float>(), cap, &count);
    }
    TORCH_CHECK(st == ZEN_OK,
                "zen_torch.topk_select: zen_topk_select failed: ", zen_status_name(st), " (",
                zen_strerror(st), ")");
    auto c = static_cast<int64_t>(count);
    // uint32 indices widened to int64 (torch's index type); int32 storage holds them bit for bit
    auto indices = idx32.narrow(0, 0, c).to(torch::kInt64).bitwise_and_(int64_t(0xffffffff));
    return { indices, values.narrow(0, 0, c).clone() };
}

void check_bucket(const torch::Tensor &t, int64_t n, const char *what)
{
    TORCH_CHECK(t.device().is_cpu() && t.dim() == 1 && t.is_contiguous() &&
                    t.scalar_type() == torch::kFloat32 && t.numel() == n,
                "zen_torch.topk_compress_bucket: ", what,
                " must be a 1-D contiguous CPU float32 tensor of the bucket's ", n, " elements");
}

// The hook's local step on one bucket (hooks.topk_hook) is libzen's zen_topk_compress_buffers on
// the bucket's gradient g, residual v and velocity u (undefined: no momentum), with the whole-sent
// element ranges of `small` (int64 [start, end) pairs, narrowed to libzen's uint32 here). Returns
// (indices int64 ascending, values float32) to send.
std::tuple<torch::Tensor, torch::Tensor>
topk_compress_bucket(const torch::Tensor &g, const torch::Tensor &v,
                     const c10::optional<torch::Tensor> &u, double momentum, int64_t k,
                     const torch::Tensor &small, bool exact, int threads)
{
    int64_t n = g.numel();
    check_bucket(g, n, "the gradient");
    check_bucket(v, n, "the residual");
    bool has_u = u.has_value() && u->defined();
    if (has_u)
        check_bucket(*u, n, "the velocity");
    TORCH_CHECK(n < (int64_t(1) << 32),
                "zen_torch.topk_compress_bucket: at most 2^32 - 1 elements");
    TORCH_CHECK(k >= 0, "zen_torch.topk_compress_bucket: k must be >= 0, got ", k);
    TORCH_CHECK(small.scalar_type() == torch::kLong && small.is_contiguous() && small.dim() == 1 &&
                    small.numel() % 2 == 0,
                "zen_torch.topk_compress_bucket: small must be int64 [start, end) pairs");
    const int64_t *sp = small.data_ptr<int64_t>();
    std::vector<uint32_t> whole(small.numel());
    int64_t total = 0;
    for (size_t r = 0; r < whole.size(); r++) {
        TORCH_CHECK(sp[r] >= 0 && sp[r] <= n,
                    "zen_torch.topk_compress_bucket: small range ends must lie in [0, ", n, "]");
        whole[r] = (uint32_t)sp[r];
        total += r % 2 ? sp[r] - sp[r - 1] : 0;
    }
    zen_topk_buffers b = {};
    b.size = sizeof b;
    b.n = (size_t)n;
    b.grad = g.data_ptr<float>();
    b.residual = v.data_ptr<float>();
    b.velocity = has_u ? u->data_ptr<float>() : nullptr;
    b.momentum = (float)momentum;
    b.whole = whole.data();
    b.nwhole = whole.size() / 2;
    size_t want = zen_topk_capacity((size_t)k);
    size_t cap = (want < (size_t)n ? want : (size_t)n) + (size_t)(total > 0 ? total : 0);
    std::vector<uint32_t> idx32(cap ? cap : 1);
    auto idx = torch::empty({ (int64_t)cap }, torch::kLong);
    auto val = torch::empty({ (int64_t)cap }, torch::kFloat32);
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    o.mode = exact ? ZEN_TOPK_EXACT : ZEN_TOPK_APPROX;
    o.threads = threads;
    size_t count = 0;
    zen_status st;
    {
        pybind11::gil_scoped_release nogil;
        st = zen_topk_compress_buffers(&b, (size_t)k, &o, idx32.data(), val.data_ptr<float>(), cap,
                                       &count);
        int64_t *ip = idx.data_ptr<int64_t>(); // torch's index type
        for (size_t i = 0; i < count; i++)
            ip[i] = idx32[i];
    }
    TORCH_CHECK(st == ZEN_OK, "zen_torch.topk_compress_bucket: zen_topk_compress_buffers failed: ",
                zen_status_name(st), " (", zen_strerror(st), ")",
                st == ZEN_EINVAL ? ": small ranges must be ascending, disjoint and non-empty, "
                                   "momentum in [0, 1) and 0 without a velocity"
                                 : "");
    return { idx.narrow(0, 0, (int64_t)count), val.narrow(0, 0, (int64_t)count) };
}

} // namespace

void zen_torch_register_compress(pybind11::module &m)
{
    m.def("topk_select", &topk_select, pybind11::arg("x"), pybind11::arg("k"),
          pybind11::arg("exact") = false, pybind11::arg("threads") = 1,
          "top-k magnitude selection of a 1-D contiguous CPU float32/bfloat16 tensor: (indices "
          "int64 ascending, values float32); exact=False: DGC threshold, count in [0.8k, 1.3k]; "
          "exact=True: exactly k, ties to the lower index. Zeros are never selected, NaN first.");
    m.def("topk_compress_bucket", &topk_compress_bucket, pybind11::arg("grad"),
          pybind11::arg("residual"), pybind11::arg("velocity"), pybind11::arg("momentum"),
          pybind11::arg("k"), pybind11::arg("small"), pybind11::arg("exact") = false,
          pybind11::arg("threads") = 1,
          "the top-k DDP hook's local step on one flat bucket, without the GIL: velocity = "
          "momentum * velocity + grad and residual += velocity (or residual += grad when velocity "
          "is None), select about k of the residual's largest magnitudes, add every element of "
          "the [start, end) int64 pairs in small, clear the sent entries of the residual (and "
          "the selected ones outside small of the velocity); returns (indices int64 ascending, "
          "values float32) to send");
}
