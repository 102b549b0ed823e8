// Define-by-run autograd. Every op that sees an input requiring grad records a Node: a
// closure that maps the gradients of its outputs to the gradients of its inputs, plus one
// Edge per input saying where that input's gradient goes next (the input's own grad_fn, or
// an accumulator into a leaf's .grad). backward() walks this graph in topological order.
//
// Rules that keep memory and recursion bounded:
//  - a backward closure captures only what it needs, and tensors it saves are detach()ed
//    (so a saved output never points back at its own node: no reference cycles);
//  - after backward (unless retain_graph) each node drops its closure and edges;
//  - the topological sort is iterative, and so is the destruction of long node chains,
//    so a graph of 100k nodes (an unrolled LSTM) needs no deep stack.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

struct Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  int output_nr = 0;           // which of `node`'s outputs this input was (its gradient's slot)
};

struct OutputMeta {
  Shape shape;
  DType dtype;
  Device device;
};

using TensorList = std::vector<Tensor>;
// Gradients of the outputs (one per output, always defined: missing ones are zeros) ->
// gradients of the inputs (one per input, undefined where the input needs none).
using BackwardFn = std::function<TensorList(const TensorList& grad_outputs)>;

struct Node {
  std::string name;            // the op, for error messages ("mul", "conv2d", ...)
  std::vector<Edge> next;      // one per input
  std::vector<OutputMeta> outputs;
  BackwardFn backward;         // empty for AccumulateGrad
  std::shared_ptr<TensorImpl> leaf;  // set only for AccumulateGrad nodes
  bool released = false;

  TensorList apply(const TensorList& grad_outputs);
  void release();  // drops the closure (and its saved tensors) and the edges
  ~Node();         // iterative: see autograd.cpp
};

// True when grad mode is on and any of the inputs requires grad.
bool any_requires_grad(const TensorList& inputs);

// Records `outputs = op(inputs)` on the tape: makes a Node with `backward`, links it to the
// inputs, and marks the outputs as requiring grad. Call it only when any_requires_grad().
void record(const char* name, const TensorList& inputs, const TensorList& outputs, BackwardFn backward);

// Runs backpropagation from `roots` seeded with `grads` (same shapes). Used by
// Tensor::backward; exposed for multi-root uses such as summing several losses.
void run_backward(const TensorList& roots, const TensorList& grads, bool retain_graph);

// While a LeafGradHook lives, every backward pass run on this thread calls fn(leaf) as soon as
// that leaf's gradient for the pass is complete: every path from the roots to the leaf has
// delivered (a leaf used by several ops is reported once, after the last), while the rest of
// the graph is still being walked. Leaves the pass does not reach are not reported. The hook
// may throw; the pass then stops with that error. Data-parallel training uses it to start
// summing a bucket of gradients across replicas during the backward pass (train/grad_sync.h).
// Hooks nest: the newest one is active, and its destruction restores the previous one.
class LeafGradHook {
 public:
  explicit LeafGradHook(std::function<void(const TensorImpl* leaf)> fn);
  ~LeafGradHook();
  LeafGradHook(const LeafGradHook&) = delete;
  LeafGradHook& operator=(const LeafGradHook&) = delete;

 private:
  friend void run_backward(const TensorList&, const TensorList&, bool);
  std::function<void(const TensorImpl*)> fn_;
  LeafGradHook* previous_;
};

}  // namespace ocrt
