// label_image: labels image files and videos with a scene-labelling model: option parsing over
// one job (job/label_job.h), which writes, for each input image NAME.ext in --out DIR, as --save
// asks, NAME_classes.png, NAME_labels.png and NAME_overlay.png, and for a video NAME.mp4
// NAME_overlay.mp4 and/or NAME_labels.mp4; the report goes to the console and, with --json, to a
// file (job/report.h). Options: docs/usage.md.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "job/inputs.h"
#include "job/label_job.h"
#include "job/pyramid_detector.h"
#include "job/report.h"
#include "job/score_map_head.h"
#include "tools/cli.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: label_image [options] IMAGE|VIDEO|DIR|GLOB...\n"
    "  --model FILE.h5[,FILE.h5...]  model (default: the model shipped in weights/);\n"
    "                       several: an ensemble, their class probabilities averaged\n"
    "                       (at most 32 passes: models x 2 if mirrored x scales)\n"
    "  --mirror             label with the mean class probabilities of the image and its\n"
    "                       left-right mirror (twice the work; +0.4 to +0.7 points on\n"
    "                       each figure on unseen CamVid sequences, weights/MODELS.md)\n"
    "  --scales LIST        label with the mean class probabilities of the image resized\n"
    "                       by each factor, e.g. 0.5,0.75,1 (work: the sum of their squares;\n"
    "                       with --mirror, both passes at each; weights/MODELS.md)\n"
    "  --refine[=S,R[,K]]   refine the class probabilities along the image's edges (the\n"
    "                       domain transform: S pixels of spread where the image is flat,\n"
    "                       a colour step of R stops it; K iterations; default 40,0.2,3;\n"
    "                       a 480x360 frame: about 0.2 ms on an H200, 8 ms on two CPU\n"
    "                       cores; weights/MODELS.md)\n"
    "  --out DIR            output folder (default: labels)\n"
    "  --save LIST          outputs, any of classes,labels,overlay (default: all three;\n"
    "                       videos: labels and/or overlay)\n"
    "  --device D           cpu | cuda | cuda:N | cuda:all (one pipeline per GPU) | auto\n"
    "                       (default auto: the GPU when there is one)\n"
    "  --precision fp32|tf32|fp16|bf16  GPU precision (default fp32, within 1e-4 of the CPU path)\n"
    "  --conv direct|gemm|gemm2s|cudnn|split|auto  GPU convolution algorithm (default\n"
    "                       auto: each timed once per layer and size, the fastest kept;\n"
    "                       split: fp32 on TF32 tensor cores, two pieces a float);\n"
    "                       on the CPU: gemm (im2col) | winograd | auto (Winograd for\n"
    "                       3x3-7x7 layers with 16 or more input channels)\n"
    "  --conv-workspace MiB bound on a convolution's GPU workspace\n"
    "                       (default: 2048 or 1/16 of the GPU memory if less)\n"
    "  --runtime-fusion on|off|auto  fp16/bf16: cuDNN's fused convolution + bias + ReLU\n"
    "                       kernels, compiled at planning (about 1 s a large size, once a\n"
    "                       machine; 0.3 ms a frame faster at 1920x1080) (default auto: on\n"
    "                       for videos and for 10000 images or more)\n"
    "  --batch N            images of one size run N at a time (default: chosen for the\n"
    "                       device and size: up to 16 on a GPU, 1 on the CPU)\n"
    "  --streams N          batches in flight per GPU (default 2)\n"
    "  --threads N          CPU backend threads (default: all)\n"
    "  --io-threads N       decoding and writing threads (default: all)\n"
    "  --queue-depth N      frames between decoding and reporting (default: automatic)\n"
    "  --plan-cache DIR|off where timed planning choices are kept\n"
    "                       (default $XDG_CACHE_HOME/scenelab or ~/.cache/scenelab)\n"
    "  --max-pixels N|WxH   largest image accepted (default 16384x16384)\n"
    "  --png-compression fast|N  fast (default): our coder for filtered rows, 3x libdeflate's\n"
    "                       fastest level at about its size; N = 0..12: libdeflate at level N\n"
    "                       (smaller files, slower; zlib's 0..9 in builds without libdeflate)\n"
    "  --skip-existing      skip inputs whose outputs all exist (resume a run)\n"
    "  --json FILE          machine-readable report ('-' for stdout)\n"
    "  --detect CLASS[,..]  sliding-window detection of these classes (names or indices):\n"
    "                       boxes go into the JSON report and onto the overlay\n"
    "  --det-threshold F    minimum objectness of a window (default: the model's per-class\n"
    "                       setting, else 0.3; with --detector hog: the SVM score, default 0)\n"
    "  --detector D         convnet (default: windows over the labelling model's class map)\n"
    "                       | hog (Dalal-Triggs HOG + linear SVM over an image pyramid,\n"
    "                       weights/hog-people.h5: class 'person') | FILE.h5 (such a model)\n"
    "  --fusion F           hog: greedy (exact greedy NMS, IoU 0.3; default) | oro (Oro et\n"
    "                       al.'s map/reduce, over-candidate 0.3) | group (OpenCV's\n"
    "                       groupRectangles) | none (every window hit)\n"
    "  --detect-only        detection without scene labelling (images; --detect needed):\n"
    "                       NAME_detections.png (boxes on the photo) and the JSON report\n"
    "  --quiet              no per-image lines\n";

