// zen_torch.tp's C++ half (tp.cpp) and the v-collectives of zen groups (vcoll.cpp).
#pragma once

#include <memory>
#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "worker.hpp"

// Registers zen_torch._C.tp_* (the TPGroup / TPLinear handles) and all_gather_v /
// reduce_scatter_v.
void zen_torch_register_tp(pybind11::module &m);
// all_gather_v / reduce_scatter_v (vcoll.cpp); called by zen_torch_register_tp.
void zen_torch_register_vcoll(pybind11::module &m);

namespace zen_torch
{
// The communicator and worker of a zen process group (defined in zen_torch.cpp); raises for a
// group of another backend.
std::shared_ptr<Comm> comm_of(const c10::intrusive_ptr<c10d::ProcessGroup> &pg);
} // namespace zen_torch
