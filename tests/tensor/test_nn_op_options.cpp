// The options of the raw nn ops that real models use: embedding's padding_idx, and cross_entropy's
// per-class weight and label smoothing, against PyTorch's numbers.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/cross_entropy_by_ops.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"

using namespace accel;
using Vec = std::vector<double>;

namespace {

Vec values(const Tensor& t) { return nograd::to_dtype(t, DType::f64).to_vector<double>(); }

void check_near(const Vec& got, const Vec& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])),
                  "element " << i << ": " << got[i] << " vs " << want[i]);
}

// F.cross_entropy(logits, target, weight=w, reduction=r, label_smoothing=eps) and its grad w.r.t.
// logits, computed with PyTorch 2.x in f64 (/root/torchvenv), for the inputs below. The upstream grad
// is [0.5, -1, 2, 1.5] for reduction none and 1 otherwise.
struct TorchCase {
  bool weighted;
  double label_smoothing;
  Reduction reduction;
  Vec loss, grad;
};

const Vec kLogits{1.0, -0.5, 2.0, 0.25, 0.75, -1.0, 3.0, 0.0, -2.0, -1.5, 0.5, 1.25};  // [4, 3]
const std::vector<int64_t> kTarget{2, 0, -100, 1};
const Vec kWeight{0.5, 2.0, 1.5};

