// zen_torch._C.topk_select: libzen's top-k selection (include/zen/compress.h) on a torch tensor,
// for DGC-style gradient compression from Python (the DDP comm hook builds on it).
//
// The tensor is read in place (no copy): 1-D, contiguous, on the CPU, float32 or bfloat16. The
// selection runs without the GIL, so other Python threads (DDP's autograd engine) keep going; the
// input tensor is kept alive by the caller's reference for the duration of the call.
#include <cstdint>
#include <string>
#include <torch/extension.h>
#include <tuple>

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

} // namespace

void zen_torch_register_compress(pybind11::module &m)
{
    m.def("topk_select", &topk_select, pybind11::arg("x"), pybind11::arg("k"),
          pybind11::arg("exact") = false, pybind11::arg("threads") = 1,
          "top-k magnitude selection of a 1-D contiguous CPU float32/bfloat16 tensor: (indices "
          "int64 ascending, values float32); exact=False: DGC threshold, count in [0.8k, 1.3k]; "
          "exact=True: exactly k, ties to the lower index. Zeros are never selected, NaN first.");
}
