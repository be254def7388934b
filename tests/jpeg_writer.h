// JPEGs for the tests through libjpeg: colour space RGB, grey or (Adobe-inverted) CMYK;
// progressive or not; the luma sampled 2x2 (libjpeg's default, 4:2:0) or 1x1 (4:4:4).
#pragma once
#include <gtest/gtest.h>
#include <jpeglib.h>

#include <cstdio>
#include <string>

#include "engine/image_io.h"

namespace scenelab::test {

inline void write_jpeg(const std::string& path, const Image8& img, J_COLOR_SPACE in_space, bool progressive,
                       int quality = 95, bool chroma_full = false) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f) << path;
  jpeg_stdio_dest(&c, f);
  c.image_width = JDIMENSION(img.width);
  c.image_height = JDIMENSION(img.height);
  c.input_components = img.channels;
  c.in_color_space = in_space;
  jpeg_set_defaults(&c);
  if (in_space == JCS_CMYK) jpeg_set_colorspace(&c, JCS_CMYK);
  if (chroma_full && c.num_components == 3) c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 1;
  jpeg_set_quality(&c, quality, TRUE);
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

}  // namespace scenelab::test