const std::vector<TorchCase> kTorch = {
    {false, 0.0, Reduction::none,
     {0.37153903185268283, 1.0767844750362334,
      0.0, 1.1793732921052462},
     {0.12685809081751262, 0.02830586612023564, -0.1551639569377482,
      0.6593107389404, -0.5617016314080712, -0.09760910753232893,
      0.0, 0.0, 0.0,
      0.06241758802185193, -1.0387929405465943, 0.9763753525247426}},
    {false, 0.0, Reduction::mean,
     {0.8758989329980542},
     {0.0845720605450084, 0.018870577413490425, -0.1034426379584988,
      -0.2197702463134667, 0.1872338771360237, 0.03253636917744297,
      0.0, 0.0, 0.0,
      0.013870575115967095, -0.23084287567702094, 0.2169723005610539}},
    {false, 0.0, Reduction::sum,
     {2.6276967989941626},
     {0.25371618163502524, 0.05661173224047128, -0.3103279138754964,
      -0.6593107389404, 0.5617016314080712, 0.09760910753232893,
      0.0, 0.0, 0.0,
      0.041611725347901286, -0.6925286270310629, 0.6509169016831617}},
    {false, 0.1, Reduction::none,
     {0.4882056985193495, 1.1017844750362333,
      0.0, 1.221039958771913},
     {0.11019142415084596, 0.011639199453568973, -0.12183062360441488,
      0.5926440722737334, -0.5283682980747378, -0.0642757741989956,
      0.0, 0.0, 0.0,
      0.012417588021851935, -0.9387929405465943, 0.9263753525247428}},
    {false, 0.1, Reduction::mean,
     {0.9370100441091653},
     {0.07346094943389729, 0.007759466302379314, -0.0812204157362766,
      -0.19754802409124447, 0.17612276602491264, 0.02142525806633187,
      0.0, 0.0, 0.0,
      0.0027594640048559855, -0.20862065345479874, 0.20586118944994283}},
    {false, 0.1, Reduction::sum,
     {2.8110301323274958},
     {0.2203828483016919, 0.023278398907137947, -0.24366124720882976,
      -0.5926440722737334, 0.5283682980747378, 0.0642757741989956,
      0.0, 0.0, 0.0,
      0.008278392014567953, -0.6258619603643962, 0.6175835683498284}},
    {false, 1.0, Reduction::none,
     {1.5382056985193495, 1.3267844750362334,
      0.0, 1.596039958771913},
     {-0.03980857584915404, -0.13836080054643102, 0.17816937639558514,
      -0.007355927726266587, -0.22836829807473785, 0.23572422580100438,
      0.0, 0.0, 0.0,
      -0.43758241197814807, -0.03879294054659432, 0.4763753525247426}},
    {false, 1.0, Reduction::mean,
     {1.4870100441091654},
     {-0.026539050566102697, -0.09224053369762068, 0.11877958426372341,
      0.0024519759087555226, 0.07612276602491261, -0.07857474193366813,
      0.0, 0.0, 0.0,
      -0.09724053599514401, -0.008620653454798738, 0.1058611894499428}},
    {false, 1.0, Reduction::sum,
     {4.461030132327496},
     {-0.07961715169830808, -0.27672160109286204, 0.3563387527911703,
      0.007355927726266587, 0.22836829807473785, -0.23572422580100438,
      0.0, 0.0, 0.0,
      -0.291721607985432, -0.025861960364396197, 0.3175835683498284}},
    {true, 0.0, Reduction::none,
     {0.5573085477790243, 0.5383922375181167,
      0.0, 2.3587465842104924},
     {0.19028713622626892, 0.04245879918035346, -0.2327459354066223,
      0.3296553694702, -0.2808508157040356, -0.048804553766164466,
      0.0, 0.0, 0.0,
      0.12483517604370387, -2.0775858810931886, 1.9527507050494852}},
    {true, 0.0, Reduction::mean,
     {0.8636118423769084},
     {0.09514356811313446, 0.02122939959017673, -0.11637296770331115,
      -0.08241384236755, 0.0702127039260089, 0.012201138441541116,
      0.0, 0.0, 0.0,
      0.020805862673950643, -0.34626431351553144, 0.32545845084158087}},
    {true, 0.0, Reduction::sum,
     {3.4544473695076334},
     {0.38057427245253783, 0.08491759836070692, -0.4654918708132446,
      -0.3296553694702, 0.2808508157040356, 0.048804553766164466,
      0.0, 0.0, 0.0,
      0.08322345069580257, -1.3850572540621258, 1.3018338033663235}},
    {true, 0.1, Reduction::none,
     {0.734449563914813, 0.6572909437711362,
      0.0, 2.275955031403476},
     {0.1798395013793104, 0.008653701411682868, -0.18849320279099321,
      0.26793126438190007, -0.2609926183213749, -0.00693864606052521,
      0.0, 0.0, 0.0,
      0.09567400350891374, -1.9083330183900826, 1.8126590148811692}},
    {true, 0.1, Reduction::mean,
     {0.9169238847723563},
     {0.0899197506896552, 0.004326850705841434, -0.09424660139549661,
      -0.06698281609547502, 0.06524815458034372, 0.0017346615151313026,
      0.0, 0.0, 0.0,
      0.01594566725148562, -0.31805550306501373, 0.3021098358135282}},
    {true, 0.1, Reduction::sum,
     {3.6676955390894252},
     {0.3596790027586208, 0.017307402823365736, -0.37698640558198643,
      -0.26793126438190007, 0.2609926183213749, 0.00693864606052521,
      0.0, 0.0, 0.0,
      0.06378266900594248, -1.272222012260055, 1.2084393432541127}},
    {true, 1.0, Reduction::none,
     {2.3287187091369104, 1.727379300048311,
      0.0, 1.5308310561403282},
     {0.0858107877566835, -0.29559217850635244, 0.20978139074966903,
      -0.28758568141279983, -0.08226884187742822, 0.3698545232902281,
      0.0, 0.0, 0.0,
      -0.16677654930419744, -0.38505725406212576, 0.5518338033663235}},
    {true, 1.0, Reduction::mean,
     {1.3967322663313875},
     {0.04290539387834175, -0.14779608925317622, 0.10489069537483452,
      0.07189642035319996, 0.020567210469357056, -0.09246363082255703,
      0.0, 0.0, 0.0,
      -0.02779609155069957, -0.06417620901035428, 0.0919723005610539}},
    {true, 1.0, Reduction::sum,
     {5.58692906532555},
     {0.171621575513367, -0.5911843570127049, 0.41956278149933807,
      0.28758568141279983, 0.08226884187742822, -0.3698545232902281,
      0.0, 0.0, 0.0,
      -0.11118436620279828, -0.25670483604141714, 0.3678892022442156}},
};

Tensor torch_logits(DType dtype = DType::f64) { return nograd::to_dtype(from_vector(kLogits, {4, 3}), dtype); }

CrossEntropyOptions options_of(const TorchCase& c, DType weight_dtype = DType::f64) {
  return {.weight = c.weighted ? nograd::to_dtype(from_vector(kWeight), weight_dtype) : Tensor(),
          .reduction = c.reduction,
          .label_smoothing = c.label_smoothing};
}

Tensor upstream(Reduction reduction, DType dtype) {
  return reduction == Reduction::none ? nograd::to_dtype(from_vector<double>({0.5, -1.0, 2.0, 1.5}), dtype)
                                      : scalar_tensor(1.0, dtype);
}

}  // namespace

