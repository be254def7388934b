#include "weights/isolated.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "engine/error.h"

namespace scenelab {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The child: runs work, sends an Error's message up the pipe, and leaves without running exit
// handlers (the parent's, inherited: HDF5's, the sanitizers' leak check).
[[noreturn]] void child(const std::function<void()>& work, int out) {
  int code = 0;
  std::string msg;
  try {
    work();
  } catch (const Error& e) {
    msg = e.what();
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

void run_isolated(const std::function<void()>& work, double timeout_s, const std::string& what) {
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
    child(work, fds[1]);
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
