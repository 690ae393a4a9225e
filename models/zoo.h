// Image classifiers of torchvision's model zoo, built as mnemo graphs with PyTorch's layouts and
// parameter shapes (docs/MODELS.md): AlexNet, VGG-11/13/16/19 (with or without batch norm),
// DenseNet-121/161/169/201, Inception-v3 and MobileNet-v2; and DARTS's CIFAR network from a
// genotype (names as its released model.py, without the auxiliary head and drop path).
//
// Parameter names follow torchvision's module paths with '/' for '.', so a torchvision state dict
// maps over by renaming: "features.0.weight" is "features/0/weight"; a batch norm's weight and
// bias are ".../gamma" and ".../beta" (running_mean / running_var keep their names;
// num_batches_tracked has no counterpart). Batch norms train in training mode, convolutions and
// linear layers use PyTorch's shapes ([K, C/G, R, S], [out, in]).
//
// Dropout layers are torchvision's (p 0.5; 0.2 in MobileNet-v2), in training graphs only; their
// masks come from mnemo's counter-based generator (ops/dropout.cpp), not PyTorch's. Differences
// from torchvision: adaptive average pools become a plain average pool when the feature map is a
// whole multiple of the target size (an identity at the standard input size) and an error
// otherwise. Inception-v3's auxiliary head is optional
// (model.aux_logits): with it the loss is main + 0.4 * aux, as torchvision's reference training.
#pragma once
#include <string>
#include <vector>

#include "models/resnet.h"

namespace mnemo {

// A DARTS genotype (Liu et al. 2019): per intermediate node of a cell, two (operation, input
// state) pairs; states 0 and 1 are the cell's inputs, state 2+i intermediate node i; the cell's
// output concatenates the states in *_concat. Operations: sep_conv_3x3, sep_conv_5x5,
// sep_conv_7x7, dil_conv_3x3, dil_conv_5x5, conv_7x1_1x7, max_pool_3x3, avg_pool_3x3, skip_connect.
struct Genotype {
  std::vector<std::pair<std::string, int>> normal, reduce;
  std::vector<int> normal_concat, reduce_concat;
};
// DARTS_V2, the paper's CIFAR-10 cell (its released genotypes.py).
Genotype darts_v2_genotype();

struct ZooConfig {
  std::string arch;        // alexnet | vgg | densenet | inception_v3 | mobilenet_v2 | darts
  int depth = 0;           // vgg: 11, 13, 16, 19; densenet: 121, 161, 169, 201 (0: 16 / 121)
  // densenet: torchvision's DenseNet(growth_rate, block_config, num_init_features, bn_size); 0 /
  // empty: the depth's standard values (bn_size 4)
  std::vector<int> blocks;
  int64_t growth = 0, init_features = 0, bn_size = 0;
  bool batch_norm = false; // vgg: vgg*_bn
  bool aux_logits = false; // inception_v3: the auxiliary classifier on Mixed_6e
  double width_mult = 1.0; // mobilenet_v2
  // darts: DARTS's CIFAR network (NetworkCIFAR): a 3x3 stem of 3C channels, `layers` cells with
  // reduction cells at layers/3 and 2*layers/3 (channels doubled), global average pool, linear
  int64_t init_channels = 36;
  int layers = 20;
  Genotype genotype = darts_v2_genotype();
  int64_t batch = 1, channels = 3, height = 224, width = 224, classes = 1000;
  DType dtype = DType::f32;
  bool training = true;
};

// Throws mnemo::Error naming the field when the configuration or the input size is impossible.
BuiltModel build_zoo_model(const ZooConfig& c);

// A one-block Inception network (the golden test against PyTorch's Inception-v3 modules): a stem
// (torchvision's BasicConv2d: 3x3 conv to `width` channels, batch norm, ReLU) named "stem", one
// Inception-v3 block of `kind` 'A', 'B' or 'C' named "Mixed" (A's pool features and C's 7x7
// channels are `c`), global average pool, linear layer "fc"; input [batch, 3, size, size].
BuiltModel build_inception_block_net(char kind, int64_t batch, int64_t size, int64_t width, int64_t c, int64_t classes);

// The architectures build_zoo_model knows (for config errors and docs).
const char* zoo_architectures();
bool is_zoo_model(const std::string& type);

}  // namespace mnemo
