// FP8 delayed scaling as Transformer Engine defines it: the recipe's options (FP8RecipeKwargs in
// Accelerate), and the amax history and scale of one FP8 tensor role (a Linear's input, weight or
// output gradient), updated once per optimizer step.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/named_values.h"

namespace accel::fp8 {

// HYBRID: e4m3 forward (inputs, weights), e5m2 for gradients; E4M3: e4m3 everywhere. Values are fixed.
enum class Format : uint8_t { hybrid = 0, e4m3 = 1 };
inline constexpr std::array<NamedValue<Format>, 2> kFormatNames{{{Format::hybrid, "HYBRID"}, {Format::e4m3, "E4M3"}}};

// The amax a scale is computed from: the max over the whole history, or the most recent step's.
enum class AmaxAlgorithm : uint8_t { max = 0, most_recent = 1 };
inline constexpr std::array<NamedValue<AmaxAlgorithm>, 2> kAmaxAlgorithmNames{
    {{AmaxAlgorithm::max, "max"}, {AmaxAlgorithm::most_recent, "most_recent"}}};

// The tensor roles of one FP8 Linear, in the order their states are stored and reduced.
enum class Role : uint8_t { input = 0, weight = 1, grad_output = 2 };
inline constexpr int kRoleCount = 3;

// The recipe; the defaults are Transformer Engine's DelayedScaling ones.
struct RecipeOptions {
  int margin = 0;                       // scale = fp8_max / amax / 2^margin
  int64_t amax_history_len = 1024;      // steps of amax kept per role
  AmaxAlgorithm amax_compute_algo = AmaxAlgorithm::max;
  Format format = Format::hybrid;
  bool include_first_last = false;      // false: a model's first and last Linear stay in bf16 (as Accelerate)
  // On a CUDA device older than sm_89 (no FP8 GEMMs): emulate FP8 there instead of refusing. Not part
  // of the numerics: the CPU path is the emulation itself.
  bool allow_emulation = false;

  // Throws accel::Error naming the field for a history length below 1 or a negative margin.
  void validate() const;
  // "HYBRID, margin 0, amax max over 1024 steps, first/last Linear in bf16": the settings line's words.
  std::string describe() const;
  DType dtype_of(Role role) const;  // e5m2 for grad_output under HYBRID, else e4m3
};

// The largest finite value of an fp8 dtype (448 or 57344).
float fp8_max(DType dtype);

// The amax as the history stores it: |x| max with NaN counted as +inf, since a max reduction (fmaxf,
// MPI_MAX) may drop a NaN and the step must see it as an overflow.
inline float amax_entry(float amax) { return amax != amax ? __builtin_inff() : amax; }

// One role's scaling state. history[0] collects the current step's amax (the max of every record);
// update() rolls it in as Transformer Engine's amax_and_scale_update does, then sets the new scale.
struct ScalingState {
  std::vector<float> history;  // length amax_history_len, history[0] the step in progress
  float scale = 1.0f;          // multiply by it to quantise; divide to dequantise

  explicit ScalingState(int64_t history_len = 1024);
  void record(float amax);  // history[0] = max(history[0], amax_entry(amax))
  // The recipe's step: amax from the history (all of it, or history[0]), the history rolled one
  // place towards the front with the current step moving to the back and a fresh 0 in front, and
  // scale = fp8_max * 2^-margin / amax where amax is finite and positive (else the old scale stays).
  void update(const RecipeOptions& options, float fp8_max);
};

}  // namespace accel::fp8
