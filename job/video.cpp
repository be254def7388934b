#include "job/video.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

#ifdef SCENELAB_WITH_FFMPEG
namespace {
// The first 64-byte aligned address in a buffer given 64 bytes of slack.
uint8_t* aligned64(std::vector<uint8_t>& b) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(b.data());
  return b.data() + ((64 - p % 64) % 64);
}
}  // namespace

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}
#endif

namespace scenelab {

bool VideoSource::next(Frame& f) {
  if (!reader_.read(f.image)) return false;
  f.name = str_cat(path_, "#", reader_.frames_read() - 1);
  return true;
}

#ifdef SCENELAB_WITH_FFMPEG

bool video_supported() { return true; }

namespace {

std::string av_err(int e) {
  char b[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(e, b, sizeof b);
  return b;
}
struct FormatInputCloser {
  void operator()(AVFormatContext* c) const { avformat_close_input(&c); }
};
struct CodecFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

}  // namespace

struct VideoReader::Impl {
  std::string path;
  ImageLimits limits;
  std::unique_ptr<AVFormatContext, FormatInputCloser> fmt;
  std::unique_ptr<AVCodecContext, CodecFree> dec;
  std::unique_ptr<AVFrame, FrameFree> frame;
  std::unique_ptr<AVPacket, PacketFree> pkt;
  std::unique_ptr<SwsContext, SwsFree> sws;
  int sws_w = 0, sws_h = 0, sws_fmt = -1;
  // swscale's SIMD paths write whole vectors: it converts into rows of an aligned stride with
  // slack after the last (kept between frames), copied out into the caller's tight rows.
  std::vector<uint8_t> padded;
  int stream = -1;
  bool draining = false, ended = false;
  int64_t read = 0, damaged = 0, hint = 0;
  double fps = 0;
  std::string stopped;

