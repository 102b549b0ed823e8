// Data-parallel training on the CPU: the communicators (threads, and MPI through mpirun when it
// is installed), gradient buckets, the equivalence of sharded and whole-batch gradients and
// training runs, and what happens when a replica fails, hangs or dies.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "models/crnn.h"
#include "models/model_file.h"
#include "ops/conv.h"
#include "ops/cpu/winograd.h"
#include "ops/ctc.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "gradcheck.h"
#include "runtime/comm.h"
#include "runtime/image.h"
#include "runtime/mpi_comm.h"
#include "golden_runner.h"
#include "run_command.h"
#include "temp_dir.h"
#include "twin_comm.h"
#include "train/grad_sync.h"
#include "train/loader.h"
#include "train/synth.h"
#include "train/trainer.h"

using namespace ocrt;
using namespace ocrt::train;
using ocrt::testing::max_rel_diff;
using ocrt::testing::run_command;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Short lines rendered with a Debian font into dir (name.png + name.gt.txt); false without fonts.
bool write_short_lines(const fs::path& dir, int count) {
  auto dirs = default_font_dirs();
  if (dirs.empty()) return false;
  auto fonts = load_fonts(dirs);
  if (fonts.empty()) return false;
  const char* words[] = {"ab", "cat", "dog", "x1", "ocr", "zip", "07", "hi", "tea", "sun", "map", "ink"};
  for (int i = 0; i < count; ++i) {
    const std::string text = words[i % 12];
    const std::string name = "l" + std::to_string(i);
    save_gray_png((dir / (name + ".png")).string(), fonts[(size_t)i % fonts.size()]->render(text, 26 + i % 5));
    std::ofstream(dir / (name + ".gt.txt")) << text << "\n";
  }
  return true;
}

// Runs fn(rank, comm) on `size` threads with thread communicators; rethrows the error of the
// rank that failed first (the others then fail because it aborted the communicator).
void on_threads(int size, double timeout_s, const std::function<void(int, Communicator&)>& fn) {
  auto comms = make_thread_communicators(size, timeout_s);
  std::mutex mu;
  std::string first_error;
  std::vector<std::thread> pool;
  for (int r = 0; r < size; ++r)
    pool.emplace_back([&, r] {
      try {
        fn(r, *comms[(size_t)r]);
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.empty()) first_error = e.what();
        }
        comms[(size_t)r]->abort();
      }
    });
  for (auto& t : pool) t.join();
  if (!first_error.empty()) throw std::runtime_error(first_error);
}

nn::CRNNConfig tiny_crnn(int64_t classes) {
  nn::CRNNConfig c;
  c.channels = {8, 8, 16, 16, 16, 16, 16};
  c.hidden = 12;
  c.num_classes = classes;
  c.batch_norm = false;
  return c;
}

}  // namespace

TEST_CASE("thread communicators: sum, mean and max in rank order, broadcast, barrier", "[distributed]") {
  const int n = 3;
  std::vector<std::vector<float>> got(n);
  on_threads(n, 30, [&](int r, Communicator& c) {
    CHECK(c.size() == n);
    CHECK(c.rank() == r);
    Tensor a = Tensor::from_vector(std::vector<float>{(float)r, 1.0f, -(float)r, 10.0f * (float)r, 0.5f});
    Tensor m = a.clone(), x = a.clone();
    c.all_reduce({a}, ReduceOp::sum);
    c.all_reduce({m}, ReduceOp::mean);
    c.all_reduce({x}, ReduceOp::max);
    CHECK(a.to_vector<float>() == std::vector<float>{3, 3, -3, 30, 1.5f});
    CHECK(m.to_vector<float>() == std::vector<float>{1, 1, -1, 10, 0.5f});
    CHECK(x.to_vector<float>() == std::vector<float>{2, 1, 0, 20, 0.5f});
    Tensor b = Tensor::full({4}, (double)(r + 1), DType::f64);
    c.broadcast({b}, 2);
    CHECK(b.to_vector<double>() == std::vector<double>(4, 3.0));
    c.barrier();
    CHECK(c.all_reduce_values({1.0, (double)r}, ReduceOp::sum, Device::cpu()) == std::vector<double>{3.0, 3.0});
  });
}

