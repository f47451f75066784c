// zen_torch._C is assembled from several files: zen_torch.cpp (the process group) calls each
// file's register function from PYBIND11_MODULE, and the files that act on a zen group reach its
// communicator and worker through comm_of.
#pragma once

#include <memory>
#include <pybind11/pybind11.h>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <zen/sparse.h>
#include <zen/store.h>

#include "worker.hpp"

// tp.cpp: zen_torch._C.tp_* (the TPGroup / TPLinear handles); also calls register_vcoll.
void zen_torch_register_tp(pybind11::module &m);
// vcoll.cpp: all_gather_v / reduce_scatter_v.
void zen_torch_register_vcoll(pybind11::module &m);
// sparse_coo.cpp: sparse_allreduce_coo (the top-k hook's sparse allreduce, a Future).
void zen_torch_register_sparse_coo(pybind11::module &m);
// compress.cpp: topk_select (zen/compress.h).
void zen_torch_register_compress(pybind11::module &m);

namespace zen_torch
{
// The communicator and worker of a zen process group (defined in zen_torch.cpp); raises for a
// group of another backend.
std::shared_ptr<Comm> comm_of(const c10::intrusive_ptr<c10d::ProcessGroup> &pg);
// A c10d::Store as a zen_store (zen_torch.cpp), for zen_comm_create_with_store: the process
// group's rendezvous and TPGroup's. The store must outlive the rendezvous.
zen_store store_of(c10d::Store *store);
// A sparse scheme by name ("auto", "balanced", ...); raises naming the valid ones (zen_torch.cpp).
zen_sparse_scheme scheme_of(const std::string &name);
} // namespace zen_torch
