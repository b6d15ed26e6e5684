// Tensor parallelism in 1, 2, 2.5 and 3 dimensions: the group roles of a plan's tensor mode,
// each tensor rank's place in them, and the local GEMM and collectives of one linear layer
// Y = X A (X: tokens x d_in, A: d_in x d_out) on one device, forward and backward.
//
// Sources: Bian et al., "Maximizing Parallelism in Distributed Training for Huge Neural
// Networks" (arXiv 2105.14450) and the Colossal-AI implementation by the same authors
// (Linear2D / Linear2p5D / Linear3D); Megatron-LM (Shoeybi et al. 2019) for 1-D; the scheme
// table in reference/models.md.
//
// Tensor ranks t = 0 .. tensor-1 of one tensor-parallel group (one data index, one stage):
//  1-D  (P):          role "tp", member t.
//  2-D  (q x q):      t = j + q i: row i, column j. "tp_row" = the q devices of row i (member j),
//                     "tp_col" = the q devices of column j (member i).
//  2.5-D (q x q x d): t = j + q (i + q k): depth layer k holds a q x q SUMMA grid. "tp_row"
//                     (group (i, k), member j), "tp_col" (group (j, k), member i), "tp_depth"
//                     (group (i, j), member k).
//  3-D  (q x q x q):  t = i + q (j + q l). "tp_x" (members differ in i), "tp_y" (in j), "tp_z" (in l).
// With the tensor dimension innermost, "tp_row" / "tp_x" members are adjacent devices.
//
// Layouts (what one device holds):
//  1-D:   X whole (activations replicated); A split by columns (column-parallel linear) or by
//         rows (row-parallel linear), Megatron's pairs.
//  2-D:   X block (T/q) x (d_in/q), A block (d_in/q) x (d_out/q), Y block (T/q) x (d_out/q).
//  2.5-D: X block (T/(d q)) x (d_in/q) (depth layer k holds rows k of d), A block
//         (d_in/q) x (d_out/q) replicated on the d layers.
//  3-D:   X (T/q^2) x (d_in/q), A (d_in/q^2) x (d_out/q), Y (T/q^2) x (d_out/q).
//
// Collectives of one linear (ring algorithms; bytes in CollectiveWork's convention: all-gather
// = the gathered result, reduce-scatter and all-reduce = the full buffer):
//  1-D column: forward none; backward all-reduce of dX (T x d_in) over "tp" after the data gradient.
//  1-D row:    forward all-reduce of Y (T x d_out) over "tp"; backward none.
//  1-D with sequence parallelism (Korthikanti et al. §4.2.2, Megatron-LM's
//              LinearWithGradAccumulationAndAsyncCommunication): X and Y outside the linears
//              are (T/P) x d sequence shards. Column: forward all-gather X (T x d_in) over "tp";
//              backward all-gather X again alongside the data gradient (the weight gradient
//              needs it: only the shard was kept), reduce-scatter dX (T x d_in) after it,
//              overlapping the weight gradient. Row: forward reduce-scatter Y (T x d_out);
//              backward all-gather dY (T x d_out) before the data gradient. An all-gather plus
//              a reduce-scatter move what one all-reduce moves, in as many ring steps.
//  2-D SUMMA:  forward all-gather X's row panel over "tp_row" (T/q x d_in) and A's column panel
//              over "tp_col" (d_in x d_out/q), then one local GEMM (T/q x d_out/q x d_in);
//              backward (Colossal-AI's Matmul_ABT / Matmul_ATB): all-gather A over "tp_col",
//              dX partial = dY A_col^T, reduce-scatter dX over "tp_row"; all-gather X over
//              "tp_row", dA partial = X_row^T dY, reduce-scatter dA over "tp_col".
//              SUMMA's q broadcasts of one block each along a row (column) deliver exactly the
//              panel an all-gather delivers, (q-1)/q of the panel per device, in q-1 ring steps:
//              we model them as one all-gather (the same bandwidth; one collective instead of q
//              pipelined broadcasts, i.e. without SUMMA's overlap of steps with the GEMM).
//  2.5-D:      the 2-D scheme inside each depth layer on its T/d rows (panels T/(d q) x d_in for
//              X, d_in x d_out/q for A). A's gradient must also be summed over the d layers: that
//              is a once-per-step gradient all-reduce over "tp_depth" (like data parallelism),
//              not part of the per-layer terms (the table's latency 6(q-1) has no depth term).
//  3-D:        Colossal-AI's Linear3D (colossalai/nn/layer/parallel_3d/_operation.py) with its
//              groups (process_group_initializer/initializer_3d.py, rank i + q (j + q l)): the
//              weight group varies i ("tp_x", adjacent ranks), the input group j ("tp_y"), the
//              output group l ("tp_z"). Forward: all-gather X over the input group (to
//              T/q x d_in/q), all-gather A over the weight group (to d_in/q x d_out/q), local GEMM,
//              reduce-scatter Y (T/q x d_out/q) over the output group; backward mirrors it:
//              all-gather dY over the output group, reduce-scatter dX over the input group,
//              reduce-scatter dA over the weight group (the gathered X and A are kept from the
//              forward, as Colossal-AI's autograd context does). Each Linear3D swaps the input
//              and output groups for the next (swap_in_out_group), so that Y's layout is the next
//              X's: the column-parallel linears of a layer (QKV, FFN1) gather X over "tp_y" and
//              scatter Y over "tp_z", the row-parallel ones (projection, FFN2) the other way
//              round. Sizes do not change, but which axis (and so which link: with 4 or 8 devices
//              per node only "tp_x" stays inside it) carries the wide FFN activations does.
//
// The table's terms (reference/models.md), per device for one linear's forward and backward,
// with X, A and Y all M bytes (the paper's square case, T = d_in = d_out) and ring collectives
// (an all-gather or reduce-scatter over n members moves (n-1)/n of its buffer, an all-reduce
// 2(n-1)/n, in n-1 resp. 2(n-1) steps):
//  1-D:   one all-reduce of M:                        2(P-1)/P x M,                 2(P-1) steps;
//  2-D:   6 collectives over q of panels M/q:          6 (q-1)/q x (M/q),            6(q-1) steps;
//  2.5-D: 3 of X panels M/(d q), 3 of A panels M/q:    3 (q-1)(d+1)/(d q) x (M/q),   6(q-1) steps;
//  3-D:   6 collectives over q of blocks M/q^2:         6 (q-1)/q^3 x M,              6(q-1) steps.
// So the table's bandwidth terms are in units of M for 1-D and 3-D and of one panel M/q for
// 2-D and 2.5-D; in units of M the 2-D and 2.5-D terms are 6(q-1)/q^2 = 6(sqrt(P)-1)/P and
// 3(q-1)(d+1)/(d q^2). tests/unit/tensor_parallel_test.cpp checks exactly this.
//
// Ops other than linears (layer norm, softmax, GELU, residual, dropout) act on the local
// activation shard: a fraction 1, 1/q^2, 1/(d q^2), 1/q^3 of T x d (the table's activation
// memory). Layer norm's row statistics under 2-D/2.5-D/3-D need a small all-reduce of 2 numbers
// per local row; it is not modelled (O(T) bytes beside the linears' O(T d)).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/parallel_plan.hpp"
#include "sim/step_graph.hpp"

