// Tensor views: a pointer, a dtype and a shape (row-major, contiguous). Views never own memory;
// the executor's arena and the parameter store own it. Tensor is an owning buffer for tests,
// parameters and data.
#pragma once
#include <cstring>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace mnemo {

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  int64_t numel() const { return mnemo::numel(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool operator==(const TensorType&) const = default;
  std::string str() const;  // "float32[64,3,32,32]"
};

struct TensorView {
  void* data = nullptr;
  TensorType type;

  const Shape& shape() const { return type.shape; }
  DType dtype() const { return type.dtype; }
  int64_t numel() const { return type.numel(); }
  int64_t dim(int i) const { return type.shape.at(i < 0 ? type.shape.size() + i : i); }
  int rank() const { return static_cast<int>(type.shape.size()); }
  size_t bytes() const { return type.bytes(); }

  template <class T>
  T* as() const {
    MNEMO_CHECK(dtype_of<T>() == type.dtype) << "tensor is " << dtype_name(type.dtype) << ", read as "
                                             << dtype_name(dtype_of<T>());
    return static_cast<T*>(data);
  }
};

// An owning, 256-byte aligned buffer with a type (the arena's alignment: a host run binds the
// data loader's batch tensors as the step's inputs). Used for parameters, data batches and tests.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(TensorType type);
  Tensor(DType dtype, Shape shape) : Tensor(TensorType{dtype, std::move(shape)}) {}

  TensorView view() const { return TensorView{data_.get(), type_}; }
  const TensorType& type() const { return type_; }
  const Shape& shape() const { return type_.shape; }
  DType dtype() const { return type_.dtype; }
  int64_t numel() const { return type_.numel(); }
  size_t bytes() const { return type_.bytes(); }
  void* data() const { return data_.get(); }
  template <class T>
  T* as() const { return view().as<T>(); }
  void zero() { if (data_) std::memset(data_.get(), 0, bytes()); }

 private:
  struct Free { void operator()(void* p) const; };
  TensorType type_;
  std::unique_ptr<void, Free> data_;
};

}  // namespace mnemo
