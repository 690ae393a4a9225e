// NCCL gathers (see nccl.h).
#include "cuda/nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>  // types and declarations; the library is loaded below

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>

#include "cuda/check.h"

namespace mnemo::cuda {
namespace {

// NCCL is loaded when a data-parallel GPU run first needs it, not linked: the binaries start on
// machines without it (the GPU bundle does not carry its ~200 MB; the GPU machine's Python wheels
// have it), and only such a run fails, naming the library.
struct Nccl {
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};
const Nccl& nccl() {
  static Nccl n;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      error = e ? e : "dlopen failed";
      return;
    }
    auto sym = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
      if (!f && error.empty()) error = std::string("no symbol ") + name;
    };
    sym(n.get_unique_id, "ncclGetUniqueId");
    sym(n.comm_init_rank, "ncclCommInitRank");
    sym(n.all_gather, "ncclAllGather");
    sym(n.comm_destroy, "ncclCommDestroy");
    sym(n.comm_abort, "ncclCommAbort");
    sym(n.error_string, "ncclGetErrorString");
  });
  MNEMO_CHECK(error.empty()) << "data parallelism on GPUs needs NCCL (libnccl.so.2 on the library path): " << error;
  return n;
}

#define MNEMO_NCCL_CHECK(call)                                                                           \
  do {                                                                                                   \
    const ncclResult_t mnemo_r_ = (call);                                                                \
    if (mnemo_r_ != ncclSuccess) MNEMO_FAIL() << #call << " failed: " << nccl().error_string(mnemo_r_); \
  } while (0)

class NcclGather final : public DeviceGather {
 public:
  NcclGather(const std::string& id, int rank, int size, int ordinal) : rank_(rank), ordinal_(ordinal) {
    ncclUniqueId uid;
    MNEMO_CHECK(id.size() == sizeof uid) << "NCCL unique id of " << id.size() << " bytes, expected " << sizeof uid;
    std::memcpy(&uid, id.data(), sizeof uid);
    MNEMO_CUDA_CHECK(cudaSetDevice(ordinal));
    MNEMO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MNEMO_NCCL_CHECK(nccl().comm_init_rank(&comm_, size, uid, rank));
  }
  ~NcclGather() override {
    cudaSetDevice(ordinal_);
    for (auto& [buf, e] : events_) cudaEventDestroy(e.before), cudaEventDestroy(e.after);
    if (comm_) nccl().comm_destroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  void start(void* buf, int64_t bytes, void* step_stream) override {
    MNEMO_CHECK(!aborted_) << "NCCL: the communicator was aborted after a timeout";
    Events& e = events_of(buf);
    auto* s = static_cast<cudaStream_t>(step_stream);
    MNEMO_CUDA_CHECK(cudaEventRecord(e.before, s));  // this rank's row is written
    MNEMO_CUDA_CHECK(cudaStreamWaitEvent(stream_, e.before, 0));
    char* b = static_cast<char*>(buf);
    MNEMO_NCCL_CHECK(nccl().all_gather(b + static_cast<size_t>(rank_) * static_cast<size_t>(bytes), b, static_cast<size_t>(bytes),
                                       ncclChar, comm_, stream_));  // in place: the send buffer is this rank's row
    MNEMO_CUDA_CHECK(cudaEventRecord(e.after, stream_));
  }
  // ncclCommAbort ends the communicator's kernels still waiting for other ranks (their streams
  // then drain); the communicator is gone, and a later gather fails naming the abort.
  void abort() override {
    if (!comm_) return;
    cudaSetDevice(ordinal_);
    nccl().comm_abort(comm_);
    comm_ = nullptr;
    aborted_ = true;
  }
  void wait(void* buf, void* step_stream) override {
    auto it = events_.find(buf);
    MNEMO_ASSERT(it != events_.end()) << "NCCL: a wait without its gather";
    MNEMO_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(step_stream), it->second.after, 0));
  }

 private:
  struct Events {
    cudaEvent_t before = nullptr, after = nullptr;
  };
  Events& events_of(void* buf) {  // one pair per bucket buffer, made at its first gather
    Events& e = events_[buf];
    if (!e.before) {
      MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&e.before, cudaEventDisableTiming));
      MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&e.after, cudaEventDisableTiming));
    }
    return e;
  }
  int rank_, ordinal_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  std::map<void*, Events> events_;
};

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId uid;
  MNEMO_NCCL_CHECK(nccl().get_unique_id(&uid));
  return std::string(reinterpret_cast<const char*>(&uid), sizeof uid);
}

std::unique_ptr<DeviceGather> open_nccl(const std::string& unique_id, int rank, int size, int ordinal) {
  return std::make_unique<NcclGather>(unique_id, rank, size, ordinal);
}

}  // namespace mnemo::cuda