  void stop(const std::string& why) {
    if (stopped.empty()) stopped = why;
  }
  // Converts the decoded frame into RGB (the converter is remade if the format or size changes).
  void to_rgb(Image8& rgb) {
    const AVFrame* f = frame.get();
    SL_REQUIRE(uint64_t(f->width) * uint64_t(f->height) <= limits.max_pixels, path, ": frame ", read,
               " of ", f->width, "x", f->height, " is larger than the limit of ", limits.max_pixels,
               " pixels");
    if (!sws || sws_w != f->width || sws_h != f->height || sws_fmt != f->format) {
      sws.reset(sws_getContext(f->width, f->height, static_cast<AVPixelFormat>(f->format), f->width,
                               f->height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
      SL_REQUIRE(sws, path, ": cannot convert frames of pixel format ", f->format, " to RGB");
      sws_w = f->width, sws_h = f->height, sws_fmt = f->format;
    }
    rgb.width = f->width;
    rgb.height = f->height;
    rgb.channels = 3;
    const size_t row = size_t(f->width) * 3, pitch = (row + 63) / 64 * 64;
    padded.resize(pitch * size_t(f->height) + 128);
    uint8_t* const base = aligned64(padded);
    uint8_t* dst[4] = {base, nullptr, nullptr, nullptr};
    int stride[4] = {int(pitch), 0, 0, 0};
    sws_scale(sws.get(), f->data, f->linesize, 0, f->height, dst, stride);
    rgb.pixels.resize(row * size_t(f->height));
    for (int y = 0; y < f->height; ++y)
      std::memcpy(rgb.pixels.data() + size_t(y) * row, base + size_t(y) * pitch, row);
  }
};

VideoReader::VideoReader(const std::string& path, const ImageLimits& limits) : impl_(new Impl) {
  Impl& m = *impl_;
  m.path = path;
  m.limits = limits;
  av_log_set_level(AV_LOG_QUIET);  // errors come back as our messages
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw_error(path, ": cannot open file");
    std::fclose(f);
  }
  AVFormatContext* fc = nullptr;
  int e = avformat_open_input(&fc, path.c_str(), nullptr, nullptr);
  if (e < 0) throw_error(path, ": not a readable video (", av_err(e), ")");
  m.fmt.reset(fc);
  e = avformat_find_stream_info(fc, nullptr);
  if (e < 0) throw_error(path, ": not a readable video (", av_err(e), ")");
  const AVCodec* codec = nullptr;
  m.stream = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (m.stream < 0 || !codec) throw_error(path, ": no decodable video stream (", av_err(m.stream), ")");
  AVStream* st = fc->streams[m.stream];
  SL_REQUIRE(uint64_t(st->codecpar->width) * uint64_t(st->codecpar->height) <= limits.max_pixels,
             path, ": video of ", st->codecpar->width, "x", st->codecpar->height,
             " is larger than the limit of ", limits.max_pixels, " pixels");
  m.dec.reset(avcodec_alloc_context3(codec));
  SL_REQUIRE(m.dec, path, ": out of memory");
  e = avcodec_parameters_to_context(m.dec.get(), st->codecpar);
  if (e < 0) throw_error(path, ": ", av_err(e));
  m.dec->thread_count = 0;  // FFmpeg picks: frame threads decode in parallel
  e = avcodec_open2(m.dec.get(), codec, nullptr);
  if (e < 0) throw_error(path, ": cannot open the ", codec->name, " decoder (", av_err(e), ")");
  AVRational r = st->avg_frame_rate.num ? st->avg_frame_rate : st->r_frame_rate;
  m.fps = r.num && r.den ? av_q2d(r) : 25.0;
  m.hint = st->nb_frames;
  if (m.hint <= 0) {  // no frame count in the container: from its duration
    double seconds = 0;
    if (st->duration != AV_NOPTS_VALUE && st->duration > 0) seconds = double(st->duration) * av_q2d(st->time_base);
    else if (fc->duration != AV_NOPTS_VALUE && fc->duration > 0) seconds = double(fc->duration) / AV_TIME_BASE;
    m.hint = int64_t(seconds * m.fps + 0.5);
  }
  m.frame.reset(av_frame_alloc());
  m.pkt.reset(av_packet_alloc());
  SL_REQUIRE(m.frame && m.pkt, path, ": out of memory");
}

VideoReader::~VideoReader() = default;

bool VideoReader::read(Image8& rgb) {
  Impl& m = *impl_;
  while (!m.ended) {
    int e = avcodec_receive_frame(m.dec.get(), m.frame.get());
    if (e == 0) {
      m.to_rgb(rgb);
      av_frame_unref(m.frame.get());
      ++m.read;
      return true;
    }
    if (e == AVERROR_EOF) {
      m.ended = true;
      break;
    }
    if (e != AVERROR(EAGAIN)) {
      m.stop(str_cat("stopped after frame ", m.read, ": decoding failed (", av_err(e), ")"));
      m.ended = true;
      break;
    }
    if (m.draining) {  // flushed, yet it wants input: nothing more will come
      m.ended = true;
      break;
    }
    // The decoder wants input: the next packet of our stream, or the end.
    for (;;) {
      e = av_read_frame(m.fmt.get(), m.pkt.get());
      if (e < 0) {
        if (e != AVERROR_EOF)
          m.stop(str_cat("stopped after frame ", m.read, ": the file ends in damaged data (",
                         av_err(e), ")"));
        avcodec_send_packet(m.dec.get(), nullptr);  // drain the frames still inside
        m.draining = true;
        break;
      }
      if (m.pkt->stream_index != m.stream) {
        av_packet_unref(m.pkt.get());
        continue;
      }
      e = avcodec_send_packet(m.dec.get(), m.pkt.get());
      av_packet_unref(m.pkt.get());
      if (e == AVERROR_INVALIDDATA) {  // a damaged packet: skipped, the stream goes on
        ++m.damaged;
        continue;
      }
      if (e < 0 && e != AVERROR(EAGAIN)) {
        m.stop(str_cat("stopped after frame ", m.read, ": ", av_err(e)));
        avcodec_send_packet(m.dec.get(), nullptr);
        m.draining = true;
      }
      break;
    }
  }
  if (m.stopped.empty() && m.hint > 0 && m.read < m.hint)
    m.stop(str_cat("ended after ", m.read, " of the ", m.hint, " frames the file announces (truncated?)"));
  if (m.damaged && m.stopped.empty())
    m.stop(str_cat(m.damaged, " damaged packet(s) skipped"));
  return false;
}

int VideoReader::width() const { return impl_->dec->width; }
int VideoReader::height() const { return impl_->dec->height; }
double VideoReader::fps() const { return impl_->fps; }
int64_t VideoReader::frames_hint() const { return impl_->hint; }
int64_t VideoReader::frames_read() const { return impl_->read; }
const std::string& VideoReader::stopped() const { return impl_->stopped; }
std::string VideoReader::codec() const { return impl_->dec->codec ? impl_->dec->codec->name : ""; }

struct VideoWriter::Impl {
  std::string path, tmp;
  AVFormatContext* fmt = nullptr;
  std::unique_ptr<AVCodecContext, CodecFree> enc;
  std::unique_ptr<AVFrame, FrameFree> yuv;
  std::unique_ptr<AVPacket, PacketFree> pkt;
  std::vector<uint8_t> padded;  // the frame's rows at an aligned stride, for swscale
  std::unique_ptr<SwsContext, SwsFree> sws;
  AVStream* st = nullptr;
  int width = 0, height = 0;
  int64_t pts = 0;
  bool closed = false;

