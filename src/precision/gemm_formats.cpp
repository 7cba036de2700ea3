// The GEMM formats (see gemm_formats.h): one line each.
#include "precision/gemm_formats.h"

#include "common/error.h"
#include "precision/fp8.h"
#include "precision/mxfp8.h"

namespace mpt::precision {

const std::vector<GemmFormatKind>& gemm_formats() {
  static const std::vector<GemmFormatKind> formats = {fp8_format(), mxfp8_format()};
  return formats;
}

const GemmFormatKind& gemm_format(const std::string& recipe) {
  for (const GemmFormatKind& format : gemm_formats())
    for (const std::string& name : format.recipes)
      if (name == recipe) return format;
  throw UsageError("precision.fp8.recipe: no GEMM format is called '" + recipe + "'");
}

}  // namespace mpt::precision
