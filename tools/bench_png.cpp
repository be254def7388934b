// bench_png: the PNG writers label_image could use, on the same images: ours with our coder
// (filters chosen per row, Huffman and runs: engine/png_deflate.h), ours with libdeflate (level
// 1, "up" filter), libpng + zlib (level 1, "up" filter) and stb_image_write (its own deflate). Median ms of --runs encodings of each on one thread, output bytes, and the
// decoded pixels checked equal to the input. Images: an overlay (a photo blended with a label
// map, as label_image writes it), the colour labels (indexed colour) and the class indices. The
// overlay also as the host codes it when a GPU made its filtered rows (encode_png_filtered: what
// is left to label_image's writers with a GPU, job/overlay_rows.h).
// --threads N: the overlay also encoded by N threads at once (each --runs times), as
// label_image's writers do on a busy machine: median ms of one encoding and encodings a second.
//   bench_png IMAGE.jpg [--runs 15] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "engine/image_io.h"
#include "job/labeler.h"
#include "engine/png_deflate.h"
#include "tools/cli.h"

using namespace scenelab;

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"runs", "threads"}, {"help"});
    if (cli.has("help") || cli.positional().empty()) {
      std::puts("usage: bench_png IMAGE [--runs 15] [--threads N]");
      return cli.has("help") ? 0 : 2;
    }
    const int runs = std::max(1, cli.get_int("runs", 15));
    const int threads = std::max(0, cli.get_int("threads", 0));
    const Image8 photo = load_image(cli.positional()[0], 3);
    // A label map with regions like a scene's: horizontal bands broken by blobs.
    LabelMap m{photo.width, photo.height, std::vector<uint8_t>(size_t(photo.width) * photo.height)};
    for (int y = 0; y < m.height; ++y)
      for (int x = 0; x < m.width; ++x)
        m.labels[size_t(y) * m.width + x] =
            uint8_t((y * 5 / m.height + ((x / 37 + y / 29) % 7 == 0 ? 3 : 0)) % 11);
    std::vector<std::array<uint8_t, 3>> palette;
    for (int c = 0; c < 11; ++c) palette.push_back({uint8_t(c * 23), uint8_t(255 - c * 20), uint8_t(c * 57 % 256)});
    const Image8 over = overlay_labels(photo, m, palette);
    const Image8 index{m.width, m.height, 1, m.labels};
    std::vector<uint8_t> rows(size_t(over.height) * (1 + 3 * size_t(over.width)));
    png_filter_rows(over.pixels.data(), size_t(over.width), size_t(over.height), 3, rows.data());
    PngOptions pal, deflate1;
    pal.palette = palette;
    deflate1.coder = PngCoder::Deflate;
    using Writer = std::pair<const char*, std::function<std::vector<uint8_t>()>>;
    // The overlay's writers that the threads section also runs.
    const Writer overlay_writers[] = {
        {"ours (Huffman + runs)", [&] { return encode_png(over); }},
        {"ours, rows filtered on the GPU (coding only)",
         [&] { return encode_png_filtered(rows.data(), over.width, over.height, 3); }},
        {"ours (libdeflate 1)", [&] { return encode_png(over, deflate1); }}};
    struct Case {
      const char* what;
      const Image8* img;
      PngOptions opt;
    };
    const Case cases[] = {{"overlay (RGB)", &over, PngOptions{}},
                          {"colour labels (indexed)", &index, pal},
                          {"class indices (grey)", &index, PngOptions{}}};
    std::printf("# bench_png, %dx%d, one thread, median of %d\n| image | writer | ms | bytes |\n|---|---|---|---|\n",
                photo.width, photo.height, runs);
    for (const auto& c : cases) {
      const bool stb_ok = c.opt.palette.empty();  // stb writes no indexed colour
      PngOptions deflate = c.opt;
      deflate.coder = PngCoder::Deflate;
      std::vector<Writer> all;
      if (c.img == &over)
        all.assign(std::begin(overlay_writers), std::end(overlay_writers));
      else
        all = {{"ours (Huffman + runs)", [&] { return encode_png(*c.img, c.opt); }},
               {"ours (libdeflate 1)", [&] { return encode_png(*c.img, deflate); }}};
      all.push_back({"libpng + zlib 1", [&] { return encode_png_libpng(*c.img, c.opt); }});
      all.push_back({"stb_image_write", [&] { return encode_png_stb(*c.img); }});
      for (const auto& [name, write] : all) {
        if (!stb_ok && std::string(name) == "stb_image_write") continue;
        std::vector<double> t;
        std::vector<uint8_t> bytes;
        for (int i = 0; i < runs; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          bytes = write();
          t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        const Image8 back = decode_image(bytes.data(), bytes.size(), name, c.opt.palette.empty() ? c.img->channels : 1);
        SL_REQUIRE(!c.opt.palette.empty() || back.pixels == c.img->pixels, name, ": decoded pixels differ");
        std::sort(t.begin(), t.end());
        std::printf("| %s | %s | %.2f | %zu |\n", c.what, name, t[t.size() / 2], bytes.size());
      }
    }
    if (threads > 0) {
      std::printf("\n| overlay writer | threads | ms per encoding (median) | encodings/s |\n|---|---|---|---|\n");
      for (const auto& [name, write] : overlay_writers) {
        std::vector<std::vector<double>> per{size_t(threads)};
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (int k = 0; k < threads; ++k)
          pool.emplace_back([&, k, write = write] {
            for (int i = 0; i < runs; ++i) {
              const auto a = std::chrono::steady_clock::now();
              const std::vector<uint8_t> bytes = write();
              per[size_t(k)].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
            }
          });
        for (auto& t : pool) t.join();
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::vector<double> all;
        for (const auto& v : per) all.insert(all.end(), v.begin(), v.end());
        std::sort(all.begin(), all.end());
        std::printf("| %s | %d | %.2f | %.0f |\n", name, threads, all[all.size() / 2], double(all.size()) / wall);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_png: %s\n", e.what());
    return 1;
  }
}
