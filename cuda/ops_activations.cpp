// CUDA kernels of ops/activations.cpp: relu, sigmoid, tanh, clip and their backward ops (in place
// allowed: x -> y, dy -> dx).
#include "cuda/context.h"
#include "cuda/kernels/activations.h"
#include "ops/activations.h"

namespace mnemo::cuda {
namespace {

template <Activation A>
void forward(const KernelContext& c) {  // in: x  out: y
  activation_forward(context_of(c).stream, A, c.in[0].as<float>(), c.out[0].as<float>(), c.out[0].numel());
}

template <Activation A>
void backward(const KernelContext& c) {  // in: y, dy  out: dx
  activation_backward(context_of(c).stream, A, c.in[0].as<float>(), c.in[1].as<float>(), c.out[0].as<float>(),
                      c.out[0].numel());
}

void clip(const KernelContext& c) {  // in: x  out: y
  const ops::ClipParams& p = c.p<ops::ClipParams>();
  clip_forward(context_of(c).stream, c.in[0].as<float>(), c.out[0].as<float>(), c.out[0].numel(),
               static_cast<float>(p.lo), static_cast<float>(p.hi));
}

void clip_grad(const KernelContext& c) {  // in: y, dy  out: dx
  const ops::ClipParams& p = c.p<ops::ClipParams>();
  clip_backward(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<float>(), c.out[0].as<float>(),
                c.out[0].numel(), static_cast<float>(p.lo), static_cast<float>(p.hi));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(activations) {
  using namespace mnemo::cuda;
  table.add("relu", {forward<Activation::relu>});
  table.add("relu_grad", {backward<Activation::relu>});
  table.add("sigmoid", {forward<Activation::sigmoid>});
  table.add("sigmoid_grad", {backward<Activation::sigmoid>});
  table.add("tanh", {forward<Activation::tanh>});
  table.add("tanh_grad", {backward<Activation::tanh>});
  table.add("clip", {clip});
  table.add("clip_grad", {clip_grad});
}
