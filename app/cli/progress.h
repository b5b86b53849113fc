// A progress bar on stderr for long verbs (sweeps, datasets): one updating line with elapsed
// time and ETA on a terminal; otherwise (logs of cluster jobs) at most one line per 5 seconds,
// plus the last step's, so 10,000 records do not write 10,000 lines.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

namespace attn::cli {

class Progress {
 public:
  Progress(int total, bool quiet, std::string verb = "sweep")
      : total_(total), quiet_(quiet), tty_(isatty(2) != 0), verb_(std::move(verb)) {}
  void step(int done, const std::string& what) {
    if (quiet_) return;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double eta = done > 0 ? secs / done * (total_ - done) : 0;
    if (tty_) {
      const int width = 28, fill = total_ > 0 ? done * width / total_ : width;
      std::fprintf(stderr, "\r[%s%s] %d/%d  %.1fs, ETA %.1fs  %-40.40s",
                   std::string(size_t(fill), '#').c_str(),
                   std::string(size_t(width - fill), '.').c_str(), done, total_, secs, eta,
                   what.c_str());
      if (done == total_) std::fprintf(stderr, "\n");
    } else {
      if (done < total_ && printed_ && secs - last_ < kLogSeconds) return;
      printed_ = true;
      last_ = secs;
      std::fprintf(stderr, "%s: %d/%d %s (%.1fs, ETA %.1fs)\n", verb_.c_str(), done, total_,
                   what.c_str(), secs, eta);
    }
    std::fflush(stderr);
  }

 private:
  static constexpr double kLogSeconds = 5;  // the shortest gap between two log lines
  int total_;
  bool printed_ = false;
  double last_ = 0;  // seconds at the last log line
  bool quiet_, tty_;
  std::string verb_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace attn::cli
