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
    "Labels images and videos with a scene-labelling model. Every option, the outputs, the exit\n"
    "status and the JSON report: docs/usage.md.\n"
    "\n"
    "input and output:\n"
    "  --out DIR                 output folder (default labels)\n"
    "  --save LIST               any of classes,labels,overlay (default all; videos: labels, overlay)\n"
    "  --json FILE               the report as JSON ('-': stdout)\n"
    "  --skip-existing           leave out images whose outputs all exist (resume a run)\n"
    "  --max-pixels N|WxH        largest image accepted (default 16384x16384)\n"
    "  --png-compression fast|N  fast (default: our coder) or libdeflate at level 0..12\n"
    "  --quiet                   no per-input lines (the summary stays)\n"
    "model and accuracy modes:\n"
    "  --model FILE.h5[,...]     the model (default: the shipped one); several: an ensemble\n"
    "  --mirror                  the mean with the mirrored image (twice the work)\n"
    "  --scales LIST             the mean over the image resized by each factor, e.g. 0.5,0.75,1\n"
    "  --refine[=S,R[,K]]        refine along the image's edges (default 40,0.2,3)\n"
    "device and speed:\n"
    "  --device D                cpu | cuda | cuda:N | cuda:all | auto (default: the GPU if any)\n"
    "  --precision P             GPU: fp32 (default, within 1e-4 of the CPU) | tf32 | fp16 | bf16\n"
    "  --conv A                  GPU: direct|gemm|gemm2s|cudnn|split|auto; CPU: gemm|winograd|auto\n"
    "  --conv-workspace MiB      bound on a GPU convolution's workspace (default 2048, or 1/16 of memory)\n"
    "  --runtime-fusion on|off|auto  fp16/bf16: cuDNN's compiled fused kernels (auto: long runs)\n"
    "  --batch N                 images of one size run together (default: per device and size)\n"
    "  --streams N               batches in flight per GPU (default 2)\n"
    "  --threads N               CPU backend threads (default all)\n"
    "  --io-threads N            decoding and writing threads (default all)\n"
    "  --queue-depth N           frames between decoding and reporting (default automatic)\n"
    "  --plan-cache DIR|off      where timed planning choices are kept (default ~/.cache/scenelab)\n"
    "detection:\n"
    "  --detect CLASS[,...]      boxes of these classes (names or indices): report and overlay\n"
    "  --det-threshold F         minimum window score (default: the model's, else 0.3; hog: 0)\n"
    "  --detector D              convnet (default) | hog (pedestrians) | FILE.h5 (a detector model)\n"
    "  --fusion F                the pyramid detector's: greedy (default) | oro | group | none\n"
    "  --detect-only             the pyramid detector alone: NAME_detections.png (needs --detector)\n"
    "  -h, --help                this help\n";

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
