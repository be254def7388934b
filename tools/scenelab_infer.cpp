// scenelab_infer: runs a model on an input tensor (HDF5 dataset "input", NCHW float32) or an
// image file, and writes the outputs of the named nodes (default: the graph outputs) as float32
// datasets into an HDF5 file. Used by the PyTorch peer check and handy for debugging.
//   scenelab_infer --model m.h5 --input x.h5 --out y.h5 [--nodes a,b] [--threads N]
#include <hdf5.h>

#include <cstdio>
#include <sstream>

#include "engine/graph.h"
#include "engine/image_io.h"
#include "tools/cli.h"
#include "weights/tensor_file.h"
#include "weights/model_file.h"

using namespace scenelab;

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"model", "input", "image", "out", "nodes", "threads", "device", "conv", "precision", "conv-workspace"},
            {"help"});
    if (cli.has("help") || !cli.has("model") || !cli.has("out") ||
        (cli.has("input") == cli.has("image"))) {
      std::fputs("usage: scenelab_infer --model M.h5 (--input X.h5 | --image IMG) --out Y.h5 "
                 "[--nodes a,b] [--threads N]\n",
                 stderr);
      return 2;
    }
    Model model = read_model(cli.get("model"));
    Tensor x = cli.has("input") ? read_tensor_h5(cli.get("input"), "input")
                                : image_to_tensor(load_image(cli.get("image"), 3));
    auto backend = make_backend(cli.get("device", "cpu"), cli.get_int("threads", 0), cuda_options(cli));
    Graph g(model);
    std::vector<std::string> nodes = g.outputs();
    if (cli.has("nodes")) {
      nodes.clear();
      std::stringstream ss(cli.get("nodes"));
      std::string n;
      while (std::getline(ss, n, ',')) nodes.push_back(n);
    }
    PlanIO io;
    io.keep = nodes;  // inner nodes asked for live to the end of the pass
    g.plan(x.shape().n, x.shape().h, x.shape().w, *backend, io);
    g.run(x.view());
    std::vector<Tensor> host;
    for (const auto& n : nodes) host.push_back(g.fetch(n));
    std::vector<std::pair<std::string, TensorView>> outs;
    for (size_t i = 0; i < nodes.size(); ++i) outs.emplace_back(nodes[i], host[i].view());
    write_tensors_h5(cli.get("out"), outs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scenelab_infer: %s\n", e.what());
    return 1;
  }
}
