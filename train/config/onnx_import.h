// ONNX import: an ONNX model (a classifier: one image or feature input, one [N, C] output) becomes
// a mnemo config of model.type graph with a softmax cross-entropy loss on its output, plus its
// weights when the file carries them (docs/FORMATS.md, "ONNX import"). `mnemo import MODEL.onnx -o
// CONFIG.yaml` writes both; `mnemo plan MODEL.onnx` plans the imported config directly.
//
// The file is read with Debian's libonnx (the ModelProto classes and ONNX's shape inference).
// Parameters come from initializers (their data becomes the weights) or, in structure-only
// exports (torch.onnx.export(..., export_params=False)), from the graph inputs after the first,
// which is the data. Names: an initializer "features.0.weight" is the mnemo parameter
// "features/0/weight"; other names are sanitised alike.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace mnemo {

struct OnnxImportOptions {
  int64_t batch = 0;  // 0: the model's own batch size (an error when the model leaves it open)
  int64_t steps = 100;  // train.steps of the written config
};

struct OnnxImport {
  std::string yaml;                                     // the config (model.type graph)
  std::vector<std::pair<std::string, Tensor>> weights;  // initializers with data, by parameter name
  std::vector<std::string> notes;                       // what the import changed, for the user
  int64_t nodes = 0, params = 0;                        // mnemo nodes and parameters written
};

// Throws mnemo::Error naming the file, and the node and operator where one is at fault.
OnnxImport import_onnx(const std::string& path, const OnnxImportOptions& options = {});

// Whether `path` names an ONNX file (by its extension), for commands that take either.
bool is_onnx_path(const std::string& path);

}  // namespace mnemo
