// Parameters of lstm_cell_grad (ops/lstm_cell.cpp), shared with its CUDA kernel
// (cuda/ops_lstm_cell.cpp).
#pragma once

namespace mnemo::ops {

// Which optional inputs lstm_cell_grad has, after (act, c), in this order: dh, dc, c_prev.
struct LstmCellGradParams {
  bool has_dh = true, has_dc = true, has_c_prev = true;
};

}  // namespace mnemo::ops
