// The autograd engine: recording nodes, the backward pass, and freeing the graph.
#include "runtime/autograd.h"

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "runtime/backend.h"

namespace ocrt {

bool any_requires_grad(const TensorList& inputs) {
  if (!grad_enabled()) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

TensorList Node::apply(const TensorList& grad_outputs) {
  OCRT_CHECK(!released, "backward through '", name,
             "' a second time: its graph was freed by the first backward() (pass retain_graph=true "
             "to the first call if you need to backpropagate twice)");
  return backward(grad_outputs);
}

void Node::release() {
  backward = nullptr;
  next.clear();
  released = true;
}

// Destroying the last tensor of a long chain (x -> y1 -> ... -> y100000) would destroy
// node after node recursively and overflow the stack. Instead, a node that dies hands the
// children it solely owns to a thread-local list, and the outermost destructor drains that
// list in a loop.
Node::~Node() {
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (auto& e : next)
    if (e.node && e.node.use_count() == 1) pending.push_back(std::move(e.node));
  next.clear();
  backward = nullptr;  // a closure may own tensors whose nodes die here too
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // may push more onto `pending`
  }
  draining = false;
}

void record(const char* name, const TensorList& inputs, const TensorList& outputs, BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->backward = std::move(backward);
  node->next.reserve(inputs.size());
  for (const auto& in : inputs) {
    Edge e;
    if (in.defined() && in.requires_grad()) {
      if (in.grad_fn()) {
        e = {in.grad_fn(), in.impl()->output_nr};
      } else {
        auto acc = std::make_shared<Node>();
        acc->name = "AccumulateGrad";
        acc->leaf = in.impl_ptr();
        acc->outputs.push_back({in.shape(), in.dtype(), in.device()});
        e = {acc, 0};
      }
    }
    node->next.push_back(std::move(e));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl* o = outputs[i].impl();
    o->grad_fn = node;
    o->output_nr = (int)i;
    o->requires_grad = true;
    node->outputs.push_back({o->shape, o->dtype, outputs[i].device()});
  }
}

namespace {

// ---- Accumulating gradients: the engine does "+=" itself, with the tensor table's add kernel
// (no recording, no broadcasting: every gradient has exactly its tensor's shape, checked as it
// arrives).

// a + b in a fresh tensor.
Tensor add_kernel(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (out.numel() > 0) kernel(a.device(), &TensorBackend::binary, "autograd (accumulate)")(BinaryOp::add, a, b, out);
  return out;
}

// The gradient collected so far for one output of a node. The first gradient to arrive is
// kept as it was handed over, without a copy; it may be shared (add's backward hands one tensor
// to both its inputs), so it is never written. The second is added into a fresh tensor the
// engine owns (copy on first write), and every later one into that tensor, in place.
struct GradSlot {
  Tensor grad;
  bool owned = false;

