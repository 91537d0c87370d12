// Turns the runtime op enums into template arguments inside the CPU loops and the CUDA kernel
// launchers, so each op's math inlines into its own loop or kernel.
#pragma once

#include "kernels/elementwise_math.h"

namespace accel {

template <class F>
void with_op(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::add: return f.template operator()<BinaryOp::add>();
    case BinaryOp::sub: return f.template operator()<BinaryOp::sub>();
    case BinaryOp::mul: return f.template operator()<BinaryOp::mul>();
    case BinaryOp::div: return f.template operator()<BinaryOp::div>();
    case BinaryOp::pow: return f.template operator()<BinaryOp::pow>();
    case BinaryOp::maximum: return f.template operator()<BinaryOp::maximum>();
    case BinaryOp::minimum: return f.template operator()<BinaryOp::minimum>();
  }
}

template <class F>
void with_op(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::neg: return f.template operator()<UnaryOp::neg>();
    case UnaryOp::exp: return f.template operator()<UnaryOp::exp>();
    case UnaryOp::log: return f.template operator()<UnaryOp::log>();
    case UnaryOp::sqrt: return f.template operator()<UnaryOp::sqrt>();
    case UnaryOp::abs: return f.template operator()<UnaryOp::abs>();
    case UnaryOp::tanh: return f.template operator()<UnaryOp::tanh>();
    case UnaryOp::sigmoid: return f.template operator()<UnaryOp::sigmoid>();
    case UnaryOp::relu: return f.template operator()<UnaryOp::relu>();
    case UnaryOp::gelu: return f.template operator()<UnaryOp::gelu>();
  }
}

template <class F>
void with_op(CompareOp op, F&& f) {
  switch (op) {
    case CompareOp::eq: return f.template operator()<CompareOp::eq>();
    case CompareOp::ne: return f.template operator()<CompareOp::ne>();
    case CompareOp::lt: return f.template operator()<CompareOp::lt>();
    case CompareOp::le: return f.template operator()<CompareOp::le>();
    case CompareOp::gt: return f.template operator()<CompareOp::gt>();
    case CompareOp::ge: return f.template operator()<CompareOp::ge>();
  }
}

}  // namespace accel
