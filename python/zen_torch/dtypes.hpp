// How torch dtypes travel through libzen, which knows float32, float64, bfloat16, int32 and int64
// (include/zen/zen.h) and has no byte or half type.
//
// Ops that only move data (broadcast, all_gather, gather, scatter, all_to_all) take every dtype
// as raw bytes: a dtype zen has goes as itself (ranks that disagree on it are caught by zen's
// argument agreement); any other goes as its bytes in int32 words when the unit every rank agrees
// on (the tensor, an all_to_all row) is a whole number of words, else each byte widened to one
// int32 (4x the bytes on the wire: odd-sized uint8/bool/int8/int16/fp16 tensors, e.g. pickles of
// all_gather_object, which are small). send/recv move bytes directly (zen's p2p is untyped).
//
// Reducing ops (all_reduce, reduce, reduce_scatter, allreduce_coalesced) reduce fp16 in float32
// and bool/uint8/int8/int16 in int32, converting back after (the shim converts; libzen has no
// fp16 reduce): uint8/int8/int16 sums and products wrap as in torch and gloo (2^8 divides 2^32),
// bool SUM and MAX are OR, PRODUCT and MIN are AND. fp16 sums are rounded once, at the end, so
// they are at least as accurate as gloo's fp16 accumulation.
#pragma once

#include <torch/extension.h>

#include <zen/zen.h>

namespace zen_torch
{

// zen's own dtype for t, if it has one.
bool zen_dtype_of(at::ScalarType t, zen_dtype *out);

// A data-moving op's representation of one dtype.
struct Wire {
    enum Kind {
        NATIVE,
        WORDS,
        WIDE
    } kind;

    zen_dtype d;       // what zen is told
    size_t esize;      // bytes per torch element
    at::ScalarType st; // the torch dtype
    // zen elements for n torch elements
    size_t count(size_t n) const;
};

// unit: the number of elements every rank agrees is indivisible (a whole tensor, a row).
Wire wire_of(const at::Tensor &t, int64_t unit);
// A contiguous buffer zen can read/write for t (t's own memory when possible).
at::Tensor to_wire(const at::Tensor &t, const Wire &w);
// A wire buffer read back as a flat tensor of w.st (shares memory unless widened).
at::Tensor wire_as_torch(const at::Tensor &data, const Wire &w);
// Copy a wire buffer back into t unless it already is t's memory.
void from_wire(at::Tensor &t, const at::Tensor &data, const Wire &w);

// A reducing op's representation: zen dtype, and the torch dtype it is computed in.
struct Reduced {
    zen_dtype d;
    at::ScalarType compute;
};

// false when the dtype has no reduction here (complex, quantized).
bool reduced_of(at::ScalarType t, Reduced *out);
// A contiguous buffer of t in r.compute (t itself when it already is one).
at::Tensor to_compute(const at::Tensor &t, const Reduced &r);
// Copy (converting) the reduced buffer back into t unless it is t's memory.
void from_compute(at::Tensor &t, const at::Tensor &data);

} // namespace zen_torch
