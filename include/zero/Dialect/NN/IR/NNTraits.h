//===- NNTraits.h - Roles of compute ops ------------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The traits of NNInterfaces.td: properties without methods, asked with
// `op->hasTrait<nn::OpTrait::...>()`.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_NN_IR_NNTRAITS_H
#define ZERO_DIALECT_NN_IR_NNTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::nn::OpTrait {

template <typename ConcreteType>
class TensorView : public ::mlir::OpTrait::TraitBase<ConcreteType, TensorView> {
};

template <typename ConcreteType>
class MatrixProduct
    : public ::mlir::OpTrait::TraitBase<ConcreteType, MatrixProduct> {};

template <typename ConcreteType>
class GroupedMatrixProducts
    : public ::mlir::OpTrait::TraitBase<ConcreteType, GroupedMatrixProducts> {};

template <typename ConcreteType>
class Attention : public ::mlir::OpTrait::TraitBase<ConcreteType, Attention> {};

template <typename ConcreteType>
class LossKernel : public ::mlir::OpTrait::TraitBase<ConcreteType, LossKernel> {
};

template <typename ConcreteType>
class KeepsLeadingRows
    : public ::mlir::OpTrait::TraitBase<ConcreteType, KeepsLeadingRows> {};

template <typename ConcreteType>
class LinearInOperands
    : public ::mlir::OpTrait::TraitBase<ConcreteType, LinearInOperands> {};

} // namespace mlir::nn::OpTrait

#endif // ZERO_DIALECT_NN_IR_NNTRAITS_H
