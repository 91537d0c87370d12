// The precision settings users choose, as typed values with one name table each: mixed_precision
// (no, fp16, bf16, fp8) and grad_comm_dtype (f32, compute, f16, bf16).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/named_values.h"

namespace accel {

// The values are fixed and only appended: they are written to files and sent between ranks.
enum class MixedPrecision : uint8_t { no = 0, fp16 = 1, bf16 = 2, fp8 = 3 };

inline constexpr std::array<NamedValue<MixedPrecision>, 4> kMixedPrecisionNames{{
    {MixedPrecision::no, "no"},
    {MixedPrecision::fp16, "fp16"},
    {MixedPrecision::bf16, "bf16"},
    {MixedPrecision::fp8, "fp8"},
}};

// The dtype gradients are all-reduced in: f32, the compute dtype, or f16/bf16 (which must then be the
// compute dtype).
enum class GradCommDType : uint8_t { f32 = 0, compute = 1, f16 = 2, bf16 = 3 };

inline constexpr std::array<NamedValue<GradCommDType>, 4> kGradCommDTypeNames{{
    {GradCommDType::f32, "f32"},
    {GradCommDType::compute, "compute"},
    {GradCommDType::f16, "f16"},
    {GradCommDType::bf16, "bf16"},
}};

constexpr const char* name_of(MixedPrecision value) { return name_in(kMixedPrecisionNames, value); }
constexpr const char* name_of(GradCommDType value) { return name_in(kGradCommDTypeNames, value); }

}  // namespace accel
