// The Open MPI communicator (see mpi_comm.h).
#include "train/parallel/mpi_comm.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace mnemo {

// A job runs on the MPI thread; `done` is set (under the mutex) when it finished.
struct MpiCommunicator::Impl {
  struct Job {
    std::function<void()> run;
    bool done = false;
    std::string error;
  };
  double timeout_s;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;
  std::map<void*, std::shared_ptr<Job>> gathers;  // by bucket buffer
  bool stop = false, ready = false, broken = false;
  MpiCommunicator::Stats stats;  // (under mu)
  int rank = 0, size = 1, provided = 0;
  std::string init_error;
  std::thread thread;

  void loop() {
    int argc = 0;
    char** argv = nullptr;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      std::lock_guard lk(mu);
      init_error = "MPI_Init_thread failed";
      ready = true;
      cv.notify_all();
      return;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    {
      std::lock_guard lk(mu);
      ready = true;
    }
    cv.notify_all();
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return stop || !queue.empty(); });
        if (queue.empty()) break;
        job = queue.front();
        queue.pop_front();
      }
      std::string error;
      try {
        job->run();
      } catch (const std::exception& e) {
        error = e.what();
      }
      {
        std::lock_guard lk(mu);
        job->done = true;
        job->error = error;
      }
      cv.notify_all();
    }
    MPI_Finalize();
  }

  std::shared_ptr<Job> submit(std::function<void()> f) {
    auto job = std::make_shared<Job>();
    job->run = std::move(f);
    {
      std::lock_guard lk(mu);
      MNEMO_CHECK(!broken) << "rank " << rank << ": the communicator stopped after an earlier timeout";
      queue.push_back(job);
    }
    cv.notify_all();
    return job;
  }

  void wait(const std::shared_ptr<Job>& job, const std::string& what) {
    std::unique_lock lk(mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    if (!cv.wait_until(lk, deadline, [&] { return job->done; })) {
      broken = true;
      const std::string msg = "rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " + what +
                              " did not complete within " + std::to_string(static_cast<int64_t>(timeout_s)) +
                              " s (parallel.timeout_s): another rank died, hangs or runs a different step; "
                              "stopping every rank (the last checkpoint is unchanged)";
      std::fprintf(stderr, "mnemo: %s\n", msg.c_str());
      std::fflush(stderr);
      throw Error(msg);
    }
    MNEMO_CHECK(job->error.empty()) << "rank " << rank << ": " << what << " failed: " << job->error;
  }
};

namespace {
void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  MNEMO_FAIL() << call << ": " << std::string(text, static_cast<size_t>(len));
}
}  // namespace

std::unique_ptr<MpiCommunicator> MpiCommunicator::open_if_launched(double timeout_s) {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return nullptr;
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(timeout_s));
}

MpiCommunicator::MpiCommunicator(double timeout_s) : impl_(std::make_unique<Impl>()) {
  MNEMO_CHECK(timeout_s > 0) << "parallel.timeout_s must be positive, got " << timeout_s;
  impl_->timeout_s = timeout_s;
  impl_->thread = std::thread([this] { impl_->loop(); });
  std::unique_lock lk(impl_->mu);
  impl_->cv.wait(lk, [&] { return impl_->ready; });
  if (!impl_->init_error.empty()) {
    lk.unlock();
    impl_->thread.join();
    MNEMO_FAIL() << "data parallelism: " << impl_->init_error;
  }
  rank_ = impl_->rank;
  size_ = impl_->size;
}

MpiCommunicator::~MpiCommunicator() {
  bool broken;
  {
    std::lock_guard lk(impl_->mu);
    broken = impl_->broken;
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (broken) {
    // The MPI thread may be stuck in a collective: stop the whole job (mpirun ends every rank),
    // after a moment for mpirun to forward the message already written to stderr (an abort
    // right away lost it in about one run of five).
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (impl_->provided >= MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }
  impl_->thread.join();
}

void MpiCommunicator::start_gather(void* buf, int64_t bytes) {
  MNEMO_CHECK(bytes <= INT_MAX) << "rank " << rank_ << ": a gradient bucket of " << bytes
                                << " bytes is above MPI's 2 GiB count limit: lower parallel.bucket_bytes";
  Impl& im = *impl_;
  auto job = im.submit([&im, buf, bytes] {
    const auto t0 = std::chrono::steady_clock::now();
    check_mpi(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Allgather");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lk(im.mu);
    ++im.stats.gathers;
    im.stats.gather_s += s;
  });
  std::lock_guard lk(im.mu);
  MNEMO_ASSERT(!im.gathers.count(buf)) << "a gather on this bucket buffer is already running";
  im.gathers[buf] = job;
}

void MpiCommunicator::wait_gather(void* buf, const std::string& what) {
  Impl& im = *impl_;
  std::shared_ptr<Impl::Job> job;
  {
    std::lock_guard lk(im.mu);
    auto it = im.gathers.find(buf);
    MNEMO_ASSERT(it != im.gathers.end()) << "wait_gather: no gather was started on this buffer";
    job = it->second;
    im.gathers.erase(it);
  }
  const auto t0 = std::chrono::steady_clock::now();
  im.wait(job, what);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lk(im.mu);
  im.stats.waited_s += s;
}

void MpiCommunicator::abandon(const std::string& why) {
  if (device_) device_->abort();
  std::fprintf(stderr, "mnemo: %s; stopping every rank (the last checkpoint is unchanged)\n", why.c_str());
  std::fflush(stderr);
  std::lock_guard lk(impl_->mu);
  impl_->broken = true;
}

bool MpiCommunicator::broken() const {
  std::lock_guard lk(impl_->mu);
  return impl_->broken;
}

MpiCommunicator::Stats MpiCommunicator::stats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}

// (The buffers a job writes are shared with it: after a timeout it may still complete.)
std::vector<double> MpiCommunicator::sum(const std::vector<double>& values, const std::string& what) {
  auto in = std::make_shared<std::vector<double>>(values);
  auto all = std::make_shared<std::vector<double>>(values.size() * static_cast<size_t>(size_));
  const int n = static_cast<int>(values.size());
  auto job = impl_->submit([in, all, n] {
    check_mpi(MPI_Allgather(in->data(), n, MPI_DOUBLE, all->data(), n, MPI_DOUBLE, MPI_COMM_WORLD), "MPI_Allgather");
  });
  impl_->wait(job, what);
  std::vector<double> out(values.size(), 0.0);
  for (int r = 0; r < size_; ++r)
    for (size_t i = 0; i < values.size(); ++i) out[i] += (*all)[static_cast<size_t>(r) * values.size() + i];
  return out;
}

std::string MpiCommunicator::broadcast(const std::string& bytes, const std::string& what) {
  auto size = std::make_shared<int64_t>(static_cast<int64_t>(bytes.size()));
  auto job = impl_->submit([size] { check_mpi(MPI_Bcast(size.get(), 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast"); });
  impl_->wait(job, what);
  MNEMO_CHECK(*size >= 0 && *size <= INT_MAX) << "rank " << rank_ << ": " << what << ": " << *size << " bytes";
  auto data = std::make_shared<std::string>(rank_ == 0 ? bytes : std::string(static_cast<size_t>(*size), '\0'));
  job = impl_->submit([data] {
    check_mpi(MPI_Bcast(data->data(), static_cast<int>(data->size()), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  });
  impl_->wait(job, what);
  return *data;
}

}  // namespace mnemo
