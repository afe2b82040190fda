#include "core/high_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace hs {

int move_fd_high(int fd) {
  if (fd < 0) return fd;
  rlimit rl;
  int floor = 900;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 64)
    floor = int(rl.rlim_cur < 1024 ? rl.rlim_cur - 64 : 960);
  int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0) return fd;
  close(fd);
  return high;
}

}  // namespace hs
