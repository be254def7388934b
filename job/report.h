// A job's report (job/label_job.h), as the tools give it: JSON, streamed as the inputs finish
// (memory stays flat over any number of them; its fields are listed in docs/usage), and the
// console's lines (one per input, a progress bar on a terminal, the closing summary).
#pragma once
#include <chrono>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

#include "job/label_job.h"

namespace scenelab {

class JsonReport : public JobObserver {
 public:
  explicit JsonReport(std::ostream& os) : os_(os) {}
  void started(const JobStart& s) override;
  void image(const ImageResult& r) override;
  void video_started(const std::string& file, size_t frames_hint) override;
  void video_frame(const VideoFrameResult& r) override;
  void video(const VideoResult& r) override;
  void finished(const JobSummary& s) override;

 private:
  std::ostream& os_;
  JobStart start_;
  size_t entries_ = 0, videos_ = 0, frames_ = 0;
  bool images_closed_ = false;
  void close_images();
};

// The progress line on a terminal: done/total, images/s, time left.
class Progress {
 public:
  Progress(bool on, size_t total) : on_(on), total_(total), t0_(std::chrono::steady_clock::now()) {}
  void update(size_t done);
  void clear_line();

 private:
  bool on_;
  size_t total_;
  std::chrono::steady_clock::time_point t0_, last_{};
};

class ConsoleReport : public JobObserver {
 public:
  // program: the errors' prefix; human: where the per-input lines and the summary go (stdout,
  // or stderr where stdout carries the JSON report); errors and progress go to stderr.
  ConsoleReport(std::string program, FILE* human, bool quiet, bool terminal)
      : program_(std::move(program)), human_(human), quiet_(quiet), terminal_(terminal) {}
  void started(const JobStart& s) override;
  void image(const ImageResult& r) override;
  void video_started(const std::string& file, size_t frames_hint) override;
  void video_frame(const VideoFrameResult& r) override;
  void video_frame_failed(const std::string& error) override;
  void video(const VideoResult& r) override;
  void finished(const JobSummary& s) override;

 private:
  std::string histogram_text(const std::vector<size_t>& hist, double total) const;
  void failed(const std::string& what);
  std::string program_;
  FILE* human_;
  bool quiet_, terminal_;
  JobStart start_;
  std::unique_ptr<Progress> progress_;
  size_t done_ = 0, frames_ = 0;
};

// The JSON report of a run into a file (written under a temporary name, renamed into place when
// complete) or "-" (stdout).
class JsonReportFile {
 public:
  explicit JsonReportFile(std::string path);  // throws if the file cannot be made
  ~JsonReportFile();
  JsonReport& report() { return *report_; }
  // Flushes and renames into place; false (with a message on stderr) if the file is incomplete.
  bool close(const char* program);

 private:
  std::string path_, tmp_;
  std::unique_ptr<std::ostream> file_;
  std::unique_ptr<JsonReport> report_;
};

}  // namespace scenelab
