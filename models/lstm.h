// Multi-layer LSTM unrolled over T steps from fine-grained ops, weights shared across steps
// (Chen et al. Sec. 5.3). Per layer l: wx[4H, D_l], wh[4H, H], bias[4H]; per step
//   gates = fc(x_t, wx, bias) + fc(h_{t-1}, wh)      (t = 0: h_{-1} = c_{-1} = 0, so no wh term)
//   i, f, g, o = split(gates, 4);  i, f, o = sigmoid;  g = tanh
//   c_t = f * c_{t-1} + i * g;  h_t = o * tanh(c_t)
// Gate order i, f, g, o and layouts as PyTorch's LSTMCell (bias = b_ih + b_hh). Output: per-step
// classifier fc(h_t) with softmax cross-entropy against labels[T, N], loss = mean over steps; or
// one classifier on the last step's h against labels[N].
// fused_cell: the split, activations, muls and adds of a step (and the gates' sum) as one
// lstm_cell node (ops/lstm_cell.cpp) with its own backward: fewer passes over memory, fewer nodes
// for the planners, the same values up to float rounding.
#pragma once
#include "models/resnet.h"

namespace mnemo {

struct LstmConfig {
  int64_t steps = 64, batch = 64, input = 50, hidden = 1024, layers = 4, classes = 5000;
  bool per_step = true;  // false: one classifier at the end
  DType dtype = DType::f32;
  bool fused_cell = false;  // true: one lstm_cell node per step (model.cell: fused)
  // true (model.head: fused): in training graphs, the classifier and the loss of every step as one
  // linear_cross_entropy node over the steps' outputs stacked (its gradient made in the forward
  // pass: no logits kept); evaluation graphs (training false) keep the per-step classifiers, whose
  // logits they score.
  bool fused_head = false;
  bool training = true;
};

BuiltModel build_lstm_model(const LstmConfig& c);

}  // namespace mnemo