TEST_CASE("cross_entropy with weight and label_smoothing matches PyTorch for each reduction, in f64 and f32") {
  const Tensor target = from_vector(kTarget);
  for (const TorchCase& c : kTorch) {
    INFO("weighted ", c.weighted, " label_smoothing ", c.label_smoothing, " reduction ", static_cast<int>(c.reduction));
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO(dtype_name(dtype));
      const double tol = dtype == DType::f64 ? 1e-14 : 1e-6;
      const Tensor logits = torch_logits(dtype);
      const CrossEntropyOptions options = options_of(c, dtype);
      const Tensor loss = nograd::cross_entropy(logits, target, options);
      CHECK(loss.dtype() == dtype);
      check_near(values(loss), c.loss, tol);
      check_near(values(nograd::cross_entropy_backward(upstream(c.reduction, dtype), logits, target, options)), c.grad,
                 tol);
    }
    // The composition of raw ops that devices without the fused loop run, here on the CPU.
    const CrossEntropyOptions options = options_of(c);
    check_near(values(nograd::cross_entropy_by_ops(torch_logits(), target, options)), c.loss, 1e-14);
    check_near(values(nograd::cross_entropy_backward_by_ops(upstream(c.reduction, DType::f64), torch_logits(), target,
                                                            options)),
               c.grad, 1e-14);
  }
}

TEST_CASE("cross_entropy options: the plain options take the plain loop bit for bit; i32 targets; f16 gives f32") {
  Generator gen(21);
  const Tensor logits = randn({300, 37}, gen) * 3.0;
  const Tensor target = nograd::to_dtype(nograd::mul(rand({300}, gen, DType::f64), 37.0), DType::i64);
  const Tensor target32 = nograd::to_dtype(target, DType::i32);
  for (Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
    INFO("reduction ", static_cast<int>(reduction));
    const CrossEntropyOptions plain{.ignore_index = 5, .reduction = reduction};
    CHECK(values(nograd::cross_entropy(logits, target, plain)) ==
          values(nograd::cross_entropy(logits, target, 5, reduction)));
    const Tensor gl = reduction == Reduction::none ? rand({300}, gen) : scalar_tensor(1.5);
    CHECK(values(nograd::cross_entropy_backward(gl, logits, target, plain)) ==
          values(nograd::cross_entropy_backward(gl, logits, target, 5, reduction)));
    // Weighted and smoothed, large enough to thread: the fused loop agrees with the raw ops, and the
    // i32 targets with the i64 ones bit for bit.
    const CrossEntropyOptions opts{.weight = rand({37}, gen) + 0.5, .ignore_index = 5, .reduction = reduction,
                                   .label_smoothing = 0.2};
    const Tensor fused = nograd::cross_entropy(logits, target, opts);
    check_near(values(fused), values(nograd::cross_entropy_by_ops(logits, target, opts)), 2e-6);
    CHECK(values(nograd::cross_entropy(logits, target32, opts)) == values(fused));
    const Tensor grad = nograd::cross_entropy_backward(gl, logits, target, opts);
    check_near(values(grad), values(nograd::cross_entropy_backward_by_ops(gl, logits, target, opts)), 2e-6);
    CHECK(values(nograd::cross_entropy_backward(gl, logits, target32, opts)) == values(grad));
  }
  // Documented: the loss of f16 and bf16 logits is f32 (PyTorch returns the logits' dtype).
  const CrossEntropyOptions smoothed{.weight = from_vector<float>({1.0f, 2.0f, 0.5f}), .label_smoothing = 0.1};
  for (DType dtype : {DType::f16, DType::bf16}) {
    const Tensor half_logits = nograd::to_dtype(from_vector(kLogits, {4, 3}), dtype);
    const Tensor t = from_vector<int64_t>({2, 0, 1, 1});
    const Tensor loss = nograd::cross_entropy(half_logits, t, smoothed);
    CHECK(loss.dtype() == DType::f32);
    check_near(values(loss), values(nograd::cross_entropy(nograd::to_dtype(half_logits, DType::f32), t, smoothed)),
               1e-6);
    const Tensor grad = nograd::cross_entropy_backward(scalar_tensor(1.0), half_logits, t, smoothed);
    CHECK(grad.dtype() == dtype);
    check_near(values(grad),
               values(nograd::cross_entropy_backward(scalar_tensor(1.0), nograd::to_dtype(half_logits, DType::f32), t,
                                                     smoothed)),
               dtype == DType::f16 ? 1e-3 : 8e-3);
  }
}