std::atomic<LabelJob*> g_job{nullptr};
std::atomic<int> g_signals{0};

void on_signal(int sig) {
  // The first Ctrl-C or SIGTERM stops taking inputs: frames in flight are written and the
  // report closed. A second one ends the program at once (temporary files only, never a
  // half-written output under its real name).
  if (g_signals.fetch_add(1) > 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  if (LabelJob* j = g_job.load()) j->cancel();
}

// What the command line asks for.
struct Request {
  Model model, pyramid;  // the labelling model; --detector's
  JobOptions job;
  std::vector<std::string> inputs;
  std::string json;
  bool quiet = false;
};

// --detector hog|FILE (a pyramid detector instead of the convnet head), --fusion, and
// --det-threshold for it; bad settings fail here, before any work.
void parse_pyramid(const Cli& cli, const std::string& detector, Request& r) {
  Model& m = r.pyramid;
  m = read_model(detector == "hog" ? find_weights("hog-people.h5") : detector);
  SL_REQUIRE(!m.pyramid.empty(), "--detector ", detector, ": model '", m.name,
             "' is no sliding-window detector (no 'pyramid' attribute)");
  const std::string cls = m.class_names.empty() ? "object" : m.class_names[0];
  SL_REQUIRE(cli.has("detect"), "--detector ", detector, " needs --detect ", cls);
  std::string want = cli.get("detect"), have = cls;
  std::transform(want.begin(), want.end(), want.begin(), ::tolower);
  std::transform(have.begin(), have.end(), have.begin(), ::tolower);
  SL_REQUIRE(want == have, "--detect ", cli.get("detect"), ": the ", detector, " detector finds '", cls, "' only");
  std::string overrides;
  if (cli.has("fusion")) overrides += " fusion=" + cli.get("fusion");
  if (cli.has("det-threshold")) overrides += " threshold=" + cli.get("det-threshold");
  PyramidOptions check;
  parse_pyramid_spec(m.pyramid + overrides, check);
  r.job.pyramid = {&m, overrides, cls};
}

// --detect with the convnet head: each class's head, the defaults, the model's settings for it,
// then --det-threshold (finite, as the model's own settings must be).
void parse_heads(const Cli& cli, Request& r) {
  for (int c : parse_classes(cli.get("detect"), r.model.class_names)) {
    nms::WindowHeadOptions o = head_settings(r.model, c);
    if (cli.has("det-threshold")) {
      const double t = cli.get_double("det-threshold", 0.0);
      SL_REQUIRE(std::abs(t) <= 1e30, "--det-threshold ", cli.get("det-threshold"), " is out of range");
      o.threshold = float(t);
    }
    r.job.pipeline.detect.push_back({c, o});
  }
}

// --save, --max-pixels, --png-compression, --skip-existing, --out.
void parse_outputs(const Cli& cli, JobOptions& jo) {
  jo.out_dir = cli.get("out", "labels");
  jo.skip_existing = cli.has("skip-existing");
  if (cli.has("save")) jo.save = parse_output_kinds(cli.get("save"));
  if (cli.has("max-pixels")) jo.limits.max_pixels = parse_max_pixels(cli.get("max-pixels"));
  if (cli.has("png-compression") && cli.get("png-compression") != "fast") {
    jo.png.coder = PngCoder::Deflate;
    jo.png.level = cli.get_int("png-compression", 1);
    SL_REQUIRE(jo.png.level >= 0 && jo.png.level <= 12, "--png-compression: fast or a level 0..12, not '",
               cli.get("png-compression"), "'");
  }
}

void parse(const Cli& cli, Request& r) {
  JobOptions& jo = r.job;
  r.quiet = cli.has("quiet");
  r.json = cli.get("json");
  parse_outputs(cli, jo);
  jo.detect_only = cli.has("detect-only");
  const std::string detector = cli.get("detector", "convnet");
  if (detector != "convnet") parse_pyramid(cli, detector, r);
  SL_REQUIRE(detector != "convnet" || !cli.has("fusion"), "--fusion applies to --detector hog");
  SL_REQUIRE(!jo.detect_only || cli.has("detect"), "--detect-only needs --detect CLASS");
  SL_REQUIRE(!jo.detect_only || jo.pyramid.model, "--detect-only works with --detector hog (the convnet head reads "
                                                  "the labelling model's class map)");
  if (jo.detect_only) {
    for (const char* o : {"mirror", "scales", "refine"})
      SL_REQUIRE(!cli.has(o), "--", o, " applies to the labelling model, which --detect-only with --detector ",
                 detector, " does not run");
    jo.model_path = detector;
  } else {
    jo.model_path = cli.has("model") ? cli.get("model") : find_default_model();
    r.model = labelling_model(jo.model_path, cli.has("mirror"), scales_option(cli), refine_option(cli));
  }
  jo.pipeline = pipeline_options(cli);
  if (cli.has("detect") && !jo.pyramid.model) parse_heads(cli, r);
  r.inputs = expand_inputs(cli.positional(), /*videos=*/!jo.detect_only);
  SL_REQUIRE(!r.inputs.empty(), "no image files found in the given paths");
  if (cli.get("runtime-fusion", "auto") == "auto") jo.pipeline.cuda.runtime_fusion = runtime_fusion_pays(r.inputs);
  std::error_code ec;
  fs::create_directories(jo.out_dir, ec);
  SL_REQUIRE(fs::is_directory(jo.out_dir), jo.out_dir, ": cannot create output folder");
}

}  // namespace

