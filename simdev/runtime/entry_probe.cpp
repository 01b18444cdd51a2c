// Entry point of the probe extension (CALRT_EXT_PROBE), which only the simulator offers: the
// residual stream of a completed job's last token at each layer boundary.
#include <algorithm>
#include <string>

#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"

namespace simdev::runtime {

CalrtError* probe_read(Calrt_Probe_Read_Args* args) {
  return guarded(args, CALRT_PROBE_READ_ARGS_STRUCT_SIZE, "Calrt_Probe_Read_Args", [&] {
    return with_handle(
        args->job, HandleKind::kJob, "job", [&](Device& device, ObjectId id, uint32_t) -> Status {
          args->count = 0;
          args->points = 0;
          auto found = device.job(id);
          if (!found) {
            return tl::unexpected(found.error());
          }
          const Job& job = **found;
          if (job.state != CALRT_JOB_COMPLETED || job.probe_width == 0) {
            return fail(CALRT_WRONG_STATE,
                        "Probe_Read: job #" + std::to_string(job.serial) +
                            (job.state != CALRT_JOB_COMPLETED
                                 ? " has not completed"
                                 : " ran no functional step (timing-only calbin or kv_update "
                                   "model)"));
          }
          const size_t points = job.probes.size() / job.probe_width;
          if (args->point >= points) {
            return fail(CALRT_INVALID_ARGUMENT, "Probe_Read: point " + std::to_string(args->point) +
                                                    " of " + std::to_string(points));
          }
          if (args->capacity > 0 && args->values == nullptr) {
            return fail(CALRT_INVALID_ARGUMENT, "Probe_Read: values is NULL with capacity " +
                                                    std::to_string(args->capacity));
          }
          args->count = job.probe_width;
          args->points = static_cast<uint32_t>(points);
          if (job.probe_width <= args->capacity) {
            const auto first =
                job.probes.begin() + static_cast<std::ptrdiff_t>(args->point * job.probe_width);
            std::copy(first, first + static_cast<std::ptrdiff_t>(job.probe_width), args->values);
          }
          return {};
        });
  });
}

}  // namespace simdev::runtime