  void add(const Tensor& g) {
    if (!grad.defined()) {
      grad = g;
    } else if (!owned) {
      grad = add_kernel(grad, g);
      owned = true;
    } else if (grad.numel() > 0) {
      kernel(grad.device(), &TensorBackend::binary, "autograd (accumulate)")(BinaryOp::add, grad, g, grad);
    }
  }
};

// Whether nothing but this Tensor object reaches g's elements: no other Tensor shares its impl
// or its storage (another leaf's slot, a closure's saved tensors, a view), and it is a plain
// contiguous tensor over the whole of its storage, outside any graph.
bool sole_owner(const Tensor& g) {
  return g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous() && g.offset() == 0 &&
         g.storage()->nbytes() == (size_t)g.numel() * g.itemsize() && !g.requires_grad() && !g.grad_fn();
}

// A leaf's .grad: never a tensor that a backward closure or another leaf may hold (optimizers
// change .grad in place), and never the .grad a caller may still hold from before this pass.
// The first gradient is copied, unless `may_take` says the caller hands over its only
// reference and sole_owner finds nothing else reaching it (a backward's fresh result, the usual
// case for a parameter): then it becomes the .grad as it is, which saves a copy of every
// parameter's gradient per step (on a GPU, a launch each).
void accumulate_into_leaf(TensorImpl* leaf, Tensor&& g, bool may_take) {
  if (leaf->grad) leaf->grad = add_kernel(Tensor(leaf->grad), g).impl_ptr();
  else if (may_take && sole_owner(g)) leaf->grad = g.impl_ptr();
  else leaf->grad = g.clone().impl_ptr();
}

void check_grad_matches(const Tensor& g, const OutputMeta& m, const std::string& where) {
  OCRT_CHECK(g.shape() == m.shape, where, ": gradient has shape ", shape_str(g.shape()), ", expected ",
             shape_str(m.shape));
  OCRT_CHECK(g.dtype() == m.dtype, where, ": gradient is ", dtype_name(g.dtype()), ", expected ",
             dtype_name(m.dtype));
  OCRT_CHECK(g.device() == m.device, where, ": gradient is on ", g.device().str(), ", expected ",
             m.device.str());
}

}  // namespace

namespace {
thread_local LeafGradHook* active_leaf_hook = nullptr;
}  // namespace

LeafGradHook::LeafGradHook(std::function<void(const TensorImpl*)> fn) : fn_(std::move(fn)), previous_(active_leaf_hook) {
  active_leaf_hook = this;
}

LeafGradHook::~LeafGradHook() { active_leaf_hook = previous_; }

namespace {

// One backward pass, in the three phases run_backward names: seed the roots' gradients, count
// the edges into every reachable node, then run the nodes in topological order.
struct BackwardPass {
  bool retain_graph = false;
  // The active LeafGradHook's function (null when none): called once per leaf, when its
  // gradient for this pass is complete.
  const std::function<void(const TensorImpl*)>* leaf_done = nullptr;

  std::unordered_map<Node*, std::vector<GradSlot>> buffers;  // gradients waiting for a node, per output
  std::vector<std::shared_ptr<Node>> root_nodes;
  std::vector<TensorImpl*> leaf_roots;          // roots that are leaves: accumulated at seeding
  std::unordered_map<Node*, int> deps;          // edges into a node that have not delivered yet
  std::unordered_map<const TensorImpl*, int> leaf_uses;  // AccumulateGrad nodes left per leaf (hook only)

  // Adds g to the gradient of output `output_nr` of node n.
  void deliver(Node* n, int output_nr, const Tensor& g) {
    auto& buf = buffers[n];
    buf.resize(n->outputs.size());
    buf[(size_t)output_nr].add(g);
  }

  // Leaves accumulate at once, other roots go into their node's input buffer.
  void seed(const TensorList& roots, const TensorList& grads) {
    for (size_t i = 0; i < roots.size(); ++i) {
      const Tensor& r = roots[i];
      OCRT_CHECK(r.requires_grad(), "backward: tensor ", i, " (shape ", shape_str(r.shape()),
                 ") does not require grad and has no grad_fn");
      check_grad_matches(grads[i], {r.shape(), r.dtype(), r.device()}, "backward");
      if (!r.grad_fn()) {
        accumulate_into_leaf(r.impl(), Tensor(grads[i]), /*may_take=*/false);  // the caller's seed
        leaf_roots.push_back(r.impl());
        continue;
      }
      deliver(r.grad_fn().get(), r.impl()->output_nr, grads[i]);
      root_nodes.push_back(r.grad_fn());
    }
  }

