// Image decoding and the PNG writer: JPEG (baseline, progressive, grey, CMYK, truncated), PNG
// (8/16-bit, grey, grey+alpha, RGBA, palette, interlaced, truncated, oversized header), other
// formats through stb, a directory named like an image, the pixel limit, a decompression bomb, an
// unreadable file, and our PNG writer's output decoded back exactly (RGB, grey, indexed colour).
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csetjmp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "core/error.h"
#include "engine/image_io.h"
#include "tests/test_util.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

// A folder of the running test's own (ctest may run these tests in parallel processes).
fs::path tmpdir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path p = fs::path(::testing::TempDir()) / (std::string("scenelab_image_io_") + info->name());
  static std::string made;
  if (made != p.string()) {
    fs::remove_all(p);
    fs::create_directories(p);
    made = p.string();
  }
  return p;
}

Image8 smooth(int w, int h, int c) {
  Image8 img{w, h, c, std::vector<uint8_t>(size_t(w) * h * c)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        img.pixels[(size_t(y) * w + x) * c + k] = uint8_t((x + y + k * 60) % 256);
  return img;
}

double mean_abs_diff(const Image8& a, const Image8& b) {
  EXPECT_EQ(a.pixels.size(), b.pixels.size());
  double s = 0;
  for (size_t i = 0; i < std::min(a.pixels.size(), b.pixels.size()); ++i)
    s += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return s / double(std::max<size_t>(1, a.pixels.size()));
}

using scenelab::test::error_of;

// A JPEG through libjpeg: colour space RGB, grey or (Adobe-inverted) CMYK; progressive or not.
void write_jpeg(const std::string& path, const Image8& img, J_COLOR_SPACE in_space, bool progressive) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  jpeg_stdio_dest(&c, f);
  c.image_width = JDIMENSION(img.width);
  c.image_height = JDIMENSION(img.height);
  c.input_components = img.channels;
  c.in_color_space = in_space;
  jpeg_set_defaults(&c);
  if (in_space == JCS_CMYK) jpeg_set_colorspace(&c, JCS_CMYK);
  jpeg_set_quality(&c, 95, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&img.pixels[size_t(c.next_scanline) * img.width * img.channels]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

// A PNG through libpng directly, for what our writer does not make (16-bit, interlaced, alpha).
void write_png_raw(const std::string& path, int w, int h, int type, int depth, bool interlace,
                   const std::vector<uint8_t>& rows_bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(p);
  png_init_io(p, f);
  png_set_IHDR(p, info, w, h, depth, type, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(p, info);
  const size_t stride = rows_bytes.size() / size_t(h);
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  for (int y = 0; y < h; ++y) rows[size_t(y)] = const_cast<uint8_t*>(&rows_bytes[size_t(y) * stride]);
  png_write_image(p, rows.data());
  png_write_end(p, nullptr);
  png_destroy_write_struct(&p, &info);
  std::fclose(f);
}

}  // namespace

TEST(ImageIo, JpegBaselineProgressiveGreyAndCmyk) {
  const Image8 rgb = smooth(67, 45, 3);
  const std::string base = (tmpdir() / "base.jpg").string(), prog = (tmpdir() / "prog.jpg").string();
  write_jpeg(base, rgb, JCS_RGB, false);
  write_jpeg(prog, rgb, JCS_RGB, true);
  const Image8 a = load_image(base), b = load_image(prog);
  EXPECT_EQ(a.width, 67);
  EXPECT_EQ(a.height, 45);
  EXPECT_LT(mean_abs_diff(a, rgb), 3.0);
  EXPECT_LT(mean_abs_diff(b, a), 1.0);
  const Image8 grey = smooth(33, 21, 1);
  const std::string gp = (tmpdir() / "grey.jpg").string();
  write_jpeg(gp, grey, JCS_GRAYSCALE, false);
  const Image8 g3 = load_image(gp, 3), g1 = load_image(gp, 1);
  EXPECT_EQ(g3.channels, 3);
  for (size_t i = 0; i < g1.pixels.size(); ++i) ASSERT_EQ(g3.pixels[3 * i], g1.pixels[i]);
  EXPECT_LT(mean_abs_diff(g1, grey), 3.0);
  // CMYK as Adobe Photoshop writes it (inverted): white paper with a cyan gradient.
  Image8 cmyk{40, 20, 4, std::vector<uint8_t>(40 * 20 * 4)};
  Image8 expect{40, 20, 3, std::vector<uint8_t>(40 * 20 * 3)};
  for (int i = 0; i < 40 * 20; ++i) {
    const int c = (i % 40) * 6;  // cyan ink 0..234
    cmyk.pixels[size_t(4 * i)] = uint8_t(255 - c);
    cmyk.pixels[size_t(4 * i + 1)] = cmyk.pixels[size_t(4 * i + 2)] = cmyk.pixels[size_t(4 * i + 3)] = 255;
    expect.pixels[size_t(3 * i)] = uint8_t(255 - c);
    expect.pixels[size_t(3 * i + 1)] = expect.pixels[size_t(3 * i + 2)] = 255;
  }
  const std::string cp = (tmpdir() / "cmyk.jpg").string();
  write_jpeg(cp, cmyk, JCS_CMYK, false);
  EXPECT_LT(mean_abs_diff(load_image(cp), expect), 4.0);
}

TEST(ImageIo, PngEveryLayoutDecodes) {
  const int w = 19, h = 13;
  // 16-bit RGB: the high bytes survive.
  std::vector<uint8_t> rgb16(size_t(w) * h * 6);
  for (size_t i = 0; i < rgb16.size(); i += 2) rgb16[i] = uint8_t(i * 7), rgb16[i + 1] = 0x40;
  write_png_raw((tmpdir() / "rgb16.png").string(), w, h, PNG_COLOR_TYPE_RGB, 16, false, rgb16);
  const Image8 a = load_image((tmpdir() / "rgb16.png").string());
  ASSERT_EQ(a.pixels.size(), size_t(w) * h * 3);
  for (size_t i = 0; i < a.pixels.size(); ++i) ASSERT_NEAR(int(a.pixels[i]), int(rgb16[2 * i]), 1) << "16-bit, byte " << i;
  // Grey + alpha, interlaced: grey replicated, alpha dropped.
  std::vector<uint8_t> ga(size_t(w) * h * 2);
  for (size_t i = 0; i < ga.size(); i += 2) ga[i] = uint8_t(i), ga[i + 1] = 17;
  write_png_raw((tmpdir() / "ga.png").string(), w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, true, ga);
  const Image8 b = load_image((tmpdir() / "ga.png").string());
  ASSERT_EQ(b.pixels.size(), size_t(w) * h * 3);
  for (int i = 0; i < w * h; ++i)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(b.pixels[size_t(3 * i + k)], ga[size_t(2 * i)]) << "grey+alpha, pixel " << i;
  // RGBA to grey.
  std::vector<uint8_t> rgba(size_t(w) * h * 4, 200);
  write_png_raw((tmpdir() / "rgba.png").string(), w, h, PNG_COLOR_TYPE_RGB_ALPHA, 8, false, rgba);
  const Image8 c = load_image((tmpdir() / "rgba.png").string(), 1);
  EXPECT_EQ(c.channels, 1);
  for (uint8_t v : c.pixels) ASSERT_NEAR(int(v), 200, 1) << "RGBA to grey";
}

TEST(ImageIo, OurPngWriterRoundTripsExactly) {
  for (int ch : {1, 3}) {
    const Image8 img = smooth(37, 23, ch);
    const std::string p = (tmpdir() / ("rt" + std::to_string(ch) + ".png")).string();
    save_png(p, img);
    const Image8 back = load_image(p, ch);
    EXPECT_EQ(back.pixels, img.pixels);
  }
  // Indexed colour: the indices' palette colours come back.
  Image8 idx{16, 4, 1, std::vector<uint8_t>(64)};
  for (size_t i = 0; i < 64; ++i) idx.pixels[i] = uint8_t(i % 5);
  PngOptions o;
  o.palette = {{{1, 2, 3}}, {{40, 50, 60}}, {{255, 0, 0}}, {{0, 255, 0}}, {{0, 0, 255}}};
  const std::string p = (tmpdir() / "pal.png").string();
  save_png(p, idx, o);
  const Image8 back = load_image(p, 3);
  for (size_t i = 0; i < 64; ++i)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(back.pixels[3 * i + size_t(k)], o.palette[idx.pixels[i]][size_t(k)]);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  // The measured alternatives (libpng + zlib, stb) give the same pixels too.
  const Image8 rgb = smooth(29, 17, 3);
  const auto bytes = encode_png_stb(rgb);
  EXPECT_EQ(decode_image(bytes.data(), bytes.size(), "stb.png", 3).pixels, rgb.pixels);
  const auto lp = encode_png_libpng(rgb);
  EXPECT_EQ(decode_image(lp.data(), lp.size(), "libpng.png", 3).pixels, rgb.pixels);
  const auto lpal = encode_png_libpng(idx, o);
  EXPECT_EQ(decode_image(lpal.data(), lpal.size(), "libpng-pal.png", 3).pixels, back.pixels);
}

TEST(ImageIo, BadInputsGetClearErrorsNamingTheFile) {
  const Image8 img = smooth(300, 200, 3);  // large enough that 60% of the file cuts pixel data
  const std::string png = (tmpdir() / "t.png").string(), jpg = (tmpdir() / "t.jpg").string();
  save_png(png, img);
  write_jpeg(jpg, img, JCS_RGB, false);
  auto truncate = [](const std::string& from, const std::string& to, double frac) {
    std::ifstream in(from, std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(to, std::ios::binary) << s.substr(0, size_t(double(s.size()) * frac));
  };
  truncate(png, (tmpdir() / "tp.png").string(), 0.6);
  truncate(jpg, (tmpdir() / "tj.jpg").string(), 0.6);
  std::string e = error_of([&] { load_image((tmpdir() / "tp.png").string()); });
  EXPECT_NE(e.find("tp.png"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  e = error_of([&] { load_image((tmpdir() / "tj.jpg").string()); });
  EXPECT_NE(e.find("tj.jpg"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  // A PNG header announcing 60000 x 60000: refused as too large, before any decoding.
  std::ifstream in(png, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  const uint8_t big[8] = {0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60};
  s.replace(16, 8, reinterpret_cast<const char*>(big), 8);
  std::ofstream((tmpdir() / "big.png").string(), std::ios::binary) << s;
  e = error_of([&] { load_image((tmpdir() / "big.png").string()); });
  EXPECT_NE(e.find("60000x60000"), std::string::npos) << e;
  EXPECT_NE(e.find("larger than the limit"), std::string::npos) << e;
  // A lower limit applies to every format.
  ImageLimits small;
  small.max_pixels = 100;
  e = error_of([&] { load_image(jpg, 3, small); });
  EXPECT_NE(e.find("larger than the limit of 100"), std::string::npos) << e;
  // A folder named like an image, an empty file, a missing file, garbage.
  fs::create_directories(tmpdir() / "folder.png");
  e = error_of([&] { load_image((tmpdir() / "folder.png").string()); });
  EXPECT_NE(e.find("is a directory"), std::string::npos) << e;
  std::ofstream((tmpdir() / "empty.jpg").string());
  e = error_of([&] { load_image((tmpdir() / "empty.jpg").string()); });
  EXPECT_NE(e.find("empty file"), std::string::npos) << e;
  e = error_of([&] { load_image((tmpdir() / "missing.jpg").string()); });
  EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
  std::ofstream((tmpdir() / "junk.bmp").string()) << "BM not a bitmap at all";
  e = error_of([&] { load_image((tmpdir() / "junk.bmp").string()); });
  EXPECT_NE(e.find("junk.bmp"), std::string::npos) << e;
  // Labels must be 8-bit grey and lossless.
  e = error_of([&] { load_label_image(jpg); });
  EXPECT_NE(e.find("lossless"), std::string::npos) << e;
  e = error_of([&] { load_label_image(png); });
  EXPECT_NE(e.find("expected 8-bit single-channel"), std::string::npos) << e;
}

// A decompression bomb: a complete, valid PNG of 17000 x 17000 zero pixels (289 megapixels, above
// the default limit of 16384 x 16384) in a few hundred kilobytes. Refused from its header, naming
// the file and the limit, before any pixel is inflated or allocated.
TEST(ImageIo, DecompressionBombIsRefusedFromItsHeader) {
  const std::string path = (tmpdir() / "bomb.png").string();
  const int side = 17000;
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    ASSERT_TRUE(png && info);
    if (setjmp(png_jmpbuf(png))) FAIL() << "libpng could not write the test file";
    png_init_io(png, f);
    png_set_compression_level(png, 9);
    png_set_filter(png, 0, PNG_FILTER_NONE);
    png_set_IHDR(png, info, side, side, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    std::vector<uint8_t> row(side, 0);
    for (int y = 0; y < side; ++y) png_write_row(png, row.data());
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
  }
  const auto bytes = fs::file_size(path);
  EXPECT_LT(bytes, 2u << 20) << "the test file should be small: " << bytes;
  const std::string e = error_of([&] { load_image(path); });
  EXPECT_NE(e.find("bomb.png"), std::string::npos) << e;
  EXPECT_NE(e.find("17000x17000"), std::string::npos) << e;
  EXPECT_NE(e.find("larger than the limit"), std::string::npos) << e;
}

// A file the process may not read: the error names it and says why. Root reads anything, so as
// root the check runs in a child process that gives up root for the `nobody` user first.
TEST(ImageIo, UnreadableFileNamesTheFileAndTheReason) {
  const std::string path = (tmpdir() / "locked.png").string();
  save_png(path, smooth(8, 6, 3));
  fs::permissions(path, fs::perms::none);
  fs::permissions(tmpdir(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  auto attempt = [&] { return error_of([&] { load_image(path); }); };
  std::string e;
  if (::geteuid() != 0) {
    e = attempt();
  } else {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      std::string msg = "could not give up root";
      if (::setgid(65534) == 0 && ::setuid(65534) == 0) msg = attempt();
      const ssize_t w = ::write(fds[1], msg.data(), msg.size());
      ::_exit(w == ssize_t(msg.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    char buf[512];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) e.append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << e;
  }
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_NE(e.find("locked.png"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot open file (Permission denied)"), std::string::npos) << e;
}
