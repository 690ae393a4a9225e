// The process's communicator (see comm.h).
#include "core/comm.h"

#include <atomic>

namespace mnemo {
namespace {
std::atomic<Communicator*> g_comm{nullptr};
}

void set_communicator(Communicator* c) { g_comm.store(c); }
Communicator* communicator() { return g_comm.load(); }

}  // namespace mnemo
