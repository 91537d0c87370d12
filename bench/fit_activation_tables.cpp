// Fits the piecewise-polynomial coefficient tables of kernels/activation_tables.h (f32 tanh, its
// derivative, GELU and its derivative) in long double and prints that header: `fit_activation_tables > kernels/activation_tables.h`.
// Each interval's polynomial is centred on a float whose function value is nearly a float (so the
// constant term carries no rounding), fitted by Lawson-weighted least squares near minimax, then its
// coefficients are rounded to f32 one at a time from the lowest, refitting the rest after each.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using LD = long double;
using Fn = std::function<LD(LD)>;

constexpr int kIntervals = 32;
constexpr int kMaxDegree = 7;  // coefficients c0..c7

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Solves the (n x n) system a x = b in place by Gaussian elimination with partial pivoting.
std::vector<LD> solve(std::vector<std::vector<LD>> a, std::vector<LD> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (size_t r = c + 1; r < n; ++r) {
      const LD f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  std::vector<LD> x(n);
  for (size_t c = n; c-- > 0;) {
    LD s = b[c];
    for (size_t k = c + 1; k < n; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return x;
}

struct Interval {
  LD lo, hi;    // in the input variable
  float center;  // r = x - center
  float coef[kMaxDegree + 1];
  int degree = 5;
};

// Fits coefficients k >= first of g(center + r) ~ sum c_k r^k on r in [lo - center, hi - center],
// minimising max |error| * weight(x), with c_0 .. c_{first-1} as already set in iv.coef.
void fit(Interval& iv, const Fn& g, const Fn& weight, int first) {
  const int n_pts = 240;
  const LD h = std::max(std::fabs(iv.lo - iv.center), std::fabs(iv.hi - iv.center));
  std::vector<LD> rs, ws(n_pts, 1), target;
  for (int i = 0; i < n_pts; ++i) {
    const LD t = std::cos(M_PIl * (i + 0.5L) / n_pts);
    rs.push_back((iv.lo + iv.hi) / 2 + t * (iv.hi - iv.lo) / 2 - iv.center);
  }
  const int kDegree = iv.degree;
  for (int k = first; k <= kDegree; ++k) {
    std::vector<LD> fixed_part(n_pts);
    for (int i = 0; i < n_pts; ++i) {
      LD s = 0;
      for (int j = 0; j < k; ++j) s += iv.coef[j] * std::pow(rs[i], j);
      fixed_part[i] = g(iv.center + rs[i]) - s;
    }
    const int m = kDegree - k + 1;
    std::vector<LD> sol(m, 0);
    std::vector<LD> lw(n_pts, 1.0L / n_pts);
    for (int iter = 0; iter < 60; ++iter) {  // Lawson: reweight towards the worst points
      std::vector<std::vector<LD>> a(m, std::vector<LD>(m, 0));
      std::vector<LD> b(m, 0);
      for (int i = 0; i < n_pts; ++i) {
        const LD w = lw[i] * std::pow(weight(iv.center + rs[i]), 2);
        const LD s = rs[i] / h;
        for (int p = 0; p < m; ++p) {
          const LD bp = std::pow(s, k + p);
          b[p] += w * bp * fixed_part[i];
          for (int q = 0; q < m; ++q) a[p][q] += w * bp * std::pow(s, k + q);
        }
      }
      sol = solve(a, b);
      LD total = 0;
      for (int i = 0; i < n_pts; ++i) {
        LD v = 0;
        for (int p = 0; p < m; ++p) v += sol[p] * std::pow(rs[i] / h, k + p);
        lw[i] *= std::fabs(v - fixed_part[i]) * weight(iv.center + rs[i]) + 1e-30L;
        total += lw[i];
      }
      for (LD& w : lw) w /= total;
    }
    iv.coef[k] = static_cast<float>(sol[0] / std::pow(h, k));
  }
}

// The float nearest the middle of [lo, hi] (within a sixteenth of its width) where g is closest to a float.
float pick_center(LD lo, LD hi, const Fn& g) {
  const float mid = static_cast<float>((lo + hi) / 2);
  float best = mid;
  LD best_err = 1e30L;
  const LD span = (hi - lo) / 16;
  for (int step = -20000; step <= 20000; ++step) {
    const float c = float_of(bits_of(mid) + step);
    if (std::fabs(c - mid) > span) continue;
    const LD v = g(c);
    const float vf = static_cast<float>(v);
    if (vf == 0) continue;
    const LD err = std::fabs(v - vf) / std::fabs(std::nextafter(vf, 2 * vf) - vf);
    if (err < best_err) best_err = err, best = c;
  }
  return best;
}

// The float near where |g| is the harmonic mean of |g(lo)| and |g(hi)|. Where g changes by a large
// factor across the interval, that centre balances |g - c0| / |g| at both ends: the share of the
// result in the terms after the (exact) constant, whose rounding the result carries.
float pick_balanced_center(LD lo, LD hi, const Fn& g) {
  const LD g_lo = std::fabs(g(lo)), g_hi = std::fabs(g(hi)), target = 2 * g_lo * g_hi / (g_lo + g_hi);
  LD a = lo, b = hi;
  for (int i = 0; i < 200; ++i) {
    const LD m = (a + b) / 2;
    ((std::fabs(g(m)) < target) == (g_hi > g_lo) ? a : b) = m;
  }
  const LD c = (a + b) / 2, half = (hi - lo) / 2;
  return pick_center(c - half, c + half, g);
}

// The interval j of the tables holds inputs whose t = base + |x| (or x) has bits >> 20 = j mod 32:
// t in [1, 16) with 3 mantissa bits gives octaves [1,2), [2,4), [4,8), [8,16) of 8 intervals each.
void interval_bounds(int j, LD offset, LD& lo, LD& hi) {
  const int pos = (j + 32 - 24) % 32;  // 1016 = 127 * 8 is 24 mod 32
  const int octave = pos / 8, sub = pos % 8;
  const LD t_lo = std::ldexp(1.0L + sub / 8.0L, octave), w = std::ldexp(1.0L, octave - 3);
  lo = t_lo - offset;
  hi = t_lo + w - offset;
}

struct Table {
  std::string name, doc;
  std::vector<Interval> iv;
  int degree = 5;
};

// tanh, |x| = a, t = 1 + a. Below t = 1.5 (a < 0.5) the tables hold tanh(a) - a, which the kernel adds to a.
Table fit_tanh() {
  Table t{"kTanh", "tanh(a) for t = 1 + a >= 1.5, tanh(a) - a below (the kernel adds a back); 1 from a = 9", {}};
  const Fn f = [](LD a) { return std::tanh(a); };
  const Fn g_small = [](LD a) { return std::tanh(a) - a; };
  const Fn weight = [](LD a) { return a == 0 ? 1.0L : 1.0L / std::tanh(a); };  // relative to the result
  for (int j = 0; j < kIntervals; ++j) {
    Interval iv{};
    interval_bounds(j, 1, iv.lo, iv.hi);
    const LD slack = std::ldexp(1.0L, std::ilogb(1 + iv.lo) - 22);  // 1 + a may round into a neighbour
    const bool small = iv.lo + 1 < 1.5L;
    const Fn& g = small ? g_small : f;
    if (iv.lo >= 9) {
      iv.center = static_cast<float>(iv.lo);
      iv.coef[0] = 1;
    } else {
      iv.center = iv.lo == 0 ? 0.0f : pick_center(iv.lo, iv.hi, g);
      iv.coef[0] = static_cast<float>(g(iv.center));
      iv.lo = std::max(0.0L, iv.lo - slack);
      iv.hi += slack;
      fit(iv, g, weight, 1);
    }
    t.iv.push_back(iv);
  }
  return t;
}

// sech^2(a) = d tanh / dx on the same intervals; zero from a = 13 (below 2.1e-11 there).
Table fit_tanh_grad() {
  Table t{"kTanhGrad", "sech^2(a), t = 1 + a; 0 from a = 13; degree 6", {}, 6};
  const Fn f = [](LD a) {
    const LD c = std::cosh(a);
    return 1 / (c * c);
  };
  const Fn weight = [&](LD a) { return 1.0L / std::max(f(a), 1e-3L); };  // the tests' floored relative error
  for (int j = 0; j < kIntervals; ++j) {
    Interval iv{};
    iv.degree = t.degree;
    interval_bounds(j, 1, iv.lo, iv.hi);
    const LD slack = std::ldexp(1.0L, std::ilogb(1 + iv.lo) - 22);
    if (iv.lo >= 13) {
      iv.center = static_cast<float>(iv.lo);
    } else {
      iv.center = iv.lo == 0 ? 0.0f : pick_center(iv.lo, iv.hi, f);
      iv.coef[0] = static_cast<float>(f(iv.center));
      iv.lo = std::max(0.0L, iv.lo - slack);
      iv.hi += slack;
      fit(iv, f, weight, 1);
    }
    t.iv.push_back(iv);
  }
  return t;
}

// GELU's derivative on a uniform grid: cell j = round(x / kGeluGradStep) + 16 mod 32 for x clamped to
// [-6.6, 6.3]; cell 0 (x below -6.44, where the grad is under 1e-9) is 0, cell 31 (above 6.03, where it
// is 1 to 1e-11) is 1. The cell holding the grad's zero (x = -0.7525) is centred there, so near it the
// polynomial is c1 r + ... and keeps the absolute accuracy the tests ask there.
constexpr LD kGeluGradStep = 0.416L, kGeluGradOffset = 16;
Table fit_gelu_grad() {
  Table t{"kGeluGrad", "d gelu(x)/dx on cells of x of width 0.416 (kernels/activation_math.h, gelu_grad_f32), degree 6",
          {}, 6};
  const LD k = 0.79788456080286535588L, c = 0.044715L;
  const Fn f = [=](LD x) {
    const LD s = 1 / (1 + std::exp(-2 * k * (x + c * x * x * x)));
    return s + x * s * (1 - s) * 2 * k * (1 + 3 * c * x * x);
  };
  // the tests' floored relative error, and absolute around the zero (tests/kernels/test_activation_math.cpp)
  const Fn weight = [&](LD x) { return 1.0L / (std::fabs(x + 0.75L) < 0.02L ? 1e-3L : std::max(std::fabs(f(x)), 1e-3L)); };
  // the zero of f, by bisection
  LD lo = -0.8L, hi = -0.7L;
  for (int i = 0; i < 200; ++i) (f((lo + hi) / 2) < 0 ? lo : hi) = (lo + hi) / 2;
  const LD root = (lo + hi) / 2;
  for (int j = 0; j < kIntervals; ++j) {
    Interval iv{};
    iv.degree = t.degree;
    const LD mid = (j - kGeluGradOffset) * kGeluGradStep;
    iv.lo = mid - kGeluGradStep * 0.51L;
    iv.hi = mid + kGeluGradStep * 0.51L;
    if (j == 0 || j == kIntervals - 1) {
      iv.center = static_cast<float>(mid);
      iv.coef[0] = j == 0 ? 0.0f : 1.0f;
    } else {
      const bool at_root = std::fabs(mid - root) <= kGeluGradStep / 2;
      iv.center = at_root ? static_cast<float>(root) : pick_center(mid - kGeluGradStep / 2, mid + kGeluGradStep / 2, f);
      iv.coef[0] = static_cast<float>(f(iv.center));
      fit(iv, f, weight, 1);
    }
    t.iv.push_back(iv);
  }
  return t;
}

// GELU itself on 32 cells uniform in phi(x) = x (A + x (B + C x)): cell j = round(phi(x)) + 26 mod
// 32, for x from kGeluLow = -6 (below it the kernel takes x e^(2u), far_left) to kGeluHigh, the middle
// of cell 31, where x is clamped. The cells are about 0.12 wide at x = -6, where GELU falls by e^8 per
// unit of x, 0.5 around 0 and 1 to 2 for x > 1. Each cell's polynomial is GELU(x) - s_j x, and the
// kernel adds s_j x last (table kGeluX): s_j is 0 for x < 0, 1/2 in cell 26 (around 0, where the rest
// is even in x and of order x^2) and GELU / x at the middle for x > 0, where the rest is then a small
// part of the result, and its rounding with it. Cell 31 is x itself. Degree 7.
constexpr float kGeluWarpA = 1.7f, kGeluWarpB = -0.3f, kGeluWarpC = 0.024f, kGeluLow = -6.0f;
constexpr int kGeluZeroCell = 26;
LD gelu_phi(LD x) { return x * (kGeluWarpA + x * (kGeluWarpB + kGeluWarpC * x)); }
LD gelu_phi_inverse(LD p) {  // phi is increasing: its derivative A + 2 B x + 3 C x^2 has no real root
  LD lo = -20, hi = 20;
  for (int i = 0; i < 200; ++i) (gelu_phi((lo + hi) / 2) < p ? lo : hi) = (lo + hi) / 2;
  return (lo + hi) / 2;
}

// The tables kGelu* and kGeluX (the slopes s_j), and the end of the range the cells serve.
struct GeluTables {
  Table poly;
  float slope[kIntervals] = {};
  float high = 0;
};

GeluTables fit_gelu() {
  GeluTables out{{"kGelu", "gelu(x) - kGeluX x on cells uniform in phi(x) (kernels/activation_math.h, gelu_f32), degree 7", {}, 7}};
  const LD k = 0.79788456080286535588L, c = 0.044715L;
  const Fn f = [=](LD x) { return x / (1 + std::exp(-2 * k * (x + c * x * x * x))); };
  const Fn weight = [&](LD x) { return x == 0 ? 2.0L : 1.0L / std::fabs(f(x)); };  // relative to the result
  out.high = static_cast<float>(gelu_phi_inverse(kIntervals - 1 - kGeluZeroCell));
  for (int j = 0; j < kIntervals; ++j) {
    Interval iv{};
    iv.degree = out.poly.degree;
    const int cell = j - kGeluZeroCell;
    iv.lo = gelu_phi_inverse(cell - 0.5L);
    iv.hi = gelu_phi_inverse(cell + 0.5L);
    const LD slack = (iv.hi - iv.lo) / 100;  // phi is rounded in f32: a cell takes in its neighbours' edges
    const float mid = static_cast<float>((iv.lo + iv.hi) / 2);
    const float slope = j == kIntervals - 1 ? 1.0f : cell == 0 ? 0.5f : cell > 0 ? static_cast<float>(f(mid) / mid) : 0.0f;
    out.slope[j] = slope;
    const Fn rest = [=](LD x) { return f(x) - slope * x; };
    if (j == kIntervals - 1) {
      iv.center = 0;  // all zero: the result is x
    } else if (cell == 0) {
      iv.center = 0;
      iv.coef[0] = -0.0f;  // with c1 = +0, keeps GELU(-0) = -0
      iv.lo -= slack;
      iv.hi += slack;
      fit(iv, rest, weight, 2);
    } else {
      iv.center = cell > 0 ? pick_center(iv.lo, iv.hi, rest) : pick_balanced_center(iv.lo, iv.hi, f);
      iv.coef[0] = static_cast<float>(rest(iv.center));
      iv.lo -= slack;
      iv.hi += slack;
      fit(iv, rest, weight, 1);
    }
    out.poly.iv.push_back(iv);
  }
  return out;
}

void print_table(const Table& t) {
  std::printf("// %s\n", t.doc.c_str());
  std::printf("ACCEL_ACTIVATION_TABLE %sCenter[32] = {", t.name.c_str());
  for (int j = 0; j < kIntervals; ++j) std::printf("%s%.8ef", j == 0 ? "\n    " : j % 4 ? ", " : ",\n    ", t.iv[j].center);
  std::printf("};\n");
  for (int k = 0; k <= t.degree; ++k) {
    std::printf("ACCEL_ACTIVATION_TABLE %sC%d[32] = {", t.name.c_str(), k);
    for (int j = 0; j < kIntervals; ++j)
      std::printf("%s%.8ef", j == 0 ? "\n    " : j % 4 ? ", " : ",\n    ", t.iv[j].coef[k]);
    std::printf("};\n");
  }
}

}  // namespace

int main() {
  std::printf(
      "// Generated by bench/fit_activation_tables.cpp (run it and redirect here to re-derive): the\n"
      "// piecewise-polynomial coefficients of the f32 tanh, its derivative, GELU and GELU's derivative in\n"
      "// kernels/activation_math.h. A tanh entry j serves the inputs whose t = 1 + |x| has float bits >> 20\n"
      "// equal to j mod 32 (t in [1, 16): eight intervals per octave); a GELU-grad entry serves a cell of a\n"
      "// uniform grid of x, a GELU entry a cell of a grid warped by a cubic. Each polynomial is\n"
      "// sum_k Ck[j] (x' - Center[j])^k, x' the (clamped) |x| or x.\n"
      "#pragma once\n\n"
      "#include \"kernels/hd.h\"\n\n"
      "#if defined(__CUDA_ARCH__)\n"
      "#define ACCEL_ACTIVATION_TABLE static __device__ const float\n"
      "#else\n"
      "#define ACCEL_ACTIVATION_TABLE inline constexpr float\n"
      "#endif\n\n"
      "namespace accel::activation_tables {\n\n");
  print_table(fit_tanh());
  std::printf("\n");
  print_table(fit_tanh_grad());
  std::printf("\n");
  print_table(fit_gelu_grad());
  std::printf("\n");
  const GeluTables gelu = fit_gelu();
  print_table(gelu.poly);
  std::printf("ACCEL_ACTIVATION_TABLE kGeluX[32] = {");
  for (int j = 0; j < kIntervals; ++j) std::printf("%s%.8ef", j == 0 ? "\n    " : j % 4 ? ", " : ",\n    ", gelu.slope[j]);
  std::printf("};\n");
  std::printf("// phi(x) = x (A + x (B + C x)); the cell of x = 0; the range the cells serve (x is clamped to the high end)\n");
  std::printf("inline constexpr float kGeluWarpA = %.8ef, kGeluWarpB = %.8ef, kGeluWarpC = %.8ef;\n", kGeluWarpA, kGeluWarpB, kGeluWarpC);
  std::printf("inline constexpr int kGeluZeroCell = %d;\n", kGeluZeroCell);
  std::printf("inline constexpr float kGeluLow = %.8ef, kGeluHigh = %.8ef;\n", kGeluLow, gelu.high);
  std::printf("\n}  // namespace accel::activation_tables\n");
  return 0;
}
