#include "models/tensor_parallel.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace exasim {

int exact_root(int n, int k) {
  if (n < 1) return 0;
  const int r = int(std::lround(std::pow(double(n), 1.0 / k)));
  for (int c = std::max(1, r - 1); c <= r + 1; ++c) {
    long long p = 1;
    for (int i = 0; i < k; ++i) p *= c;
    if (p == n) return c;
  }
  return 0;
}

namespace {

TensorCollective coll(CollectiveKind k, const std::string& role, int members, double bytes, const std::string& what) {
  return TensorCollective{k, role, members, bytes, what};
}

}  // namespace

int TensorLayout::token_split() const {
  switch (mode) {
    case TensorMode::one_d: return 1;
    case TensorMode::two_d: return q;
    case TensorMode::two_half_d: return depth * q;
    case TensorMode::three_d: return q * q;
  }
  return 1;
}

int TensorLayout::feature_split() const { return mode == TensorMode::one_d ? 1 : q; }

double TensorLayout::parameter_fraction() const {
  switch (mode) {
    case TensorMode::one_d: return 1.0 / size;
    case TensorMode::two_d:
    case TensorMode::two_half_d: return 1.0 / (double(q) * q);
    case TensorMode::three_d: return 1.0 / (double(q) * q * q);
  }
  return 1.0;
}

TensorLayout tensor_layout(const ParallelPlan& plan) {
  TensorLayout l;
  l.mode = plan.tensor_mode;
  l.size = plan.tensor;
  if (plan.sequence_parallel && plan.tensor_mode != TensorMode::one_d)
    throw std::invalid_argument(fmt::format("sequence parallelism is Megatron's 1-D tensor parallelism's; {} tensor "
                                            "parallelism already splits the tokens",
                                            to_string(plan.tensor_mode)));
  l.sequence_parallel = plan.sequence_parallel;
  if (plan.tensor < 1) throw std::invalid_argument("tensor_parallel must be at least 1");
  switch (plan.tensor_mode) {
    case TensorMode::one_d:
      l.q = plan.tensor;
      break;
    case TensorMode::two_d:
      l.q = exact_root(plan.tensor, 2);
      if (!l.q) throw std::invalid_argument(fmt::format("2-D tensor parallelism needs a perfect square, got {}", plan.tensor));
      break;
    case TensorMode::two_half_d:
      l.depth = plan.tensor_depth;
      l.q = plan.tensor_depth >= 1 && plan.tensor % plan.tensor_depth == 0 ? exact_root(plan.tensor / plan.tensor_depth, 2) : 0;
      if (!l.q)
        throw std::invalid_argument(fmt::format("2.5-D tensor parallelism needs tensor_depth x q x q devices (depth {}), got {}",
                                                plan.tensor_depth, plan.tensor));
      break;
    case TensorMode::three_d:
      l.q = exact_root(plan.tensor, 3);
      if (!l.q) throw std::invalid_argument(fmt::format("3-D tensor parallelism needs a perfect cube, got {}", plan.tensor));
      break;
  }
  return l;
}

std::vector<std::string> tensor_group_roles(TensorMode m) {
  switch (m) {
    case TensorMode::one_d: return {"tp"};
    case TensorMode::two_d: return {"tp_row", "tp_col"};
    case TensorMode::two_half_d: return {"tp_row", "tp_col", "tp_depth"};
    case TensorMode::three_d: return {"tp_x", "tp_y", "tp_z"};
  }
  return {};
}

TensorGroupPosition tensor_group_position(const TensorLayout& l, const std::string& role, int t) {
  const int q = l.q;
  switch (l.mode) {
    case TensorMode::one_d:
      if (role == "tp") return {0, t};
      break;
    case TensorMode::two_d: {
      const int i = t / q, j = t % q;
      if (role == "tp_row") return {i, j};
      if (role == "tp_col") return {j, i};
      break;
    }
    case TensorMode::two_half_d: {
      const int j = t % q, i = (t / q) % q, k = t / (q * q);
      if (role == "tp_row") return {i + q * k, j};
      if (role == "tp_col") return {j + q * k, i};
      if (role == "tp_depth") return {j + q * i, k};
      break;
    }
    case TensorMode::three_d: {
      const int i = t % q, j = (t / q) % q, l3 = t / (q * q);
      if (role == "tp_x") return {j + q * l3, i};
      if (role == "tp_y") return {i + q * l3, j};
      if (role == "tp_z") return {i + q * j, l3};
      break;
    }
  }
  throw std::invalid_argument(fmt::format("tensor mode {} has no group role \"{}\"", to_string(l.mode), role));
}

std::vector<TensorCollective> TensorLinear::all() const {
  std::vector<TensorCollective> v;
  for (const auto* part : {&forward_before, &forward_after, &dgrad_before, &wgrad_alongside_dgrad, &dgrad_after,
                           &wgrad_before, &wgrad_after})
    v.insert(v.end(), part->begin(), part->end());
  return v;
}

