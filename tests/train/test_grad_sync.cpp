// Gradient synchronisation between replicas (train/grad_sync.h): buckets that cover every
// parameter once, parameters without a gradient on some replica, sharded gradients that equal
// the whole batch's, and buckets started during the backward pass.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "golden_runner.h"
#include "models/crnn.h"
#include "ops/conv.h"
#include "ops/ctc.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/comm.h"
#include "temp_dir.h"
#include "train/replica_fixture.h"
#include "twin_comm.h"
#include "train/grad_sync.h"
#include "train/loader.h"
#include "train/trainer.h"

using namespace ocrt;
using namespace ocrt::train;
using ocrt::testing::max_rel_diff;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;
using ocrt::testing::on_threads;
using ocrt::testing::tiny_crnn;
using ocrt::testing::write_short_lines;

TEST_CASE("gradient buckets cover every parameter exactly once, in reverse order, within the size", "[distributed]") {
  Generator gen(3);
  nn::CRNN model(nn::CRNNConfig::preset("crnn-s", 40), gen);
  const auto params = model.parameters();
  for (int64_t bytes : {int64_t(1), int64_t(64 << 10), int64_t(1 << 20), int64_t(4 << 20), int64_t(1) << 40}) {
    GradSync sync(params, bytes);
    std::vector<size_t> order;
    for (const auto& b : sync.buckets()) {
      int64_t numel = 0;
      for (size_t k : b.params) {
        order.push_back(k);
        numel += params[k].numel();
      }
      CHECK(b.numel == numel);
      // A bucket over the limit holds a single parameter that is larger than the limit alone.
      if (numel * 4 > bytes) CHECK(b.params.size() == 1);
    }
    REQUIRE(order.size() == params.size());
    for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == params.size() - 1 - i);
    if (bytes == 1) CHECK(sync.buckets().size() == params.size());
    if (bytes == (int64_t(1) << 40)) CHECK(sync.buckets().size() == 1);
  }
}

