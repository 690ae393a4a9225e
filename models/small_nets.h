// Small reference networks used by the tests and `mnemo graph` (the config-driven ResNet and LSTM
// builders come with the models issue). Each returns the builder (graph + parameter specs) and
// the entries a training step needs.
#pragma once
#include "models/builder.h"

namespace mnemo {

struct Model {
  ModelBuilder builder;
  EntryRef loss;
  EntryRef logits;      // the last layer's output (per-step logits for the LSTM: the last step)
  std::string data = "data";
  std::string labels = "labels";
};

// data[N,D] -> fc(H) -> tanh -> fc(H) -> sigmoid -> fc(C) -> softmax CE(labels[N]).
Model build_mlp(int64_t n, int64_t d, int64_t h, int64_t c, DType dtype = DType::f32);

// data[N,3,S,S] -> conv3x3(C)-bn-relu -> residual block (conv-bn-relu-conv-bn, + skip, relu)
// -> max_pool 2 -> conv3x3 stride 2 (2C)-bn-relu -> avg_pool 2 -> global_avg_pool -> fc(classes) -> CE.
Model build_small_cnn(int64_t n, int64_t s, int64_t c, int64_t classes, DType dtype = DType::f32);

// data[T,N,D] -> `layers` LSTM layers of `hidden` units unrolled over T steps (weights shared
// across steps; gates from fully_connected, split, sigmoid, tanh, mul, add) -> per-step
// fc(classes) + softmax CE against labels[T,N]; loss = mean over steps (models/lstm.h).
Model build_lstm(int64_t t, int64_t n, int64_t d, int64_t hidden, int64_t layers, int64_t classes,
                 DType dtype = DType::f32);

}  // namespace mnemo
