// Helpers of the data-parallel tests (test_distributed.cpp, test_grad_sync.cpp and
// tests/runtime/test_comm.cpp): replicas on threads, a tiny CRNN, short rendered lines.
#pragma once
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "models/crnn.h"
#include "runtime/comm.h"
#include "runtime/image.h"
#include "train/synth.h"

namespace ocrt::testing {

// Short lines rendered with a Debian font into dir (name.png + name.gt.txt); false without fonts.
inline bool write_short_lines(const std::filesystem::path& dir, int count) {
  auto dirs = train::default_font_dirs();
  if (dirs.empty()) return false;
  auto fonts = train::load_fonts(dirs);
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
inline void on_threads(int size, double timeout_s, const std::function<void(int, Communicator&)>& fn) {
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

inline nn::CRNNConfig tiny_crnn(int64_t classes) {
  nn::CRNNConfig c;
  c.channels = {8, 8, 16, 16, 16, 16, 16};
  c.hidden = 12;
  c.num_classes = classes;
  c.batch_norm = false;
  return c;
}

}  // namespace ocrt::testing
