// make_model: writes a model file with deterministic random weights for a named network, or
// prints a network's graph description, or combines labelling models into one file: an
// ensemble (their class probabilities averaged), test-time mirroring and/or test-time scaling
// (job/combine.h).
//   make_model --network multiscale --classes 8 --seed 1 --out model.h5
//   make_model --network reference --print-graph
//   make_model --combine A.h5,B.h5,C.h5 [--mirror] [--scales 0.5,0.75,1] [--refine[=S,R[,K]]] --out ensemble.h5
#include <cstdio>
#include <iostream>

#include "engine/networks.h"
#include "tools/cli.h"
#include "weights/default_model.h"
#include "weights/model_file.h"

using namespace scenelab;

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"network", "classes", "seed", "out", "combine", "scales", "refine"},
            {"print-graph", "help", "mirror", "refine"});
    if (cli.has("help")) {
      std::puts("usage: make_model --network reference|multiscale [--classes N] [--seed S] "
                "(--out FILE.h5 | --print-graph)\n"
                "       make_model --combine A.h5[,B.h5...] [--mirror] [--scales LIST] [--refine[=S,R[,K]]]\n"
                "                  (--out FILE.h5 | --print-graph)");
      return 0;
    }
    if (cli.has("combine") || cli.has("mirror") || cli.has("scales") || cli.has("refine")) {
      SL_REQUIRE(cli.has("combine"), cli.has("mirror") ? "--mirror" : cli.has("scales") ? "--scales" : "--refine",
                 " needs --combine FILE.h5[,FILE.h5...]");
      SL_REQUIRE(!cli.has("network") && !cli.has("classes") && !cli.has("seed"),
                 "--combine takes trained models: --network, --classes and --seed do not apply");
      Model m = labelling_model(cli.get("combine"), cli.has("mirror"), scales_option(cli), refine_option(cli), "--combine");
      if (cli.has("print-graph")) {
        std::cout << m.graph.to_text();
        return 0;
      }
      SL_REQUIRE(cli.has("out"), "--out FILE.h5 is required");
      write_model(cli.get("out"), m);
      return 0;
    }
    const std::string net = cli.get("network", "multiscale");
    const int classes = cli.get_int("classes", 8);
    if (cli.has("print-graph")) {
      std::cout << network_text(net, classes);
      return 0;
    }
    SL_REQUIRE(cli.has("out"), "--out FILE.h5 is required");
    Model m = make_random_model(net, classes, uint32_t(cli.get_int("seed", 1)));
    write_model(cli.get("out"), m);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_model: %s\n", e.what());
    return 2;
  }
}