  // Counts, for every reachable node, how many edges point at it (iterative DFS), and for the
  // leaf hook how many AccumulateGrad nodes of each leaf the pass will run (one per op that
  // took the leaf as an input).
  void count() {
    std::unordered_set<Node*> seen;
    std::vector<Node*> stack;
    for (auto& n : root_nodes)
      if (seen.insert(n.get()).second) stack.push_back(n.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      OCRT_CHECK(!n->released, "backward through '", n->name,
                 "' a second time: its graph was freed by the first backward() (pass retain_graph=true "
                 "to the first call if you need to backpropagate twice)");
      if (leaf_done && n->leaf) leaf_uses[n->leaf.get()]++;
      for (auto& e : n->next) {
        if (!e.node) continue;
        deps[e.node.get()]++;
        if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
      }
    }
    if (leaf_done)
      for (TensorImpl* leaf : leaf_roots)
        if (!leaf_uses.count(leaf)) (*leaf_done)(leaf);  // a root that is a leaf and nothing else
  }

  // Kahn's algorithm: a node runs once every edge into it has delivered its gradient. The
  // queue holds owning pointers: releasing a node drops its edges, which may be the last
  // owners of the nodes waiting in the queue.
  void run() {
    std::deque<std::shared_ptr<Node>> ready;
    for (auto& n : root_nodes)
      if (deps[n.get()] == 0 && std::find(ready.begin(), ready.end(), n) == ready.end()) ready.push_back(n);
    while (!ready.empty()) {
      std::shared_ptr<Node> keep = std::move(ready.front());
      ready.pop_front();
      run_node(keep.get(), ready);
    }
  }

  // Runs one node on the gradients its outputs received, passes the results along its edges,
  // and queues the nodes that have now heard from every edge.
  void run_node(Node* n, std::deque<std::shared_ptr<Node>>& ready) {
    TensorList grad_out(n->outputs.size());
    if (auto it = buffers.find(n); it != buffers.end()) {
      for (size_t i = 0; i < it->second.size(); ++i) grad_out[i] = std::move(it->second[i].grad);
      buffers.erase(it);
    }
    bool any = false;
    for (auto& g : grad_out) any |= g.defined();

    if (n->leaf) {
      if (grad_out[0].defined()) accumulate_into_leaf(n->leaf.get(), std::move(grad_out[0]), /*may_take=*/true);
      if (leaf_done && --leaf_uses[n->leaf.get()] == 0) (*leaf_done)(n->leaf.get());
      return;
    }
    TensorList grad_in;
    if (any) {
      for (size_t i = 0; i < grad_out.size(); ++i)
        if (!grad_out[i].defined())
          grad_out[i] = Tensor::zeros(n->outputs[i].shape, n->outputs[i].dtype, n->outputs[i].device);
      grad_in = n->apply(grad_out);
      OCRT_CHECK(grad_in.size() == n->next.size(), "autograd: backward of '", n->name, "' returned ",
                 grad_in.size(), " gradients for ", n->next.size(), " inputs");
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      Edge& e = n->next[i];
      if (!e.node) continue;
      if (any && grad_in[i].defined()) {
        check_grad_matches(grad_in[i], e.node->outputs[e.output_nr],
                           "autograd: gradient of input " + std::to_string(i) + " of '" + n->name + "'");
        deliver(e.node.get(), e.output_nr, grad_in[i]);
      }
      if (--deps[e.node.get()] == 0) ready.push_back(e.node);
    }
    if (!retain_graph) n->release();
  }
};

}  // namespace

void run_backward(const TensorList& roots, const TensorList& grads, bool retain_graph) {
  OCRT_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(), " gradients");
  NoGradGuard no_grad;  // gradients are computed without recording (no higher-order grads)
  BackwardPass pass;
  pass.retain_graph = retain_graph;
  if (active_leaf_hook) pass.leaf_done = &active_leaf_hook->fn_;
  pass.seed(roots, grads);
  pass.count();
  pass.run();
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor g = gradient;
  if (!g.defined()) {
    OCRT_CHECK(numel() == 1, "backward: gradient can be implicitly created only for a one-element "
               "output; this tensor has shape ", shape_str(shape()), ", so pass a gradient of that shape");
    g = Tensor::ones(shape(), dtype(), device());
  }
  run_backward({*this}, {g}, retain_graph);
}

}  // namespace ocrt
