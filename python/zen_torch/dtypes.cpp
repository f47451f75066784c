// torch dtypes on libzen (dtypes.hpp says what travels how and why).
#include "dtypes.hpp"

namespace zen_torch
{

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

size_t Wire::count(size_t n) const
{
    switch (kind) {
    case NATIVE:
        return n;
    case WORDS:
        return n * esize / 4;
    default:
        return n * esize;
    }
}

Wire wire_of(const at::Tensor &t, int64_t unit)
{
    Wire w;
    w.st = t.scalar_type();
    w.esize = (size_t)t.element_size();
    if (zen_dtype_of(w.st, &w.d)) {
        w.kind = Wire::NATIVE;
    } else {
        w.d = ZEN_I32;
        w.kind = ((size_t)unit * w.esize) % 4 == 0 ? Wire::WORDS : Wire::WIDE;
    }
    return w;
}

namespace
{

bool same_memory(const at::Tensor &a, const at::Tensor &b)
{
    return a.is_contiguous() && a.data_ptr() == b.data_ptr() && a.nbytes() == b.nbytes();
}

} // namespace

at::Tensor to_wire(const at::Tensor &t, const Wire &w)
{
    at::Tensor c = t.is_contiguous() ? t : t.contiguous();
    if (w.kind == Wire::NATIVE)
        return c.reshape({ -1 });
    at::Tensor bytes = c.reshape({ -1 }).view(at::kByte);
    if (w.kind == Wire::WIDE)
        return bytes.to(at::kInt);
    if ((c.storage_offset() * (int64_t)w.esize) % 4 != 0) // a view at an odd byte offset
        bytes = bytes.clone();
    return bytes.view(at::kInt);
}

at::Tensor wire_as_torch(const at::Tensor &data, const Wire &w)
{
    switch (w.kind) {
    case Wire::NATIVE:
        return data;
    case Wire::WORDS:
        return data.view(at::kByte).view(w.st);
    default:
        return data.to(at::kByte).view(w.st);
    }
}

void from_wire(at::Tensor &t, const at::Tensor &data, const Wire &w)
{
    at::Tensor v = wire_as_torch(data, w);
    if (!same_memory(t, v))
        t.copy_(v.view(t.sizes()));
}

bool reduced_of(at::ScalarType t, Reduced *out)
{
    if (zen_dtype_of(t, &out->d)) {
        out->compute = t;
        return true;
    }
    switch (t) {
    case at::kHalf:
        *out = { ZEN_F32, at::kFloat };
        return true;
    case at::kBool:
    case at::kByte:
    case at::kChar:
    case at::kShort:
        *out = { ZEN_I32, at::kInt };
        return true;
    default:
        return false;
    }
}

at::Tensor to_compute(const at::Tensor &t, const Reduced &r)
{
    at::Tensor c = t.scalar_type() == r.compute ? t : t.to(r.compute);
    return (c.is_contiguous() ? c : c.contiguous()).reshape({ -1 });
}

void from_compute(at::Tensor &t, const at::Tensor &data)
{
    if (!same_memory(t, data))
        t.copy_(data.view(t.sizes()));
}

} // namespace zen_torch
