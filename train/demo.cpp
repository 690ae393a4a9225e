// The demo job: build the small conv net, its training graph (plain backprop) and the trivial
// memory plan, then run SGD steps on synthetic data, printing the loss and the memory figures.
#include "train/demo.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "autograd/gradient.h"
#include "models/small_nets.h"
#include "train/param_store.h"
#include "train/sgd.h"
#include "train/synthetic.h"

namespace mnemo {

int run_demo(const DemoOptions& opt) {
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  const int64_t classes = 4, size = 16, channels = 8;
  Model m = build_small_cnn(opt.batch, size, channels, classes);
  const Graph& fwd = m.builder.graph();
  TrainingGraph tg = build_training_graph(fwd, m.loss, {});
  MemoryPlan plan = plan_separate(tg.graph);
  ParamStore params(fwd, m.builder.params(), opt.seed);
  Sgd sgd(params, {opt.lr, 0.9, 1e-4});
  SyntheticImages data({3, size, size}, classes, opt.seed);
  Tensor x(DType::f32, {opt.batch, 3, size, size}), y(DType::i32, {opt.batch});

  Executor ex(tg.graph, plan);
  params.bind(ex);
  ex.bind(m.data, x.view());
  ex.bind(m.labels, y.view());
  std::printf("mnemo demo: small conv net (%zu forward nodes, %zu training nodes, %zu parameters tensors), batch %d, %d threads\n",
              fwd.size(), tg.graph.size(), params.specs().size(), opt.batch, omp_get_max_threads());
  std::printf("memory (mode none): arena %.2f MiB planned, %.2f MiB allocated; params %.2f MiB; optimizer %.2f MiB\n",
              plan.arena_bytes / 1048576.0, ex.allocated_bytes() / 1048576.0, params.bytes() / 1048576.0,
              sgd.state_bytes() / 1048576.0);
  double first = 0, last = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < opt.steps; ++step) {
    data.batch(step, x, y);
    ex.run();
    const double loss = ex.entry(tg.loss).as<float>()[0];
    if (!std::isfinite(loss)) {
      std::fprintf(stderr, "mnemo demo: loss is %f at step %d: stopping\n", loss, step + 1);
      return 1;
    }
    std::vector<TensorView> grads;
    for (const ParamGrad& pg : tg.grads) grads.push_back(ex.entry(pg.grad));
    sgd.step(params, grads, opt.lr);
    if (step == 0) first = loss;
    last = loss;
    std::printf("step %3d  loss %.4f\n", step + 1, loss);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("done: loss %.4f -> %.4f in %d steps, %.1f ms/step\n", first, last, opt.steps, 1000 * secs / opt.steps);
  return 0;
}

}  // namespace mnemo
