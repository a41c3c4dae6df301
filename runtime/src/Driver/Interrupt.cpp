//===- Interrupt.cpp - SIGINT and SIGTERM ---------------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/Interrupt.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <time.h>
#include <unistd.h>

namespace {

/// What rank 0 prints when SIGINT or SIGTERM ends the run (mpirun sends
/// SIGTERM to every rank when it is interrupted): the step and the last
/// checkpoint. Formatted outside the handler (which may only write(2)) into
/// the buffer the handler is not reading, then published.
struct InterruptNote {
  char text[2][1024] = {};
  size_t length[2] = {};
  std::atomic<int> current{-1};
};
InterruptNote interruptNote;

std::atomic<bool> stopRequest{false};

extern "C" void onStopRequest(int) { stopRequest.store(true); }

extern "C" void onInterrupt(int sig) {
  int c = interruptNote.current.load();
  if (c < 0) {
    // Not rank 0: let rank 0 end first. mpirun forwards the signal to every
    // rank and, once one has ended, stops forwarding output, which would
    // lose rank 0's line when another rank happened to end before it.
    struct timespec delay = {1, 0};
    ::nanosleep(&delay, nullptr);
  } else {
    const char *name = sig == SIGINT ? "zrt: interrupted (SIGINT) "
                                     : "zrt: terminated (SIGTERM) ";
    ssize_t ignored = ::write(STDERR_FILENO, name, std::strlen(name));
    ignored =
        ::write(STDERR_FILENO, interruptNote.text[c], interruptNote.length[c]);
    (void)ignored;
  }
  // The default action ends the process with the signal's status.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

} // namespace

void zrt::setInterruptNote(const std::string &text) {
  int next = interruptNote.current.load() == 0 ? 1 : 0;
  size_t n = std::min(text.size(), sizeof(interruptNote.text[0]) - 1);
  std::memcpy(interruptNote.text[next], text.data(), n);
  interruptNote.length[next] = n;
  interruptNote.current.store(next);
}

void zrt::installInterruptHandlers() {
  struct sigaction action = {};
  action.sa_handler = onInterrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  struct sigaction stop = {};
  stop.sa_handler = onStopRequest;
  sigemptyset(&stop.sa_mask);
  // A rank in a blocking call carries on with it.
  stop.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR2, &stop, nullptr);
}

bool zrt::stopRequested() { return stopRequest.load(); }
