// What the tools take as inputs: files, folders and globs, expanded in natural order ("frame2"
// before "frame10"), images told from videos by their extension.
#pragma once
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace scenelab {

inline std::string lower_extension(const std::filesystem::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return e;
}

inline bool is_image_name(const std::filesystem::path& p) {
  static const std::set<std::string> exts{".png", ".jpg", ".jpeg", ".bmp", ".tga",
                                          ".gif", ".ppm", ".pgm", ".pnm"};
  return exts.count(lower_extension(p)) != 0;
}

inline bool is_video_name(const std::filesystem::path& p) {
  static const std::set<std::string> exts{".mp4", ".mkv", ".avi", ".webm", ".mov", ".m4v"};
  return exts.count(lower_extension(p)) != 0;
}

// Natural order: runs of digits compare by value, the rest character by character.
inline bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && a[i2] == '0') ++i2;
      while (j2 < b.size() && b[j2] == '0') ++j2;
      size_t ie = i2, je = j2;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      if (ie - i2 != je - j2) return ie - i2 < je - j2;  // more significant digits: larger
      const int c = a.compare(i2, ie - i2, b, j2, je - j2);
      if (c != 0) return c < 0;
      if (ie - i != je - j) return ie - i < je - j;  // equal values: fewer leading zeros first
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// Files named by the arguments: a folder gives its images (and videos when `videos`), a glob
// its matches, in natural order; anything else is passed on as named (a missing file is
// reported later by name).
inline std::vector<std::string> expand_inputs(const std::vector<std::string>& args, bool videos) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& e : fs::directory_iterator(a, ec))
        if (e.is_regular_file() && (is_image_name(e.path()) || (videos && is_video_name(e.path()))))
          in_dir.push_back(e.path().string());
      std::sort(in_dir.begin(), in_dir.end(), natural_less);
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (a.find_first_of("*?[") != std::string::npos && !fs::exists(a, ec)) {
      glob_t g{};
      std::vector<std::string> matched;
      if (::glob(a.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) matched.push_back(g.gl_pathv[i]);
      globfree(&g);
      if (matched.empty()) matched.push_back(a);  // reported as missing
      std::sort(matched.begin(), matched.end(), natural_less);
      files.insert(files.end(), matched.begin(), matched.end());
    } else {
      files.push_back(a);
    }
  }
  return files;
}

}  // namespace scenelab
