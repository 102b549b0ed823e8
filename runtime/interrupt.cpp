// Ctrl-C and SIGTERM: a flag for the first signal, an immediate exit for the second (see interrupt.h).
#include "runtime/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace ocrt {

namespace {

// Lock-free, so the handler may touch it (std::atomic<int> is on every platform ocrt builds for).
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

// Only async-signal-safe calls here: an atomic exchange, write(2) and _exit.
extern "C" void on_interrupt(int sig) {
  if (g_signal.exchange(sig) == 0) return;
  static const char msg[] = "\nsecond signal: stopping at once\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  ::_exit(128 + sig);
}

}  // namespace

Interrupted::Interrupted(int sig, const std::string& what)
    : Error("interrupted by " + signal_name(sig) + " while " + what), signal(sig) {}

InterruptHandlers::InterruptHandlers() {
  g_signal = 0;
  previous_int_ = std::signal(SIGINT, on_interrupt);
  previous_term_ = std::signal(SIGTERM, on_interrupt);
}

InterruptHandlers::~InterruptHandlers() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }

void throw_if_interrupted(const char* what) {
  if (const int sig = interrupt_signal()) throw Interrupted(sig, what);
}

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

void set_interrupt_for_test(int sig) { g_signal = sig; }

}  // namespace ocrt
