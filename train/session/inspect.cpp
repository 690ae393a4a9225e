// small_model_graph: see inspect.h.
#include "train/session/inspect.h"

#include "autograd/gradient.h"
#include "models/small_nets.h"

namespace mnemo {

Graph small_model_graph(const std::string& model, int mirror) {
  Model m = model == "mlp"   ? build_mlp(8, 16, 32, 4)
            : model == "cnn" ? build_small_cnn(8, 16, 8, 4)
            : model == "lstm" ? build_lstm(3, 8, 16, 32, 1, 4)
                              : throw Error("unknown model '" + model + "' (expected mlp, cnn or lstm)");
  Graph fwd = m.builder.graph();
  if (mirror < 0) return fwd;
  return build_training_graph(fwd, m.loss, MirrorPlan(fwd.size(), mirror)).graph;
}

}  // namespace mnemo
