// The cost of gradient synchronisation for data-parallel training (docs/distributed.md): the
// gradients of a CRNN preset, summed over replicas through train/grad_sync.h's buckets, as the
// trainer does every step. Prints the time per sync and the bandwidths NCCL's tests report:
// algorithm bandwidth = bytes / time, bus bandwidth = algbw * 2 (n - 1) / n (what each link
// carries in a ring all-reduce, comparable across replica counts).
//
//   bench_allreduce [--arch crnn|crnn-s] [--comm threads|nccl] [--replicas N] [--reps 20]
//                   [--bucket-mb 4]
//   mpirun -np N bench_allreduce [--device cpu|cuda] ...      (MPI, or NCCL between GPUs)
//
// threads: N CPU replicas in this process (shared memory). nccl: one replica per visible GPU
// (or --replicas of them). Under mpirun: one replica per rank, MPI for CPU tensors, NCCL for GPU
// tensors (--device cuda takes cuda:<local rank mod GPUs>). Every rank prints its own line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "models/recognizer.h"
#include "runtime/comm.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/mpi_comm.h"
#include "runtime/nccl_comm.h"
#include "runtime/threading.h"
#include "train/grad_sync.h"
#include "timing.h"

using namespace ocrt;

namespace {

struct Settings {
  std::string arch = "crnn", comm = "threads", device = "cpu";
  int replicas = 2, reps = 20;
  double bucket_mb = 4;
};


// One replica: a model's parameters with gradients, synced `reps` times; returns the median.
double time_syncs(const Settings& s, Communicator& comm, Device device, int64_t* bytes) {
  Generator gen(1);
  auto model = nn::make_recognizer(s.arch, 96, gen);
  model->to(device);
  auto params = model->parameters();
  *bytes = 0;
  for (auto& p : params) {
    p.set_grad(Tensor::ones(p.shape(), p.dtype(), device));
    *bytes += p.numel() * (int64_t)p.itemsize();
  }
  train::GradSync sync(params, (int64_t)(s.bucket_mb * (1 << 20)));
  std::vector<double> times;
  for (int r = -2; r < s.reps; ++r) {  // two warm-up syncs
    comm.barrier();
    const double t0 = bench::now_seconds();
    sync.all_reduce(comm);
    if (device.is_cuda()) cuda_synchronize(device.index);
    if (r >= 0) times.push_back(bench::now_seconds() - t0);
  }
  // The sum of ones over n replicas is n everywhere: check one value.
  const float v = params[0].grad().flatten().narrow(0, 0, 1).item();
  if (v != (float)comm.size() * (float)std::pow(comm.size(), s.reps + 1))
    std::fprintf(stderr, "warning: rank %d: unexpected gradient value %g after the syncs\n", comm.rank(), v);
  return bench::median(times);
}

void report(const Settings& s, const Communicator& comm, Device device, int64_t bytes, double t) {
  const int n = comm.size();
  const double algbw = bytes / t / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
  std::printf("%s, %s, rank %d of %d on %s: %.1f MB of gradients, median sync %.3f ms, algbw %.2f GB/s, "
              "busbw %.2f GB/s\n",
              s.arch.c_str(), comm.kind().c_str(), comm.rank(), n, device.str().c_str(), bytes / 1e6, t * 1e3, algbw,
              busbw);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--arch") s.arch = v;
    else if (a == "--comm") s.comm = v;
    else if (a == "--device") s.device = v;
    else if (a == "--replicas") s.replicas = std::stoi(v);
    else if (a == "--reps") s.reps = std::stoi(v);
    else if (a == "--bucket-mb") s.bucket_mb = std::stod(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  // The values grow by a factor n per sync: keep them finite in float32.
  s.reps = std::min(s.reps, 30);
  try {
    set_num_threads(1);
    if (mpi_launched()) {
      MpiSession mpi;
      Device device = Device::cpu();
      std::unique_ptr<Communicator> comm;
      if (s.device == "cuda") {
        device = Device::cuda(mpi.local_rank() % std::max(1, cuda_device_count()));
        const std::string id = mpi.broadcast_bytes(mpi.rank() == 0 ? nccl_unique_id() : std::string(), 0);
        comm = make_nccl_communicator(device.index, mpi.rank(), mpi.size(), id, 120);
      } else {
        comm = make_mpi_communicator(mpi, 120);
      }
      int64_t bytes = 0;
      const double t = time_syncs(s, *comm, device, &bytes);
      report(s, *comm, device, bytes, t);
      comm.reset();
      return 0;
    }
    std::vector<std::unique_ptr<Communicator>> comms;
    std::vector<Device> devices;
    if (s.comm == "nccl") {
      const int gpus = std::min(s.replicas, cuda_device_count());
      std::vector<int> ids;
      for (int i = 0; i < std::max(1, gpus); ++i) ids.push_back(i), devices.push_back(Device::cuda(i));
      comms = make_nccl_communicators(ids, 120);
    } else {
      for (int i = 0; i < s.replicas; ++i) devices.push_back(Device::cpu());
      comms = make_thread_communicators(s.replicas, 120);
    }
    std::vector<std::thread> pool;
    for (size_t r = 0; r < comms.size(); ++r)
      pool.emplace_back([&, r] {
        int64_t bytes = 0;
        const double t = time_syncs(s, *comms[r], devices[r], &bytes);
        if (r == 0) report(s, *comms[r], devices[r], bytes, t);
      });
    for (auto& t : pool) t.join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
  return 0;
}
