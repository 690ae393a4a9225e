// The process's communicator (see comm.h).
#include "core/comm.h"

#include <atomic>

#include "core/error.h"

namespace mnemo {
namespace {
std::atomic<Communicator*> g_comm{nullptr};
}

void set_communicator(Communicator* c) { g_comm.store(c); }
Communicator* communicator() { return g_comm.load(); }

Communicator* communicator_for(int64_t ranks) {
  Communicator* c = communicator();
  if (ranks == 1) return c && c->size() == 1 ? c : nullptr;
  MNEMO_CHECK(c) << "this step was planned for " << ranks << " ranks (data parallelism) but the process has no "
                 << "communicator: run it under mpirun with " << ranks << " processes (docs/PARALLEL.md)";
  MNEMO_CHECK(c->size() == ranks) << "this step was planned for " << ranks << " ranks, the run has " << c->size();
  return c;
}

}  // namespace mnemo
