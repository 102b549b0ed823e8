// Data-parallel training on the CPU: synchronised BatchNorm, training runs on replicas (threads,
// and MPI through mpirun when it is installed) against one replica with the whole batch, and
// what happens when a replica fails, hangs or dies. The communicators' own tests are in
// tests/runtime/test_comm.cpp, the gradient buckets' in test_grad_sync.cpp.
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
#include "train/replica_fixture.h"

using namespace ocrt;
using namespace ocrt::train;
using ocrt::testing::max_rel_diff;
using ocrt::testing::run_command;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;

using ocrt::testing::on_threads;
using ocrt::testing::tiny_crnn;
using ocrt::testing::write_short_lines;
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