namespace exasim {

// The shape of a plan's tensor parallelism. Throws std::invalid_argument from tensor_layout()
// when the size is not a square (2-D), depth x square (2.5-D) or cube (3-D).
struct TensorLayout {
  TensorMode mode = TensorMode::one_d;
  int size = 1;   // devices of the tensor group (P)
  int q = 1;      // grid side (1-D: P)
  int depth = 1;  // 2.5-D: d
  // 1-D only: Megatron's sequence parallelism (Korthikanti et al., arXiv 2205.05198): the
  // activations outside the linears (layer norm, dropout, residual) are split along the sequence
  // over the group, and each all-reduce becomes a reduce-scatter plus an all-gather.
  bool sequence_parallel = false;
  // How a T x d activation is split: token rows over `token_split()`, features over
  // `feature_split()` (1-D: replicated, both 1).
  int token_split() const;
  int feature_split() const;
  // The token rows of the activations outside the linears: token_split(), or t under sequence
  // parallelism.
  int sequence_split() const { return sequence_parallel ? size : token_split(); }
  // The table's fractions per device: activation memory, parameter memory, computation.
  double activation_fraction() const { return 1.0 / (double(token_split()) * feature_split()); }
  double parameter_fraction() const;
  double computation_fraction() const { return 1.0 / size; }
};
TensorLayout tensor_layout(const ParallelPlan& plan);

// The integer r with r^k = n, or 0 (also for n < 1).
int exact_root(int n, int k);

// The group roles of a tensor mode, and the group and member index of tensor rank `t` in `role`.
std::vector<std::string> tensor_group_roles(TensorMode m);
struct TensorGroupPosition {
  int group = 0, member = 0;
};
TensorGroupPosition tensor_group_position(const TensorLayout& layout, const std::string& role, int t);

// One collective of a linear layer.
struct TensorCollective {
  CollectiveKind kind = CollectiveKind::all_gather;
  std::string role;
  int members = 1;    // group size
  double bytes = 0;   // CollectiveWork's convention
  std::string what;   // the operand, e.g. "x_all_gather"
};

// 1-D: Megatron's column-parallel (split d_out: QKV, FFN1, logits) or row-parallel (split d_in:
// projection, FFN2) linear. 3-D: row marks the linears whose input and output groups are swapped.
enum class Linear1D { column, row };

// One device's share of the linear Y = X A, forward and backward. The backward runs the data
// gradient then the weight gradient (GraphBuilder::gemm_backward's shapes).
struct TensorLinear {
  KernelShape forward_gemm;   // local C[m x n] = A[m x k] B[k x n]
  std::vector<TensorCollective> forward_before, forward_after;
  std::vector<TensorCollective> dgrad_before, dgrad_after;
  std::vector<TensorCollective> wgrad_before, wgrad_after;
  // Launched with the data gradient (concurrently: Megatron's sequence-parallel linear all-gathers
  // its input again while dX is computed) and waited for by the weight gradient.
  std::vector<TensorCollective> wgrad_alongside_dgrad;
  std::vector<TensorCollective> all() const;  // in the order they run
};

// tokens, d_in, d_out: the whole layer's sizes; bytes_per_element of activations and weights.
TensorLinear tensor_linear(const TensorLayout& layout, double tokens, double d_in, double d_out,
                           double bytes_per_element, Linear1D one_d = Linear1D::column);

// Why a transformer (micro-batch of `sequences`, `heads`, d_model, d_ff, vocab) does not split
// under the layout (sequences stay whole on a device: the token split divides the micro-batch;
// the feature split divides the heads; 3-D's weight split q^2 divides d_model, d_ff, vocab), or
// nothing when it does.
std::optional<std::string> tensor_split_problem(const TensorLayout& layout, int sequences, int heads, int d_model,
                                                int d_ff, int vocab);

}  // namespace exasim
