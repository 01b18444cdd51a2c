// Entry points: submitting, waiting for, inspecting and cancelling jobs.
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"
#include "simdev/runtime/object_ids.hpp"

namespace simdev::runtime {

CalrtError* job_submit(Calrt_Job_Submit_Args* args) {
  return guarded(args, CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE, "Calrt_Job_Submit_Args", [&] {
    return with_handle(
        args->calbin, HandleKind::kCalbin, "calbin",
        [&](Device& device, ObjectId calbin, uint32_t index) -> Status {
          if (args->model_name == nullptr) {
            return fail(CALRT_INVALID_ARGUMENT, "model_name is NULL");
          }
          auto input = same_device_id(args->input, HandleKind::kBuffer, "input buffer", index);
          auto output = same_device_id(args->output, HandleKind::kBuffer, "output buffer", index);
          if (!input || !output) {
            return tl::unexpected(!input ? input.error() : output.error());
          }
          auto job = device.job_submit(calbin, args->model_name, *input, *output);
          if (!job) {
            return tl::unexpected(job.error());
          }
          args->job = to_handle<CalrtJob>(HandleKind::kJob, index, *job);
          return {};
        });
  });
}

CalrtError* job_wait(Calrt_Job_Wait_Args* args) {
  return guarded(args, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE, "Calrt_Job_Wait_Args", [&] {
    return with_handle_sleeper(
        args->job, HandleKind::kJob, "job",
        [&](Device& device, ObjectId id, uint32_t, Sleeper& sleeper) -> Status {
          auto outcome = device.job_wait(id, args->timeout_ns, &sleeper);
          if (auto job = device.job(id)) {
            args->state = (*job)->state;
            args->result = (*job)->final() ? CALRT_WAIT_READY : CALRT_WAIT_NOT_READY;
          }
          if (!outcome) {
            return tl::unexpected(outcome.error());
          }
          args->result = outcome->result;
          args->state = outcome->state;
          return {};
        });
  });
}

CalrtError* job_status(Calrt_Job_Status_Args* args) {
  // The profiling fields were appended later: a caller compiled before them is served.
  return guarded(
      args, CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, end_time_ns), "Calrt_Job_Status_Args", [&] {
        return with_handle(args->job, HandleKind::kJob, "job",
                           [&](Device& device, ObjectId id, uint32_t) -> Status {
                             auto job = device.job(id);
                             if (!job) {
                               return tl::unexpected(job.error());
                             }
                             const Job& j = **job;
                             args->state = j.state;
                             args->code = j.code;
                             args->message = j.code == CALRT_OK ? "" : j.message.c_str();
                             args->submit_time_ns = ps_to_ns(j.submit_ps);
                             args->start_time_ns = ps_to_ns(j.start_ps);  // 0 until started
                             args->end_time_ns = j.final() ? ps_to_ns(j.end_ps) : 0;
                             // Fields appended later are filled only where the
                             // caller's struct has them.
                             auto covers = [&](const uint64_t& field) {
                               return args->struct_size >=
                                      static_cast<size_t>(reinterpret_cast<const char*>(&field) -
                                                          reinterpret_cast<const char*>(args)) +
                                          sizeof(field);
                             };
                             if (covers(args->h2d_end_time_ns)) {
                               args->h2d_end_time_ns = ps_to_ns(j.h2d_end_ps);
                             }
                             if (covers(args->compute_end_time_ns)) {
                               args->compute_end_time_ns = ps_to_ns(j.compute_end_ps);
                             }
                             if (covers(args->compute_start_time_ns)) {
                               args->compute_start_time_ns = ps_to_ns(j.compute_start_ps);
                             }
                             return {};
                           });
      });
}

CalrtError* job_cancel(Calrt_Job_Cancel_Args* args) {
  return guarded(args, CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE, "Calrt_Job_Cancel_Args", [&] {
    return with_handle(
        args->job, HandleKind::kJob, "job",
        [&](Device& device, ObjectId id, uint32_t) -> Status { return device.job_cancel(id); });
  });
}

CalrtError* job_destroy(Calrt_Job_Destroy_Args* args) {
  return guarded(args, CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Job_Destroy_Args", [&] {
    return with_handle(
        args->job, HandleKind::kJob, "job",
        [&](Device& device, ObjectId id, uint32_t) -> Status { return device.job_destroy(id); });
  });
}

}  // namespace simdev::runtime
