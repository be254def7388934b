// Finds the model that ships with the project, whether run from the build tree or installed.
#pragma once
#include <string>
#include <vector>

namespace scenelab {

// File names tried, best first: the trained model, then the generated default.
std::vector<std::string> default_model_names();
// Directories searched, in order: $SCENELAB_WEIGHTS_DIR, <exe>/../share/scenelab/weights,
// the install prefix, the build tree, the source tree.
std::vector<std::string> weights_search_dirs();
// Full path of the default model; throws listing where it looked.
std::string find_default_model();
// Full path of a shipped weights file by name (e.g. "hog-people.h5"), searched as above; throws
// listing where it looked.
std::string find_weights(const std::string& name);

}  // namespace scenelab