TEST_CASE("thread communicators: a rank that never joins makes the others fail within the timeout", "[distributed]") {
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    on_threads(2, 1.0, [&](int r, Communicator& c) {
      if (r == 1) return;  // never joins the collective
      Tensor a = Tensor::ones({3});
      c.all_reduce({a}, ReduceOp::sum);
    });
  } catch (const std::exception& e) {
    what = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_THAT(what, Catch::Contains("rank 0") && Catch::Contains("did not complete within 1 s"));
  CHECK(waited < 10);
  // Mismatched sizes are an error too, not a silent partial sum.
  CHECK_THROWS_WITH(on_threads(2, 5,
                               [&](int r, Communicator& c) {
                                 Tensor a = Tensor::ones({r == 0 ? 3 : 4});
                                 c.all_reduce({a}, ReduceOp::sum);
                               }),
                    Catch::Contains("differ between ranks"));
}

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

TEST_CASE("synchronised BatchNorm on shards equals BatchNorm on the whole batch: outputs, gradients, running "
          "statistics", "[distributed]") {
  // 5 lines split 2 + 3, as the loader shards them; float64 so that only summation order differs.
  const Tensor x = ocrt::testing::det_uniform({5, 3, 4, 6}, 31, -2.0, 3.0);
  const Tensor r = ocrt::testing::det_uniform({5, 3, 4, 6}, 32);  // the loss: sum(y * r)
  auto fresh = [](int64_t C) {
    std::vector<Tensor> t = {Tensor::zeros({C}, DType::f64), Tensor::ones({C}, DType::f64),
                             ocrt::testing::det_uniform({C}, 33, 0.5, 1.5),
                             ocrt::testing::det_uniform({C}, 34)};
    t[2].set_requires_grad(true);
    t[3].set_requires_grad(true);
    return t;  // running mean, running var, weight, bias
  };
  // The whole batch, plain BatchNorm.
  auto whole = fresh(3);
  Tensor xw = x.clone().set_requires_grad(true);
  Tensor yw = batch_norm(xw, whole[0], whole[1], whole[2], whole[3], true, 0.1, 1e-5);
  sum(mul(yw, r)).backward();

  std::vector<Tensor> y(2), dx(2), dw(2), db(2), rm(2), rv(2);
  on_threads(2, 30, [&](int rank, Communicator& c) {
    const int64_t at = rank == 0 ? 0 : 2, n = rank == 0 ? 2 : 3;
    auto mine = fresh(3);
    Tensor xs = x.narrow(0, at, n).contiguous().clone().set_requires_grad(true);
    Tensor ys = sync_batch_norm(xs, mine[0], mine[1], mine[2], mine[3], c, 0.1, 1e-5);
    sum(mul(ys, r.narrow(0, at, n))).backward();
    y[(size_t)rank] = ys.detach();
    dx[(size_t)rank] = xs.grad();
    dw[(size_t)rank] = mine[2].grad();
    db[(size_t)rank] = mine[3].grad();
    rm[(size_t)rank] = mine[0];
    rv[(size_t)rank] = mine[1];
  });
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t at = rank == 0 ? 0 : 2, n = rank == 0 ? 2 : 3;
    INFO("rank " << rank);
    CHECK(max_rel_diff(y[(size_t)rank], yw.detach().narrow(0, at, n), 1e-6) < 1e-12);
    CHECK(max_rel_diff(dx[(size_t)rank], xw.grad().narrow(0, at, n), 1e-6) < 1e-12);
    CHECK(max_rel_diff(rm[(size_t)rank], whole[0], 1e-6) < 1e-12);  // every replica: the global statistics
    CHECK(max_rel_diff(rv[(size_t)rank], whole[1], 1e-6) < 1e-12);
  }
  // weight and bias: each replica holds its own part; the gradient sync adds them.
  CHECK(max_rel_diff(add(dw[0], dw[1]), whole[2].grad(), 1e-6) < 1e-12);
  CHECK(max_rel_diff(add(db[0], db[1]), whole[3].grad(), 1e-6) < 1e-12);
  // Per-replica BatchNorm (the default) differs: the test above would fail without the sync.
  auto alone = fresh(3);
  Tensor y0 = batch_norm(x.narrow(0, 0, 2).contiguous(), alone[0], alone[1], alone[2].detach(), alone[3].detach(), true);
  CHECK(max_rel_diff(y0, yw.detach().narrow(0, 0, 2), 1e-6) > 1e-3);
}