  ~Impl() {
    if (fmt) {
      if (fmt->pb) avio_closep(&fmt->pb);
      avformat_free_context(fmt);
    }
    if (!closed && !tmp.empty()) std::remove(tmp.c_str());
  }
  void drain(bool flush) {
    int e = avcodec_send_frame(enc.get(), flush ? nullptr : yuv.get());
    if (e < 0) throw_error(path, ": encoding failed (", av_err(e), ")");
    for (;;) {
      e = avcodec_receive_packet(enc.get(), pkt.get());
      if (e == AVERROR(EAGAIN) || e == AVERROR_EOF) return;
      if (e < 0) throw_error(path, ": encoding failed (", av_err(e), ")");
      av_packet_rescale_ts(pkt.get(), enc->time_base, st->time_base);
      pkt->stream_index = st->index;
      e = av_interleaved_write_frame(fmt, pkt.get());
      if (e < 0) throw_error(path, ": cannot write (", av_err(e), ")");
    }
  }
};

VideoWriter::VideoWriter(const std::string& path, int width, int height, double fps)
    : impl_(new Impl) {
  Impl& m = *impl_;
  m.path = path;
  m.width = width;
  m.height = height;
  av_log_set_level(AV_LOG_QUIET);
  const AVOutputFormat* of = av_guess_format(nullptr, path.c_str(), nullptr);
  SL_REQUIRE(of, path, ": no video container for this file name (use .mp4, .mkv, .avi or .webm)");
  m.tmp = str_cat(path, ".tmp.", ::getpid());
  int e = avformat_alloc_output_context2(&m.fmt, of, nullptr, m.tmp.c_str());
  if (e < 0 || !m.fmt) throw_error(path, ": ", av_err(e));
  // H.264 through libx264 where libavcodec has it (Debian's does), else MPEG-4 Part 2.
  const AVCodec* codec = avcodec_find_encoder_by_name("libx264");
  if (!codec) codec = avcodec_find_encoder(AV_CODEC_ID_MPEG4);
  SL_REQUIRE(codec, path, ": libavcodec has no H.264 or MPEG-4 encoder");
  m.enc.reset(avcodec_alloc_context3(codec));
  SL_REQUIRE(m.enc, path, ": out of memory");
  // 4:2:0 needs even sizes: odd ones are scaled up by one pixel.
  m.enc->width = (width + 1) & ~1;
  m.enc->height = (height + 1) & ~1;
  m.enc->pix_fmt = AV_PIX_FMT_YUV420P;
  const AVRational rate = av_d2q(fps > 0 ? fps : 25.0, 100000);
  m.enc->time_base = av_inv_q(rate);
  m.enc->framerate = rate;
  m.enc->thread_count = 0;
  // No B-frames: timestamps stay in order, so MP4 needs no edit list (whose start a reader may
  // drop), and a frame leaves the encoder as soon as it is written.
  m.enc->max_b_frames = 0;
  if (of->flags & AVFMT_GLOBALHEADER) m.enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  if (std::string(codec->name) == "libx264") {
    av_opt_set(m.enc->priv_data, "preset", "veryfast", 0);
    av_opt_set(m.enc->priv_data, "crf", "20", 0);
  } else {
    m.enc->flags |= AV_CODEC_FLAG_QSCALE;
    m.enc->global_quality = FF_QP2LAMBDA * 3;
  }
  e = avcodec_open2(m.enc.get(), codec, nullptr);
  if (e < 0) throw_error(path, ": cannot open the ", codec->name, " encoder (", av_err(e), ")");
  m.st = avformat_new_stream(m.fmt, nullptr);
  SL_REQUIRE(m.st, path, ": out of memory");
  m.st->time_base = m.enc->time_base;
  m.st->avg_frame_rate = rate;
  e = avcodec_parameters_from_context(m.st->codecpar, m.enc.get());
  if (e < 0) throw_error(path, ": ", av_err(e));
  if (!(of->flags & AVFMT_NOFILE)) {
    e = avio_open(&m.fmt->pb, m.tmp.c_str(), AVIO_FLAG_WRITE);
    if (e < 0) throw_error(path, ": cannot write (", av_err(e), ")");
  }
  e = avformat_write_header(m.fmt, nullptr);
  if (e < 0) throw_error(path, ": cannot write the header (", av_err(e), ")");
  m.yuv.reset(av_frame_alloc());
  m.pkt.reset(av_packet_alloc());
  SL_REQUIRE(m.yuv && m.pkt, path, ": out of memory");
  m.yuv->format = m.enc->pix_fmt;
  m.yuv->width = m.enc->width;
  m.yuv->height = m.enc->height;
  e = av_frame_get_buffer(m.yuv.get(), 0);
  if (e < 0) throw_error(path, ": ", av_err(e));
  m.sws.reset(sws_getContext(width, height, AV_PIX_FMT_RGB24, m.enc->width, m.enc->height,
                             AV_PIX_FMT_YUV420P, SWS_BILINEAR, nullptr, nullptr, nullptr));
  SL_REQUIRE(m.sws, path, ": cannot convert RGB to YUV 4:2:0");
}

VideoWriter::~VideoWriter() = default;

void VideoWriter::write(const Image8& rgb) {
  Impl& m = *impl_;
  SL_REQUIRE(!m.closed, m.path, ": write after close");
  SL_REQUIRE(rgb.width == m.width && rgb.height == m.height && rgb.channels == 3, m.path,
             ": frame of ", rgb.width, "x", rgb.height, " in a video of ", m.width, "x", m.height);
  int e = av_frame_make_writable(m.yuv.get());
  if (e < 0) throw_error(m.path, ": ", av_err(e));
  // swscale may read whole vectors past a row's end: it reads from aligned, padded rows.
  const size_t row = size_t(rgb.width) * 3, pitch = (row + 63) / 64 * 64;
  m.padded.resize(pitch * size_t(rgb.height) + 128);
  uint8_t* const base = aligned64(m.padded);
  for (int y = 0; y < rgb.height; ++y) std::memcpy(base + size_t(y) * pitch, rgb.pixels.data() + size_t(y) * row, row);
  const uint8_t* src[4] = {base, nullptr, nullptr, nullptr};
  const int stride[4] = {int(pitch), 0, 0, 0};
  sws_scale(m.sws.get(), src, stride, 0, rgb.height, m.yuv->data, m.yuv->linesize);
  m.yuv->pts = m.pts++;
  m.drain(false);
}

void VideoWriter::close() {
  Impl& m = *impl_;
  if (m.closed) return;
  m.drain(true);
  int e = av_write_trailer(m.fmt);
  if (e < 0) throw_error(m.path, ": cannot write the trailer (", av_err(e), ")");
  if (m.fmt->pb) avio_closep(&m.fmt->pb);
  SL_REQUIRE(std::rename(m.tmp.c_str(), m.path.c_str()) == 0, m.path, ": cannot write");
  m.closed = true;
}

std::string VideoWriter::codec() const { return impl_->enc->codec ? impl_->enc->codec->name : ""; }

#else  // no FFmpeg in this build

bool video_supported() { return false; }

namespace {
[[noreturn]] void no_video(const std::string& path) {
  throw_error(path, ": this build has no video support (install libavformat-dev, libavcodec-dev "
                    "and libswscale-dev and rebuild, or pass -DSCENELAB_ENABLE_FFMPEG=ON)");
}
}  // namespace

struct VideoReader::Impl {};
VideoReader::VideoReader(const std::string& path, const ImageLimits&) { no_video(path); }
VideoReader::~VideoReader() = default;
bool VideoReader::read(Image8&) { return false; }
int VideoReader::width() const { return 0; }
int VideoReader::height() const { return 0; }
double VideoReader::fps() const { return 0; }
int64_t VideoReader::frames_hint() const { return 0; }
int64_t VideoReader::frames_read() const { return 0; }
const std::string& VideoReader::stopped() const {
  static const std::string none;
  return none;
}
std::string VideoReader::codec() const { return {}; }

struct VideoWriter::Impl {};
VideoWriter::VideoWriter(const std::string& path, int, int, double) { no_video(path); }
VideoWriter::~VideoWriter() = default;
void VideoWriter::write(const Image8&) {}
void VideoWriter::close() {}
std::string VideoWriter::codec() const { return {}; }

#endif

}  // namespace scenelab