// Documented: a mean over nothing is 0 (PyTorch gives NaN): every target ignored, or the weights of the
// counted targets summing to 0. The grad is then 0 too.
TEST_CASE("cross_entropy mean over zero total weight is 0, not NaN, with weights and smoothing") {
  const Tensor logits = torch_logits();
  const Tensor all_ignored = from_vector<int64_t>({-100, -100, -100, -100});
  const Tensor zero_weighted = from_vector<int64_t>({0, 0, -100, 0});
  for (const Tensor& target : {all_ignored, zero_weighted}) {
    const CrossEntropyOptions options{.weight = from_vector<double>({0.0, 2.0, 1.5}), .label_smoothing = 0.0};
    CHECK(nograd::cross_entropy(logits, target, options).item() == 0.0);
    const Tensor one = scalar_tensor(1.0, DType::f64);
    CHECK(values(nograd::cross_entropy_backward(one, logits, target, options)) == Vec(12, 0.0));
    CHECK(nograd::cross_entropy_by_ops(logits, target, options).item() == 0.0);
    CHECK(values(nograd::cross_entropy_backward_by_ops(scalar_tensor(1.0, DType::f64), logits, target, options)) ==
          Vec(12, 0.0));
  }
  const CrossEntropyOptions smoothed{.weight = from_vector(kWeight), .label_smoothing = 0.3};
  CHECK(nograd::cross_entropy(logits, all_ignored, smoothed).item() == 0.0);
  // Smoothing gives zero-weight targets a loss, but the mean still divides by their weight: 0 by the rule.
  const CrossEntropyOptions zero_target_weight{.weight = from_vector<double>({0.0, 2.0, 1.5}), .label_smoothing = 0.3};
  CHECK(nograd::cross_entropy(logits, zero_weighted, zero_target_weight).item() == 0.0);
  CHECK(nograd::cross_entropy_by_ops(logits, zero_weighted, zero_target_weight).item() == 0.0);
  CHECK(values(nograd::cross_entropy(logits, all_ignored, {.reduction = Reduction::none, .label_smoothing = 0.5})) ==
        Vec(4, 0.0));
}

TEST_CASE("cross_entropy option errors name the op, the value and what was expected") {
  const Tensor logits = torch_logits(DType::f32), target = from_vector(kTarget);
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    CHECK_THROWS_WITH_AS(nograd::cross_entropy(logits, target, {.label_smoothing = bad}),
                         doctest::Contains("cross_entropy: label_smoothing must be in [0, 1], got"), Error);
    CHECK_THROWS_WITH_AS(nograd::cross_entropy_backward(scalar_tensor(1.0), logits, target, {.label_smoothing = bad}),
                         doctest::Contains("cross_entropy_backward: label_smoothing must be in [0, 1], got"), Error);
  }
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(logits, target, {.weight = ones({4})}),
                       "cross_entropy: weight has shape [4], expected [3] (one per class of logits [4, 3])", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(logits, target, {.weight = ones({3}, DType::i64)}),
                       "cross_entropy: weight is i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(logits, from_vector<int64_t>({0, 3, 1, 1}), {.weight = ones({3})}),
                       "cross_entropy: target[1] = 3 is out of range for 3 classes (ignore_index is -100)", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy_by_ops(logits, from_vector<int64_t>({0, 3, 1, 1}), {.weight = ones({3})}),
                       "cross_entropy: target[1] = 3 is out of range for 3 classes (ignore_index is -100)", Error);
}

TEST_CASE("embedding_backward with padding_idx: that row's grad is 0, counted from the end when negative") {
  // F.embedding(idx, w, padding_idx=-1).backward(arange(12).reshape(2, 3, 2)) with w [4, 2]
  // (PyTorch 2.x): the rows of w.grad are [6, 7], [4, 6], [10, 11], [0, 0].
  const Tensor idx = from_vector<int64_t>({1, 3, 1, 0, 3, 2}, {2, 3});
  const Tensor grad = nograd::to_dtype(reshape(arange(12), {2, 3, 2}), DType::f64);
  const Vec torch_grad{6, 7, 4, 6, 10, 11, 0, 0};
  CHECK(values(nograd::embedding_backward(grad, idx, 4, -1)) == torch_grad);
  CHECK(values(nograd::embedding_backward(grad, idx, 4, 3)) == torch_grad);
  CHECK(values(nograd::embedding_backward(grad, idx, 4)) == Vec{6, 7, 4, 6, 10, 11, 10, 12});
  // A padding row nobody indexes: nothing changes; i32 indices and f32 grads work the same way.
  CHECK(values(nograd::embedding_backward(grad, nograd::to_dtype(idx, DType::i32), 5, 4)) ==
        Vec{6, 7, 4, 6, 10, 11, 10, 12, 0, 0});
  CHECK(values(nograd::embedding_backward(nograd::to_dtype(grad, DType::f32), idx, 4, 1)) ==
        Vec{6, 7, 0, 0, 10, 11, 10, 12});
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(grad, idx, 4, 4),
                       "embedding_backward: padding_idx 4 is out of range for 4 rows (expected -4..3)", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(grad, idx, 4, -5),
                       "embedding_backward: padding_idx -5 is out of range for 4 rows (expected -4..3)", Error);
  CHECK(nograd::normalize_padding_idx("embedding", -4, 4) == 0);
}