TensorLinear tensor_linear(const TensorLayout& l, double T, double din, double dout, double ea, Linear1D one_d) {
  using K = CollectiveKind;
  TensorLinear out;
  const double q = l.q;
  switch (l.mode) {
    case TensorMode::one_d: {
      const int P = l.size;
      const bool sp = l.sequence_parallel && P > 1;
      if (one_d == Linear1D::column) {
        out.forward_gemm = {{shape_dim(T), shape_dim(dout / P), shape_dim(din)}, 1};
        const double x = T * din * ea;
        if (sp) {
          out.forward_before.push_back(coll(K::all_gather, "tp", P, x, "x_all_gather"));
          out.wgrad_alongside_dgrad.push_back(coll(K::all_gather, "tp", P, x, "x_all_gather"));
          out.dgrad_after.push_back(coll(K::reduce_scatter, "tp", P, x, "dx_reduce_scatter"));
        } else if (P > 1) {
          out.dgrad_after.push_back(coll(K::all_reduce, "tp", P, x, "dx_all_reduce"));
        }
      } else {
        out.forward_gemm = {{shape_dim(T), shape_dim(dout), shape_dim(din / P)}, 1};
        const double y = T * dout * ea;
        if (sp) {
          out.forward_after.push_back(coll(K::reduce_scatter, "tp", P, y, "y_reduce_scatter"));
          out.dgrad_before.push_back(coll(K::all_gather, "tp", P, y, "dy_all_gather"));
        } else if (P > 1) {
          out.forward_after.push_back(coll(K::all_reduce, "tp", P, y, "y_all_reduce"));
        }
      }
      return out;
    }
    case TensorMode::two_d:
    case TensorMode::two_half_d: {
      const int n = l.q;
      const double rows = T / (l.mode == TensorMode::two_d ? q : l.depth * q);  // this depth layer's row panel
      out.forward_gemm = {{shape_dim(rows), shape_dim(dout / q), shape_dim(din)}, 1};
      if (n > 1) {
        const double x_panel = rows * din * ea, a_panel = din * dout / q * ea;
        out.forward_before = {coll(K::all_gather, "tp_row", n, x_panel, "x_all_gather"),
                              coll(K::all_gather, "tp_col", n, a_panel, "a_all_gather")};
        out.dgrad_before = {coll(K::all_gather, "tp_col", n, a_panel, "a_all_gather")};
        out.dgrad_after = {coll(K::reduce_scatter, "tp_row", n, x_panel, "dx_reduce_scatter")};
        out.wgrad_before = {coll(K::all_gather, "tp_row", n, x_panel, "x_all_gather")};
        out.wgrad_after = {coll(K::reduce_scatter, "tp_col", n, a_panel, "da_reduce_scatter")};
      }
      return out;
    }
    case TensorMode::three_d: {
      const int n = l.q;
      out.forward_gemm = {{shape_dim(T / q), shape_dim(dout / q), shape_dim(din / q)}, 1};
      if (n > 1) {
        const double x = T / q * din / q * ea, a = din / q * dout / q * ea, y = T / q * dout / q * ea;
        // Colossal-AI's groups: weight "tp_x", input "tp_y", output "tp_z"; every second linear
        // (Megatron's row-parallel ones) swaps the input and output groups (swap_in_out_group).
        const bool swapped = one_d == Linear1D::row;
        const std::string in = swapped ? "tp_z" : "tp_y", w = "tp_x", o = swapped ? "tp_y" : "tp_z";
        out.forward_before = {coll(K::all_gather, in, n, x, "x_all_gather"), coll(K::all_gather, w, n, a, "a_all_gather")};
        out.forward_after = {coll(K::reduce_scatter, o, n, y, "y_reduce_scatter")};
        out.dgrad_before = {coll(K::all_gather, o, n, y, "dy_all_gather")};
        out.dgrad_after = {coll(K::reduce_scatter, in, n, x, "dx_reduce_scatter")};
        out.wgrad_after = {coll(K::reduce_scatter, w, n, a, "da_reduce_scatter")};
      }
      return out;
    }
  }
  return out;
}

std::optional<std::string> tensor_split_problem(const TensorLayout& l, int sequences, int heads, int d_model, int d_ff,
                                                int vocab) {
  if (l.mode == TensorMode::one_d) {
    if (heads % l.size || d_ff % l.size || (vocab > 0 && vocab % l.size))
      return fmt::format("heads ({}), d_ff ({}) and vocab ({}) must be multiples of the tensor-parallel size ({})", heads,
                         d_ff, vocab, l.size);
    return std::nullopt;
  }
  const int ts = l.token_split(), fs = l.feature_split();
  if (sequences % ts)
    return fmt::format("{} tensor parallelism splits a micro-batch's sequences {} ways: micro_batch ({}) must be a multiple",
                       to_string(l.mode), ts, sequences);
  const int ws = l.mode == TensorMode::three_d ? l.q * l.q : l.q;  // 3-D splits a weight's rows q^2 ways
  if (heads % fs || d_model % ws || d_ff % ws || (vocab > 0 && vocab % ws))
    return fmt::format("{} tensor parallelism (q = {}): heads ({}) must be a multiple of {}, d_model ({}), d_ff ({}) and "
                       "vocab ({}) of {}",
                       to_string(l.mode), l.q, heads, fs, d_model, d_ff, vocab, ws);
  return std::nullopt;
}

}  // namespace exasim