namespace {

TrainConfig dp_config(const fs::path& data, const fs::path& out) {
  TrainConfig c;
  c.arch = "crnn-s";
  c.batch_norm = false;
  c.train = {data.string()};
  c.out = out.string();
  c.batch = 6;
  c.steps = 4;
  c.workers = 1;
  c.bucket_window = 0;
  c.augment = false;
  c.shuffle = true;
  c.optimizer = OptimizerKind::sgd;
  c.momentum = 0.9;
  c.lr = 0.02;
  c.schedule = ScheduleKind::constant;
  c.clip_grad = 5;
  c.log_every = 1000;
  c.save_every = 1000;
  c.seed = 5;
  return c;
}

void check_same_weights(const std::string& a, const std::string& b, double tol) {
  nn::ModelFile fa = nn::load_model_file(a), fb = nn::load_model_file(b);
  REQUIRE(fa.weights.size() == fb.weights.size());
  double worst = 0;
  for (auto& [name, t] : fa.weights) {
    REQUIRE(fb.weights.count(name));
    worst = std::max(worst, max_rel_diff(fb.weights.at(name), t, 1e-6));
  }
  INFO(a << " vs " << b);
  CHECK(worst < tol);
}

bool have_mpirun() { return mpi_built() && run_command("command -v mpirun", nullptr) == 0; }

std::string mpirun(int np) {
  // --oversubscribe: CI machines have 2 cores; root is allowed (CI containers run as root).
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 "
         "mpirun -np " + std::to_string(np) + " ";
}

std::string train_flags(const fs::path& data, const fs::path& out) {
  return std::string(OCRT_BINARY_DIR) + "/ocrt-train --train " + data.string() + " --out " + out.string() +
         " --arch crnn-s --no-batch-norm --batch 6 --steps 4 --workers 1 --bucket-window 0 --no-augment"
         " --optimizer sgd --momentum 0.9 --lr 0.02 --schedule constant --clip-grad 5 --seed 5 --threads 1"
         " --log-every 1000";
}

}  // namespace

