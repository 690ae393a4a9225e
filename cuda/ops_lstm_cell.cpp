// CUDA kernels of ops/lstm_cell.cpp: the fused LSTM cell and its backward (in place allowed:
// gates -> act, act -> dgates).
#include "cuda/context.h"
#include "cuda/kernels/lstm_cell.h"
#include "ops/lstm_cell.h"

namespace mnemo::cuda {
namespace {

void cell(const KernelContext& c) {  // in: gates [, c_prev [, gates_h]]  out: h, c, act
  lstm_cell_forward(context_of(c).stream, c.in[0].as<float>(), c.in.size() == 3 ? c.in[2].as<float>() : nullptr,
                    c.in.size() >= 2 ? c.in[1].as<float>() : nullptr, c.out[0].as<float>(), c.out[1].as<float>(),
                    c.out[2].as<float>(), c.out[0].dim(0), c.out[0].dim(1));
}

void cell_grad(const KernelContext& c) {  // in: act, c [, dh] [, dc] [, c_prev]  out: dgates [, dc_prev]
  const ops::LstmCellGradParams& p = c.p<ops::LstmCellGradParams>();
  size_t next = 2;
  const float* dh = p.has_dh ? c.in[next++].as<float>() : nullptr;
  const float* dc = p.has_dc ? c.in[next++].as<float>() : nullptr;
  const float* cp = p.has_c_prev ? c.in[next++].as<float>() : nullptr;
  lstm_cell_backward(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<float>(), dh, dc, cp, c.out[0].as<float>(),
                     p.has_c_prev ? c.out[1].as<float>() : nullptr, c.in[1].dim(0), c.in[1].dim(1));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(lstm_cell) {
  using namespace mnemo::cuda;
  table.add("lstm_cell", {cell});
  table.add("lstm_cell_grad", {cell_grad});
}
