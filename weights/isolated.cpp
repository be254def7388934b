#include "weights/isolated.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace scenelab {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerReservesMemory = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitizerReservesMemory = true;
#else
constexpr bool kSanitizerReservesMemory = false;
#endif
#else
constexpr bool kSanitizerReservesMemory = false;
#endif

// This process's address space in bytes (/proc/self/statm's first field), 0 if unknown. Plain
// system calls: it runs in the forked child.
size_t address_space_bytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  return size_t(std::strtoull(buf, nullptr, 10)) * size_t(::sysconf(_SC_PAGESIZE));
}

// The child: caps its memory, runs work, sends an Error's message up the pipe, and leaves without
// running exit handlers (the parent's, inherited: HDF5's, the sanitizers' leak check).
[[noreturn]] void child(const std::function<void()>& work, int out, size_t memory_bytes,
                        const std::string& what) {
  int code = 0;
  std::string msg;
  if (memory_bytes > 0 && !kSanitizerReservesMemory) {
    if (const size_t now = address_space_bytes(); now > 0) {
      const rlimit r{rlim_t(now + memory_bytes), rlim_t(now + memory_bytes)};
      (void)::setrlimit(RLIMIT_AS, &r);
    }
  }
  try {
    work();
  } catch (const Error& e) {
    msg = e.what();
    code = 3;
  } catch (const std::bad_alloc&) {
    msg = str_cat(what, ": reading it needed more than the ", memory_bytes >> 20,
                  " MiB of memory allowed (a corrupt or hostile file, or raise the limit)");
    code = 3;
  } catch (const std::exception& e) {
    msg = std::string("unexpected error: ") + e.what();
    code = 4;
  } catch (...) {
    msg = "unexpected error";
    code = 4;
  }
  for (size_t done = 0; done < msg.size();) {
    ssize_t n = ::write(out, msg.data() + done, msg.size() - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  ::_exit(code);
}

}  // namespace

bool isolation_caps_memory() { return !kSanitizerReservesMemory; }

void run_isolated(const std::function<void()>& work, double timeout_s, const std::string& what,
                  size_t memory_bytes) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    work();
    return;
  }
  Fd rd{fds[0]}, wr{fds[1]};
  const pid_t pid = ::fork();
  if (pid < 0) {  // no child to be had: read here, as without isolation
    work();
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(work, fds[1], memory_bytes, what);
  }
  ::close(wr.fd);
  wr.fd = -1;
  std::string msg;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{rd.fd, POLLIN, 0};
    const int r = ::poll(&p, 1, int(std::min<long long>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (r == 0) continue;
    const ssize_t n = ::read(rd.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: it has exited (or is exiting)
    msg.append(buf, size_t(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    throw_error(what, ": reading it did not finish within ", timeout_s,
                " s (a corrupt or hostile file can make the HDF5 library loop)");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3 && !msg.empty()) throw Error(msg);
  if (WIFSIGNALED(status))
    throw_error(what, ": the reader crashed on it (signal ", WTERMSIG(status), ", ",
                strsignal(WTERMSIG(status)),
                "): a corrupt or hostile file (the HDF5 library is not safe on every malformed file)");
  throw_error(what, ": the reader failed on it (exit status ", WEXITSTATUS(status), ")",
              msg.empty() ? "" : ": ", msg);
}

}  // namespace scenelab