TEST_CASE("gradient sync: parameters without a gradient on some replica still get the sum", "[distributed]") {
  std::vector<std::vector<float>> a_after(2), b_after(2);
  on_threads(2, 30, [&](int r, Communicator& c) {
    Tensor a = Tensor::zeros({5}), b = Tensor::zeros({2, 3});
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    a.set_grad(Tensor::full({5}, (double)(r + 1)));
    if (r == 1) b.set_grad(Tensor::full({2, 3}, 4.0));  // rank 0 has none for b
    GradSync sync({a, b}, 16);                           // one bucket per parameter
    CHECK(sync.buckets().size() == 2);
    sync.all_reduce(c);
    a_after[(size_t)r] = a.grad().to_vector<float>();
    REQUIRE(b.grad().defined());
    b_after[(size_t)r] = b.grad().to_vector<float>();
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(a_after[(size_t)r] == std::vector<float>(5, 3.0f));
    CHECK(b_after[(size_t)r] == std::vector<float>(6, 4.0f));
  }
}

TEST_CASE("sharded gradients, scaled by each shard's share and summed, equal the whole batch's", "[distributed]") {
  TempDir data("dp-grad");
  if (!write_short_lines(data.path, 5)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  const nn::Charset charset = nn::Charset::ascii();
  auto report = validate_samples(read_sources({data.path.string()}), charset);
  REQUIRE(report.good.size() == 5);
  auto dataset = std::make_shared<FileDataset>(report.good);
  LoaderOptions lo;
  lo.batch = 5;  // does not divide by 2: shards of 2 and 3 lines
  lo.workers = 1;
  lo.shuffle = false;

  auto loss_of = [](nn::CRNN& model, const Batch& b) {
    std::vector<int64_t> frames, lengths, flat;
    for (size_t i = 0; i < b.widths.size(); ++i) {
      frames.push_back(nn::CRNN::frames(b.widths[i]));
      lengths.push_back((int64_t)b.targets[i].size());
      flat.insert(flat.end(), b.targets[i].begin(), b.targets[i].end());
    }
    CTCLossOptions o;
    o.reduction = Reduction::mean;
    o.zero_infinity = true;
    return ctc_loss_from_logits(model.forward(b.images, b.widths), Tensor::from_vector(flat), frames, lengths, o);
  };

  // The whole batch on one replica.
  Generator gen(11);
  nn::CRNN whole(tiny_crnn(charset.num_classes()), gen);
  Loader full_loader(dataset, lo);
  const Batch full = full_loader.next();
  loss_of(whole, full).backward();
  const nn::StateDict init = whole.state_dict();

  // Two replicas, each with its shard, through the thread communicator.
  std::vector<std::vector<Tensor>> grads(2);
  std::vector<Shape> image_shapes(2);
  on_threads(2, 60, [&](int r, Communicator& c) {
    Generator g(99 + r);  // different initial weights: the broadcast must fix them
    nn::CRNN model(tiny_crnn(charset.num_classes()), g);
    if (r == 0) model.load_state_dict(init);
    std::vector<Tensor> all;
    for (auto& [name, t] : model.named_parameters()) all.push_back(t);
    broadcast_tensors(c, all, 0);
    LoaderOptions so = lo;
    so.shard_index = r;
    so.shard_count = 2;
    Loader loader(dataset, so);
    const Batch b = loader.next();
    image_shapes[(size_t)r] = b.images.shape();
    (loss_of(model, b) * ((double)b.widths.size() / 5.0)).backward();
    GradSync sync(model.parameters(), 1 << 12);
    sync.all_reduce(c);
    for (const Tensor& p : model.parameters()) grads[(size_t)r].push_back(p.grad().clone());
  });
  CHECK(image_shapes[0] == Shape{2, 1, 32, full.images.size(3)});  // padded like the whole batch
  CHECK(image_shapes[1] == Shape{3, 1, 32, full.images.size(3)});
  const auto params = whole.parameters();
  REQUIRE(grads[0].size() == params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    INFO("parameter " << k);
    CHECK(max_rel_diff(params[k].grad(), grads[0][k], 1e-6) < 1e-4);
    CHECK(max_rel_diff(grads[1][k], grads[0][k], 1e-6) == 0);  // every replica holds the same sum
  }
}

namespace {

// TwinCommunicator (every sum twice the value) that also records each started collective and
// whether `probe` (the first parameter: the stem, which the backward pass reaches last) had its
// gradient yet at that moment.
class EchoCommunicator : public ocrt::testing::TwinCommunicator {
 public:
  explicit EchoCommunicator(Tensor probe) : probe_(std::move(probe)) {}
  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& t, ReduceOp op) override {
    started.push_back({t.numel(), probe_.grad().defined()});
    return Communicator::start_all_reduce(t, op);
  }
  std::vector<std::pair<int64_t, bool>> started;

 private:
  Tensor probe_;
};

}  // namespace

TEST_CASE("gradient sync overlapped with backward: buckets start in order, during the pass, same sums",
          "[distributed]") {
  const Tensor images = ocrt::testing::det_uniform({2, 1, 32, 40}, 7, 0.0, 1.0).to(DType::f32);
  const std::vector<int64_t> widths = {40, 28};
  auto loss_of = [&](nn::CRNN& m) {
    Tensor out = m.forward(images, widths);
    return sum(mul(out, out));
  };
  Generator g1(21), g2(21);
  nn::CRNN ref(tiny_crnn(12), g1), model(tiny_crnn(12), g2);
  loss_of(ref).backward();  // no sync: the reference gradients

  const auto params = model.parameters();
  // An extra parameter that the pass never reaches, registered first (so in the last bucket).
  Tensor unused = Tensor::ones({3}).set_requires_grad();
  std::vector<Tensor> all = {unused};
  all.insert(all.end(), params.begin(), params.end());
  GradSync sync(all, 1 << 12);
  REQUIRE(sync.buckets().size() >= 3);
  EchoCommunicator comm(params[0]);
  for (int step = 0; step < 2; ++step) {  // the second step reuses the buffers
    comm.started.clear();
    model.zero_grad();
    unused.zero_grad();
    sync.begin(comm);
    loss_of(model).backward();
    const int early = sync.started_during_backward();
    sync.finish();
    // Every bucket but the last (it holds the unused parameter) started inside the pass, the
    // first ones before backward had reached the stem.
    CHECK(early == (int)sync.buckets().size() - 1);
    REQUIRE(comm.started.size() == sync.buckets().size());
    for (size_t b = 0; b < sync.buckets().size(); ++b) CHECK(comm.started[b].first == sync.buckets()[b].numel);
    CHECK(!comm.started[0].second);
    CHECK(comm.started.back().second);
    const auto rp = ref.parameters();
    for (size_t k = 0; k < params.size(); ++k) {
      INFO("parameter " << k);
      CHECK(max_rel_diff(params[k].grad(), mul(rp[k].grad(), 2.0), 1e-30) == 0);
    }
    REQUIRE(unused.grad().defined());
    CHECK(unused.grad().to_vector<float>() == std::vector<float>(3, 0.f));
  }
  // One rank: begin/finish do nothing.
  auto single = make_single_communicator();
  model.zero_grad();
  sync.begin(*single);
  loss_of(model).backward();
  sync.finish();
  CHECK(sync.started_during_backward() == 0);
  CHECK(max_rel_diff(params[0].grad(), ref.parameters()[0].grad(), 1e-30) == 0);
}
