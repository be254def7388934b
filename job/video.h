// Video files through FFmpeg (libavformat, libavcodec, libswscale): frames decoded to RGB for
// the pipeline, and labelled frames encoded into a video (H.264 through libx264 when libavcodec
// has it, else MPEG-4 Part 2). Optional at build time (SCENELAB_ENABLE_FFMPEG); without it the
// classes exist and throw a clear error. Errors name the file and the frame.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/image_io.h"
#include "job/pipeline.h"

namespace scenelab {

bool video_supported();  // built with FFmpeg

class VideoReader {
 public:
  explicit VideoReader(const std::string& path, const ImageLimits& limits = ImageLimits{});
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;
  // The next frame as RGB; false at the end of the stream. Damaged data ends the stream early:
  // read() then returns false and stopped() says where and why.
  bool read(Image8& rgb);
  int width() const;
  int height() const;
  double fps() const;
  int64_t frames_hint() const;  // from the container, 0 if unknown
  int64_t frames_read() const;
  const std::string& stopped() const;  // "" after a clean end
  std::string codec() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class VideoWriter {
 public:
  // Written under a temporary name and renamed into place by close(), so an interrupted run
  // leaves no half-written video.
  VideoWriter(const std::string& path, int width, int height, double fps);
  ~VideoWriter();  // abandons (removes) the temporary file unless close() ran
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;
  void write(const Image8& rgb);
  void close();
  std::string codec() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A video as a pipeline source: frames decoded in order (FFmpeg's own threads decode in
// parallel), named "FILE#N".
class VideoSource : public FrameSource {
 public:
  explicit VideoSource(const std::string& path, const ImageLimits& limits = ImageLimits{})
      : path_(path), reader_(path, limits) {}
  bool next(Frame& f) override;
  size_t size_hint() const override { return size_t(std::max<int64_t>(0, reader_.frames_hint())); }
  VideoReader& reader() { return reader_; }

 private:
  std::string path_;
  VideoReader reader_;
};

}  // namespace scenelab
