// `calrt calibrate CALBIN REPORT...`: fits the simulator's timing constants to bench reports
// measured on a device (simdev/calibrate/calibration.hpp says how), prints each constant
// before and after with the fit error per phase, and writes a device config whose fitted keys
// are tagged `measured`, with the source reports named in its header.
//
// The reports are `calrt bench --json` reports of this calbin, single runs (calrt-bench/3) or
// sweeps over bench keys such as `--prompt-len 64,512,4096` (calrt-bench-sweep/3, one
// measurement per point): their sync mode records the median phases of every job shape
// (`job_shapes`), and with `--d2d-spans` (or `--trace`) the device trace's D2D reductions
// (`d2d_spans`). Several prompt lengths fit the compute constants. A report of another
// calbin or another device config (a sweep over device keys), a failed run or a malformed
// field is bad input naming the file, the field and the value.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace runner {

struct CalibrateOptions {
  std::filesystem::path calbin;
  std::vector<std::filesystem::path> reports;
  // The card's peak rates and the fit's starting point, as Device_Create's config string
  // (`key=value;...`, `config=FILE`); empty: the simulator's defaults.
  std::string device_config;
  std::filesystem::path out;   // the calibrated config (YAML); empty: not written
  std::filesystem::path json;  // calrt-calibrate/1 report; empty: not written
};

// Exit codes: 0 the fit ran (its error is reported, not judged); 2 bad input or an output
// that cannot be written.
int run_calibrate(const CalibrateOptions& options);

}  // namespace runner