TEST_CASE("two CPU replicas in threads train to the same weights as one replica with the whole batch",
          "[distributed]") {
  TempDir data("dp-data"), one("dp-one"), two("dp-two");
  if (!write_short_lines(data.path, 12)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TrainResult a = run_training(dp_config(data.path, one.path));
  TrainConfig c2 = dp_config(data.path, two.path);
  c2.devices = {Device::cpu(), Device::cpu()};
  TrainResult b = run_training(c2);
  CHECK(a.steps == 4);
  CHECK(b.steps == 4);
  CHECK(std::abs(a.final_loss - b.final_loss) < 1e-4 * std::abs(a.final_loss));
  check_same_weights(a.best_model, b.best_model, 1e-4);
  // The summary line of the replicated run counts the whole global batch.
  std::ifstream m(two.path / "metrics.jsonl");
  std::string line, last;
  while (std::getline(m, line)) last = line;
  CHECK_THAT(last, Catch::Contains("\"replicas\":2"));

  // Stopped after step 2 and resumed with the same command: the same weights again (the data
  // order and the shards depend only on the seed and the step).
  TempDir three("dp-three");
  TrainConfig c3 = c2;
  c3.out = three.path.string();
  c3.stop_at = 2;
  CHECK(run_training(c3).steps == 2);
  c3.stop_at = 0;
  c3.resume = true;
  TrainResult r3 = run_training(c3);
  CHECK(r3.steps == 4);
  check_same_weights(b.best_model, r3.best_model, 1e-6);
}

TEST_CASE("conv modes fast and exact train a norm-free CRNN to weights within rounding of each other", "[trainer]") {
  TempDir data("conv-data"), fast("conv-fast"), exact("conv-exact");
  if (!write_short_lines(data.path, 12)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TrainConfig c = dp_config(data.path, fast.path);
  TrainResult a = run_training(c);
  CHECK(conv_mode() == ConvMode::fast);
  c.out = exact.path.string();
  c.conv = ConvMode::exact;
  TrainResult b = run_training(c);
  CHECK(conv_mode() == ConvMode::fast);  // the run's mode ends with the run
  CHECK(std::abs(a.final_loss - b.final_loss) < 1e-4 * std::abs(a.final_loss));
  check_same_weights(a.best_model, b.best_model, 1e-4);
  // ... and the flag does choose the other path: the weights are not bit-identical. A build
  // without Winograd (no AVX2 or AVX-512 GEMM, e.g. OCRT_NATIVE=OFF) has one path only, and
  // there the two runs must agree bit for bit.
  nn::ModelFile fa = nn::load_model_file(a.best_model), fb = nn::load_model_file(b.best_model);
  bool any_differs = false;
  for (auto& [name, t] : fa.weights) any_differs |= t.to_vector<float>() != fb.weights.at(name).to_vector<float>();
#if defined(OCRT_CPU_WINOGRAD)
  CHECK(any_differs);
#else
  CHECK_FALSE(any_differs);
#endif
}

TEST_CASE("with BatchNorm, --sync-batch-norm makes two replicas train like one with the whole batch",
          "[distributed]") {
  TempDir data("dp-bn-data"), one("dp-bn-one"), two("dp-bn-two"), plain("dp-bn-plain");
  if (!write_short_lines(data.path, 12)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TrainConfig c1 = dp_config(data.path, one.path);
  c1.batch_norm = true;
  // Exact convolutions: the two runs differ only by the rounding of the synchronised statistics
  // (about 1e-7), and with BatchNorm the CRNN's max-pools hold near-ties that a perturbation of
  // 1e-5 flips, sending gradients elsewhere (a 1e-4 change of the learning rate moves a few
  // weights by 2% within 3 steps, with either conv mode; without BatchNorm, 1e-3 moves them by
  // 1e-3). Winograd's rounding in fast mode sits right at that edge (docs/ops/conv.md).
  c1.conv = ConvMode::exact;
  TrainResult a = run_training(c1);
  TrainConfig c2 = c1;
  c2.out = two.path.string();
  c2.devices = {Device::cpu(), Device::cpu()};
  c2.sync_batch_norm = true;
  TrainResult b = run_training(c2);
  CHECK(std::abs(a.final_loss - b.final_loss) < 1e-4 * std::abs(a.final_loss));
  check_same_weights(a.best_model, b.best_model, 1e-4);  // weights and running statistics
  // Without the sync each replica normalises its own 3 lines: a different trajectory.
  TrainConfig c3 = c2;
  c3.out = plain.path.string();
  c3.sync_batch_norm = false;
  TrainResult p = run_training(c3);
  nn::ModelFile fa = nn::load_model_file(a.best_model), fp = nn::load_model_file(p.best_model);
  double worst = 0;
  for (auto& [name, t] : fa.weights) worst = std::max(worst, max_rel_diff(fp.weights.at(name), t, 1e-6));
  CHECK(worst > 1e-3);
}

TEST_CASE("a failing replica thread ends the whole run with an error naming it", "[distributed]") {
  TempDir data("dp-fail-data"), out("dp-fail-out");
  if (!write_short_lines(data.path, 6)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TrainConfig c = dp_config(data.path, out.path);
  c.devices = {Device::cpu(), Device::cpu()};
  set_fault_injection("1:2:throw");
  c.comm_timeout = 20;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(run_training(c), Catch::Contains("replica") && Catch::Contains("injected fault at step 2"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 60);
  set_fault_injection("0:1:throw");
  CHECK_THROWS_WITH(run_training(c), Catch::Contains("replica 0") && Catch::Contains("injected fault at step 1"));
  // A batch smaller than the replicas is refused up front.
  set_fault_injection("");
  c.batch = 1;
  CHECK_THROWS_WITH(run_training(c), Catch::Contains("--batch 1 is smaller than the 2 replicas"));
}

TEST_CASE("mpirun -np 2: the same weights as one process, and a hung or killed rank ends the job", "[distributed][mpi]") {
  if (!have_mpirun()) {
    WARN("mpirun or an MPI build is missing: skipped");
    return;
  }
  TempDir data("mpi-data"), one("mpi-one"), two("mpi-two"), hang("mpi-hang"), kill("mpi-kill");
  if (!write_short_lines(data.path, 12)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  std::string out;
  REQUIRE(run_command(train_flags(data.path, one.path), &out) == 0);
  INFO(out);
  int rc = run_command(mpirun(2) + train_flags(data.path, two.path), &out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK_THAT(out, Catch::Contains("2 MPI ranks"));
  // Only rank 0 prints the summary.
  size_t summaries = 0;
  for (size_t at = out.find("\"steps\":4"); at != std::string::npos; at = out.find("\"steps\":4", at + 1)) ++summaries;
  CHECK(summaries == 1);
  check_same_weights((one.path / "best.safetensors").string(), (two.path / "best.safetensors").string(), 1e-4);
  // Summing the buckets during the backward pass (MPI's default is after it): the same sums, bit
  // for bit.
  TempDir after("mpi-during");
  rc = run_command(mpirun(2) + train_flags(data.path, after.path) + " --overlap on", &out);
  INFO(out);
  REQUIRE(rc == 0);
  check_same_weights((two.path / "best.safetensors").string(), (after.path / "best.safetensors").string(), 1e-30);
  // With BatchNorm and --sync-batch-norm: again the same weights as one process (with exact
  // convolutions in both, as in the thread-replica test above, which says why).
  TempDir bn_one("mpi-bn-one"), bn_two("mpi-bn-two");
  std::string bn_flags = train_flags(data.path, bn_one.path);
  bn_flags.replace(bn_flags.find(" --no-batch-norm"), 16, " --conv exact");
  REQUIRE(run_command(bn_flags, &out) == 0);
  bn_flags = train_flags(data.path, bn_two.path);
  bn_flags.replace(bn_flags.find(" --no-batch-norm"), 16, " --sync-batch-norm --conv exact");
  rc = run_command(mpirun(2) + bn_flags, &out);
  INFO(out);
  REQUIRE(rc == 0);
  check_same_weights((bn_one.path / "best.safetensors").string(), (bn_two.path / "best.safetensors").string(), 1e-4);

  // Rank 1 hangs at step 2: rank 0's all-reduce times out, names itself, and the job ends.
  auto t0 = std::chrono::steady_clock::now();
  rc = run_command(mpirun(2) + train_flags(data.path, hang.path) + " --comm-timeout 3 --fault 1:2:hang", &out);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(out);
  CHECK(rc != 0);
  CHECK(rc != 124);  // not ended by the outer `timeout`
  CHECK_THAT(out, Catch::Contains("rank 0") && Catch::Contains("did not complete within 3 s"));
  CHECK(waited < 120);

  // Rank 1 is killed (SIGKILL) at step 2: the job ends with an error, within the timeout.
  t0 = std::chrono::steady_clock::now();
  rc = run_command(mpirun(2) + train_flags(data.path, kill.path) + " --comm-timeout 10 --fault 1:2:kill", &out);
  waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(out);
  CHECK(rc != 0);
  CHECK(rc != 124);
  CHECK_THAT(out, Catch::Contains("rank 1") || Catch::Contains("rank 0"));
  CHECK(waited < 120);
}