int main(int argc, char** argv) {
  Request r;
  std::unique_ptr<LabelJob> job;
  std::unique_ptr<JsonReportFile> json;
  try {
    Cli cli(argc, argv,
            {"model", "out", "device", "threads", "json", "detect", "det-threshold", "conv", "precision",
             "conv-workspace", "batch", "streams", "io-threads", "queue-depth", "plan-cache", "save", "max-pixels",
             "detector", "fusion", "runtime-fusion", "png-compression", "scales", "refine"},
            {"quiet", "help", "skip-existing", "detect-only", "mirror", "refine"});
    if (cli.has("help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cli.positional().empty()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    parse(cli, r);
    job = std::make_unique<LabelJob>(r.job.detect_only ? nullptr : &r.model, r.job);
    if (!r.json.empty()) json = std::make_unique<JsonReportFile>(r.json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_image: %s\n", e.what());
    return 2;
  }
  FILE* human = r.json == "-" ? stderr : stdout;  // keep stdout pure JSON with --json -
  ConsoleReport console("label_image", human, r.quiet, isatty(STDERR_FILENO));
  std::vector<JobObserver*> observers{&console};
  if (json) observers.push_back(&json->report());
  g_job.store(job.get());
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  JobSummary sum;
  try {
    sum = job->run(r.inputs, observers);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_image: %s\n", e.what());
    return 2;
  }
  g_job.store(nullptr);
  if (json && !json->close("label_image")) return 1;
  return sum.exit_code();
}
