// Ctrl-C and SIGTERM for programs that run long (ocrt-train): the first signal asks the program
// to stop at the next safe point, a second one ends the process at once.
//
//   InterruptHandlers handlers;          // installs both handlers; the destructor restores them
//   ...
//   throw_if_interrupted("reading --train");   // in a loop that may run for seconds
//   if (interrupt_signal() != 0) ...          // or look, and stop where it is safe
//
// A phase that cannot stop half way (a training step, writing a checkpoint) simply does not
// look. The first signal only sets a flag (a signal handler may do little else); whoever looks
// next decides what stopping means there: the data scan throws Interrupted and nothing is
// written, the training loop saves a checkpoint and returns. The second signal, for a user
// who does not want to wait, writes one line to stderr and calls _exit(128 + signal): 130 for
// SIGINT, as a shell reports a process Ctrl-C ended. Files are only ever replaced by rename
// (checkpoints, best.safetensors, the report), so an exit at any moment leaves each file as it
// was or as it was meant to be, never half written; a save cut short leaves a *.tmp.<pid> file
// that the next run in that folder removes.
#pragma once
#include <string>

#include "runtime/error.h"

namespace ocrt {

// The signal a phase was stopped by (Error's message says where: "interrupted by SIGINT while
// reading --train").
struct Interrupted : Error {
  int signal;
  Interrupted(int sig, const std::string& what);
};

// Installs the handlers for SIGINT and SIGTERM and clears the flag; the destructor puts back
// the handlers that were there. Not nested: one program-wide scope at a time.
class InterruptHandlers {
 public:
  InterruptHandlers();
  ~InterruptHandlers();
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;

 private:
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

// The number of the first signal received since the handlers were installed, 0 if none.
int interrupt_signal();

// Throws Interrupted naming `what` (the phase) if a signal has arrived.
void throw_if_interrupted(const char* what);

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int sig);

// For tests: behave as if signal `sig` had arrived (0 clears the flag).
void set_interrupt_for_test(int sig);

}  // namespace ocrt
