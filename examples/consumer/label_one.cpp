// Labels one image with the shipped model through the installed library, writes the class
// indices (OUT_classes.png, as label_image writes them) and the colour labels (OUT_labels.png),
// prints each class's share of the pixels and the cars the detection head finds.
//   label_one IMAGE OUT [cpu|cuda|auto]
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <scenelab/scenelab.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s IMAGE OUT [cpu|cuda|auto]\n", argv[0]);
    return 2;
  }
  try {
    scenelab::api::ModelOptions options;
    if (argc > 3) options.device = argv[3];
    scenelab::api::Labeler labeler(options);
    const scenelab::api::Image image = scenelab::api::load_image(argv[1]);
    const scenelab::api::Labels labels = labeler.label(image);
    const std::string out = argv[2];
    scenelab::api::save_png(out + "_classes.png",
                            scenelab::api::Image{labels.width, labels.height, 1, labels.classes});
    scenelab::api::save_png(out + "_labels.png", labeler.colorize(labels));

    std::vector<size_t> count(labeler.classes().size(), 0);
    for (uint8_t c : labels.classes) ++count[c];
    std::printf("%s on %s: %dx%d\n", labeler.model_path().c_str(), labeler.device().c_str(),
                labels.width, labels.height);
    for (size_t c = 0; c < count.size(); ++c)
      if (count[c] > 0)
        std::printf("  %-12s %5.1f%%\n", labeler.classes()[c].c_str(),
                    100.0 * double(count[c]) / double(labels.classes.size()));
    for (const auto& name : labeler.classes())
      if (name == "Car")
        std::printf("  %zu cars\n", labeler.detect(image, "Car").size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_one: %s\n", e.what());
    return 1;
  }
  return 0;
}
